// RUN: attn-opt %s -split-input-file -attn-lower-to-vector -canonicalize | FileCheck %s
// RUN: attn-opt %s -split-input-file -attn-lower-to-vector="bf16-dot recompute-bf16-dot" -canonicalize | FileCheck %s --check-prefix=DOT
// RUN: attn-opt %s -split-input-file -attn-lower-to-vector="vector-width=8" -canonicalize | FileCheck %s --check-prefix=AVX2

// A bufferized attn.attention_backward (one work item: a batch and a GQA
// group of two query heads) becomes the backward micro-kernel: the group's
// rows as padded f32 copies with Δ = dO·O and the LSE (−inf made +inf, so
// that a fully masked row's P is exp(s − inf) = 0), then per block of 64
// keys K^T, V^T and K packed on the stack, and per block of 16 rows of a
// head that sees the block: S = Q·K^T and dP = dO·V^T as 4 x 4 register
// tiles of 16-lane FMAs (four a product), P and dS (with the soft cap's
// derivative), then dV += P^T·dO, dK += dS^T·Q and dQ += dS·K. The gradients are written,
// scaled and rounded once, per key block (dK, dV) and at the end (dQ).

// CHECK-LABEL: func @backward
//   CHECK-DAG: %[[KT:.+]] = memref.alloca() {alignment = 64 : i64} : memref<16x64xf32>
//   CHECK-DAG: memref.alloca() {alignment = 64 : i64} : memref<16x64xf32>
//       CHECK: %[[QROWS:.+]] = memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?x16xf32>
//       CHECK: %[[DOROWS:.+]] = memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?x16xf32>
//       CHECK: %[[DELTA:.+]] = memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?xf32>
//       CHECK: %[[LSE:.+]] = memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?xf32>
//       CHECK: %[[DQ:.+]] = memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?x16xf32>
// The rows: Δ = dO·O (the packed row of dO against O's 8 columns, a lane
// sum), the LSE with −inf as +inf.
//       CHECK: vector.maskedload
//       CHECK: vector.fma
//       CHECK: %[[SUM:.+]] = vector.reduction <add>
//       CHECK: memref.store %[[SUM]], %[[DELTA]]
//       CHECK: arith.select %{{.+}}, %cst{{.*}}, %{{.+}} : f32
//       CHECK: memref.store %{{.+}}, %[[LSE]]
// The key blocks, and in each the rows that see it by blocks of 16: S as
// four register tiles of 4 rows, each made P (soft cap, exp, select) before
// the next is computed (a tile kept live through the next one's loop
// spills), then dP the same way; dV += P^T·dO and dK += dS^T·Q as register
// tiles of 4 keys x the rows' vectors summed down the 16 rows (from copies
// of the rows with non-finite elements 0); dQ += dS·K in two passes of 8
// rows; then blocks of 4 rows, then one by one. On the causal band's edge
// the products stop at the last key vector a row sees: each tile of S and
// dP switches on how many of the 4 key vectors its rows see (a loop of 4,
// 8, 12 accumulators, the rest 0; by default 16), and the loops of dV, dK
// and dQ end at the row block's last one. (V^T is packed by 16 x 16
// register transposes of the block's rows: unpack shuffles.)
//       CHECK: scf.for %{{.+}} = %c0 to %{{.+}} step %c64 {
//       CHECK:   vector.shuffle %{{.+}}, %{{.+}} [0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29] : vector<16xf32>, vector<16xf32>
//       CHECK:   scf.for %{{.+}} = %{{.+}} to %{{.+}} step %c16 {
//       CHECK:     scf.index_switch
//  CHECK-NEXT:     case 1 {
//  CHECK-NEXT:       scf.for %{{.+}} = %c0 to %c16 step %c1 iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
//       CHECK:     case 3 {
//       CHECK:     default {
//  CHECK-NEXT:       scf.for %{{.+}} = %c0 to %c16 step %c1 iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
//       CHECK:       vector.load %[[KT]]
//       CHECK:       vector.fma
//       CHECK:     math.tanh
//       CHECK:     math.exp
//       CHECK:     arith.select
// CHECK-COUNT-3:     scf.for %{{.+}} = %c0 to %c16 step %c1 iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
//       CHECK:     math.exp
// CHECK-COUNT-4:     scf.for %{{.+}} = %c0 to %c8 step %c1 iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
//       CHECK:     vector.store %{{.+}}, %[[FINITE:.+]][%c15, %c0] : memref<16x16xf32>
//       CHECK:     scf.for %{{.+}} = %c0 to %[[KEYEND:.+]] step %c4 {
// CHECK-COUNT-4:       vector.load %[[DV:.+]][%{{.+}}, %c0] : memref<64x16xf32>
//       CHECK:       vector.load %[[FINITE]][%c0, %c0]
// CHECK-COUNT-4:       vector.fma
//       CHECK:       vector.load %[[FINITE]][%c15, %c0]
// CHECK-COUNT-4:       vector.fma
// CHECK-COUNT-4:       vector.store %{{.+}}, %[[DV]][%{{.+}}, %c0] : memref<64x16xf32>
//       CHECK:     scf.for %{{.+}} = %c0 to %[[KEYEND]] step %c4 {
// CHECK-COUNT-2:     scf.for %{{.+}} = %c0 to %[[KEYEND]] step %c1 iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
//       CHECK:   scf.for %{{.+}} = %{{.+}} to %{{.+}} step %c4 {
//       CHECK:   scf.for %{{.+}} = %{{.+}} to %{{.+}} step %c1 {
//       CHECK: memref.dealloc %[[QROWS]]
//       CHECK: memref.dealloc %[[DQ]]
// AVX2 (8 lanes, 16 registers): a row tile of S, 4 rows x 8 key vectors,
// would be 32 accumulators; it is made in slices of 2 key vectors (8
// accumulators), a loop over the slices storing each to a [4 x 64] buffer,
// and the whole tile is loaded back for P. Blocks of 16 rows as on AVX-512.
// AVX2-LABEL: func @backward
//       AVX2: %[[TILE:.+]] = memref.alloca() {alignment = 64 : i64} : memref<4x64xf32>
//       AVX2: scf.for %{{.+}} = %{{.+}} to %{{.+}} step %c16 {
//       AVX2:   scf.for %[[SLICE:.+]] = %c0 to %c8 step %c2 {
//       AVX2:     %[[S:.+]]:8 = scf.for %{{.+}} = %c0 to %c16 step %c1 iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
//       AVX2:       vector.fma
//       AVX2:     vector.store %[[S]]#0, %[[TILE]][%c0, %{{.+}}]
//       AVX2:     vector.store %[[S]]#7, %[[TILE]][%c3, %{{.+}}]
//       AVX2:   }
//       AVX2:   vector.load %[[TILE]][%c0, %c0]
//       AVX2:   vector.load %[[TILE]][%c3, %c56]
//       AVX2:   math.exp
func.func @backward(%q: memref<1x2x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x8xf32>,
                    %o: memref<1x2x?x8xf32>, %lse: memref<1x2x?xf32>, %do: memref<1x2x?x8xf32>,
                    %dq: memref<1x2x?x16xf32>, %dk: memref<1x1x?x16xf32>, %dv: memref<1x1x?x8xf32>,
                    %d: index) {
  attn.attention_backward
      ins(%q, %k, %v : memref<1x2x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x8xf32>)
      diagonal(%d)
      forward(%o, %lse : memref<1x2x?x8xf32>, memref<1x2x?xf32>)
      grads(%do : memref<1x2x?x8xf32>)
      outs(%dq, %dk, %dv : memref<1x2x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x8xf32>)
      causal softcap(20.0)
  return
}

