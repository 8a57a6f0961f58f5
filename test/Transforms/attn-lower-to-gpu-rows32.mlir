// RUN: attn-opt %s -split-input-file -attn-tiling="query-tile-size=64 key-tile-size=32 block-mapping=true decode-rows=0" -attn-lower-to-gpu="rows-per-warp=32" -canonicalize -cse | FileCheck %s
// RUN: not attn-opt %s -split-input-file -attn-tiling="query-tile-size=48 key-tile-size=32 block-mapping=true decode-rows=0" -attn-lower-to-gpu="rows-per-warp=32" 2>&1 | FileCheck %s --check-prefix=TILE
// RUN: not attn-opt %s -split-input-file -attn-tiling="query-tile-size=48 key-tile-size=32 block-mapping=true decode-rows=0" -attn-lower-to-gpu="rows-per-warp=24" 2>&1 | FileCheck %s --check-prefix=ROWS
// RUN: not attn-opt %s -split-input-file -attn-tiling="query-tile-size=48 key-tile-size=32 block-mapping=true decode-rows=0" -attn-lower-to-gpu="rows-per-warp=0" 2>&1 | FileCheck %s --check-prefix=ZERO

// 32 query rows a warp (FlashAttention-2's tiles): each warp owns two m16
// blocks of rows, so a 64-row query tile takes 2 warps (64 threads), and
// every K and V operand loaded by ldmatrix feeds the MMAs of both blocks.
// Lane l holds rows l/4, +8, +16 and +24 of its warp's 32.

// CHECK-LABEL: gpu.func @full_f16
// CHECK-SAME: attn.block_rows = 64 : i64, attn.shared_memory_bytes = 18432 : i64, known_block_size = array<i32: 64, 1, 1>
// CHECK:   %[[TID:.+]] = gpu.thread_id x
// CHECK:   %[[WARP:.+]] = arith.divui %[[TID]], %c32
// CHECK:   %[[LANE:.+]] = arith.remui %[[TID]], %c32
// CHECK:   %[[QUAD:.+]] = arith.divui %[[LANE]], %c4
// CHECK:   %[[BASE:.+]] = arith.muli %[[WARP]], %c32
// CHECK:   %[[R0:.+]] = arith.addi %[[BASE]], %[[QUAD]]
// CHECK:   %[[R1:.+]] = arith.addi %[[R0]], %c8
// CHECK:   %[[R2:.+]] = arith.addi %[[R0]], %c16
// CHECK:   %[[R3:.+]] = arith.addi %[[R0]], %c24
// CHECK:   %[[QS:.+]] = memref.view %{{.+}}[%c0][] {{.+}} to memref<64x72xf16, #gpu.address_space<workgroup>>
// CHECK:   %[[KS:.+]] = memref.view %{{.+}}[%c9216][] {{.+}} to memref<32x72xf16, #gpu.address_space<workgroup>>
// CHECK:   %[[VS:.+]] = memref.view %{{.+}}[%c13824][] {{.+}} to memref<32x72xf16, #gpu.address_space<workgroup>>
// The key loop carries both blocks' accumulators (2 x 32 values), then the
// four rows' max and sum.
// CHECK:   %[[STATE:.+]]:72 = scf.for %{{.+}} = %c0 to %{{.+}} step %c32 iter_args({{.+}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)
// Per 16 columns of D: Q's two 16 x 16 blocks (rows +0 and +16 of the
// warp's), then each K load gives the B operands of two groups of 8 keys,
// multiplied by block 0's A and then by block 1's.
// CHECK:     %[[QROW:.+]] = arith.addi %[[BASE]], %{{.+}} : index
// CHECK:     %[[A0:.+]] = nvgpu.ldmatrix %[[QS]][%[[QROW]], %{{.+}}] {numTiles = 4 : i32, transpose = false}
// CHECK:     %[[A0E:.+]] = vector.extract %[[A0]][0]
// CHECK:     %[[QROW1:.+]] = arith.addi %[[QROW]], %c16 : index
// CHECK:     %[[A1:.+]] = nvgpu.ldmatrix %[[QS]][%[[QROW1]], %{{.+}}] {numTiles = 4 : i32, transpose = false}
// CHECK:     %[[A1E:.+]] = vector.extract %[[A1]][0]
// CHECK:     %[[B:.+]] = nvgpu.ldmatrix %[[KS]]
// CHECK:     %[[BE:.+]] = vector.extract %[[B]][0]
// CHECK:     nvvm.mma.sync A[%[[A0E]], {{.+}}]  B[%[[BE]], {{.+}}]
// CHECK:     nvvm.mma.sync A[%[[A0E]], {{.+}}]
// CHECK:     nvvm.mma.sync A[%[[A1E]], {{.+}}]  B[%[[BE]], {{.+}}]
// CHECK:     nvvm.mma.sync A[%[[A1E]], {{.+}}]
// CHECK:     nvgpu.ldmatrix %[[KS]]
// Four rows' statistics, each over the 4 lanes that hold it.
// CHECK-COUNT-4: gpu.shuffle xor %{{.+}}, %c1_i32, %c32_i32 : f32
// P·V: each V load (ldmatrix.trans) feeds both blocks' MMAs.
// CHECK:     %[[V:.+]] = nvgpu.ldmatrix %[[VS]][%{{.+}}, %{{.+}}] {numTiles = 4 : i32, transpose = true}
// CHECK:     %[[VE:.+]] = vector.extract %[[V]][0]
// CHECK-COUNT-4: nvvm.mma.sync A[%{{.+}}]  B[%{{.+}}]  C
// CHECK:     nvgpu.ldmatrix %[[VS]]
// CHECK:     scf.yield
// The epilogue: element 0 of block 0 over row r0's sum, element 0 of block 1
// over row r0 + 16's; the LSE of the four rows, each stored by one lane.
// CHECK:   arith.divf %[[STATE]]#0, %[[STATE]]#68 : f32
// CHECK:   arith.divf %[[STATE]]#2, %[[STATE]]#69 : f32
// CHECK:   arith.divf %[[STATE]]#32, %[[STATE]]#70 : f32
// CHECK:   arith.divf %[[STATE]]#34, %[[STATE]]#71 : f32
// CHECK:   math.log %[[STATE]]#68
// CHECK:   arith.addi %{{.+}}, %[[R0]] : index
// CHECK:   math.log %[[STATE]]#69
// CHECK:   arith.addi %{{.+}}, %[[R1]] : index
// CHECK:   math.log %[[STATE]]#70
// CHECK:   arith.addi %{{.+}}, %[[R2]] : index
// CHECK:   math.log %[[STATE]]#71
// CHECK:   arith.addi %{{.+}}, %[[R3]] : index
// CHECK:   gpu.return

