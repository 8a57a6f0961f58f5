func.func @static_decode_gqa(%q: tensor<?x8x1x32xf16>, %k: tensor<?x2x?x32xf16>, %v: tensor<?x2x?x32xf16>, %o: tensor<?x8x1x32xf16>) -> tensor<?x8x1x32xf16> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x8x1x32xf16>, tensor<?x2x?x32xf16>, tensor<?x2x?x32xf16>) outs(%o : tensor<?x8x1x32xf16>) -> tensor<?x8x1x32xf16>
  return %r : tensor<?x8x1x32xf16>
}