// -----

// With a score_mod (here a soft cap written as one, 20·tanh(s/20)), the
// backward evaluates it on each vector of scores and, op by op, its
// derivative in the score (forward mode: (1 − t²)·(1/20)·20), into a
// [16 x 64] buffer after P's, dS's and the finite rows' ([16 x 16]);
// dS = P·(dP − Δ) is multiplied by it, and is 0 where P is (a score_mod
// that excludes by −inf).

// CHECK-LABEL: func @backward_score_mod
//       CHECK: memref.alloca() {alignment = 64 : i64} : memref<16x16xf32>
//  CHECK-NEXT: %[[SLOPES:.+]] = memref.alloca() {alignment = 64 : i64} : memref<16x64xf32>
//       CHECK: %[[X:.+]] = arith.divf %{{.+}}, %[[C20:.+]] : vector<16xf32>
//       CHECK: %[[T:.+]] = math.tanh %[[X]] : vector<16xf32>
//       CHECK: %[[TT:.+]] = arith.mulf %[[T]], %[[T]] : vector<16xf32>
//       CHECK: %[[DT:.+]] = arith.subf %{{.+}}, %[[TT]] : vector<16xf32>
//       CHECK: %[[DX:.+]] = arith.mulf %[[DT]], %{{.+}} : vector<16xf32>
//       CHECK: arith.mulf %[[T]], %[[C20]] : vector<16xf32>
//       CHECK: %[[D:.+]] = arith.mulf %[[DX]], %[[C20]] : vector<16xf32>
//       CHECK: vector.store %[[D]], %[[SLOPES]][%c0, %c0]
//       CHECK: %[[P:.+]] = vector.load %{{.+}}[%c0, %c0] : memref<16x64xf32>, vector<16xf32>
//       CHECK: %[[DS:.+]] = arith.mulf %[[P]], %{{.+}} : vector<16xf32>
//       CHECK: %[[SLOPE:.+]] = vector.load %[[SLOPES]][%c0, %c0]
//       CHECK: %[[NONE:.+]] = arith.cmpf oeq, %[[P]], %[[ZERO:.+]] : vector<16xf32>
//       CHECK: %[[CHAINED:.+]] = arith.mulf %[[DS]], %[[SLOPE]] : vector<16xf32>
//       CHECK: arith.select %[[NONE]], %[[ZERO]], %[[CHAINED]]
func.func @backward_score_mod(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                              %o: memref<1x1x?x16xf32>, %lse: memref<1x1x?xf32>, %do: memref<1x1x?x16xf32>,
                              %dq: memref<1x1x?x16xf32>, %dk: memref<1x1x?x16xf32>, %dv: memref<1x1x?x16xf32>) {
  attn.attention_backward
      ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      forward(%o, %lse : memref<1x1x?x16xf32>, memref<1x1x?xf32>)
      grads(%do : memref<1x1x?x16xf32>)
      outs(%dq, %dk, %dv : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %c = arith.constant 20.0 : f32
        %x = arith.divf %s, %c : f32
        %t = math.tanh %x : f32
        %r = arith.mulf %t, %c : f32
        attn.yield %r : f32
      }
  return
}

