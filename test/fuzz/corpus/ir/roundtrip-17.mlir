func.func @online_memref(%q: memref<1x2x16x8xf32>, %k: memref<1x2x?x8xf32>,
                         %v: memref<1x2x?x8xf32>, %acc: memref<1x2x16x8xf32>,
                         %max: memref<1x2x16xf32>, %sum: memref<1x2x16xf32>) {
  attn.online_attention
      ins(%q, %k, %v : memref<1x2x16x8xf32>, memref<1x2x?x8xf32>, memref<1x2x?x8xf32>)
      outs(%acc, %max, %sum : memref<1x2x16x8xf32>, memref<1x2x16xf32>, memref<1x2x16xf32>)
      align(top_left) window <left = 8>
  return
}
