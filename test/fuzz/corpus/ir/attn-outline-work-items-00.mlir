func.func @kernel(%o: memref<2x?x32xf32, strided<[?, ?, ?], offset: ?>>) attributes {attn.kernel} {
  %c1 = arith.constant 1 : index
  %sq = memref.dim %o, %c1 : memref<2x?x32xf32, strided<[?, ?, ?], offset: ?>>
  %cst = arith.constant 1.0 : f32
  scf.forall (%b, %i) = (0, 0) to (2, %sq) step (1, 16) {
    %buf = memref.alloca() : memref<16xf32>
    memref.store %cst, %buf[%c1] : memref<16xf32>
    %v = memref.load %buf[%c1] : memref<16xf32>
    memref.store %v, %o[%b, %i, %c1] : memref<2x?x32xf32, strided<[?, ?, ?], offset: ?>>
  }
  return
}