// -----

// The backward walks every row of the group for one key block, so each
// row's run of the block's keys in an [.., Sq, Sk] mask or captured tensor
// lies in a page of its own, which no hardware prefetcher follows. After a
// block of 16 rows has read its own (the mask's loads, the score_mod's
// reads in S), it prefetches into L2 what the next block's rows (16 on,
// clamped to the last row) read at the block's keys, a dP tile's 4 rows
// after each of dP's tiles: five prefetches a row of the mask (a cache
// line of 16 f32 each, and the 64th key: a run that does not start a line
// ends in one more), keys clamped to the last; then the score_mod's read
// at the head, the row and the keys it reads, clamped into the capture as
// the read clamps them.

// CHECK-LABEL: func @backward_prefetch
//       CHECK: scf.for %[[START:.+]] = %c0 to %{{.+}} step %c64 {
//       CHECK:   scf.for %[[ROW:.+]] = %c0 to %{{.+}} step %c16 {
//       CHECK:     math.exp
//   CHECK-NOT:     memref.prefetch %arg3
//       CHECK:     scf.for %{{.+}} = %c0 to %c16 step %c1 iter_args
//       CHECK:       vector.fma
//       CHECK:     %[[NEXT:.+]] = arith.addi %[[ROW]], %c16 : index
//       CHECK:     %[[LASTROW:.+]] = arith.subi %{{.+}}, %c1 : index
//       CHECK:     %[[R0:.+]] = arith.minsi %[[NEXT]], %[[LASTROW]] : index
//       CHECK:     %[[M0:.+]] = arith.select %{{.+}}, %c0, %[[R0]] : index
//       CHECK:     %[[LASTKEY:.+]] = arith.subi %{{.+}}, %c1 : index
//       CHECK:     %[[K0:.+]] = arith.minsi %[[START]], %[[LASTKEY]] : index
//       CHECK:     memref.prefetch %arg3[%c0, %c0, %[[M0]], %[[K0]]], read, locality<2>, data
//       CHECK:     %[[K16:.+]] = arith.addi %[[START]], %c16 : index
//       CHECK:     %[[K16C:.+]] = arith.minsi %[[K16]], %[[LASTKEY]] : index
//       CHECK:     memref.prefetch %arg3[%c0, %c0, %[[M0]], %[[K16C]]], read, locality<2>, data
//       CHECK:     arith.addi %[[START]], %c32 : index
//       CHECK:     memref.prefetch %arg3[%c0, %c0, %[[M0]], %{{.+}}], read, locality<2>, data
//       CHECK:     arith.addi %[[START]], %c48 : index
//       CHECK:     memref.prefetch %arg3[%c0, %c0, %[[M0]], %{{.+}}], read, locality<2>, data
//       CHECK:     arith.addi %[[START]], %c63 : index
//       CHECK:     memref.prefetch %arg3[%c0, %c0, %[[M0]], %{{.+}}], read, locality<2>, data
//       CHECK:     arith.addi %[[ROW]], %c17 : index
// CHECK-COUNT-5:   memref.prefetch %arg3[%c0, %c0, %{{.+}}, %{{.+}}], read, locality<2>, data
//       CHECK:     arith.addi %[[ROW]], %c19 : index
// CHECK-COUNT-5:   memref.prefetch %arg3[%c0, %c0, %{{.+}}, %{{.+}}], read, locality<2>, data
//       CHECK:     %[[C0:.+]] = arith.minsi %[[NEXT]], %[[LASTROW]] : index
//       CHECK:     %[[C1:.+]] = arith.maxsi %[[C0]], %c0 : index
//       CHECK:     %[[CROW:.+]] = arith.minsi %[[C1]], %{{.+}} : index
//       CHECK:     memref.prefetch %arg4[%{{.+}}, %[[CROW]], %{{.+}}], read, locality<2>, data : memref<?x?x?xf32>
// CHECK-COUNT-4:   memref.prefetch %arg4[%{{.+}}, %[[CROW]], %{{.+}}], read, locality<2>, data : memref<?x?x?xf32>
//       CHECK:     memref.prefetch %arg4
//   CHECK-NOT:     vector.fma
//       CHECK:     arith.addi %[[ROW]], %c19 : index
// CHECK-COUNT-5:   memref.prefetch %arg4
//   CHECK-NOT:     memref.prefetch
//       CHECK:     vector.fma
//       CHECK:     arith.addi %[[ROW]], %c20 : index
//       CHECK:     memref.prefetch %arg3
//       CHECK:     arith.addi %[[ROW]], %c31 : index
// CHECK-COUNT-5:   memref.prefetch %arg4
func.func @backward_prefetch(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                             %mask: memref<1x1x?x?xf32>, %bias: memref<?x?x?xf32>,
                             %o: memref<1x1x?x16xf32>, %lse: memref<1x1x?xf32>, %do: memref<1x1x?x16xf32>,
                             %dq: memref<1x1x?x16xf32>, %dk: memref<1x1x?x16xf32>, %dv: memref<1x1x?x16xf32>) {
  attn.attention_backward
      ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      mask(%mask : memref<1x1x?x?xf32>)
      captures(%bias : memref<?x?x?xf32>)
      forward(%o, %lse : memref<1x1x?x16xf32>, memref<1x1x?xf32>)
      grads(%do : memref<1x1x?x16xf32>)
      outs(%dq, %dk, %dv : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %x = attn.captured 0 [%h, %i, %j] : f32
        %r = arith.addf %s, %x : f32
        attn.yield %r : f32
      }
  return
}

