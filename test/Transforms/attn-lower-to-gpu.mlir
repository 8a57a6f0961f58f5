// RUN: attn-opt %s -split-input-file -attn-tiling="query-tile-size=32 key-tile-size=32 block-mapping=true decode-rows=0" -attn-lower-to-gpu -canonicalize -cse | FileCheck %s

// A tiled causal f16 kernel becomes one gpu.func in a gpu.module: each
// tensor argument is a pointer, its sizes and its strides; the block ids
// replace the forall's (batch, head, query tile) indices; 2 warps of 16
// rows (64 threads) for a 32-row query tile; Q, K and V tiles live in
// dynamic shared memory with padded rows; Q·Kᵀ and P·V are f16 mma.sync
// into f32 fragments carried by the key loops; the row max and sum are
// combined across the 4 lanes of a row with xor shuffles.

// CHECK: module attributes {gpu.container_module}
// CHECK: gpu.module @attn_kernels
// Q is argument 0, K argument 9 (after Q's 4 sizes and 4 strides), the
// LSE argument 36.
// CHECK: gpu.func @causal_f16(%[[Q:arg0]]: memref<?xf16>, %arg1: i64, %arg2: i64, %arg3: i64, %arg4: i64, %arg5: i64, %arg6: i64, %arg7: i64, %arg8: i64, %[[K:arg9]]: memref<?xf16>,
// CHECK-SAME: %[[LSE:arg36]]: memref<?xf32>, %arg37: i64, %arg38: i64, %arg39: i64, %arg40: i64, %arg41: i64, %arg42: i64) kernel
// CHECK-SAME: attn.block_rows = 32 : i64, attn.shared_memory_bytes = 13824 : i64, known_block_size = array<i32: 64, 1, 1>, nvvm.minctasm = 1 : i32
// Whether each tensor's layout allows 16-byte copies: checked once.
// CHECK:   memref.extract_aligned_pointer_as_index %[[Q]]
// CHECK:   %[[TID:.+]] = gpu.thread_id x
// CHECK-DAG:   gpu.block_id z
// CHECK-DAG:   gpu.block_id y
// CHECK-DAG:   %[[BX:.+]] = gpu.block_id x
// CHECK-DAG:   arith.muli %[[BX]], %c32
// CHECK:   %[[SMEM:.+]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// CHECK:   %[[QS:.+]] = memref.view %[[SMEM]][%c0][] {{.+}} to memref<32x72xf16, #gpu.address_space<workgroup>>
// CHECK:   %[[KS:.+]] = memref.view %[[SMEM]][%c4608][] {{.+}} to memref<32x72xf16, #gpu.address_space<workgroup>>
// CHECK:   %[[VS:.+]] = memref.view %[[SMEM]][%c9216][] {{.+}} to memref<32x72xf16, #gpu.address_space<workgroup>>
// The query tile, once before the first key loop, all threads cooperating:
// 16-byte cp.async chunks (8 f16, the rest of a chunk past D or past the
// rows zero-filled) where Q's strides and pointer allow, decided at run
// time; element copies otherwise. Each tile's copies are one cp.async group
// (empty after element copies), waited for before the barrier.
// CHECK:   gpu.barrier
// CHECK:   scf.if
// CHECK:     scf.for %{{.+}} = %[[TID]] to %c256 step %c64
// CHECK:       nvgpu.device_async_copy %[[Q]][%{{.+}}], %[[QS]][%{{.+}}, %{{.+}}], 8, %{{.+}} {bypassL1}
// CHECK:   } else {
// CHECK:     scf.for %{{.+}} = %[[TID]] to %c2048 step %c64
// CHECK:       memref.load %[[Q]]
// CHECK:       memref.store %{{.+}}, %[[QS]]
// CHECK:   nvgpu.device_async_create_group
// CHECK:   nvvm.cp.async.wait.group 0
// CHECK:   gpu.barrier
// The key loop over fully allowed keys carries 32 accumulator values and
// the two rows' max and sum.
// CHECK:   scf.for %{{.+}} = %c0 to %{{.+}} step %c32 iter_args({{.+}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)
// K's and V's tiles are two groups: the scores wait for K's alone (at most
// one group in flight), P·V for V's too.
// CHECK:     gpu.barrier
// CHECK:     nvgpu.device_async_copy %[[K]][%{{.+}}], %[[KS]]
// CHECK:     memref.store %{{.+}}, %[[KS]]
// CHECK:     nvgpu.device_async_create_group
// CHECK:     nvgpu.device_async_copy %{{.+}}, %[[VS]]
// CHECK:     memref.store %{{.+}}, %[[VS]]
// CHECK:     nvgpu.device_async_create_group
// CHECK:     nvvm.cp.async.wait.group 1
// CHECK:     gpu.barrier
// Fragments by ldmatrix.x4: Q's 16 x 16 block as the A operand, K's rows
// as the B operands of two groups of 8 keys.
// CHECK:     nvgpu.ldmatrix %[[QS]][%{{.+}}, %{{.+}}] {numTiles = 4 : i32, transpose = false} : memref<32x72xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
// CHECK:     nvgpu.ldmatrix %[[KS]][%{{.+}}, %{{.+}}] {numTiles = 4 : i32, transpose = false}
// CHECK:     nvvm.mma.sync {{.+}} {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (vector<2xf16>, vector<2xf16>, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK:     gpu.shuffle xor %{{.+}}, %c1_i32, %c32_i32 : f32
// CHECK:     gpu.shuffle xor %{{.+}}, %c2_i32, %c32_i32 : f32
// CHECK:     math.exp
// P·V: the weights rounded to f16; V's B operands (pairs of keys in one
// column) by ldmatrix.x4.trans.
// CHECK:     nvvm.cp.async.wait.group 0
// CHECK:     gpu.barrier
// CHECK:     arith.truncf %{{.+}} : f32 to f16
// CHECK:     nvgpu.ldmatrix %[[VS]][%{{.+}}, %{{.+}}] {numTiles = 4 : i32, transpose = true}
// CHECK:     nvvm.mma.sync
// CHECK:     scf.yield
// The diagonal key loop masks with the causal band. An excluded key's
// weight is 0 and 0 · NaN is NaN on tensor cores, so before P·V the block
// asks whether V's tile holds NaN or ±inf (its exponent bits, OR-ed by a
// barrier); if so, P·V by FMA with each row's excluded keys dropped, the
// weights passed between a row's lanes by shuffles; else mma.sync.
// CHECK:   scf.for
// CHECK:     arith.cmpi sle
// CHECK:     vector.bitcast %{{.+}} : vector<8xf16> to vector<8xi16>
// CHECK:     %[[ANY:.+]] = nvvm.barrier #nvvm.reduction<or> %{{.+}} -> i32
// CHECK:     %[[NONFINITE:.+]] = arith.cmpi ne, %[[ANY]]
// CHECK:     scf.if %[[NONFINITE]]
// CHECK:       gpu.shuffle  idx
// CHECK:       arith.cmpf oeq
// CHECK:       math.fma
// CHECK:     } else {
// CHECK:       nvvm.mma.sync
// Normalization per fragment element, stored where row and column exist;
// the LSE by one lane of each row.
// CHECK:   arith.divf
// CHECK:   arith.truncf
// CHECK:   memref.store %{{.+}}, %{{.+}}[%{{.+}}] : memref<?xf16>
// CHECK:   math.log
// CHECK:   memref.store %{{.+}}, %[[LSE]][%{{.+}}] : memref<?xf32>
// CHECK:   gpu.return
// CHECK-NOT: func.func
func.func @causal_f16(%q: tensor<?x?x?x64xf16>, %k: tensor<?x?x?x64xf16>, %v: tensor<?x?x?x64xf16>, %o: tensor<?x?x?x64xf16>, %lse: tensor<?x?x?xf32>) -> (tensor<?x?x?x64xf16>, tensor<?x?x?xf32>) {
  %r:2 = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>) outs(%o, %lse : tensor<?x?x?x64xf16>, tensor<?x?x?xf32>) causal align(top_left) -> tensor<?x?x?x64xf16>, tensor<?x?x?xf32>
  return %r#0, %r#1 : tensor<?x?x?x64xf16>, tensor<?x?x?xf32>
}

