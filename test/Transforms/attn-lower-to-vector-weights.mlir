// RUN: attn-opt %s -attn-lower-to-vector -canonicalize | FileCheck %s
// RUN: attn-opt %s -attn-lower-to-vector="bf16-dot recompute-bf16-dot" -canonicalize | FileCheck %s --check-prefix=DOT

// A bufferized attn.attention_weights (one work item: a batch, a query head,
// a tile of rows) becomes the weights kernel. Without an LSE operand it
// first computes each row's own: per block of 64 keys (K^T packed on the
// stack), per block of four rows that see it, the scores as 4 x 4 register
// tiles of 16-lane FMAs, the allowed ones' maximum (NaN-propagating) and
// sum of exponentials, folded into the row's running max and sum; LSE = m +
// log(l), +inf for a row that saw no key. Then per key block again the rows
// outside the band get zeros and the others exp(s - LSE), written where the
// weights' rows have unit stride by vector stores (else element by
// element): a whole block of 64 keys whose row starts a cache line by
// non-temporal stores (W is written once and larger than the caches: no
// read of its lines first), a partial or unaligned one by masked stores.
// A fence at the end orders the non-temporal stores before the work
// item's end.

// CHECK-LABEL: func @own_lse
//   CHECK-DAG: %[[KT:.+]] = memref.alloca() {alignment = 64 : i64} : memref<16x64xf32>
//       CHECK: %[[QROWS:.+]] = memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?x16xf32>
//       CHECK: %[[LSE:.+]] = memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?xf32>
//       CHECK: %[[MAX:.+]] = memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?xf32>
//       CHECK: %[[SUM:.+]] = memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?xf32>
// The LSE pass: key blocks, row blocks of 4, the scores against K^T.
//       CHECK: scf.for %{{.+}} = %c0 to %{{.+}} step %c64 {
//       CHECK:   scf.for %{{.+}} = %{{.+}} to %{{.+}} step %c4 {
//       CHECK:     scf.for %{{.+}} = %c0 to %c16 step %c1 iter_args
//       CHECK:       vector.load %[[KT]]
//       CHECK:       memref.load %[[QROWS]]
//       CHECK:     vector.reduction <maximumf>
//       CHECK:     memref.store %{{.+}}, %[[MAX]]
//       CHECK:     vector.reduction <add>
//       CHECK:     memref.store %{{.+}}, %[[SUM]]
// LSE = m + log(l), +inf where m = -inf.
//       CHECK: scf.for
//       CHECK:   math.log
//       CHECK:   arith.cmpf oeq
//       CHECK:   memref.store %{{.+}}, %[[LSE]]
// The weights: unit-stride rows or not, then per key block the zeros
// before and after the band and the band's rows by blocks of 4.
//       CHECK: scf.if
//       CHECK:   scf.for %[[START:.+]] = %c0 to %{{.+}} step %c64 {
//       CHECK:     %[[FULL:.+]] = arith.cmpi eq, %[[COUNT:.+]], %c64 : index
//       CHECK:     %[[LINE:.+]] = arith.andi %{{.+}}, %c63 : index
//       CHECK:     %[[ALIGNED:.+]] = arith.cmpi eq, %[[LINE]], %c0 : index
//       CHECK:     %[[STREAM:.+]] = arith.andi %[[FULL]], %[[ALIGNED]] : i1
//       CHECK:     scf.if %[[STREAM]] {
// CHECK-COUNT-4:     vector.store %{{.+}} {alignment = 64 : i64, nontemporal = true} : memref<1x1x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, vector<16xf32>
//       CHECK:     } else {
//       CHECK:       vector.create_mask %[[COUNT]] : vector<16xi1>
//       CHECK:       vector.maskedstore
//       CHECK:     scf.for %{{.+}} = %{{.+}} to %{{.+}} step %c4 {
//       CHECK:       math.exp
//       CHECK:       vector.store %{{.+}} {alignment = 64 : i64, nontemporal = true}
//       CHECK:       vector.maskedstore
//       CHECK: } else {
//       CHECK:   memref.store %{{.+}}, %{{.+}}[%c0, %c0, %{{.+}}, %{{.+}}] : memref<1x1x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
//       CHECK: memref.dealloc %[[QROWS]]
//       CHECK: llvm.fence seq_cst
//  CHECK-NEXT: return
func.func @own_lse(%q: memref<1x1x?x16xf32, strided<[?, ?, ?, ?], offset: ?>>,
                   %k: memref<1x1x?x16xf32, strided<[?, ?, ?, ?], offset: ?>>,
                   %w: memref<1x1x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, %d: index) {
  attn.attention_weights ins(%q, %k : memref<1x1x?x16xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x16xf32, strided<[?, ?, ?, ?], offset: ?>>)
      diagonal(%d) outs(%w : memref<1x1x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>) causal
  return
}

// With the forward's LSE the kernel reads it (-inf made +inf, so that a fully
// masked row's weights are exp(s - inf) = 0) and makes one pass.

// CHECK-LABEL: func @given_lse
//       CHECK: %[[LSE:.+]] = memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?xf32>
//       CHECK: scf.for
//       CHECK:   memref.load %{{.+}} : memref<1x1x?xf32, strided<[?, ?, ?], offset: ?>>
//       CHECK:   arith.select %{{.+}}, %cst{{.*}}, %{{.+}} : f32
//       CHECK:   memref.store %{{.+}}, %[[LSE]]
//   CHECK-NOT: vector.reduction <maximumf>
//       CHECK: scf.if
// With recompute-bf16-dot (and bf16-dot), bf16 Q and K take the dot
// product: Q's rows stay bf16, K^T is packed as pairs of head dims
// ([16/2][2·64] bf16), and each of the 8 steps broadcasts a row's pair.