// -----

// Where a prefetched read's indices need another read (here q_idx divided
// by a captured stride), that read is made as the scores make it, a load at
// clamped indices: the prefetch's row is that row's, never one of a
// stand-in value (a 0 divisor would trap).

// CHECK-LABEL: func @backward_prefetch_divided
//       CHECK: scf.for %[[ROWS:.+]] = %c0 to %{{.+}} step %c16 {
//       CHECK:   math.exp
//       CHECK:   %[[NEXT:.+]] = arith.addi %[[ROWS]], %c16 : index
//       CHECK:   %[[CLAMPED:.+]] = arith.minsi %[[NEXT]], %{{.+}} : index
//       CHECK:   %[[N:.+]] = memref.load %arg4[%{{.+}}] : memref<?xi64>
//  CHECK-NEXT:   %[[D:.+]] = arith.index_cast %[[N]] : i64 to index
//  CHECK-NEXT:   %[[ROW:.+]] = arith.divsi %[[CLAMPED]], %[[D]] : index
//       CHECK:   %[[R0:.+]] = arith.maxsi %[[ROW]], %c0 : index
//  CHECK-NEXT:   %[[R:.+]] = arith.minsi %[[R0]], %{{.+}} : index
//       CHECK:   memref.prefetch %arg3[%{{.+}}, %[[R]], %{{.+}}], read, locality<2>, data
func.func @backward_prefetch_divided(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                                     %bias: memref<?x?x?xf32>, %stride: memref<?xi64>,
                                     %o: memref<1x1x?x16xf32>, %lse: memref<1x1x?xf32>, %do: memref<1x1x?x16xf32>,
                                     %dq: memref<1x1x?x16xf32>, %dk: memref<1x1x?x16xf32>, %dv: memref<1x1x?x16xf32>) {
  attn.attention_backward
      ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      captures(%bias, %stride : memref<?x?x?xf32>, memref<?xi64>)
      forward(%o, %lse : memref<1x1x?x16xf32>, memref<1x1x?xf32>)
      grads(%do : memref<1x1x?x16xf32>)
      outs(%dq, %dk, %dv : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %c0 = arith.constant 0 : index
        %n = attn.captured 1 [%c0] : i64
        %d = arith.index_cast %n : i64 to index
        %row = arith.divsi %i, %d : index
        %x = attn.captured 0 [%h, %row, %j] : f32
        %r = arith.addf %s, %x : f32
        attn.yield %r : f32
      }
  return
}

// -----

// With a block mask, each block of 4 rows at a 64-key block reads the table
// entries it covers (as the forward does) and runs only where one keeps a
// score; elsewhere the rows add nothing to dQ, dK, dV. Where it runs, the
// mask_mod's keep bits of the block of rows are or'ed first, and the
// products run only where one is set.

