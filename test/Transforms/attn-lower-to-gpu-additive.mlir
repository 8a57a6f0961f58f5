// RUN: attn-opt %s -attn-tiling="query-tile-size=64 decode-rows=0 block-mapping=true" -attn-lower-to-gpu -canonicalize -cse | FileCheck %s
// RUN: attn-opt %s -attn-lower-to-gpu=host-emulation=1 -canonicalize -cse | FileCheck %s --check-prefix=HOST

// attn.additive becomes its own kernel (Gpu/AdditiveKernel.cpp), whatever
// the tiling made of it: a block of 256 threads per (32 query rows,
// batch). qp = Q·W_qᵀ once; per tile of 32 keys kp = K·W_kᵀ and V staged,
// the scores Σ_a v[a]·tanh(qp + kp) at allowed cells (-inf elsewhere), each
// row's online max and sum (a row with no allowed key yet takes weights 0
// and keeps its accumulator), acc·rescale + p·V skipping keys of weight 0;
// then O = acc / l (0 for a row that saw no key, its NaN kept) and, with
// weights, the key tiles once more: W = exp(s − m) / l.

// CHECK: gpu.func @additive(%arg0: memref<?xf16>,
// CHECK-SAME: %[[MASK:arg34]]: memref<?xi8>,
// CHECK-SAME: %[[O:arg41]]: memref<?xf16>,
// CHECK-SAME: %[[W:arg48]]: memref<?xf32>,
// CHECK-SAME: attn.block_rows = 32 : i64, attn.shared_memory_bytes = 24336 : i64, known_block_size = array<i32: 256, 1, 1>
// CHECK: %[[QP:.+]] = memref.view {{.+}} to memref<32x37xf32, #gpu.address_space<workgroup>>
// CHECK: %[[KP:.+]] = memref.view {{.+}} to memref<32x37xf32, #gpu.address_space<workgroup>>
// CHECK: %[[VA:.+]] = memref.view {{.+}} to memref<36xf32, #gpu.address_space<workgroup>>
// CHECK: %[[VT:.+]] = memref.view {{.+}} to memref<32x40xf32, #gpu.address_space<workgroup>>
// CHECK: %[[P:.+]] = memref.view {{.+}} to memref<32x32xf32, #gpu.address_space<workgroup>>
// CHECK: %[[ACC:.+]] = memref.view {{.+}} to memref<32x40xf32, #gpu.address_space<workgroup>>
// CHECK: %[[M:.+]] = memref.view {{.+}} to memref<32xf32, #gpu.address_space<workgroup>>
// CHECK: %[[L:.+]] = memref.view {{.+}} to memref<32xf32, #gpu.address_space<workgroup>>
// CHECK: %[[R:.+]] = memref.view {{.+}} to memref<32xf32, #gpu.address_space<workgroup>>
// qp: a Dq = 24 dot per cell of [32][36].
// CHECK: scf.for %{{.+}} = %thread_id_x to %c1152 step %c256
// CHECK:   scf.for {{.+}} = %c0 to %c24 step %c1
// CHECK:   memref.store {{.+}}, %[[QP]]
// CHECK: gpu.barrier
// The key tiles: kp (Dk = 20), V, then the scores under the mask.
// CHECK: scf.for %[[FIRST:.+]] = %c0 to %{{.+}} step %c32
// CHECK:   scf.for {{.+}} = %c0 to %c20 step %c1
// CHECK:   memref.store {{.+}}, %[[KP]]
// CHECK:   memref.store {{.+}}, %[[VT]]
// CHECK:   gpu.barrier
// CHECK:   scf.for %{{.+}} = %thread_id_x to %c1024 step %c256
// CHECK:     memref.load %[[MASK]]
// CHECK:     scf.for {{.+}} = %c0 to %c36 step %c1
// CHECK:       math.tanh
// CHECK:       math.fma
// CHECK:     memref.store {{.+}}, %[[P]]
// CHECK:   gpu.barrier
// Each row's statistics, by 32 threads.
// CHECK:   scf.for %{{.+}} = %thread_id_x to %c32 step %c256
// CHECK:     arith.maximumf
// CHECK:     arith.cmpf oeq
// CHECK:     math.exp
// CHECK:     memref.store {{.+}}, %[[P]]
// CHECK:     memref.store {{.+}}, %[[R]]
// CHECK:     memref.store {{.+}}, %[[M]]
// CHECK:     memref.store {{.+}}, %[[L]]
// CHECK:   gpu.barrier
// acc = acc·rescale + p·V, a key of weight 0 skipped.
// CHECK:   scf.for %{{.+}} = %thread_id_x to %c1280 step %c256
// CHECK:     memref.load %[[R]]
// CHECK:     arith.cmpf oeq
// CHECK:     arith.select
// CHECK:     memref.store {{.+}}, %[[ACC]]
// CHECK:   gpu.barrier
// O, rounded to f16; a row with max -inf gives 0 (une: a NaN row's NaN out).
// CHECK: arith.cmpf une
// CHECK: arith.divf
// CHECK: arith.truncf {{.+}} : f32 to f16
// CHECK: memref.store {{.+}}, %[[O]]
// The weights' pass.
// CHECK: scf.for
// CHECK:   math.tanh
// CHECK:   math.exp
// CHECK:   arith.divf
// CHECK:   memref.store {{.+}}, %[[W]]
// CHECK: gpu.return

// The host emulation: the grid (query tiles, batch) in loops, one thread.
// HOST: func.func @additive(
// HOST-NOT: gpu.
// HOST: memref.alloca() : memref<24336xi8>
// HOST: %[[TILES:.+]] = arith.ceildivui %{{.+}}, %c32
// HOST: scf.for %{{.+}} = %c0 to %{{.+}} step %c1 {
// HOST-NEXT: scf.for %{{.+}} = %c0 to %[[TILES]] step %c1 {
// HOST-NOT: gpu.
// HOST: return
func.func @additive(%q: tensor<?x?x24xf16>, %k: tensor<?x?x20xf16>, %v: tensor<?x?x40xf16>,
                    %wq: tensor<36x24xf16>, %wk: tensor<36x20xf16>, %va: tensor<36xf16>,
                    %m: tensor<?x?x?xi1>, %o: tensor<?x?x40xf16>, %w: tensor<?x?x?xf32>)
    -> (tensor<?x?x40xf16>, tensor<?x?x?xf32>) {
  %r:2 = attn.additive ins(%q, %k, %v, %wq, %wk, %va : tensor<?x?x24xf16>, tensor<?x?x20xf16>, tensor<?x?x40xf16>, tensor<36x24xf16>, tensor<36x20xf16>, tensor<36xf16>)
      mask(%m : tensor<?x?x?xi1>)
      outs(%o, %w : tensor<?x?x40xf16>, tensor<?x?x?xf32>) -> tensor<?x?x40xf16>, tensor<?x?x?xf32>
  return %r#0, %r#1 : tensor<?x?x40xf16>, tensor<?x?x?xf32>
}
