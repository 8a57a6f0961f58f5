// RUN: attn-opt %s -attn-lower-to-vector="key-block=32 direct-rows=4" -canonicalize | FileCheck %s

// The scratch buffers' pad columns are zeroed once at the function's entry
// (whole-vector loads read them); the columns before them are written before
// any read, so they are left alone. D = Dv = 20 in 32-column rows: only the
// vector at column 16 of each row of the packed V (32 x 32) and of the
// buffered query rows (16 x 32) is zeroed.

// CHECK-LABEL: func @pads
//   CHECK-DAG:   %[[ZERO:.+]] = arith.constant dense<0.000000e+00> : vector<16xf32>
//   CHECK-DAG:   %[[C16:.+]] = arith.constant 16 : index
//       CHECK:   %[[V:.+]] = memref.alloca() {alignment = 64 : i64} : memref<32x32xf32>
//       CHECK:   %[[QROWS:.+]] = memref.alloca() {alignment = 64 : i64} : memref<16x32xf32>
//       CHECK:   scf.for %[[R:.+]] =
//  CHECK-NEXT:     vector.store %[[ZERO]], %[[V]][%[[R]], %[[C16]]] : memref<32x32xf32>, vector<16xf32>
//  CHECK-NEXT:   }
//       CHECK:   scf.for %[[R2:.+]] =
//  CHECK-NEXT:     vector.store %[[ZERO]], %[[QROWS]][%[[R2]], %[[C16]]] : memref<16x32xf32>, vector<16xf32>
//  CHECK-NEXT:   }
func.func @pads(%q: memref<1x1x?x20xf32>, %k: memref<1x1x?x20xf32>, %v: memref<1x1x?x20xf32>,
                %acc: memref<1x1x?x20xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x20xf32>, memref<1x1x?x20xf32>, memref<1x1x?x20xf32>)
      outs(%acc, %m, %s : memref<1x1x?x20xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
  return
}

// D = Dv = 32, whole vectors: no pad column, no store before the kernel.
// CHECK-LABEL: func @no_pads
//   CHECK-NOT:   vector.store
//       CHECK:   arith.cmpi sle
func.func @no_pads(%q: memref<1x1x?x32xf32>, %k: memref<1x1x?x32xf32>, %v: memref<1x1x?x32xf32>,
                   %acc: memref<1x1x?x32xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x32xf32>, memref<1x1x?x32xf32>, memref<1x1x?x32xf32>)
      outs(%acc, %m, %s : memref<1x1x?x32xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
  return
}