// CHECK-LABEL: func @backward_block_table
//  CHECK-SAME: %[[TABLE:[a-z0-9]+]]: memref<?x?x?x?xi32>
//       CHECK: scf.for %{{.+}} = %c0 to %{{.+}} step %c64 {
//       CHECK:   %[[ENTRIES:.+]]:2 = scf.for
//       CHECK:     memref.load %[[TABLE]]
//       CHECK:   scf.if %[[ENTRIES]]#0 {
//       CHECK:     vector.gather
//   CHECK-NOT:     math.exp
//       CHECK:     %[[ANY:.+]] = vector.reduction <or>, %{{.+}} : vector<16xi1> into i1
//   CHECK-NOT:     math.exp
//       CHECK:     scf.if %[[ANY]] {
//       CHECK:       math.exp
func.func @backward_block_table(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                                %o: memref<1x1x?x16xf32>, %lse: memref<1x1x?xf32>, %do: memref<1x1x?x16xf32>,
                                %dq: memref<1x1x?x16xf32>, %dk: memref<1x1x?x16xf32>, %dv: memref<1x1x?x16xf32>,
                                %docs: memref<?xi32>, %table: memref<?x?x?x?xi32>) {
  attn.attention_backward
      ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      captures(%docs, %table : memref<?xi32>, memref<?x?x?x?xi32>)
      forward(%o, %lse : memref<1x1x?x16xf32>, memref<1x1x?xf32>)
      grads(%do : memref<1x1x?x16xf32>)
      outs(%dq, %dk, %dv : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      mask_mod {
      ^bb0(%bb: index, %hh: index, %ii: index, %jj: index):
        %di = attn.captured 0 [%ii] : i32
        %dj = attn.captured 0 [%jj] : i32
        %same = arith.cmpi eq, %di, %dj : i32
        attn.yield %same : i1
      } {attn.block_mask = array<i64: 1, 128, 128>}
  return
}

// -----

// With grad_captures (here a relative-position table [1, 17] and a per-head
// factor [1] of the score, each with its partial [1, 1, <its shape>]), the
// work item first zeros its partials, and each score's input to the
// score_mod is kept in a [16 x 64] buffer after the derivative's. Where dS'
// = P·(dP − Δ) is known, the score_mod is emitted again for each read of a
// trained capture with its derivative in the element read (0 where P is
// 0): the table's (1) at 16 keys' clamped elements, added three ways (all
// lanes on one element: their sum; increasing elements: gather, add,
// scatter; otherwise lane by lane, in lane order); the factor's (the
// score) summed into its one element.

// CHECK-LABEL: func @backward_grad_captures
//  CHECK-SAME: %[[DTABLE:[a-z0-9]+]]: memref<1x1x1x17xf32>, %[[DFACTOR:[a-z0-9]+]]: memref<1x1x1xf32>
//       CHECK: memref.alloca() {alignment = 64 : i64} : memref<16x16xf32>
//  CHECK-NEXT: %[[SLOPES:.+]] = memref.alloca() {alignment = 64 : i64} : memref<16x64xf32>
//  CHECK-NEXT: %[[INPUTS:.+]] = memref.alloca() {alignment = 64 : i64} : memref<16x64xf32>
//       CHECK: memref.store %{{.+}}, %[[DTABLE]][%c0, %c0, %c0, %{{.+}}] : memref<1x1x1x17xf32>
//       CHECK: memref.store %{{.+}}, %[[DFACTOR]][%c0, %c0, %c0] : memref<1x1x1xf32>
//       CHECK: vector.store %{{.+}}, %[[INPUTS]][%c0, %c0]
//       CHECK: %[[P:.+]] = vector.load %{{.+}}[%c0, %c0] : memref<16x64xf32>, vector<16xf32>
//       CHECK: %[[DS:.+]] = arith.mulf %[[P]], %{{.+}} : vector<16xf32>
//       CHECK: %[[NONE:.+]] = arith.cmpf oeq, %[[P]], %[[ZERO:.+]] : vector<16xf32>
//       CHECK: %[[INPUT:.+]] = vector.load %[[INPUTS]][%c0, %c0]
//       CHECK: %[[AT:.+]] = arith.minsi %{{.+}} : vector<16xindex>
//       CHECK: %[[TABLEPART:.+]] = arith.select %[[NONE]], %[[ZERO]], %[[DS]]
//       CHECK: %[[FLAT:.+]] = memref.reinterpret_cast %[[DTABLE]]
//       CHECK: %[[FIRST:.+]] = vector.extract %[[AT]][0]
//       CHECK: %[[SAME:.+]] = vector.reduction <and>
//       CHECK: scf.if %[[SAME]] {
//  CHECK-NEXT:   %[[SUM:.+]] = vector.reduction <add>, %[[TABLEPART]]
//  CHECK-NEXT:   %[[OLD:.+]] = memref.load %[[FLAT]][%[[FIRST]]]
//  CHECK-NEXT:   %[[NEW:.+]] = arith.addf %[[OLD]], %[[SUM]]
//  CHECK-NEXT:   memref.store %[[NEW]], %[[FLAT]][%[[FIRST]]]
//  CHECK-NEXT: } else {
//  CHECK-NEXT:   %[[NEXT:.+]] = vector.shuffle %[[AT]], %[[AT]] [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 15]
//  CHECK-NEXT:   %[[LESS:.+]] = arith.cmpi ult, %[[AT]], %[[NEXT]]
//       CHECK:   %[[INCREASING:.+]] = vector.reduction <and>
//  CHECK-NEXT:   scf.if %[[INCREASING]] {
//  CHECK-NEXT:     %[[GATHERED:.+]] = vector.gather %{{.+}}[%c0] [%[[AT]]]
//  CHECK-NEXT:     %[[ADDED:.+]] = arith.addf %[[GATHERED]], %[[TABLEPART]]
//  CHECK-NEXT:     vector.scatter %{{.+}}[%c0] [%[[AT]]], %{{.+}}, %[[ADDED]]
//  CHECK-NEXT:   } else {
//  CHECK-NEXT:     vector.extract %[[AT]][0]
//  CHECK-NEXT:     vector.extract %[[TABLEPART]][0]
// CHECK-COUNT-15:  vector.extract %[[AT]][{{[0-9]+}}]
//       CHECK: %[[BYSCORE:.+]] = arith.mulf %[[DS]], %[[INPUT]]
//  CHECK-NEXT: %[[FACTORPART:.+]] = arith.select %[[NONE]], %[[ZERO]], %[[BYSCORE]]
//  CHECK-NEXT: %[[FACTORSUM:.+]] = vector.reduction <add>, %[[FACTORPART]]
//  CHECK-NEXT: %[[FOLD:.+]] = memref.load %[[DFACTOR]][%c0, %c0, %c0]
//  CHECK-NEXT: %[[FNEW:.+]] = arith.addf %[[FOLD]], %[[FACTORSUM]]
//  CHECK-NEXT: memref.store %[[FNEW]], %[[DFACTOR]][%c0, %c0, %c0]
func.func @backward_grad_captures(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                                  %o: memref<1x1x?x16xf32>, %lse: memref<1x1x?xf32>, %do: memref<1x1x?x16xf32>,
                                  %dq: memref<1x1x?x16xf32>, %dk: memref<1x1x?x16xf32>, %dv: memref<1x1x?x16xf32>,
                                  %table: memref<1x17xf32>, %factor: memref<1xf32>,
                                  %dtable: memref<1x1x1x17xf32>, %dfactor: memref<1x1x1xf32>) {
  attn.attention_backward
      ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      captures(%table, %factor : memref<1x17xf32>, memref<1xf32>)
      forward(%o, %lse : memref<1x1x?x16xf32>, memref<1x1x?xf32>)
      grads(%do : memref<1x1x?x16xf32>)
      outs(%dq, %dk, %dv : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>
           grad_captures [0, 1](%dtable, %dfactor : memref<1x1x1x17xf32>, memref<1x1x1xf32>))
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %d = arith.subi %j, %i : index
        %c8 = arith.constant 8 : index
        %e = arith.addi %d, %c8 : index
        %t = attn.captured 0 [%h, %e] : f32
        %m = attn.captured 1 [%h] : f32
        %x = arith.mulf %s, %m : f32
        %r = arith.addf %x, %t : f32
        attn.yield %r : f32
      }
  return
}

