func.func @dynamic_alloca_in_loop(%o: memref<?xf32>, %n: index) {
  %cst = arith.constant 1.0 : f32
  scf.forall (%i) in (8) {
    %buf = memref.alloca(%n) : memref<?xf32>
    memref.store %cst, %buf[%i] : memref<?xf32>
  }
  return
}