// -----

// bf16: mma.sync takes the pairs as packed i32 words. A keep-mask is an i8
// pointer; each score reads its element (0 = masked) where it exists.

// CHECK-LABEL: gpu.func @masked_bf16
// CHECK-SAME: %[[M:arg27]]: memref<?xi8>
// CHECK: arith.index_cast %arg34
// CHECK: vector.bitcast %{{.+}} : vector<2xbf16> to vector<1xi32>
// CHECK: nvvm.mma.sync {{.+}} multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>{{.+}} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK: memref.load %[[M]][%{{.+}}] : memref<?xi8>
// CHECK: arith.cmpi ne
func.func @masked_bf16(%q: tensor<?x?x?x32xbf16>, %k: tensor<?x?x?x32xbf16>, %v: tensor<?x?x?x32xbf16>, %m: tensor<?x?x?x?xi1>, %o: tensor<?x?x?x32xbf16>) -> tensor<?x?x?x32xbf16> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x32xbf16>, tensor<?x?x?x32xbf16>, tensor<?x?x?x32xbf16>) mask(%m : tensor<?x?x?x?xi1>) outs(%o : tensor<?x?x?x32xbf16>) -> tensor<?x?x?x32xbf16>
  return %r : tensor<?x?x?x32xbf16>
}

// -----

// f32 uses FMA on the same fragments (and element copies, no cp.async):
// scores over the head dim, soft-cap,
// the window's two bounds, then the weights through a shared-memory tile
// (rows of 33 floats: one word of padding) for P·V, where an excluded key's value is dropped.

