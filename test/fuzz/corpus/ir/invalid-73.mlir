func.func @online_memref_results(%q: memref<1x4x8x16xf32>,
                                 %k: memref<1x2x32x16xf32>,
                                 %v: memref<1x2x32x8xf32>,
                                 %acc: memref<1x4x8x8xf32>,
                                 %max: memref<1x4x8xf32>,
                                 %sum: memref<1x4x8xf32>) {
  %r:3 = attn.online_attention ins(%q, %k, %v : memref<1x4x8x16xf32>, memref<1x2x32x16xf32>, memref<1x2x32x8xf32>)
      outs(%acc, %max, %sum : memref<1x4x8x8xf32>, memref<1x4x8xf32>, memref<1x4x8xf32>)
      -> tensor<1x4x8x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>
  return
}
