func.func @scale_not_f32(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                         %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  %r = "attn.attention"(%q, %k, %v, %o) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1>, scale = 1.0 : f64}>
      : (tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>, tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}
