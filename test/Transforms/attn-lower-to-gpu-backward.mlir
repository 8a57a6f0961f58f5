// RUN: attn-opt %s -attn-tiling="query-tile-size=64 decode-rows=0 block-mapping=true" -attn-lower-to-gpu -canonicalize -cse | FileCheck %s
// RUN: attn-opt %s -attn-lower-to-gpu=host-emulation=1 -canonicalize -cse | FileCheck %s --check-prefix=HOST

// attn.attention_backward becomes its own kernel (Gpu/BackwardKernel.cpp),
// whatever the tiling made of it: 256 threads a block, T = 32 keys or rows
// (D = 64, Dv = 32). Blocks x < ceil(Sk / 32) take 32 keys of key/value
// head y: K and V staged once, then per query head of the GQA group (8 / 2
// = 4) and per row tile that the bottom-right band lets see those keys: Q,
// dO, LSE and Δ = dO·O − dLSE staged, each cell's P = exp(s − LSE) and dS
// (the score: scale, soft cap, bias; dS through the cap's derivative, dM
// before it), then dV += Pᵀ·dO and dK += dSᵀ·Q skipping weights of 0; row
// tiles the band hides get dM = 0. The other blocks take 32 rows of one
// query head: dQ += dS·K over the key tiles they see. No atomics.

// CHECK: gpu.func @backward(%arg0: memref<?xbf16>,
// CHECK-SAME: %[[MASK:arg27]]: memref<?xbf16>,
// CHECK-SAME: %[[OUT:arg36]]: memref<?xbf16>,
// CHECK-SAME: %[[LSE:arg45]]: memref<?xf32>,
// CHECK-SAME: %[[DO:arg52]]: memref<?xbf16>,
// CHECK-SAME: %[[DLSE:arg61]]: memref<?xf32>,
// CHECK-SAME: %[[DQ:arg68]]: memref<?xbf16>,
// CHECK-SAME: %[[DK:arg77]]: memref<?xbf16>,
// CHECK-SAME: %[[DV:arg86]]: memref<?xbf16>,
// CHECK-SAME: %[[DM:arg95]]: memref<?xf32>,
// CHECK-SAME: attn.block_rows = 32 : i64, attn.shared_memory_bytes = 46080 : i64, known_block_size = array<i32: 256, 1, 1>
// CHECK: %[[Q:.+]] = memref.view {{.+}} to memref<32x65xf32, #gpu.address_space<workgroup>>
// CHECK: %[[DOT:.+]] = memref.view {{.+}} to memref<32x33xf32, #gpu.address_space<workgroup>>
// CHECK: %[[K:.+]] = memref.view {{.+}} to memref<32x65xf32, #gpu.address_space<workgroup>>
// CHECK: %[[V:.+]] = memref.view {{.+}} to memref<32x33xf32, #gpu.address_space<workgroup>>
// CHECK: %[[P:.+]] = memref.view {{.+}} to memref<32x33xf32, #gpu.address_space<workgroup>>
// CHECK: %[[DS:.+]] = memref.view {{.+}} to memref<32x33xf32, #gpu.address_space<workgroup>>
// CHECK: %[[ACC:.+]] = memref.view {{.+}} to memref<32x64xf32, #gpu.address_space<workgroup>>
// CHECK: %[[ACCV:.+]] = memref.view {{.+}} to memref<32x32xf32, #gpu.address_space<workgroup>>
// CHECK: %[[RLSE:.+]] = memref.view {{.+}} to memref<32xf32, #gpu.address_space<workgroup>>
// CHECK: %[[DELTA:.+]] = memref.view {{.+}} to memref<32xf32, #gpu.address_space<workgroup>>
// The group G = Hq / max(Hkv, 1); key blocks first.
// CHECK: %[[G:.+]] = arith.divui
// CHECK: %[[KEYTILES:.+]] = arith.ceildivui %{{.+}}, %c32
// CHECK: %[[ISKEY:.+]] = arith.cmpi slt, %block_id_x, %[[KEYTILES]]
// CHECK: scf.if %[[ISKEY]] {
// K and V staged, then each query head of the group and its row tiles.
// CHECK:   memref.store {{.+}}, %[[K]]
// CHECK:   memref.store {{.+}}, %[[V]]
// CHECK:   scf.for %{{.+}} = %c0 to %[[G]] step %c1 {
// CHECK:     scf.for %[[FIRST:.+]] = %c0 to %{{.+}} step %c32 {
// CHECK:       %[[MEET:.+]] = arith.andi
// CHECK:       scf.if %[[MEET]] {
// CHECK:         gpu.barrier
// CHECK:         memref.store {{.+}}, %[[Q]]
// CHECK:         memref.store {{.+}}, %[[DOT]]
// CHECK:         memref.load %[[LSE]]
// CHECK:         memref.store {{.+}}, %[[RLSE]]
// CHECK:         memref.load %[[DO]]
// CHECK:         memref.load %[[OUT]]
// CHECK:         math.fma
// CHECK:         memref.load %[[DLSE]]
// CHECK:         arith.subf
// CHECK:         memref.store {{.+}}, %[[DELTA]]
// CHECK:         gpu.barrier
// The cells: the band (bottom-right: j <= i + Sk - Sq), the bias (-inf
// excludes), a finite LSE; s, the cap, P; dP - Δ; the cap's derivative.
// CHECK:         scf.for %{{.+}} = %thread_id_x to %c1024 step %c256 {
// CHECK:           arith.cmpi sle
// CHECK:           memref.load %[[MASK]]
// CHECK:           arith.cmpf une
// CHECK:           scf.if %{{.+}} -> (f32, f32, f32) {
// CHECK:             math.fma
// CHECK:             math.tanh
// CHECK:             math.exp
// CHECK:             math.fma
// CHECK:             memref.load %[[DELTA]]
// CHECK:             arith.subf
// CHECK:             arith.mulf
// CHECK:             arith.divf
// CHECK:           memref.store %{{.+}}#0, %[[P]]
// CHECK:           memref.store %{{.+}}#1, %[[DS]]
// CHECK:           memref.store %{{.+}}#2, %[[DM]]
// CHECK:         gpu.barrier
// dV += Pᵀ·dO, dK += dSᵀ·Q, a weight of 0 skipped.
// CHECK:         scf.for %{{.+}} = %thread_id_x to %c1024 step %c256 {
// CHECK:           memref.load %[[P]]
// CHECK:           arith.cmpf oeq
// CHECK:           memref.load %[[DOT]]
// CHECK:           arith.select
// CHECK:           memref.store {{.+}}, %[[ACCV]]
// CHECK:         scf.for %{{.+}} = %thread_id_x to %c2048 step %c256 {
// CHECK:           memref.load %[[DS]]
// CHECK:           memref.load %[[Q]]
// CHECK:           memref.store {{.+}}, %[[ACC]]
// A row tile the band hides: dM = 0 there.
// CHECK:       arith.xori %[[MEET]]
// CHECK:         memref.store %{{.+}}, %[[DM]]
// CHECK:   gpu.barrier
// CHECK:   memref.store {{.+}}, %[[DK]]
// CHECK:   memref.store {{.+}}, %[[DV]]
// CHECK: } else {
// A row block: Q, dO, LSE and Δ once, then the key tiles it sees.
// CHECK:   memref.store {{.+}}, %[[Q]]
// CHECK:   scf.for %{{.+}} = %c0 to %{{.+}} step %c32 {
// CHECK:     scf.if
// CHECK:       gpu.barrier
// CHECK:       memref.store {{.+}}, %[[K]]
// CHECK:       gpu.barrier
// CHECK:       math.exp
// CHECK:       memref.store %{{.+}}#1, %[[DS]]
// CHECK-NOT:   %[[DM]]
// CHECK:       gpu.barrier
// CHECK:       memref.load %[[DS]]
// CHECK:       memref.load %[[K]]
// CHECK:       memref.store {{.+}}, %[[ACC]]
// CHECK:   gpu.barrier
// CHECK:   memref.store {{.+}}, %[[DQ]]
// CHECK: gpu.return