// The tile must be whole warps of 32 rows.
// TILE: query tile of 48 rows: the GPU kernel needs a multiple of 32 (rows a warp) up to 512
// ROWS: 24 query rows a warp: a warp takes 16 or 32
// ZERO: 0 query rows a warp: a warp takes 16 or 32
func.func @full_f16(%q: tensor<?x?x?x64xf16>, %k: tensor<?x?x?x64xf16>, %v: tensor<?x?x?x64xf16>, %o: tensor<?x?x?x64xf16>, %lse: tensor<?x?x?xf32>) -> (tensor<?x?x?x64xf16>, tensor<?x?x?xf32>) {
  %r:2 = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>) outs(%o, %lse : tensor<?x?x?x64xf16>, tensor<?x?x?xf32>) -> tensor<?x?x?x64xf16>, tensor<?x?x?xf32>
  return %r#0, %r#1 : tensor<?x?x?x64xf16>, tensor<?x?x?xf32>
}

// -----

// The FMA path (f32) on the same layout: each thread's scores take four
// rows of Q against each key pair, block 0's values first (indices 0-15 of
// the 4 groups of 8 keys of a 32-key tile), then block 1's (16-31); the
// weights go through the shared P tile from all four rows.

// CHECK-LABEL: gpu.func @causal_f32
// CHECK-SAME: attn.block_rows = 64 : i64
// CHECK-SAME: known_block_size = array<i32: 64, 1, 1>
// CHECK:   %[[BASE:.+]] = arith.muli %{{.+}}, %c32
// CHECK:   %[[R0:.+]] = arith.addi %[[BASE]], %{{.+}}
// CHECK:   %[[R1:.+]] = arith.addi %[[R0]], %c8
// CHECK:   %[[R2:.+]] = arith.addi %[[R0]], %c16
// CHECK:   %[[R3:.+]] = arith.addi %[[R0]], %c24
// CHECK:   %[[QS:.+]] = memref.view %{{.+}}[%c0][] {{.+}} to memref<64x17xf32, #gpu.address_space<workgroup>>
// CHECK:   %[[PS:.+]] = memref.view %{{.+}} to memref<64x33xf32, #gpu.address_space<workgroup>>
// CHECK:   scf.for %{{.+}} = %c0 to %c16 step %c1 iter_args(%[[S0:[^ ]+]] = %{{[^,]+}}, %[[S1:[^ ]+]] = %{{[^,]+}}, %[[S2:[^ ]+]] = %{{[^,]+}}, %[[S3:[^ ]+]] = %{{[^,]+}}, %{{[^ ]+}} = %{{[^,]+}}, %{{[^ ]+}} = %{{[^,]+}}, %{{[^ ]+}} = %{{[^,]+}}, %{{[^ ]+}} = %{{[^,]+}}, %{{[^ ]+}} = %{{[^,]+}}, %{{[^ ]+}} = %{{[^,]+}}, %{{[^ ]+}} = %{{[^,]+}}, %{{[^ ]+}} = %{{[^,]+}}, %{{[^ ]+}} = %{{[^,]+}}, %{{[^ ]+}} = %{{[^,]+}}, %{{[^ ]+}} = %{{[^,]+}}, %{{[^ ]+}} = %{{[^,]+}}, %[[S16:[^ ]+]] = %{{[^,]+}}, %[[S17:[^ ]+]] = %{{[^,]+}}, %[[S18:[^ ]+]] = %{{[^,]+}}, %[[S19:[^ ]+]] = %{{[^,]+}},
// CHECK:     %[[Q0:.+]] = memref.load %[[QS]][%[[R0]], %{{.+}}]
// CHECK:     %[[Q1:.+]] = memref.load %[[QS]][%[[R1]], %{{.+}}]
// CHECK:     %[[Q2:.+]] = memref.load %[[QS]][%[[R2]], %{{.+}}]
// CHECK:     %[[Q3:.+]] = memref.load %[[QS]][%[[R3]], %{{.+}}]
// CHECK:     %[[K0:.+]] = memref.load
// CHECK:     %[[K1:.+]] = memref.load
// CHECK:     math.fma %[[Q0]], %[[K0]], %[[S0]]
// CHECK:     math.fma %[[Q0]], %[[K1]], %[[S1]]
// CHECK:     math.fma %[[Q1]], %[[K0]], %[[S2]]
// CHECK:     math.fma %[[Q1]], %[[K1]], %[[S3]]
// CHECK:     math.fma %[[Q2]], %[[K0]], %[[S16]]
// CHECK:     math.fma %[[Q2]], %[[K1]], %[[S17]]
// CHECK:     math.fma %[[Q3]], %[[K0]], %[[S18]]
// CHECK:     math.fma %[[Q3]], %[[K1]], %[[S19]]
// CHECK:   memref.store %{{.+}}, %[[PS]][%[[R0]], %{{.+}}]
// CHECK:   memref.store %{{.+}}, %[[PS]][%[[R2]], %{{.+}}]
// CHECK:   scf.for
// CHECK:     memref.load %[[PS]][%[[R0]], %{{.+}}]
// CHECK:     memref.load %[[PS]][%[[R1]], %{{.+}}]
// CHECK:     memref.load %[[PS]][%[[R2]], %{{.+}}]
// CHECK:     memref.load %[[PS]][%[[R3]], %{{.+}}]
// CHECK:   gpu.return
func.func @causal_f32(%q: tensor<?x?x?x16xf32>, %k: tensor<?x?x?x16xf32>, %v: tensor<?x?x?x8xf32>, %o: tensor<?x?x?x8xf32>) -> tensor<?x?x?x8xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x16xf32>, tensor<?x?x?x16xf32>, tensor<?x?x?x8xf32>) outs(%o : tensor<?x?x?x8xf32>) causal align(top_left) -> tensor<?x?x?x8xf32>
  return %r : tensor<?x?x?x8xf32>
}
