// RUN: attn-opt %s -attn-lower-to-vector -canonicalize | FileCheck %s
// RUN: attn-opt %s -attn-lower-to-vector=vector-width=8 -canonicalize | FileCheck %s --check-prefix=AVX2

// A bufferized attn.additive (one work item: a batch and a tile of query
// rows) becomes the additive attention kernel. Once per work item W_qᵀ,
// W_kᵀ and v are packed as f32 (A = 36 padded to 48; W by 16x16 register
// transposes); per batch the keys are projected 16 at a time: tiles of 4
// keys (read in place) by the 48 of A into a 16-key scratch tile, whose
// 16x16 blocks are transposed into kpᵀ [48][Sk'] (keys in vector lanes);
// the rows projected into qp [rows][48], V packed. Then per block of 4
// rows, per block of 16 keys:
// the four rows' scores Σ_a v[a]·tanh(qp[i,a] + kpᵀ[a]) share each kpᵀ
// load; keys past Sk or under a false keep bit become −inf by a select;
// each row's online softmax (maximum, exp, sum) and its P·V. Per row, O =
// acc / sum (0 for an empty row) with masked stores where O's rows have
// unit stride, and the weights exp(s − m) / sum likewise.

// CHECK-LABEL: func @additive
//   CHECK-DAG: %[[WQT:.+]] = memref.alloc() {alignment = 64 : i64} : memref<24x48xf32>
//   CHECK-DAG: %[[VA:.+]] = memref.alloc() {alignment = 64 : i64} : memref<48xf32>
//   CHECK-DAG: %[[WKT:.+]] = memref.alloc() {alignment = 64 : i64} : memref<20x48xf32>
//   CHECK-DAG: %[[KPT:.+]] = memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<48x?xf32>
//   CHECK-DAG: %[[TILE:.+]] = memref.alloc() {alignment = 64 : i64} : memref<16x48xf32>
//   CHECK-DAG: %[[QP:.+]] = memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?x48xf32>
// W_qᵀ: blocks of 16 rows of W_q (A) by 16 columns, transposed in
// registers (four levels of two-vector shuffles: unpacks inside the
// 128-bit lanes, then the lanes); then the last 4 rows of A, a partial
// tile (its missing rows zero).
//       CHECK: %[[WQ:.+]] = memref.reinterpret_cast %arg3
//       CHECK: scf.for %[[A0:.+]] = %c0 to %c32 step %c16 {
//       CHECK:   vector.load %[[WQ]][%[[A0]], %c0]
//       CHECK:   vector.shuffle %{{.+}}, %{{.+}} [0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29]
//       CHECK:   vector.shuffle %{{.+}}, %{{.+}} [0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29]
//       CHECK:   vector.shuffle %{{.+}}, %{{.+}} [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27]
//       CHECK:   vector.store %{{.+}}, %[[WQT]][%c0, %[[A0]]]
//       CHECK: vector.load %[[WQ]][%c32, %c0]
//       CHECK: vector.shuffle
//       CHECK: vector.store %{{.+}}, %[[WQT]][%c0, %c32]
// The keys' projection, 16 keys a group: the tile's rows past the keys
// zero, tiles of 4 keys by 48 of A (3 vectors) into it, then its three
// 16x16 blocks transposed into kpᵀ's 16 columns of the group.
//       CHECK: scf.for %[[GROUP:.+]] = %c0 to %{{.+}} step %c16 {
//       CHECK:   scf.for
//       CHECK:     vector.store %{{.+}}, %[[TILE]]
//       CHECK:   scf.for %[[KEY:.+]] = %c0 to %{{.+}} step %c4 {
//       CHECK:     scf.for %{{.+}} = %c0 to %c20 step %c1 iter_args
//       CHECK:       vector.load %[[WKT]]
//       CHECK:       %[[J:.+]] = arith.addi %[[GROUP]], %[[KEY]]
//       CHECK:       memref.load %arg1[%c0, %[[J]],
//       CHECK:       vector.fma
//       CHECK:     vector.store %{{.+}}, %[[TILE]][%[[KEY]], %c0]
//       CHECK:   scf.for %[[BLOCK:.+]] = %c0 to %c48 step %c16 {
//       CHECK:     vector.load %[[TILE]][%c0, %[[BLOCK]]]
//       CHECK:     vector.shuffle
//       CHECK:     vector.store %{{.+}}, %[[KPT]][%[[BLOCK]], %[[GROUP]]]
// The rows' projection.
//       CHECK: scf.for %{{.+}} = %c0 to %{{.+}} step %c4 {
//       CHECK:   scf.for %{{.+}} = %c0 to %c24 step %c1 iter_args
//       CHECK:     vector.load %[[WQT]]
//       CHECK:   vector.store %{{.+}}, %[[QP]]
// Blocks of 4 rows, blocks of 16 keys: the scores.
//       CHECK: scf.for %[[ROW:.+]] = %c0 to %{{.+}} step %c4 {
//       CHECK:   scf.for %{{.+}} = %c0 to %{{.+}} step %c16 {
//       CHECK:     scf.for %{{.+}} = %c0 to %c36 step %c1 iter_args
//       CHECK:       vector.load %[[KPT]]
//       CHECK:       memref.load %[[VA]]
//       CHECK:       memref.load %[[QP]][%[[ROW]],
//       CHECK:       math.tanh
//       CHECK:       vector.fma
//       CHECK:       math.tanh
//       CHECK:       math.tanh
//       CHECK:       math.tanh
//       CHECK:     arith.cmpi slt
//       CHECK:     memref.load %arg6
//       CHECK:     arith.andi
//       CHECK:     arith.select
// The online softmax of a row, its P·V (a select per key: a masked key's
// NaN V stays out).
//       CHECK:     vector.reduction <maximumf>
//       CHECK:     math.exp
//       CHECK:     vector.reduction <add>
//       CHECK:     scf.for %{{.+}} = %c0 to %c16 step %c1 iter_args
//       CHECK:       arith.select
// O and the weights of each row.
//       CHECK:   arith.divf
//       CHECK:   scf.if
//       CHECK:     vector.maskedstore
//       CHECK:   scf.for %{{.+}} = %c0 to %{{.+}} step %c16 {
//       CHECK:     math.exp
//       CHECK:     vector.maskedstore
//       CHECK: memref.dealloc %[[WQT]]
// AVX2 (8 lanes, 16 registers): the projections' register tiles are 4 rows
// by 2 vectors of A (8 accumulators; 4 x 4 spilled there), the keys' over
// Dk = 20, the queries' over Dq = 24.

