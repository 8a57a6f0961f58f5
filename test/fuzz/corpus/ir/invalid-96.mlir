func.func @weights_not_f32(%q: tensor<1x4x8x16xbf16>, %k: tensor<1x2x32x16xbf16>,
                           %w: tensor<1x4x8x32xbf16>) {
  %r = attn.attention_weights ins(%q, %k : tensor<1x4x8x16xbf16>, tensor<1x2x32x16xbf16>)
      outs(%w : tensor<1x4x8x32xbf16>) -> tensor<1x4x8x32xbf16>
  return
}
