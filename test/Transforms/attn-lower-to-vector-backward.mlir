// RUN: attn-opt %s -attn-lower-to-vector -canonicalize | FileCheck %s

// A bufferized attn.attention_backward (one work item: a batch and a GQA
// group of two query heads) becomes the backward micro-kernel: the group's
// rows as padded f32 copies with Δ = dO·O and the LSE (−inf made +inf, so
// that a fully masked row's P is exp(s − inf) = 0), then per block of 64
// keys K^T, V^T and K packed on the stack, and per block of four rows of a
// head that sees the block: S = Q·K^T and dP = dO·V^T as 4 x 4 register
// tiles of 16-lane FMAs, P and dS (with the soft cap's derivative), then
// dV += P^T·dO, dK += dS^T·Q and dQ += dS·K. The gradients are written,
// scaled and rounded once, per key block (dK, dV) and at the end (dQ).

// CHECK-LABEL: func @backward
//   CHECK-DAG: %[[KT:.+]] = memref.alloca() {alignment = 64 : i64} : memref<16x64xf32>
//   CHECK-DAG: memref.alloca() {alignment = 64 : i64} : memref<4x64xf32>
//       CHECK: %[[QROWS:.+]] = memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?x16xf32>
//       CHECK: %[[DOROWS:.+]] = memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?x16xf32>
//       CHECK: %[[DELTA:.+]] = memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?xf32>
//       CHECK: %[[LSE:.+]] = memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?xf32>
//       CHECK: %[[DQ:.+]] = memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?x16xf32>
// The rows: Δ = dO·O (8 columns), the LSE with −inf as +inf.
//       CHECK: scf.for %{{.+}} = %c0 to %c8 step %c1 iter_args
//       CHECK: memref.store %{{.+}}, %[[DELTA]]
//       CHECK: arith.select %{{.+}}, %cst{{.*}}, %{{.+}} : f32
//       CHECK: memref.store %{{.+}}, %[[LSE]]
// The key blocks, and in each the rows that see it by blocks of 4.
//       CHECK: scf.for %{{.+}} = %c0 to %{{.+}} step %c64 {
//       CHECK:   scf.for %{{.+}} = %{{.+}} to %{{.+}} step %c4 {
//       CHECK:     scf.for %{{.+}} = %c0 to %c16 step %c1 iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
//       CHECK:       vector.load %[[KT]]
//       CHECK:       vector.fma
//       CHECK:     math.tanh
//       CHECK:     math.exp
//       CHECK:     arith.select
//       CHECK:     scf.for %{{.+}} = %c0 to %c8 step %c1 iter_args
//       CHECK:       vector.fma
//       CHECK:   scf.for %{{.+}} = %{{.+}} to %{{.+}} step %c1 {
//       CHECK: memref.dealloc %[[QROWS]]
//       CHECK: memref.dealloc %[[DQ]]
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