// AVX2-LABEL: func @additive
//       AVX2: %{{.+}}:8 = scf.for %{{.+}} = %c0 to %c20 step %c1 iter_args
//       AVX2: %{{.+}}:8 = scf.for %{{.+}} = %c0 to %c24 step %c1 iter_args
//   AVX2-NOT: :16 = scf.for
func.func @additive(%q: memref<1x?x24xf32, strided<[?, ?, ?], offset: ?>>, %k: memref<1x?x20xf32, strided<[?, ?, ?], offset: ?>>,
                    %v: memref<1x?x40xf32, strided<[?, ?, ?], offset: ?>>, %wq: memref<36x24xf32>, %wk: memref<36x20xf32>,
                    %va: memref<36xf32>, %m: memref<1x1x?xi1, strided<[?, ?, ?], offset: ?>>,
                    %o: memref<1x?x40xf32, strided<[?, ?, ?], offset: ?>>, %w: memref<1x?x?xf32, strided<[?, ?, ?], offset: ?>>) {
  attn.additive ins(%q, %k, %v, %wq, %wk, %va : memref<1x?x24xf32, strided<[?, ?, ?], offset: ?>>, memref<1x?x20xf32, strided<[?, ?, ?], offset: ?>>, memref<1x?x40xf32, strided<[?, ?, ?], offset: ?>>, memref<36x24xf32>, memref<36x20xf32>, memref<36xf32>)
      mask(%m : memref<1x1x?xi1, strided<[?, ?, ?], offset: ?>>)
      outs(%o, %w : memref<1x?x40xf32, strided<[?, ?, ?], offset: ?>>, memref<1x?x?xf32, strided<[?, ?, ?], offset: ?>>)
  return
}
