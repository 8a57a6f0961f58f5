func.func @decode(%q: memref<1x1x?x20xf32, strided<[?, ?, ?, ?], offset: ?>>,
                  %k: memref<1x1x?x20xf32, strided<[?, ?, ?, ?], offset: ?>>,
                  %v: memref<1x1x?x20xf32, strided<[?, ?, ?, ?], offset: ?>>,
                  %acc: memref<1x1x?x20xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x20xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x20xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x20xf32, strided<[?, ?, ?, ?], offset: ?>>)
      outs(%acc, %m, %s : memref<1x1x?x20xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
  return
}
func.func @decode_group(%q: memref<1x4x1x20xf32, strided<[?, ?, ?, ?], offset: ?>>,
                        %k: memref<1x1x?x20xf32, strided<[?, ?, ?, ?], offset: ?>>,
                        %v: memref<1x1x?x20xf32, strided<[?, ?, ?, ?], offset: ?>>,
                        %acc: memref<1x4x1x20xf32>, %m: memref<1x4x1xf32>, %s: memref<1x4x1xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x4x1x20xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x20xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x20xf32, strided<[?, ?, ?, ?], offset: ?>>)
      outs(%acc, %m, %s : memref<1x4x1x20xf32>, memref<1x4x1xf32>, memref<1x4x1xf32>)
  return
}
func.func @decode_wide(%q: memref<1x2x1x256xf32>, %k: memref<1x1x?x256xf32>, %v: memref<1x1x?x256xf32>,
                       %acc: memref<1x2x1x256xf32>, %m: memref<1x2x1xf32>, %s: memref<1x2x1xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x2x1x256xf32>, memref<1x1x?x256xf32>, memref<1x1x?x256xf32>)
      outs(%acc, %m, %s : memref<1x2x1x256xf32>, memref<1x2x1xf32>, memref<1x2x1xf32>)
  return
}
func.func @decode_f16_tiles(%q: memref<1x?x1x20xf16>, %k: memref<1x1x?x20xf16>, %v: memref<1x1x?x20xf16>,
                            %acc: memref<1x?x1x20xf32>, %m: memref<1x?x1xf32>, %s: memref<1x?x1xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x?x1x20xf16>, memref<1x1x?x20xf16>, memref<1x1x?x20xf16>)
      outs(%acc, %m, %s : memref<1x?x1x20xf32>, memref<1x?x1xf32>, memref<1x?x1xf32>)
  return
}
func.func @decode_group_wide(%q: memref<1x4x1x256xf32>, %k: memref<1x1x?x256xf32>, %v: memref<1x1x?x256xf32>,
                             %acc: memref<1x4x1x256xf32>, %m: memref<1x4x1xf32>, %s: memref<1x4x1xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x4x1x256xf32>, memref<1x1x?x256xf32>, memref<1x1x?x256xf32>)
      outs(%acc, %m, %s : memref<1x4x1x256xf32>, memref<1x4x1xf32>, memref<1x4x1xf32>)
  return
}
func.func @decode_softcap(%q: memref<1x4x1x20xf32>, %k: memref<1x1x?x20xf32>, %v: memref<1x1x?x20xf32>,
                          %acc: memref<1x4x1x20xf32>, %m: memref<1x4x1xf32>, %s: memref<1x4x1xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x4x1x20xf32>, memref<1x1x?x20xf32>, memref<1x1x?x20xf32>)
      outs(%acc, %m, %s : memref<1x4x1x20xf32>, memref<1x4x1xf32>, memref<1x4x1xf32>) softcap(30.0)
  return
}
