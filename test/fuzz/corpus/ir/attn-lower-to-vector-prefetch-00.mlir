func.func @decode_f32(%q: memref<1x4x1x128xf32, strided<[?, ?, ?, ?], offset: ?>>,
                      %k: memref<1x1x?x128xf32, strided<[?, ?, ?, ?], offset: ?>>,
                      %v: memref<1x1x?x128xf32, strided<[?, ?, ?, ?], offset: ?>>,
                      %acc: memref<1x4x1x128xf32>, %m: memref<1x4x1xf32>, %s: memref<1x4x1xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x4x1x128xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x128xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x128xf32, strided<[?, ?, ?, ?], offset: ?>>)
      outs(%acc, %m, %s : memref<1x4x1x128xf32>, memref<1x4x1xf32>, memref<1x4x1xf32>)
  return
}
func.func @decode_f32_any_group(%q: memref<1x?x1x128xf32, strided<[?, ?, ?, ?], offset: ?>>,
                                %k: memref<1x1x?x128xf32, strided<[?, ?, ?, ?], offset: ?>>,
                                %v: memref<1x1x?x128xf32, strided<[?, ?, ?, ?], offset: ?>>,
                                %acc: memref<1x?x1x128xf32>, %m: memref<1x?x1xf32>, %s: memref<1x?x1xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x?x1x128xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x128xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x128xf32, strided<[?, ?, ?, ?], offset: ?>>)
      outs(%acc, %m, %s : memref<1x?x1x128xf32>, memref<1x?x1xf32>, memref<1x?x1xf32>)
  return
}
func.func @decode_bf16(%q: memref<1x4x1x128xbf16, strided<[?, ?, ?, ?], offset: ?>>,
                       %k: memref<1x1x?x128xbf16, strided<[?, ?, ?, ?], offset: ?>>,
                       %v: memref<1x1x?x128xbf16, strided<[?, ?, ?, ?], offset: ?>>,
                       %acc: memref<1x4x1x128xf32>, %m: memref<1x4x1xf32>, %s: memref<1x4x1xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x4x1x128xbf16, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x128xbf16, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x128xbf16, strided<[?, ?, ?, ?], offset: ?>>)
      outs(%acc, %m, %s : memref<1x4x1x128xf32>, memref<1x4x1xf32>, memref<1x4x1xf32>)
  return
}
func.func @decode_two_tiles(%q: memref<1x8x1x64xf32, strided<[?, ?, ?, ?], offset: ?>>,
                            %k: memref<1x1x?x64xf32, strided<[?, ?, ?, ?], offset: ?>>,
                            %v: memref<1x1x?x64xf32, strided<[?, ?, ?, ?], offset: ?>>,
                            %acc: memref<1x8x1x64xf32>, %m: memref<1x8x1xf32>, %s: memref<1x8x1xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x8x1x64xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x64xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x64xf32, strided<[?, ?, ?, ?], offset: ?>>)
      outs(%acc, %m, %s : memref<1x8x1x64xf32>, memref<1x8x1xf32>, memref<1x8x1xf32>)
  return
}
