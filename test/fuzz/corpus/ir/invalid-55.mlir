func.func @outs_three(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                      %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>,
                      %l: tensor<1x4x8xf32>) {
  %r:3 = "attn.attention"(%q, %k, %v, %o, %l, %l) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 3>}>
      : (tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> (tensor<1x4x8x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>)
  return
}
