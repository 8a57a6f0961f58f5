func.func @causal_softcap(%q: memref<1x1x?x32xf32, strided<[?, ?, ?, ?], offset: ?>>,
                          %k: memref<1x1x?x32xf32>, %v: memref<1x1x?x20xf32>,
                          %acc: memref<1x1x?x20xf32, strided<[?, ?, ?, ?], offset: ?>>,
                          %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>, %d: index) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x32xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x32xf32>, memref<1x1x?x20xf32>)
      diagonal(%d)
      outs(%acc, %m, %s : memref<1x1x?x20xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?xf32>, memref<1x1x?xf32>) causal softcap(30.0)
  return
}
