func.func @two_foralls(%o: memref<8xf32>) attributes {attn.kernel} {
  %cst = arith.constant 1.0 : f32
  scf.forall (%i) in (8) {
    memref.store %cst, %o[%i] : memref<8xf32>
  }
  scf.forall (%i) in (8) {
    memref.store %cst, %o[%i] : memref<8xf32>
  }
  return
}