// -----

// bf16 operands: without recompute-bf16-dot, widened to f32 rows and f32
// FMAs. With it (and bf16-dot), every product takes vdpbf16ps, a pair a
// step: Q's and dO's rows stay bf16 ([Sq][16]); S = Q·K^T and dP = dO·V^T
// over pairs of head dims (8 steps), each broadcasting a row's pair as one
// 32-bit word against K^T and V^T packed as pairs ([16/2][2·64] bf16: lane
// j of vector v of pair p holds head dims 2p and 2p + 1 of key 16v + j);
// dV += P^T·dO and dK += dS^T·Q over pairs of rows: P and dS rounded to
// bf16 and interleaved two rows at a time ([16/2][2·64]), the rows of dO
// and Q interleaved the same way with non-finite elements 0 ([8][2·16]),
// 8 steps per tile; dQ += dS·K over pairs of keys (32 steps): dS's bf16
// rows ([16][64]) against K packed as pairs of keys ([64/2][2·16]). K^T's
// pairs are packed by register transposes of 16 keys x 16 words: the next
// 16 keys' rows prefetched, 16 row loads (masked: a key past the block's
// count reads nothing), the 8 words of the head's 16 dims stored as pairs;
// K's pairs of keys as two rows interleaved, non-finite elements 0.

// CHECK-LABEL: func @backward_bf16
//   CHECK-NOT: x86vector.avx512.dot
//       CHECK: memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?x16xf32>
//   CHECK-NOT: x86vector.avx512.dot
//       CHECK: return

