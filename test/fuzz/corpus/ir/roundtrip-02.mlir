func.func @f16(%q: tensor<2x4x16x32xf16>, %k: tensor<2x4x64x32xf16>,
               %v: tensor<2x4x64x32xf16>, %o: tensor<2x4x16x32xf16>)
    -> tensor<2x4x16x32xf16> {
  %r = attn.attention ins(%q, %k, %v : tensor<2x4x16x32xf16>, tensor<2x4x64x32xf16>, tensor<2x4x64x32xf16>)
      outs(%o : tensor<2x4x16x32xf16>) -> tensor<2x4x16x32xf16>
  return %r : tensor<2x4x16x32xf16>
}
