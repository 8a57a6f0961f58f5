func.func @row_broadcast_mask(%q: tensor<?x?x?x32xf16>, %k: tensor<?x?x?x32xf16>, %v: tensor<?x?x?x32xf16>, %m: tensor<?x?x1x?xi1>, %o: tensor<?x?x?x32xf16>) -> tensor<?x?x?x32xf16> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x32xf16>, tensor<?x?x?x32xf16>, tensor<?x?x?x32xf16>) mask(%m : tensor<?x?x1x?xi1>) outs(%o : tensor<?x?x?x32xf16>) -> tensor<?x?x?x32xf16>
  return %r : tensor<?x?x?x32xf16>
}