// CHECK-LABEL: gpu.func @window_f32
// CHECK-NOT: nvgpu.device_async_copy
// CHECK:   %[[PS:.+]] = memref.view %{{.+}}[%c12672][] {{.+}} to memref<32x33xf32, #gpu.address_space<workgroup>>
// CHECK:   scf.for %{{.+}} = %c0 to %c20 step %c1 iter_args
// CHECK:     math.fma
// CHECK:   math.tanh
// CHECK:   arith.cmpi sle
// CHECK:   arith.cmpi sge
// CHECK:   memref.store %{{.+}}, %[[PS]]
// CHECK:   gpu.barrier
// CHECK:   scf.for
// CHECK:     memref.load %[[PS]]
// CHECK:     arith.cmpf oeq
// CHECK:     arith.select
// CHECK:     math.fma
func.func @window_f32(%q: tensor<?x?x?x20xf32>, %k: tensor<?x?x?x20xf32>, %v: tensor<?x?x?x20xf32>, %o: tensor<?x?x?x20xf32>) -> tensor<?x?x?x20xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x20xf32>, tensor<?x?x?x20xf32>, tensor<?x?x?x20xf32>) outs(%o : tensor<?x?x?x20xf32>) align(bottom_right) window <left = 8, right = 0> softcap(5.0) -> tensor<?x?x?x20xf32>
  return %r : tensor<?x?x?x20xf32>
}

// -----

// A mask whose Sq dim is a static 1 (one padding row for every query)
// is read at row 0 for every query row: its Sq stride (argument 34, after
// the mask pointer's 5 descriptor words, its 4 sizes and its B, H strides)
// never enters an index. (@masked_bf16's full mask uses it.)

// CHECK-LABEL: gpu.func @row_broadcast_mask
// CHECK-SAME: %[[M:arg27]]: memref<?xi8>
// CHECK-NOT: arith.index_cast %arg34
// CHECK: memref.load %[[M]]
func.func @row_broadcast_mask(%q: tensor<?x?x?x32xf16>, %k: tensor<?x?x?x32xf16>, %v: tensor<?x?x?x32xf16>, %m: tensor<?x?x1x?xi1>, %o: tensor<?x?x?x32xf16>) -> tensor<?x?x?x32xf16> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x32xf16>, tensor<?x?x?x32xf16>, tensor<?x?x?x32xf16>) mask(%m : tensor<?x?x1x?xi1>) outs(%o : tensor<?x?x?x32xf16>) -> tensor<?x?x?x32xf16>
  return %r : tensor<?x?x?x32xf16>
}

// -----

// Static sizes leave some of the forall's dims one iteration (here Sq = 1:
// one query tile). The runtime still launches the (query tiles, Hq, B)
// grid, so the tiles' forall keeps all three dims under its #gpu.block
// mapping and each index takes the block id the mapping names: the batch
// is block z, the query head block y (its key/value head y / 4 for GQA
// 8/2), whatever the other dims fold to. (Folded, the head had become
// block x and the batch block y: blocks read other heads' and batches'
// rows, out of bounds.)

// CHECK-LABEL: gpu.func @static_decode_gqa
// CHECK-DAG:   %[[BZ:.+]] = gpu.block_id z
// CHECK-DAG:   %[[BY:.+]] = gpu.block_id y
// CHECK-DAG:   %[[KVH:.+]] = arith.divui %[[BY]], %c4
// Q's row: batch stride times block z, head stride times block y.
// CHECK:       arith.muli %[[BZ]], %{{.+}} : index
// CHECK-NEXT:  arith.muli %[[BY]], %{{.+}} : index
// A K or V row: its head stride times y / 4.
// CHECK:       arith.muli %[[KVH]], %{{.+}} : index
func.func @static_decode_gqa(%q: tensor<?x8x1x32xf16>, %k: tensor<?x2x?x32xf16>, %v: tensor<?x2x?x32xf16>, %o: tensor<?x8x1x32xf16>) -> tensor<?x8x1x32xf16> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x8x1x32xf16>, tensor<?x2x?x32xf16>, tensor<?x2x?x32xf16>) outs(%o : tensor<?x8x1x32xf16>) -> tensor<?x8x1x32xf16>
  return %r : tensor<?x8x1x32xf16>
}

// -----

// Static keys that fit one key tile (20 here, tiles of 32): canonicalization
// folds the key loop away, and the op takes all its keys as one tile padded
// to whole MMA steps (32 rows of shared memory); keys 20 and later are not
// loaded and are masked like a tail tile's.
// CHECK-LABEL: gpu.func @short_keys
// CHECK:   %[[KS:.+]] = memref.view %{{.+}}[%c4608][] {{.+}} to memref<32x72xf16, #gpu.address_space<workgroup>>
// CHECK:   arith.cmpi slt, %{{.+}}, %c20 : index
// CHECK:   nvvm.mma.sync
func.func @short_keys(%q: tensor<?x?x?x64xf16>, %k: tensor<?x?x20x64xf16>, %v: tensor<?x?x20x64xf16>, %o: tensor<?x?x?x64xf16>) -> tensor<?x?x?x64xf16> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xf16>, tensor<?x?x20x64xf16>, tensor<?x?x20x64xf16>) outs(%o : tensor<?x?x?x64xf16>) -> tensor<?x?x?x64xf16>
  return %r : tensor<?x?x?x64xf16>
}