// DOT-LABEL: func @given_lse
//       DOT: %[[KP:.+]] = memref.alloca() {alignment = 64 : i64} : memref<8x128xbf16>
//       DOT: %[[QROWS:.+]] = memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?x16xbf16>
//       DOT: scf.for %{{.+}} = %c0 to %c8 step %c1 iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// DOT-COUNT-4:   vector.load %[[KP]][%{{.+}}, %c{{[0-9]+}}] : memref<8x128xbf16>, vector<32xbf16>
//       DOT:     vector.load %[[QROWS]][%{{.+}}, %{{.+}}] : memref<?x16xbf16>, vector<2xbf16>
// DOT-COUNT-4:   x86vector.avx512.dot
//       DOT: math.exp
func.func @given_lse(%q: memref<1x1x?x16xbf16, strided<[?, ?, ?, ?], offset: ?>>,
                     %k: memref<1x1x?x16xbf16, strided<[?, ?, ?, ?], offset: ?>>,
                     %lse: memref<1x1x?xf32, strided<[?, ?, ?], offset: ?>>,
                     %w: memref<1x1x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>) {
  attn.attention_weights ins(%q, %k : memref<1x1x?x16xbf16, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x16xbf16, strided<[?, ?, ?, ?], offset: ?>>)
      lse(%lse : memref<1x1x?xf32, strided<[?, ?, ?], offset: ?>>)
      outs(%w : memref<1x1x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>)
  return
}

// With a block mask, each block of 4 rows at a 64-key block reads the table
// entries it covers (as the forward and backward do): in the LSE pass a
// block of rows that keeps nothing is skipped, and in the weights pass it
// gets zeros with no scores computed.

// CHECK-LABEL: func @block_table
//  CHECK-SAME: %[[TABLE:[a-z0-9]+]]: memref<?x?x?x?xi32>
// The LSE pass.
//       CHECK: scf.for %{{.+}} = %c0 to %{{.+}} step %c64 {
//       CHECK:   %[[LSEENTRIES:.+]]:2 = scf.for
//       CHECK:     memref.load %[[TABLE]]
//       CHECK:   scf.if %[[LSEENTRIES]]#0 {
//       CHECK:     vector.reduction <maximumf>
//       CHECK:   }
// The weights pass: exp(s - LSE) where kept, zeros stored otherwise.
//       CHECK: scf.for %{{.+}} = %c0 to %{{.+}} step %c64 {
//       CHECK:   %[[ENTRIES:.+]]:2 = scf.for
//       CHECK:     memref.load %[[TABLE]]
// (The zeros by non-temporal stores where the row's block starts a cache
// line, else masked stores; no exp between them.)
//       CHECK:   scf.if %[[ENTRIES]]#0 {
//       CHECK:     math.exp
//       CHECK:     vector.store %{{[0-9]+}}, %{{.+}} {alignment = 64 : i64, nontemporal = true}
//       CHECK:     vector.store %[[ZERO:cst[_0-9]*]], %{{.+}} {alignment = 64 : i64, nontemporal = true}
//   CHECK-NOT:     math.exp
//       CHECK:     vector.maskedstore %{{.+}}, %[[ZERO]]
func.func @block_table(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>,
                       %w: memref<1x1x?x?xf32>, %docs: memref<?xi32>,
                       %table: memref<?x?x?x?xi32>) {
  attn.attention_weights ins(%q, %k : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      captures(%docs, %table : memref<?xi32>, memref<?x?x?x?xi32>)
      outs(%w : memref<1x1x?x?xf32>)
      mask_mod {
      ^bb0(%bb: index, %hh: index, %ii: index, %jj: index):
        %di = attn.captured 0 [%ii] : i32
        %dj = attn.captured 0 [%jj] : i32
        %same = arith.cmpi eq, %di, %dj : i32
        attn.yield %same : i1
      } {attn.block_mask = array<i64: 1, 128, 128>}
  return
}

// With a mask of every row, each block of 4 rows prefetches into L2 what
// the rows 16 further (clamped to the last) read of the mask at the block's
// keys, after its own scores: five prefetches a row (a line of 16 f32 keys
// a step and the 64th key), keys clamped to the mask's last; in the LSE's
// pass and in the weights' pass.

// CHECK-LABEL: func @mask_prefetch
// CHECK-COUNT-2: scf.for %[[START:.+]] = %c0 to %{{.+}} step %c64 {
//       CHECK:   scf.for %[[ROW:.+]] = %c0 to %{{.+}} step %c4 {
//       CHECK:     %[[AHEAD:.+]] = arith.addi %[[ROW]], %c16 : index
//       CHECK:     %[[LAST:.+]] = arith.subi %{{.+}}, %c1 : index
//       CHECK:     %[[R0:.+]] = arith.minsi %[[AHEAD]], %[[LAST]] : index
//       CHECK:     %[[M0:.+]] = arith.select %{{.+}}, %c0, %[[R0]] : index
//       CHECK:     %[[K0:.+]] = arith.minsi %[[START]], %{{.+}} : index
//       CHECK:     memref.prefetch %arg2[%c0, %c0, %[[M0]], %[[K0]]], read, locality<2>, data
// CHECK-COUNT-19:  memref.prefetch %arg2[%c0, %c0, %{{.+}}, %{{.+}}], read, locality<2>, data
//   CHECK-NOT:     memref.prefetch
//       CHECK:     math.exp
func.func @mask_prefetch(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>,
                         %mask: memref<1x1x?x?xf32>, %w: memref<1x1x?x?xf32>) {
  attn.attention_weights ins(%q, %k : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      mask(%mask : memref<1x1x?x?xf32>) outs(%w : memref<1x1x?x?xf32>)
  return
}