// The host emulation: the grid (ceil(Sk / 32) + G·ceil(Sq / 32), Hkv, B)
// in loops, one thread, no barriers.
// HOST: func.func @backward(
// HOST-NOT: gpu.
// HOST: memref.alloca() : memref<46080xi8>
// HOST: %[[G:.+]] = arith.divui
// HOST: %[[KT:.+]] = arith.ceildivui %{{.+}}, %c32
// HOST: %[[QT:.+]] = arith.ceildivui %{{.+}}, %c32
// HOST: %[[ROWBLOCKS:.+]] = arith.muli %[[G]], %[[QT]]
// HOST: %[[X:.+]] = arith.addi %[[KT]], %[[ROWBLOCKS]]
// HOST: scf.for %{{.+}} = %c0 to %{{.+}} step %c1 {
// HOST:   scf.for %{{.+}} = %c0 to %{{.+}} step %c1 {
// HOST:     scf.for %{{.+}} = %c0 to %[[X]] step %c1 {
// HOST-NOT: gpu.
// HOST: return

func.func @backward(%q: tensor<?x8x?x64xbf16>, %k: tensor<?x2x?x64xbf16>, %v: tensor<?x2x?x32xbf16>,
                    %m: tensor<?x?x?x?xbf16>,
                    %o: tensor<?x8x?x32xbf16>, %lse: tensor<?x8x?xf32>, %do: tensor<?x8x?x32xbf16>,
                    %dlse: tensor<?x8x?xf32>,
                    %dq: tensor<?x8x?x64xbf16>, %dk: tensor<?x2x?x64xbf16>, %dv: tensor<?x2x?x32xbf16>,
                    %dm: tensor<?x8x?x?xf32>)
    -> (tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x32xbf16>, tensor<?x8x?x?xf32>) {
  %r:4 = attn.attention_backward
      ins(%q, %k, %v : tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x32xbf16>)
      mask(%m : tensor<?x?x?x?xbf16>)
      forward(%o, %lse : tensor<?x8x?x32xbf16>, tensor<?x8x?xf32>)
      grads(%do : tensor<?x8x?x32xbf16>) grad_lse(%dlse : tensor<?x8x?xf32>)
      outs(%dq, %dk, %dv : tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x32xbf16>
           grad_mask(%dm : tensor<?x8x?x?xf32>))
      causal align(bottom_right) softcap(30.0)
      -> tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x32xbf16>, tensor<?x8x?x?xf32>
  return %r#0, %r#1, %r#2, %r#3 : tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x32xbf16>, tensor<?x8x?x?xf32>
}
