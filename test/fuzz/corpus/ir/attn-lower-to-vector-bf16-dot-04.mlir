func.func @bf16_dot_decode_group(%q: memref<1x4x1x64xbf16>, %k: memref<1x1x?x64xbf16>, %v: memref<1x1x?x64xbf16>,
                                 %acc: memref<1x4x1x64xf32>, %m: memref<1x4x1xf32>, %s: memref<1x4x1xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x4x1x64xbf16>, memref<1x1x?x64xbf16>, memref<1x1x?x64xbf16>)
      outs(%acc, %m, %s : memref<1x4x1x64xf32>, memref<1x4x1xf32>, memref<1x4x1xf32>)
  return
}
