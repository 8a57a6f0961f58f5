// RUN: attn-opt %s -split-input-file -attn-outline-work-items -verify-diagnostics

// expected-error @+1 {{a kernel must hold exactly one top-level scf.forall, found 2}}
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

// -----

// expected-error @+1 {{a dynamically sized stack buffer inside a loop would grow the stack}}
func.func @dynamic_alloca_in_loop(%o: memref<?xf32>, %n: index) {
  %cst = arith.constant 1.0 : f32
  scf.forall (%i) in (8) {
    %buf = memref.alloca(%n) : memref<?xf32>
    memref.store %cst, %buf[%i] : memref<?xf32>
  }
  return
}
