// RUN: attn-opt %s -split-input-file -attn-tiling="query-tile-size=64 decode-rows=0 block-mapping=true" -attn-lower-to-gpu -canonicalize -cse | FileCheck %s
// RUN: attn-opt %s -split-input-file -attn-lower-to-gpu=host-emulation=1 -canonicalize -cse | FileCheck %s --check-prefix=HOST

// attn.linear becomes its own kernel (Gpu/LinearKernel.cpp), whatever the
// tiling made of it: a block of 256 threads per (32 value columns, key/value
// head, batch); the state S [D][32] and z [D] in shared memory beside the
// chunk's φ(Q), φ(K) (rows padded to D + 1 floats), V and, causal, the
// chunk's scores A [C][C]. Causal f16 with GQA (4 query heads on 2
// key/value heads) and a state: S₀, z₀ read first; per chunk of 16 rows
// φ(K) and V staged, then for each query head of the group φ(Q), A on
// j ≤ i, O = (φ(Q)S + AV) / (φ(Q)z + ΣA + eps); then S += φ(K)ᵀV; the
// final state written last, z by the first column tile's block.

// CHECK: module attributes {gpu.container_module}
// CHECK: gpu.func @causal_state(%[[Q:arg0]]: memref<?xf16>,
// CHECK-SAME: %[[S0:arg27]]: memref<?xf32>,
// CHECK-SAME: %[[O:arg43]]: memref<?xf16>,
// CHECK-SAME: %[[S1:arg52]]: memref<?xf32>,
// CHECK-SAME: %[[Z1:arg61]]: memref<?xf32>,
// CHECK-SAME: attn.block_rows = 32 : i64, attn.shared_memory_bytes = 19840 : i64, known_block_size = array<i32: 256, 1, 1>, nvvm.minctasm = 1 : i32
// CHECK-DAG: %[[TID:.+]] = gpu.thread_id x
// CHECK-DAG: %[[BX:.+]] = gpu.block_id x
// CHECK-DAG: gpu.block_id y
// CHECK-DAG: gpu.block_id z
// CHECK: %[[SMEM:.+]] = gpu.dynamic_shared_memory
// CHECK: %[[PQ:.+]] = memref.view %[[SMEM]][%c0][] {{.+}} to memref<16x65xf32, #gpu.address_space<workgroup>>
// CHECK: %[[PK:.+]] = memref.view %[[SMEM]][%c4160][] {{.+}} to memref<16x65xf32, #gpu.address_space<workgroup>>
// CHECK: %[[V:.+]] = memref.view %[[SMEM]][%c8320][] {{.+}} to memref<16x32xf32, #gpu.address_space<workgroup>>
// CHECK: %[[A:.+]] = memref.view %[[SMEM]][%c10368][] {{.+}} to memref<16x16xf32, #gpu.address_space<workgroup>>
// CHECK: %[[S:.+]] = memref.view %[[SMEM]][%c11392][] {{.+}} to memref<64x32xf32, #gpu.address_space<workgroup>>
// CHECK: %[[Z:.+]] = memref.view %[[SMEM]][%c19584][] {{.+}} to memref<64xf32, #gpu.address_space<workgroup>>
// The block's first value column.
// CHECK: arith.muli %[[BX]], %c32
// S from S₀ (columns past Dv = 40 zero), the threads striding over [64][32].
// CHECK: scf.for %{{.+}} = %[[TID]] to %c2048 step %c256
// CHECK:   scf.if
// CHECK:     memref.load %[[S0]]
// CHECK:   memref.store {{.+}}, %[[S]]
// CHECK: gpu.barrier
// The chunks: φ(K) (elu + 1) and V staged.
// CHECK: scf.for %[[FIRST:.+]] = %c0 to %{{.+}} step %c16
// CHECK:   %[[ROWS:.+]] = arith.minsi %{{.+}}, %c16
// CHECK:   scf.for %{{.+}} = %[[TID]] to %c1024 step %c256
// CHECK:     math.exp
// CHECK:     memref.store {{.+}}, %[[PK]]
// CHECK:   scf.for %{{.+}} = %[[TID]] to %c512 step %c256
// CHECK:     memref.store {{.+}}, %[[V]]
// Each query head of the group: φ(Q), then A on j ≤ i < rows (a dot over D).
// CHECK:   scf.for %{{.+}} = %c0 to %{{.+}} step %c1
// CHECK:     memref.store {{.+}}, %[[PQ]]
// CHECK:     gpu.barrier
// CHECK:     scf.for %{{.+}} = %[[TID]] to %c256 step %c256
// CHECK:       arith.cmpi ule
// CHECK:       scf.for {{.+}} = %c0 to %c64 step %c1
// CHECK:         math.fma
// CHECK:       memref.store {{.+}}, %[[A]]
// CHECK:     gpu.barrier
// O: φ(Q)·S and φ(Q)·z over D, then A·V and ΣA over the row's keys j ≤ i
// only (a NaN past the diagonal stays there), the quotient rounded to f16.
// CHECK:     scf.for %{{.+}} = %[[TID]] to %c512 step %c256
// CHECK:       scf.for {{.+}} = %c0 to %c64 step %c1 iter_args
// CHECK:         memref.load %[[S]]
// CHECK:         memref.load %[[Z]]
// CHECK:       %[[END:.+]] = arith.addi %{{.+}}, %c1
// CHECK:       scf.for {{.+}} = %c0 to %[[END]] step %c1 iter_args
// CHECK:         memref.load %[[A]]
// CHECK:         memref.load %[[V]]
// CHECK:       arith.divf
// CHECK:       arith.truncf {{.+}} : f32 to f16
// CHECK:       memref.store {{.+}}, %[[O]]
// CHECK:     gpu.barrier
// Then S += φ(K)ᵀV over the chunk's rows; z by the (d, 0) threads.
// CHECK:   scf.for %{{.+}} = %[[TID]] to %c2048 step %c256
// CHECK:     scf.for {{.+}} = %c0 to %[[ROWS]] step %c1 iter_args
// CHECK:       memref.load %[[PK]]
// CHECK:       memref.load %[[V]]
// CHECK:     memref.store {{.+}}, %[[S]]
// CHECK:     scf.if
// CHECK:       memref.store {{.+}}, %[[Z]]
// CHECK:   gpu.barrier
// The final state.
// CHECK: scf.for %{{.+}} = %[[TID]] to %c2048 step %c256
// CHECK:   memref.store {{.+}}, %[[S1]]
// CHECK: arith.cmpi eq, %[[BX]], %c0
// CHECK: scf.if
// CHECK:   memref.store {{.+}}, %[[Z1]]
// CHECK: gpu.return
// The host emulation (what GpuEmulationTest runs on the CPU): the same
// parameters and body, the grid as loops over batch, key/value head and
// column tile (2 of 32 for Dv = 40), one thread (stride 1), no barriers,
// the tiles in one stack buffer.
// HOST-LABEL: func.func @causal_state(%arg0: memref<?xf16>,
// HOST-NOT: gpu.
// HOST: memref.alloca() : memref<19840xi8>
// HOST: scf.for %{{.+}} = %c0 to %{{.+}} step %c1 {
// HOST-NEXT:   scf.for %{{.+}} = %c0 to %{{.+}} step %c1 {
// HOST-NEXT:     scf.for %[[X:.+]] = %c0 to %c2 step %c1 {
// HOST-NEXT:       arith.muli %[[X]], %c32
// HOST:       scf.for %{{.+}} = %c0 to %c2048 step %c1 {
// HOST-NOT: gpu.
// HOST: return

