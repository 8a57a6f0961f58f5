// RUN: attn-opt %s -attn-lower-to-vector -canonicalize | FileCheck %s
// RUN: attn-opt %s -attn-lower-to-vector=vector-width=8 -canonicalize | FileCheck %s --check-prefix=AVX2

// A bufferized attn.linear (one work item: a batch and a key/value head with
// its group of query heads) becomes the linear attention kernel: f32 heap
// buffers for a chunk's φ(Q), φ(K), V, φ(K)ᵀ, the rows' A and the state S
// [D][DvPad] and normalizer z [D], the state zeroed; per chunk of 32 rows
// φ(K) and V packed (φ = elu + 1: a select between x + 1 and exp(x); vector
// loads where the rows have unit stride, else element by element), then per
// query head φ(Q) packed and per block of 4 rows: φ(Q)·z as a dot product,
// A = φ(Q) φ(K)ᵀ as 4 x 2 register tiles masked to j <= i (a select, so a
// NaN at a later key stays out), A·V over the keys before the block and
// its diagonal, φ(Q)·S, times the inverse of the denominator plus eps, and
// the rows below the chunk's end stored; then S += φ(K)ᵀV by 4 rows of S at a
// time and z += Σ φ(K).

// CHECK-LABEL: func @causal
//   CHECK-DAG: %[[QS:.+]] = memref.alloc() {alignment = 64 : i64} : memref<32x16xf32>
//   CHECK-DAG: %[[KS:.+]] = memref.alloc() {alignment = 64 : i64} : memref<32x16xf32>
//   CHECK-DAG: %[[VS:.+]] = memref.alloc() {alignment = 64 : i64} : memref<32x32xf32>
//   CHECK-DAG: %[[S:.+]] = memref.alloc() {alignment = 64 : i64} : memref<16x32xf32>
//   CHECK-DAG: %[[Z:.+]] = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
//   CHECK-DAG: %[[KT:.+]] = memref.alloc() {alignment = 64 : i64} : memref<16x32xf32>
//   CHECK-DAG: %[[A:.+]] = memref.alloc() {alignment = 64 : i64} : memref<4x32xf32>
// The chunks, φ(K) packed.
//       CHECK: scf.for %{{.+}} = %c0 to %{{.+}} step %c32 {
//       CHECK:   scf.if
//       CHECK:     arith.cmpf ogt
//       CHECK:     math.exp
//       CHECK:     arith.select
//       CHECK:     vector.store %{{.+}}, %[[KS]]
//       CHECK:   } else {
//       CHECK:     memref.store %{{.+}}, %[[KS]]
// φ(K)ᵀ by 16 x 16 register transposes, then per query head (G = 2) φ(Q)
// and the blocks of 4 rows.
//       CHECK:   vector.shuffle
//       CHECK:   vector.store %{{.+}}, %[[KT]]
//       CHECK:   scf.for %{{.+}} = %c0 to %c2 step %c1 {
//       CHECK:     vector.store %{{.+}}, %[[QS]]
//       CHECK:     scf.for %[[ROW:.+]] = %c0 to %{{.+}} step %c4 {
//       CHECK:       vector.load %[[Z]]
//       CHECK:       vector.reduction <add>
//       CHECK:       scf.for %{{.+}} = %c0 to %c16 step %c1 iter_args
//       CHECK:         vector.load %[[KT]]
//       CHECK:         memref.load %[[QS]]
//       CHECK:         vector.fma
//       CHECK:       arith.cmpi {{sle|sge}}
//       CHECK:       arith.select
//       CHECK:       vector.store %{{.+}}, %[[A]]
// One division per row (its inverse), then A·V up to the block's first
// row, its diagonal keys, and φ(Q)·S.
//       CHECK:       arith.divf %{{.+}}, %{{.+}} : f32
//       CHECK:       scf.for %{{.+}} = %c0 to %[[ROW]] step %c1 iter_args
//       CHECK:         vector.load %[[VS]]
//       CHECK:         memref.load %[[A]]
//       CHECK:       vector.load %[[VS]]
//       CHECK:       scf.for %{{.+}} = %c0 to %c16 step %c1 iter_args
//       CHECK:         vector.load %[[S]]
//       CHECK:       arith.mulf
//       CHECK:       scf.if
//       CHECK:         vector.maskedstore
// The state's update.
//       CHECK:   scf.for %{{.+}} = %c0 to %c16 step %c4 {
//       CHECK:     vector.load %[[S]]
//       CHECK:     scf.for %{{.+}} = %c0 to %{{.+}} step %c1 iter_args
//       CHECK:       memref.load %[[KS]]
//       CHECK:       vector.fma
//       CHECK:     vector.store %{{.+}}, %[[S]]
//       CHECK:   vector.load %[[Z]]
//       CHECK:   scf.for
//       CHECK:     arith.addf
//       CHECK:   vector.store %{{.+}}, %[[Z]]
//       CHECK: memref.dealloc %[[QS]]
func.func @causal(%q: memref<1x2x?x16xf32, strided<[?, ?, ?, ?], offset: ?>>,
                  %k: memref<1x1x?x16xf32, strided<[?, ?, ?, ?], offset: ?>>,
                  %v: memref<1x1x?x24xf32, strided<[?, ?, ?, ?], offset: ?>>,
                  %o: memref<1x2x?x24xf32, strided<[?, ?, ?, ?], offset: ?>>) {
  attn.linear ins(%q, %k, %v : memref<1x2x?x16xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x16xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x24xf32, strided<[?, ?, ?, ?], offset: ?>>)
      outs(%o : memref<1x2x?x24xf32, strided<[?, ?, ?, ?], offset: ?>>) causal chunk(32)
  return
}

