func.func @dropout_without_seed(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                                %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>, %p: f32) {
  %r = "attn.attention"(%q, %k, %v, %p, %o) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 1, 0, 0, 0, 0, 1>}>
      : (tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>, f32, tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}
