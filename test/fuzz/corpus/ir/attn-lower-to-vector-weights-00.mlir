func.func @own_lse(%q: memref<1x1x?x16xf32, strided<[?, ?, ?, ?], offset: ?>>,
                   %k: memref<1x1x?x16xf32, strided<[?, ?, ?, ?], offset: ?>>,
                   %w: memref<1x1x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, %d: index) {
  attn.attention_weights ins(%q, %k : memref<1x1x?x16xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x16xf32, strided<[?, ?, ?, ?], offset: ?>>)
      diagonal(%d) outs(%w : memref<1x1x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>) causal
  return
}
func.func @given_lse(%q: memref<1x1x?x16xbf16, strided<[?, ?, ?, ?], offset: ?>>,
                     %k: memref<1x1x?x16xbf16, strided<[?, ?, ?, ?], offset: ?>>,
                     %lse: memref<1x1x?xf32, strided<[?, ?, ?], offset: ?>>,
                     %w: memref<1x1x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>) {
  attn.attention_weights ins(%q, %k : memref<1x1x?x16xbf16, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x16xbf16, strided<[?, ?, ?, ?], offset: ?>>)
      lse(%lse : memref<1x1x?xf32, strided<[?, ?, ?], offset: ?>>)
      outs(%w : memref<1x1x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>)
  return
}
