func.func @f16_widened(%q: memref<1x1x?x16xf16>, %k: memref<1x1x?x16xf16>, %v: memref<1x1x?x16xf16>,
                             %acc: memref<1x1x?x16xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x16xf16>, memref<1x1x?x16xf16>, memref<1x1x?x16xf16>)
      outs(%acc, %m, %s : memref<1x1x?x16xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
  return
}