// DOT-LABEL: func @backward_bf16
//   DOT-DAG: %[[KP:.+]] = memref.alloca() {alignment = 64 : i64} : memref<8x128xbf16>
//   DOT-DAG: %[[VP:.+]] = memref.alloca() {alignment = 64 : i64} : memref<8x128xbf16>
//   DOT-DAG: %[[KROWS:.+]] = memref.alloca() {alignment = 64 : i64} : memref<32x32xbf16>
//   DOT-DAG: %[[ROWPAIRS:.+]] = memref.alloca() {alignment = 64 : i64} : memref<8x32xbf16>
//   DOT-DAG: %[[PP:.+]] = memref.alloca() {alignment = 64 : i64} : memref<8x128xbf16>
//   DOT-DAG: %[[DSP:.+]] = memref.alloca() {alignment = 64 : i64} : memref<8x128xbf16>
//   DOT-DAG: %[[DSROWS:.+]] = memref.alloca() {alignment = 64 : i64} : memref<16x64xbf16>
//       DOT: %[[QROWS:.+]] = memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?x16xbf16>
//       DOT: %[[DOROWS:.+]] = memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?x16xbf16>
//       DOT: scf.for %{{.+}} = %c0 to %{{.+}} step %c64 {
//       DOT:   scf.for %{{.+}} = %c0 to %{{.+}} step %c16 {
//       DOT:     memref.prefetch
// DOT-COUNT-16:    vector.maskedload %{{.+}} : memref<1x1x?x16xbf16, strided<[?, ?, 16, 1]>>, vector<32xi1>, vector<32xbf16> into vector<32xbf16>
//       DOT:     vector.store %{{.+}}, %{{.+}}[%c7, %{{.+}}] : memref<8x128xbf16>, vector<32xbf16>
//       DOT:   scf.for
//       DOT:     vector.interleave %{{.+}}, %{{.+}} : vector<16xbf16> -> vector<32xbf16>
//       DOT:     arith.cmpi ult, %{{.+}}, %{{.+}} : vector<32xi16>
//       DOT:     vector.store %{{.+}}, %[[KROWS]][%{{.+}}, %c0] : memref<32x32xbf16>, vector<32xbf16>
//       DOT: scf.for %{{.+}} = %c0 to %c8 step %c1 iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// DOT-COUNT-4:   vector.load %[[KP]][%{{.+}}, %c{{[0-9]+}}] : memref<8x128xbf16>, vector<32xbf16>
//       DOT:     vector.load %[[QROWS]][%{{.+}}, %{{.+}}] : memref<?x16xbf16>, vector<2xbf16>
//       DOT:     vector.broadcast %{{.+}} : i32 to vector<16xi32>
// DOT-COUNT-4:   x86vector.avx512.dot
//       DOT:     math.exp
//       DOT: scf.for %{{.+}} = %c0 to %c8 step %c1 iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// DOT-COUNT-4:   vector.load %[[VP]][%{{.+}}, %c{{[0-9]+}}] : memref<8x128xbf16>, vector<32xbf16>
//       DOT:     vector.load %[[DOROWS]][%{{.+}}, %{{.+}}] : memref<?x16xbf16>, vector<2xbf16>
// DOT-COUNT-4:   x86vector.avx512.dot
// P's rows 0 and 1 as pairs, then dS's; dS's rows in bf16.
//       DOT: arith.truncf %{{.+}} : vector<16xf32> to vector<16xbf16>
//       DOT: arith.truncf %{{.+}} : vector<16xf32> to vector<16xbf16>
//       DOT: vector.interleave %{{.+}}, %{{.+}} : vector<16xbf16> -> vector<32xbf16>
//       DOT: vector.store %{{.+}}, %[[PP]][%c0, %c0] : memref<8x128xbf16>, vector<32xbf16>
//       DOT: vector.store %{{.+}}, %[[DSP]][%c0, %c0] : memref<8x128xbf16>, vector<32xbf16>
//       DOT: vector.store %{{.+}}, %[[DSROWS]][%c0, %c0] : memref<16x64xbf16>, vector<16xbf16>
// dV: dO's rows 14 and 15 interleaved, inf and NaN made 0, then the tiles.
//       DOT: vector.interleave %{{.+}}, %{{.+}} : vector<16xbf16> -> vector<32xbf16>
//       DOT: arith.cmpi ult, %{{.+}}, %{{.+}} : vector<32xi16>
//       DOT: vector.store %{{.+}}, %[[ROWPAIRS]][%c7, %c0] : memref<8x32xbf16>, vector<32xbf16>
//       DOT: scf.for %{{.+}} = %c0 to %c64 step %c4 {
//       DOT:   vector.load %[[ROWPAIRS]][%c0, %c0] : memref<8x32xbf16>, vector<32xbf16>
//       DOT:   vector.load %[[PP]][%c0, %{{.+}}] : memref<8x128xbf16>, vector<2xbf16>
//       DOT:   x86vector.avx512.dot
//       DOT:   vector.load %[[ROWPAIRS]][%c7, %c0] : memref<8x32xbf16>, vector<32xbf16>
//       DOT: scf.for %{{.+}} = %c0 to %c64 step %c4 {
//       DOT:   vector.load %[[DSP]][%c0, %{{.+}}] : memref<8x128xbf16>, vector<2xbf16>
// dQ: 32 steps of a pair of keys, two passes of 8 rows.
//       DOT: scf.for %{{.+}} = %c0 to %c32 step %c1 iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
//       DOT:   vector.load %[[DSROWS]][%c0, %{{.+}}] : memref<16x64xbf16>, vector<2xbf16>
//       DOT:   vector.load %[[KROWS]][%{{.+}}, %c0] : memref<32x32xbf16>, vector<32xbf16>
// DOT-COUNT-8:   x86vector.avx512.dot
//       DOT: scf.for %{{.+}} = %c0 to %c32 step %c1 iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
func.func @backward_bf16(%q: memref<1x1x?x16xbf16>, %k: memref<1x1x?x16xbf16>, %v: memref<1x1x?x16xbf16>,
                         %o: memref<1x1x?x16xbf16>, %lse: memref<1x1x?xf32>, %do: memref<1x1x?x16xbf16>,
                         %dq: memref<1x1x?x16xbf16>, %dk: memref<1x1x?x16xbf16>, %dv: memref<1x1x?x16xbf16>) {
  attn.attention_backward
      ins(%q, %k, %v : memref<1x1x?x16xbf16>, memref<1x1x?x16xbf16>, memref<1x1x?x16xbf16>)
      forward(%o, %lse : memref<1x1x?x16xbf16>, memref<1x1x?xf32>)
      grads(%do : memref<1x1x?x16xbf16>)
      outs(%dq, %dk, %dv : memref<1x1x?x16xbf16>, memref<1x1x?x16xbf16>, memref<1x1x?x16xbf16>)
  return
}

