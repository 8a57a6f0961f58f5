func.func @mask_batch(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x32x16xf32>,
                      %v: tensor<2x2x32x8xf32>, %o: tensor<2x4x8x8xf32>,
                      %m: tensor<3x1x1x32xi1>) {
  %r = attn.attention ins(%q, %k, %v : tensor<2x4x8x16xf32>, tensor<2x2x32x16xf32>, tensor<2x2x32x8xf32>)
      mask(%m : tensor<3x1x1x32xi1>)
      outs(%o : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return
}
