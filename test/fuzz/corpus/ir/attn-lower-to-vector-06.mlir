func.func @vector_sums(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                       %acc: memref<1x1x?x16xf32>, %m: memref<1x1x?xf32>, %sum: memref<1x1x64xf32>,
                       %rows: index) {
  %s = memref.subview %sum[0, 0, 0] [1, 1, %rows] [1, 1, 1] : memref<1x1x64xf32> to memref<1x1x?xf32, strided<[64, 64, 1]>>
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      outs(%acc, %m, %s : memref<1x1x?x16xf32>, memref<1x1x?xf32>, memref<1x1x?xf32, strided<[64, 64, 1]>>)
  return
}