// -----

// With grad_mask, each row block's dS is written to dM at the block's keys
// after dP (the whole block of 16 rows, row by row). dM is written once and
// is larger than the caches: a whole block of 64 keys whose row starts a
// cache line takes non-temporal stores (no read of the lines first), a
// partial or unaligned one masked stores. A fence after the work item
// orders the non-temporal stores before its end.

// CHECK-LABEL: func @backward_grad_mask
//  CHECK-SAME: %[[DM:[a-z0-9]+]]: memref<1x1x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
//       CHECK: scf.for %[[START:.+]] = %c0 to %{{.+}} step %c64 {
//       CHECK:   scf.for %[[ROW:.+]] = %c0 to %{{.+}} step %c16 {
//       CHECK:     math.exp
//       CHECK:     %[[VIEW:.+]] = memref.reinterpret_cast %[[DM]]
//       CHECK:     %[[FULL:.+]] = arith.cmpi eq, %[[COUNT:.+]], %c64 : index
//       CHECK:     %[[LINE:.+]] = arith.andi %{{.+}}, %c63 : index
//       CHECK:     %[[ALIGNED:.+]] = arith.cmpi eq, %[[LINE]], %c0 : index
//       CHECK:     %[[STREAM:.+]] = arith.andi %[[FULL]], %[[ALIGNED]] : i1
//       CHECK:     scf.if %[[STREAM]] {
//       CHECK:       vector.store %{{.+}}, %[[VIEW]][%c0, %c0, %[[ROW]], %[[START]]] {alignment = 64 : i64, nontemporal = true}
// CHECK-COUNT-3:     vector.store %{{.+}}, %[[VIEW]][%c0, %c0, %[[ROW]], %{{.+}}] {alignment = 64 : i64, nontemporal = true}
//       CHECK:     } else {
//       CHECK:       vector.create_mask %[[COUNT]] : vector<16xi1>
//       CHECK:       vector.maskedstore %[[VIEW]][%c0, %c0, %[[ROW]], %[[START]]]
//       CHECK: memref.dealloc
//       CHECK: llvm.fence seq_cst
//  CHECK-NEXT: return
// AVX2's stores are of 8 lanes, each aligned to its 32 bytes.
// AVX2-LABEL: func @backward_grad_mask
//       AVX2: arith.andi %{{.+}}, %c63 : index
// AVX2-COUNT-8: vector.store %{{.+}} {alignment = 32 : i64, nontemporal = true} : memref<1x1x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, vector<8xf32>
func.func @backward_grad_mask(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                              %mask: memref<1x1x?x?xf32>,
                              %o: memref<1x1x?x16xf32>, %lse: memref<1x1x?xf32>, %do: memref<1x1x?x16xf32>,
                              %dq: memref<1x1x?x16xf32>, %dk: memref<1x1x?x16xf32>, %dv: memref<1x1x?x16xf32>,
                              %dm: memref<1x1x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>) {
  attn.attention_backward
      ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      mask(%mask : memref<1x1x?x?xf32>)
      forward(%o, %lse : memref<1x1x?x16xf32>, memref<1x1x?xf32>)
      grads(%do : memref<1x1x?x16xf32>)
      outs(%dq, %dk, %dv : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>
           grad_mask(%dm : memref<1x1x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>))
  return
}
