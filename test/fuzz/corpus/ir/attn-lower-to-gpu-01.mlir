func.func @masked_bf16(%q: tensor<?x?x?x32xbf16>, %k: tensor<?x?x?x32xbf16>, %v: tensor<?x?x?x32xbf16>, %m: tensor<?x?x?x?xi1>, %o: tensor<?x?x?x32xbf16>) -> tensor<?x?x?x32xbf16> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x32xbf16>, tensor<?x?x?x32xbf16>, tensor<?x?x?x32xbf16>) mask(%m : tensor<?x?x?x?xi1>) outs(%o : tensor<?x?x?x32xbf16>) -> tensor<?x?x?x32xbf16>
  return %r : tensor<?x?x?x32xbf16>
}
