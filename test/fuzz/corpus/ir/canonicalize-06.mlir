func.func @both_patterns(%q: tensor<1x2x8x16xf16>, %k: tensor<1x2x8x16xf16>,
                         %v: tensor<1x2x8x16xf16>, %o: tensor<1x2x8x16xf16>,
                         %l: tensor<1x2x8xf32>) -> tensor<1x2x8x16xf16> {
  %r:2 = attn.attention ins(%q, %k, %v : tensor<1x2x8x16xf16>, tensor<1x2x8x16xf16>, tensor<1x2x8x16xf16>)
      outs(%o, %l : tensor<1x2x8x16xf16>, tensor<1x2x8xf32>)
      causal align(bottom_right) window <right = 0>
      -> tensor<1x2x8x16xf16>, tensor<1x2x8xf32>
  return %r#0 : tensor<1x2x8x16xf16>
}
