// RUN: attn-opt %s -attn-lower-to-vector -canonicalize -cse -split-input-file | FileCheck %s
// RUN: attn-opt %s -attn-lower-to-vector=vector-width=8 -canonicalize -cse -split-input-file | FileCheck %s --check-prefix=AVX2

// A layer's projection (attn-decompose-mha): C[M, 72] f32 += A[M, 40] ·
// W[72, 40]ᵀ, W bf16. Where C's rows have unit stride: Wᵀ is packed as f32
// panels [2][40][64] (the second strip's columns past 72 zeroed first), then
// per strip of 64 columns and block of 6 rows, 24 accumulators are loaded
// from C (its bias), take one broadcast A element per row and k against
// the panel's 4 vectors, and are stored back; the last strip holds 8
// columns: one vector, a masked load and store. Elsewhere the matmul stays
// for convert-linalg-to-loops.

// CHECK-LABEL: func @projection
//       CHECK: scf.if
//       CHECK:   %[[C:.+]] = memref.reinterpret_cast %arg2 {{.*}} to memref<?x72xf32, strided<[?, 1], offset: ?>>
//       CHECK:   %[[P:.+]] = memref.alloc() {alignment = 64 : i64} : memref<2x40x64xf32>
//       CHECK:   scf.for %[[K:.+]] = %c0 to %c40
//       CHECK:     vector.store %{{.+}}, %[[P]][%c1, %[[K]], %c48]
//       CHECK:   scf.for %[[N:.+]] = %c0 to %c72
//       CHECK:     %[[PANEL:.+]] = arith.divui %[[N]], %c64
//       CHECK:     %[[COL:.+]] = arith.remui %[[N]], %c64
//       CHECK:     scf.for %[[K2:.+]] = %c0 to %c40
//       CHECK:       %[[W:.+]] = memref.load %arg1[%[[N]], %[[K2]]] : memref<72x40xbf16
//       CHECK:       %[[WF:.+]] = arith.extf %[[W]] : bf16 to f32
//       CHECK:       memref.store %[[WF]], %[[P]][%[[PANEL]], %[[K2]], %[[COL]]]
//       CHECK:   scf.for %[[R:.+]] = %c0 to %{{.+}} step %c6
//       CHECK:     %[[S0:.+]] = memref.subview %[[P]][0, 0, 0] [1, 40, 64]
//       CHECK:     vector.load %[[C]][%[[R]], %c0]
// CHECK-COUNT-23:  vector.load %[[C]]
//       CHECK:     scf.for %{{.+}} = %c0 to %c40 step %c1 iter_args({{.*}}) -> (vector<16xf32>, {{.*}}) {
// CHECK-COUNT-4:     vector.load %[[S0]]
//       CHECK:       memref.load %arg0
// CHECK-COUNT-4:     vector.fma
//       CHECK:       memref.load %arg0
// CHECK-COUNT-4:     vector.fma
//       CHECK:     vector.store %{{.+}}, %[[C]][%[[R]], %c0]
//       CHECK:   scf.for %{{.+}} = %{{.+}} to %{{.+}} step %c1
//       CHECK:   %[[S1:.+]] = memref.subview %[[P]][1, 0, 0] [1, 40, 64]
//       CHECK:   vector.constant_mask [8] : vector<16xi1>
//       CHECK:   vector.maskedload %[[C]]
//       CHECK:   vector.maskedstore %[[C]]
//       CHECK:   memref.dealloc %[[P]]
//       CHECK: } else {
//       CHECK:   linalg.matmul

// AVX2 (8 lanes, 16 registers): strips of 2 vectors (16 columns, 5 panels
// for 72), 6 x 2 = 12 accumulators (6 x 4 spilled in every step there).

// AVX2-LABEL: func @projection
//       AVX2: memref.alloc() {alignment = 64 : i64} : memref<5x40x16xf32>
//       AVX2: %{{.+}}:12 = scf.for %{{.+}} = %c0 to %c40 step %c1 iter_args({{.*}}) -> (vector<8xf32>,
//   AVX2-NOT: :24 = scf.for
func.func @projection(%x: memref<?x40xf32, strided<[?, ?], offset: ?>>,
                      %w: memref<72x40xbf16, strided<[?, ?], offset: ?>>,
                      %c: memref<?x72xf32, strided<[?, ?], offset: ?>>) {
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                 affine_map<(m, n, k) -> (n, k)>,
                                 affine_map<(m, n, k) -> (m, n)>]
      ins(%x, %w : memref<?x40xf32, strided<[?, ?], offset: ?>>,
                   memref<72x40xbf16, strided<[?, ?], offset: ?>>)
      outs(%c : memref<?x72xf32, strided<[?, ?], offset: ?>>)
  return
}

// -----

// A plain matmul (B not transposed) is not a projection: it stays.

// CHECK-LABEL: func @plain
//   CHECK-NOT: vector.fma
//       CHECK: linalg.matmul
func.func @plain(%x: memref<?x40xf32>, %w: memref<40x72xf32>, %c: memref<?x72xf32>) {
  linalg.matmul ins(%x, %w : memref<?x40xf32>, memref<40x72xf32>)
      outs(%c : memref<?x72xf32>)
  return
}
