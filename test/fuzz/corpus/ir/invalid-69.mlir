func.func @online_memref_query(%q: memref<1x4x8x16xf32>,
                               %k: tensor<1x2x32x16xf32>,
                               %v: tensor<1x2x32x8xf32>,
                               %acc: tensor<1x4x8x8xf32>,
                               %max: tensor<1x4x8xf32>,
                               %sum: tensor<1x4x8xf32>) {
  %r:3 = attn.online_attention ins(%q, %k, %v : memref<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%acc, %max, %sum : tensor<1x4x8x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>)
      -> tensor<1x4x8x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>
  return
}