func.func @causal_state(%q: tensor<?x4x?x64xf16>, %k: tensor<?x2x?x64xf16>, %v: tensor<?x2x?x40xf16>,
                        %s0: tensor<?x2x64x40xf32>, %z0: tensor<?x2x64xf32>,
                        %o: tensor<?x4x?x40xf16>, %s1: tensor<?x2x64x40xf32>, %z1: tensor<?x2x64xf32>)
    -> (tensor<?x4x?x40xf16>, tensor<?x2x64x40xf32>, tensor<?x2x64xf32>) {
  %r:3 = attn.linear ins(%q, %k, %v : tensor<?x4x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x40xf16>)
      state(%s0, %z0 : tensor<?x2x64x40xf32>, tensor<?x2x64xf32>)
      outs(%o, %s1, %z1 : tensor<?x4x?x40xf16>, tensor<?x2x64x40xf32>, tensor<?x2x64xf32>) causal
      -> tensor<?x4x?x40xf16>, tensor<?x2x64x40xf32>, tensor<?x2x64xf32>
  return %r#0, %r#1, %r#2 : tensor<?x4x?x40xf16>, tensor<?x2x64x40xf32>, tensor<?x2x64xf32>
}

// -----

// Non-causal, relu, unnormalized: two passes. First the keys' chunks into
// S (no scores tile), then per query head and query chunk O = φ(Q)·S alone:
// no division, f32 stored as is.

// HOST-LABEL: func.func @full
// HOST: memref.alloca() : memref<10496xi8>
// HOST: scf.for %{{.+}} = %c0 to %c3 step %c1 {

// CHECK-LABEL: gpu.func @full
// CHECK-SAME: attn.shared_memory_bytes = 10496 : i64
// CHECK: %[[PQ:.+]] = memref.view {{.+}} to memref<16x33xf32, #gpu.address_space<workgroup>>
// CHECK: %[[PK:.+]] = memref.view {{.+}} to memref<16x33xf32, #gpu.address_space<workgroup>>
// CHECK: %[[V:.+]] = memref.view {{.+}} to memref<16x32xf32, #gpu.address_space<workgroup>>
// CHECK: %[[S:.+]] = memref.view {{.+}} to memref<32x32xf32, #gpu.address_space<workgroup>>
// CHECK-NOT: memref<16x16xf32
// CHECK: gpu.barrier
// CHECK: scf.for
// CHECK:   arith.maximumf
// CHECK:   memref.store {{.+}}, %[[PK]]
// CHECK:   gpu.barrier
// CHECK:   memref.store {{.+}}, %[[S]]
// CHECK:   gpu.barrier
// CHECK: scf.for
// CHECK:   scf.for
// CHECK:     arith.maximumf
// CHECK:     memref.store {{.+}}, %[[PQ]]
// CHECK:     gpu.barrier
// CHECK-NOT: arith.divf
// CHECK:     memref.store {{.+}}, %arg27[{{.+}}] : memref<?xf32>
// CHECK:     gpu.barrier
// CHECK: gpu.return
func.func @full(%q: tensor<1x8x?x32xf32>, %k: tensor<1x8x?x32xf32>, %v: tensor<1x8x?x96xf32>, %o: tensor<1x8x?x96xf32>) -> tensor<1x8x?x96xf32> {
  %r = attn.linear ins(%q, %k, %v : tensor<1x8x?x32xf32>, tensor<1x8x?x32xf32>, tensor<1x8x?x96xf32>)
      outs(%o : tensor<1x8x?x96xf32>) feature_map(relu) unnormalized -> tensor<1x8x?x96xf32>
  return %r : tensor<1x8x?x96xf32>
}
