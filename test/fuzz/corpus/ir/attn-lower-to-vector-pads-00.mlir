func.func @pads(%q: memref<1x1x?x20xf32>, %k: memref<1x1x?x20xf32>, %v: memref<1x1x?x20xf32>,
                %acc: memref<1x1x?x20xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x20xf32>, memref<1x1x?x20xf32>, memref<1x1x?x20xf32>)
      outs(%acc, %m, %s : memref<1x1x?x20xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
  return
}
func.func @no_pads(%q: memref<1x1x?x32xf32>, %k: memref<1x1x?x32xf32>, %v: memref<1x1x?x32xf32>,
                   %acc: memref<1x1x?x32xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x32xf32>, memref<1x1x?x32xf32>, memref<1x1x?x32xf32>)
      outs(%acc, %m, %s : memref<1x1x?x32xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
  return
}
