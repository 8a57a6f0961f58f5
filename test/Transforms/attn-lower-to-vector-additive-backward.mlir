// RUN: attn-opt %s -attn-lower-to-vector -canonicalize | FileCheck %s

// A bufferized attn.additive_backward (one work item: a batch and a part
// of the query rows) becomes the additive backward kernel. It shares the
// forward's setup (W_qᵀ, W_kᵀ, v packed, A = 36 padded to 48; kpᵀ [48][Sk']
// with keys in lanes; qp of the rows), packs Vᵀ [48][Sk'] (Dv = 40 padded)
// and the rows' dO. Per part of the rows (R = ⌈Sq / P⌉ each) its partial
// sums start at 0; per block of 4 rows:
//   pass 1: the scores Σ_a v[a]·tanh(qp + kpᵀ) per 16 keys, −inf where
//           excluded, kept, and each row's running max and sum;
//   pass 2: P = exp(s − m)·(1/sum), dP = dO·Vᵀ (40 steps, the rows share
//           each Vᵀ load), Δ += P·dP, dV += Pᵀ·dO key by key;
//           then dS = P·(dP − Δ), 0 where P is 0;
//   pass 3: per a (36 of them), per 16 keys, for each row t = tanh(qp +
//           kpᵀ) again, dS·t and g = dS − dS·t·t (selected to 0 where dS
//           is 0: the op has a mask, and an excluded key's t may be NaN),
//           the rows' g summed into dkpᵀ (one load and store a block);
//           after the keys grad_qp[i, a] = v[a]·Σ g and dv[a] += Σ dS·t.
// The part's sums are then stored (grad_kp by 16x16 transposes of dkpᵀ,
// times v).