// Non-causal, relu, with a state: S₀ and z₀ read into the buffers, the
// state summed over every chunk of keys (16 rows: the default) first, then per query head (one
// here: its loop folds away) and chunk the output rows (no A), and the
// final state written out.

// CHECK-LABEL: func @state
//       CHECK: memref.load %arg3
//       CHECK: memref.load %arg4
//       CHECK: scf.for %{{.+}} = %c0 to %{{.+}} step %c16 {
//       CHECK:   arith.maximumf
//   CHECK-NOT:   math.exp
//       CHECK:   vector.fma
//       CHECK: scf.for %{{.+}} = %c0 to %{{.+}} step %c16 {
//   CHECK-NOT:   arith.cmpi
//       CHECK:   arith.divf
//       CHECK: memref.store %{{.+}}, %arg6
//       CHECK: memref.store %{{.+}}, %arg7
func.func @state(%q: memref<1x1x?x8xbf16>, %k: memref<1x1x?x8xbf16>,
                 %v: memref<1x1x?x8xbf16>, %s0: memref<1x1x8x8xf32>,
                 %z0: memref<1x1x8xf32>, %o: memref<1x1x?x8xbf16>,
                 %s1: memref<1x1x8x8xf32>, %z1: memref<1x1x8xf32>) {
  attn.linear ins(%q, %k, %v : memref<1x1x?x8xbf16>, memref<1x1x?x8xbf16>, memref<1x1x?x8xbf16>)
      state(%s0, %z0 : memref<1x1x8x8xf32>, memref<1x1x8xf32>)
      outs(%o, %s1, %z1 : memref<1x1x?x8xbf16>, memref<1x1x8x8xf32>, memref<1x1x8xf32>)
      feature_map(relu)
  return
}

// Unnormalized with the identity map (the sums of products that the
// gradients are made of): the rows are packed as they are (no exp, no
// max), A keeps its causal select, and the numerators are
// stored without a denominator (no division, no reduction for φ(Q)·z).

// CHECK-LABEL: func @unnormalized
//   CHECK-NOT: math.exp
//   CHECK-NOT: arith.maximumf
//       CHECK: arith.cmpi sge, %{{.+}}, %{{.+}} : vector<16xi32>
//       CHECK: arith.select
//   CHECK-NOT: arith.divf
//   CHECK-NOT: vector.reduction
//       CHECK: return
func.func @unnormalized(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>,
                        %v: memref<1x1x?x16xf32>, %o: memref<1x1x?x16xf32>) {
  attn.linear ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      outs(%o : memref<1x1x?x16xf32>) causal feature_map(identity) unnormalized
  return
}

// AVX2 (8 lanes, 16 registers): the register tiles are 4 rows by 2 vectors
// (8 accumulators), not AVX-512's 4 x 4, which spilled in every step there;
// Dv = 32 (4 vectors) takes two tiles for the state's update and two for
// the output rows.

// AVX2-LABEL: func @avx2_tiles
//   AVX2-NOT: :16 = scf.for
//       AVX2: %{{.+}}:8 = scf.for
//       AVX2: %{{.+}}:8 = scf.for
//   AVX2-NOT: :16 = scf.for
//       AVX2: return
func.func @avx2_tiles(%q: memref<1x1x?x8xf32>, %k: memref<1x1x?x8xf32>,
                      %v: memref<1x1x?x32xf32>, %o: memref<1x1x?x32xf32>) {
  attn.linear ins(%q, %k, %v : memref<1x1x?x8xf32>, memref<1x1x?x8xf32>, memref<1x1x?x32xf32>)
      outs(%o : memref<1x1x?x32xf32>)
  return
}

// attn.linear_backward (one work item: a batch, a key/value head and its
// group of 2 query heads; D = 16, Dv = 24 padded to 32): S loaded
// transposed and z; per query head and chunk of 16 rows φ(Q), dO and O
// packed, per block of 4 rows the denominators (a dot product each),
// their inverses, g = dO / den and c = −(g·O); dQ = (g Sᵀ + c z) ∘ φ'(Q) (4
// accumulators over Dv, φ' = min(φ, 1) for elu + 1); then dS += φ(Q)ᵀ g by
// 4 rows of dS x 2 vectors. Then per chunk of keys dK = (V dSᵀ + dz) ∘ φ'(K)
// and dV = φ(K) dS, stored masked past Dv.

