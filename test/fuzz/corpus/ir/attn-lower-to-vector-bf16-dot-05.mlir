func.func @bf16_dot_causal(%q: memref<1x1x?x32xbf16>, %k: memref<1x1x?x32xbf16>, %v: memref<1x1x?x16xbf16>,
                           %acc: memref<1x1x?x16xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>, %d: index) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x32xbf16>, memref<1x1x?x32xbf16>, memref<1x1x?x16xbf16>)
      diagonal(%d) outs(%acc, %m, %s : memref<1x1x?x16xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>) causal
  return
}