// CHECK-LABEL: func @additive_backward
//   CHECK-DAG: %[[KPT:.+]] = memref.alloc(%[[PAD:.+]]) {alignment = 64 : i64} : memref<48x?xf32>
//   CHECK-DAG: %[[QP:.+]] = memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?x48xf32>
//   CHECK-DAG: %[[VA:.+]] = memref.alloc() {alignment = 64 : i64} : memref<48xf32>
//       CHECK: %[[VT:.+]] = memref.alloc(%[[PAD]]) {alignment = 64 : i64} : memref<48x?xf32>
//  CHECK-NEXT: %[[DO:.+]] = memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?x48xf32>
//  CHECK-NEXT: %[[PROBS:.+]] = memref.alloc(%[[PAD]]) {alignment = 64 : i64} : memref<4x?xf32>
//  CHECK-NEXT: %[[GRADS:.+]] = memref.alloc(%[[PAD]]) {alignment = 64 : i64} : memref<4x?xf32>
//  CHECK-NEXT: memref.alloc() {alignment = 64 : i64} : memref<2x4xf32>
//  CHECK-NEXT: %[[DKPT:.+]] = memref.alloc(%[[PAD]]) {alignment = 64 : i64} : memref<48x?xf32>
//  CHECK-NEXT: %[[DV:.+]] = memref.alloc(%[[PAD]]) {alignment = 64 : i64} : memref<?x48xf32>
//  CHECK-NEXT: %[[DVA:.+]] = memref.alloc() {alignment = 64 : i64} : memref<48xf32>
// The parts: R = ⌈Sq / P⌉ rows each.
//       CHECK: %[[P:.+]] = memref.dim %arg9, %c1
//       CHECK: arith.ceildivui %{{.+}}, %[[P]] : index
//       CHECK: scf.for %{{.+}} = %c0 to %[[P]] step %c1 {
// Pass 1.
//       CHECK:   scf.for %[[J:.+]] = %c0 to %{{.+}} step %c16 {
//       CHECK:     scf.for %{{.+}} = %c0 to %c36 step %c1 iter_args(
//       CHECK:       math.tanh
//       CHECK:     arith.select %{{.+}}, %{{.+}}#0, %cst : vector<16xi1>, vector<16xf32>
//       CHECK:     vector.store %{{.+}}, %[[PROBS]][%c0, %[[J]]]
//       CHECK:     vector.reduction <maximumf>
// Pass 2.
//       CHECK:   scf.for %[[J2:.+]] = %c0 to %{{.+}} step %c16 iter_args(
//       CHECK:     math.exp
//       CHECK:     vector.store %{{.+}}, %[[PROBS]][%c0, %[[J2]]]
//       CHECK:     scf.for %[[C:.+]] = %c0 to %c40 step %c1 iter_args(
//       CHECK:       vector.load %[[VT]][%[[C]], %[[J2]]]
//       CHECK:       memref.load %[[DO]]
//       CHECK:       vector.fma
//       CHECK:     vector.store %{{.+}}, %[[GRADS]][%c0, %[[J2]]]
//       CHECK:     scf.for %{{.+}} = %c0 to %c16 step %c1 {
//       CHECK:       vector.load %[[DV]]
//       CHECK:       memref.load %[[PROBS]]
//       CHECK:       vector.store %{{.+}}, %[[DV]]
// dS.
//       CHECK:   scf.for %[[J3:.+]] = %c0 to %{{.+}} step %c16 {
//       CHECK:     %[[PV:.+]] = vector.load %[[PROBS]][%c0, %[[J3]]]
//       CHECK:     arith.cmpf oeq, %[[PV]]
//       CHECK:     vector.store %{{.+}}, %[[GRADS]][%c0, %[[J3]]]
// Pass 3.
//       CHECK:   scf.for %[[A:.+]] = %c0 to %c36 step %c1 {
//       CHECK:     memref.load %[[QP]]
//       CHECK:     scf.for %[[J4:.+]] = %c0 to %{{.+}} step %c16 iter_args(
//       CHECK:       %[[KP:.+]] = vector.load %[[KPT]][%[[A]], %[[J4]]]
//       CHECK:       %[[T:.+]] = math.tanh
//       CHECK:       %[[DS:.+]] = vector.load %[[GRADS]][%c0, %[[J4]]]
//       CHECK:       %[[DT:.+]] = arith.mulf %[[DS]], %[[T]]
//       CHECK:       %[[NDT:.+]] = arith.negf %[[DT]]
//       CHECK:       %[[G:.+]] = vector.fma %[[NDT]], %[[T]], %[[DS]]
//       CHECK:       %[[LIVE:.+]] = arith.cmpf une, %[[DS]]
//       CHECK:       arith.select %[[LIVE]], %[[DT]]
//       CHECK:       arith.select %[[LIVE]], %[[G]]
//   CHECK-COUNT-3:   math.tanh
//       CHECK:       vector.load %[[DKPT]][%[[A]], %[[J4]]]
//       CHECK:       vector.store %{{.+}}, %[[DKPT]][%[[A]], %[[J4]]]
//       CHECK:     %[[W:.+]] = memref.load %[[VA]][%[[A]]]
//       CHECK:     %[[SUM:.+]] = vector.reduction <add>, %{{.+}}#0
//       CHECK:     %[[GQ:.+]] = arith.mulf %[[W]], %[[SUM]]
//       CHECK:     memref.store %[[GQ]], %arg8[%c0, %{{.+}}, %[[A]]]
//       CHECK:     memref.load %[[DVA]][%[[A]]]
//       CHECK:     vector.reduction <add>, %{{.+}}#4
//       CHECK:     memref.store %{{.+}}, %[[DVA]][%[[A]]]
func.func @additive_backward(%q: memref<1x?x24xf32>, %k: memref<1x?x20xf32>, %v: memref<1x?x40xf32>,
                             %wq: memref<36x24xf32>, %wk: memref<36x20xf32>, %va: memref<36xf32>,
                             %do: memref<1x?x40xf32>, %m: memref<1x1x?xi1>,
                             %dqp: memref<1x?x36xf32>, %dkp: memref<1x?x?x36xf32>,
                             %dv: memref<1x?x?x40xf32>, %dva: memref<1x?x36xf32>) {
  attn.additive_backward ins(%q, %k, %v, %wq, %wk, %va, %do : memref<1x?x24xf32>, memref<1x?x20xf32>, memref<1x?x40xf32>, memref<36x24xf32>, memref<36x20xf32>, memref<36xf32>, memref<1x?x40xf32>)
      mask(%m : memref<1x1x?xi1>)
      outs(%dqp, %dkp, %dv, %dva : memref<1x?x36xf32>, memref<1x?x?x36xf32>, memref<1x?x?x40xf32>, memref<1x?x36xf32>)
  return
}
