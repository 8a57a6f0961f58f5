func.func @online_tensor_query_memref_state(%q: tensor<1x4x8x16xf32>,
                                            %k: tensor<1x2x32x16xf32>,
                                            %v: tensor<1x2x32x8xf32>,
                                            %acc: memref<1x4x8x8xf32>,
                                            %max: memref<1x4x8xf32>,
                                            %sum: memref<1x4x8xf32>) {
  attn.online_attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%acc, %max, %sum : memref<1x4x8x8xf32>, memref<1x4x8xf32>, memref<1x4x8xf32>)
  return
}
