func.func @sinks_f32(%q: tensor<1x4x8x16xbf16>, %k: tensor<1x2x32x16xbf16>,
                     %v: tensor<1x2x32x16xbf16>, %s: tensor<4xbf16>,
                     %o: tensor<1x4x8x16xbf16>) {
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xbf16>, tensor<1x2x32x16xbf16>, tensor<1x2x32x16xbf16>)
      sinks(%s : tensor<4xbf16>) outs(%o : tensor<1x4x8x16xbf16>) -> tensor<1x4x8x16xbf16>
  return
}
