func.func @outs_empty(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                      %v: tensor<1x2x32x8xf32>) {
  "attn.attention"(%q, %k, %v) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0>}>
      : (tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>) -> ()
  return
}