// CHECK-LABEL: func @backward
//       CHECK: memref.load %arg5[%c0, %c0, %[[D:.+]], %[[E:.+]]] : memref<1x1x16x24xf32>
//  CHECK-NEXT: memref.store %{{.+}}, %{{.+}}[%[[E]], %[[D]]] : memref<32x16xf32>
//       CHECK: memref.load %arg6
//       CHECK: scf.for %{{.+}} = %c0 to %c2 step %c1 {
//       CHECK:   scf.for %{{.+}} = %c0 to %{{.+}} step %c16 {
//       CHECK:     math.exp
//       CHECK:     scf.for %{{.+}} = %c0 to %{{.+}} step %c4 {
//       CHECK:       vector.reduction <add>
//       CHECK:       arith.divf
//       CHECK:       arith.negf
//       CHECK:       %{{.+}}:4 = scf.for %{{.+}} = %c0 to %c24 step %c1 iter_args
//       CHECK:       arith.minimumf
//       CHECK:       vector.store %{{.+}}, %{{.+}} : memref<1x2x?x16xf32, strided<[?, ?, 16, 1]>>, vector<16xf32>
//       CHECK:     %{{.+}}:8 = scf.for %{{.+}} = %c0 to %{{.+}} step %c1 iter_args
//       CHECK: scf.for %{{.+}} = %c0 to %{{.+}} step %c16 {
//       CHECK:   math.exp
//       CHECK:   %{{.+}}:4 = scf.for %{{.+}} = %c0 to %c24 step %c1 iter_args
//       CHECK:   arith.minimumf
//       CHECK:   %{{.+}}:8 = scf.for %{{.+}} = %c0 to %c16 step %c1 iter_args
//       CHECK:   vector.maskedstore %{{.+}} : memref<1x1x?x24xf32, strided<[?, ?, 24, 1]>>, vector<16xi1>, vector<16xf32>
//       CHECK: memref.dealloc
func.func @backward(%q: memref<1x2x?x16xf32>, %k: memref<1x1x?x16xf32>,
                    %v: memref<1x1x?x24xf32>, %o: memref<1x2x?x24xf32>,
                    %do: memref<1x2x?x24xf32>, %s: memref<1x1x16x24xf32>,
                    %z: memref<1x1x16xf32>, %dq: memref<1x2x?x16xf32>,
                    %dk: memref<1x1x?x16xf32>, %dv: memref<1x1x?x24xf32>) {
  attn.linear_backward ins(%q, %k, %v, %o, %do : memref<1x2x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x24xf32>, memref<1x2x?x24xf32>, memref<1x2x?x24xf32>)
      state(%s, %z : memref<1x1x16x24xf32>, memref<1x1x16xf32>)
      outs(%dq, %dk, %dv : memref<1x2x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x24xf32>)
  return
}

// The causal backward (state operands: the initial state): forward in time,
// per chunk φ(K) and V packed and transposed by register transposes
// (two-vector shuffles), per block of rows the
// masked A (j <= i: a select on i >= j) whose row sums join each row's
// denominator, which is kept in a [G][Sq + C] buffer, then B and dQ; then
// backward in time over the ceil(Sq / 16) chunks, the denominators read
// back, the rows i >= j of each key (and below the chunk's end: an and of
// two compares) for dK and dV.

// CHECK-LABEL: func @backward_causal
//       CHECK: %[[DEN:.+]] = memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<1x?xf32>
//       CHECK: scf.for %{{.+}} = %c0 to %{{.+}} step %c16 {
//       CHECK:   vector.shuffle
//       CHECK:   arith.cmpi sge, %{{.+}}, %{{.+}} : vector<16xi32>
//       CHECK:   memref.store %{{.+}}, %[[DEN]][%c0, %{{.+}}] : memref<1x?xf32>
//  CHECK-NEXT:   arith.divf
//       CHECK: arith.ceildivui %{{.+}}, %c16 : index
//       CHECK: memref.load %[[DEN]][%c0, %{{.+}}] : memref<1x?xf32>
//       CHECK: arith.andi %{{.+}}, %{{.+}} : vector<16xi1>
//       CHECK: memref.dealloc %[[DEN]]
func.func @backward_causal(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>,
                           %v: memref<1x1x?x16xf32>, %s: memref<1x1x16x16xf32>,
                           %z: memref<1x1x16xf32>, %dq: memref<1x1x?x16xf32>) {
  attn.linear_backward ins(%q, %k, %v, %v, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      state(%s, %z : memref<1x1x16x16xf32>, memref<1x1x16xf32>)
      outs(%dq, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>) causal
  return
}
