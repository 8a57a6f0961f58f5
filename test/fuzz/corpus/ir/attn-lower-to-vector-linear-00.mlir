func.func @causal(%q: memref<1x2x?x16xf32, strided<[?, ?, ?, ?], offset: ?>>,
                  %k: memref<1x1x?x16xf32, strided<[?, ?, ?, ?], offset: ?>>,
                  %v: memref<1x1x?x24xf32, strided<[?, ?, ?, ?], offset: ?>>,
                  %o: memref<1x2x?x24xf32, strided<[?, ?, ?, ?], offset: ?>>) {
  attn.linear ins(%q, %k, %v : memref<1x2x?x16xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x16xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x24xf32, strided<[?, ?, ?, ?], offset: ?>>)
      outs(%o : memref<1x2x?x24xf32, strided<[?, ?, ?, ?], offset: ?>>) causal chunk(32)
  return
}
func.func @state(%q: memref<1x1x?x8xbf16>, %k: memref<1x1x?x8xbf16>,
                 %v: memref<1x1x?x8xbf16>, %s0: memref<1x1x8x8xf32>,
                 %z0: memref<1x1x8xf32>, %o: memref<1x1x?x8xbf16>,
                 %s1: memref<1x1x8x8xf32>, %z1: memref<1x1x8xf32>) {
  attn.linear ins(%q, %k, %v : memref<1x1x?x8xbf16>, memref<1x1x?x8xbf16>, memref<1x1x?x8xbf16>)
      state(%s0, %z0 : memref<1x1x8x8xf32>, memref<1x1x8xf32>)
      outs(%o, %s1, %z1 : memref<1x1x?x8xbf16>, memref<1x1x8x8xf32>, memref<1x1x8xf32>)
      feature_map(relu)
  return
}
