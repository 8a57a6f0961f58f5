// RUN: attn-opt %s -attn-tiling="query-tile-size=64 decode-rows=0" -attn-lower-to-gpu -canonicalize -cse | FileCheck %s

// A block mask's table on the GPU: before staging a key tile, every thread
// reads the table's entries that the tile (its query rows, its keys; here
// 128 keys over two key blocks of 64) covers, at the tile's batch and head:
// (some entry kept, every entry full). A tile the table keeps nothing of is
// skipped whole (the block's threads agree: no barrier is split); where
// every entry is full the mask_mod's keep bit is ORed with that promise, as
// the CPU kernels leave the mask_mod out there.

// CHECK-LABEL: gpu.func @documents_table(
// CHECK-SAME: %[[DOCS:arg27]]: memref<?xi32>
// CHECK-SAME: %[[TABLE:arg30]]: memref<?xi32>
// CHECK: scf.for %[[KEY:.+]] = %c0 to %{{.+}} step %c128 iter_args(
// CHECK: %[[T:.+]] = memref.reinterpret_cast %[[TABLE]]
// CHECK: arith.divui %[[KEY]], %c64 : index
// CHECK: %[[ENTRIES:.+]]:2 = scf.for %[[QB:.+]] = %{{.+}} to %{{.+}} step %c1 iter_args(%{{.+}} = %false, %{{.+}} = %true) -> (i1, i1) {
// CHECK:   scf.for %[[KB:.+]] = %{{.+}} to %{{.+}} step %c1
// CHECK:     %[[ENTRY:.+]] = memref.load %[[T]][%{{.+}}, %{{.+}}, %[[QB]], %[[KB]]]
// CHECK:     arith.cmpi ne, %[[ENTRY]], %c0_i32 : i32
// CHECK:     arith.cmpi eq, %[[ENTRY]], %c2_i32 : i32
// CHECK: scf.if %[[ENTRIES]]#0 -> (f32,
// CHECK:   gpu.barrier
// CHECK:   nvvm.mma.sync
// CHECK:   arith.ori %{{.+}}, %[[ENTRIES]]#1 : i1
// CHECK:   nvvm.mma.sync
// CHECK: } else {
// CHECK-NEXT: scf.yield %arg
// CHECK: gpu.return
func.func @documents_table(%q: tensor<?x4x?x32xf16>, %k: tensor<?x2x?x32xf16>, %v: tensor<?x2x?x32xf16>,
                           %docs: tensor<?xi32>, %table: tensor<?x?x?x?xi32>, %o: tensor<?x4x?x32xf16>) -> tensor<?x4x?x32xf16> {
  %r = attn.attention
      ins(%q, %k, %v : tensor<?x4x?x32xf16>, tensor<?x2x?x32xf16>, tensor<?x2x?x32xf16>)
      captures(%docs, %table : tensor<?xi32>, tensor<?x?x?x?xi32>)
      outs(%o : tensor<?x4x?x32xf16>)
      mask_mod {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %di = attn.captured 0 [%i] : i32
        %dj = attn.captured 0 [%j] : i32
        %same = arith.cmpi eq, %di, %dj : i32
        attn.yield %same : i1
      } {attn.block_mask = array<i64: 1, 64, 64>} -> tensor<?x4x?x32xf16>
  return %r : tensor<?x4x?x32xf16>
}
