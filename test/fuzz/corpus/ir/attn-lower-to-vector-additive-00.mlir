func.func @additive(%q: memref<1x?x24xf32, strided<[?, ?, ?], offset: ?>>, %k: memref<1x?x20xf32, strided<[?, ?, ?], offset: ?>>,
                    %v: memref<1x?x40xf32, strided<[?, ?, ?], offset: ?>>, %wq: memref<36x24xf32>, %wk: memref<36x20xf32>,
                    %va: memref<36xf32>, %m: memref<1x1x?xi1, strided<[?, ?, ?], offset: ?>>,
                    %o: memref<1x?x40xf32, strided<[?, ?, ?], offset: ?>>, %w: memref<1x?x?xf32, strided<[?, ?, ?], offset: ?>>) {
  attn.additive ins(%q, %k, %v, %wq, %wk, %va : memref<1x?x24xf32, strided<[?, ?, ?], offset: ?>>, memref<1x?x20xf32, strided<[?, ?, ?], offset: ?>>, memref<1x?x40xf32, strided<[?, ?, ?], offset: ?>>, memref<36x24xf32>, memref<36x20xf32>, memref<36xf32>)
      mask(%m : memref<1x1x?xi1, strided<[?, ?, ?], offset: ?>>)
      outs(%o, %w : memref<1x?x40xf32, strided<[?, ?, ?], offset: ?>>, memref<1x?x?xf32, strided<[?, ?, ?], offset: ?>>)
  return
}
