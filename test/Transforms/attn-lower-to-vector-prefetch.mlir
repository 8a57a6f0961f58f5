// RUN: attn-opt %s -attn-lower-to-vector="direct-rows=4 prefetch-bytes=2048" -canonicalize | FileCheck %s
// RUN: attn-opt %s -attn-lower-to-vector="direct-rows=4 prefetch-bytes=0" | FileCheck %s --check-prefix=OFF

// With prefetch-bytes, the direct path's score loop prefetches, for
// each key, the K and V rows of the key 2048 bytes of K ahead (4 f32 rows
// of D = 128 here, 8 bf16 rows), clamped to the last key, into L2
// (locality 2): one prefetch per 64-byte line, plus the row's last element
// for rows that do not start on a line. The packed path does not prefetch.

// CHECK-LABEL: func @decode_f32
//       CHECK: scf.if
//       CHECK:   scf.for %{{.+}} step %c128 {
//       CHECK:     scf.for %[[J:.+]] = %c0 to %{{.+}} step %c4 {
// The tile's 4 keys (clamped to the block's last), then the prefetches of
// the same keys, asked for by the first tile of rows only (here the only
// one).
//       CHECK:     %[[KEY:.+]] = arith.addi %{{.+}}, %[[J]] : index
//       CHECK-COUNT-4: arith.minsi
//       CHECK:     %[[AHEAD:.+]] = arith.addi %[[KEY]], %c4 : index
//       CHECK:     %[[LAST:.+]] = arith.subi %{{.+}}, %c1 : index
//       CHECK:     %[[ROW:.+]] = arith.minsi %[[AHEAD]], %[[LAST]] : index
//       CHECK:     memref.prefetch %[[K:.+]][%c0, %c0, %[[ROW]], %c0], read, locality<2>, data
//       CHECK:     memref.prefetch %[[K]][%c0, %c0, %[[ROW]], %c16], read, locality<2>, data
//       CHECK-COUNT-5: memref.prefetch %[[K]]
//       CHECK:     memref.prefetch %[[K]][%c0, %c0, %[[ROW]], %c112], read, locality<2>, data
//       CHECK:     memref.prefetch %[[K]][%c0, %c0, %[[ROW]], %c127], read, locality<2>, data
//       CHECK:     memref.prefetch %[[V:.+]][%c0, %c0, %[[ROW]], %c0], read, locality<2>, data
//       CHECK-COUNT-8: memref.prefetch %[[V]]
// The same for the score tile's other 3 keys (4 rows x 4 keys).
//       CHECK:     arith.addi %{{.+}}, %c5 : index
//       CHECK-COUNT-54: memref.prefetch
//   CHECK-NOT:     memref.prefetch
//       CHECK:     vector.load %[[K]]
// P·V, reading the block's f32 V rows from cache, prefetches the next
// block's rows, one key per key, so that memory keeps streaming: with two
// pairs of rows (a GQA group of 4), the first pair asks for K's rows and
// the second for V's. The choice is made per pair after the pair's online
// update, which is compiled once.
//       CHECK:     scf.for %[[PAIR:.+]] = %c0 to %c4 step %c2 {
//       CHECK:       math.exp2
//       CHECK:       %[[FIRST:.+]] = arith.cmpi eq, %[[PAIR]], %c0 : index
//   CHECK-NOT:       math.exp2
//       CHECK:       scf.if %[[FIRST]] {
//       CHECK:         scf.for %{{.+}} = %c0 to %{{.+}} step %c1 iter_args(
//       CHECK:           %[[PVKEY:.+]] = arith.addi %{{.+}}, %{{.+}} : index
//       CHECK:           %[[NEXT:.+]] = arith.addi %[[PVKEY]], %c128 : index
//       CHECK:           %[[NROW:.+]] = arith.minsi %[[NEXT]], %{{.+}} : index
//       CHECK:           memref.prefetch %[[K]][%c0, %c0, %[[NROW]], %c0], read, locality<2>, data
//   CHECK-NOT:           memref.prefetch %[[V]]
//       CHECK:           vector.fma
//       CHECK:       } else {
//   CHECK-NOT:         math.exp2
//       CHECK:         scf.for %{{.+}} = %c0 to %{{.+}} step %c1 iter_args(
//       CHECK:           %[[PVKEY2:.+]] = arith.addi %{{.+}}, %{{.+}} : index
//       CHECK:           %[[NEXT2:.+]] = arith.addi %[[PVKEY2]], %c128 : index
//       CHECK:           %[[NROW2:.+]] = arith.minsi %[[NEXT2]], %{{.+}} : index
//   CHECK-NOT:           memref.prefetch %[[K]]
//       CHECK:           memref.prefetch %[[V]][%c0, %c0, %[[NROW2]], %c0], read, locality<2>, data
//       CHECK:           vector.fma
//       CHECK: } else {
//   CHECK-NOT: memref.prefetch
//       CHECK: return
// OFF-NOT: memref.prefetch
func.func @decode_f32(%q: memref<1x4x1x128xf32, strided<[?, ?, ?, ?], offset: ?>>,
                      %k: memref<1x1x?x128xf32, strided<[?, ?, ?, ?], offset: ?>>,
                      %v: memref<1x1x?x128xf32, strided<[?, ?, ?, ?], offset: ?>>,
                      %acc: memref<1x4x1x128xf32>, %m: memref<1x4x1xf32>, %s: memref<1x4x1xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x4x1x128xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x128xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x128xf32, strided<[?, ?, ?, ?], offset: ?>>)
      outs(%acc, %m, %s : memref<1x4x1x128xf32>, memref<1x4x1xf32>, memref<1x4x1xf32>)
  return
}

// A group of any size: with at least two pairs of rows the first pair
// prefetches K and the others V; a single pair prefetches both. The
// choice is made per pair, after the pair's online update (once in the
// code), and an odd row left over prefetches both.

// CHECK-LABEL: func @decode_f32_any_group
//       CHECK: %[[ODD:.+]] = arith.remui %[[COUNT:.+]], %c2 : index
//  CHECK-NEXT: %[[EVEN:.+]] = arith.subi %[[COUNT]], %[[ODD]] : index
//  CHECK-NEXT: %[[SEVERAL:.+]] = arith.cmpi sge, %[[EVEN]], %c4 : index
//  CHECK-NEXT: scf.for %[[PAIR:.+]] = %c0 to %[[EVEN]] step %c2 {
//       CHECK:   math.exp2 %{{.+}} {attn.nonpositive} : f32
//       CHECK:   math.exp2 %{{.+}} {attn.nonpositive} : f32
//   CHECK-NOT:   math.exp2 %{{.+}} {attn.nonpositive} : f32
//       CHECK:   scf.if %[[SEVERAL]] {
//  CHECK-NEXT:     %[[FIRST:.+]] = arith.cmpi eq, %[[PAIR]], %c0 : index
//  CHECK-NEXT:     scf.if %[[FIRST]] {
//       CHECK:       memref.prefetch %[[K:.+]][%c0, %c0, %{{.+}}, %c0]
//       CHECK:     } else {
//       CHECK:       memref.prefetch %[[V:.+]][%c0, %c0, %{{.+}}, %c0]
//       CHECK:   } else {
//       CHECK:     memref.prefetch %[[K]][%c0, %c0, %{{.+}}, %c0]
//       CHECK:     memref.prefetch %[[V]][%c0, %c0, %{{.+}}, %c0]
//       CHECK: scf.if
//       CHECK:   math.exp2
//       CHECK:   memref.prefetch %[[K]][%c0, %c0, %{{.+}}, %c0]
//       CHECK:   memref.prefetch %[[V]][%c0, %c0, %{{.+}}, %c0]
func.func @decode_f32_any_group(%q: memref<1x?x1x128xf32, strided<[?, ?, ?, ?], offset: ?>>,
                                %k: memref<1x1x?x128xf32, strided<[?, ?, ?, ?], offset: ?>>,
                                %v: memref<1x1x?x128xf32, strided<[?, ?, ?, ?], offset: ?>>,
                                %acc: memref<1x?x1x128xf32>, %m: memref<1x?x1xf32>, %s: memref<1x?x1xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x?x1x128xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x128xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x128xf32, strided<[?, ?, ?, ?], offset: ?>>)
      outs(%acc, %m, %s : memref<1x?x1x128xf32>, memref<1x?x1xf32>, memref<1x?x1xf32>)
  return
}

// bf16 rows are 256 bytes: 8 keys ahead, 4 lines and the last element each.

// CHECK-LABEL: func @decode_bf16
//       CHECK:     %[[AHEAD:.+]] = arith.addi %{{.+}}, %c8 : index
//       CHECK:     %[[ROW:.+]] = arith.minsi %[[AHEAD]]
//       CHECK:     memref.prefetch %[[K:.+]][%c0, %c0, %[[ROW]], %c0], read, locality<2>, data
//       CHECK:     memref.prefetch %[[K]][%c0, %c0, %[[ROW]], %c32], read, locality<2>, data
//       CHECK:     memref.prefetch %[[K]][%c0, %c0, %[[ROW]], %c64], read, locality<2>, data
//       CHECK:     memref.prefetch %[[K]][%c0, %c0, %[[ROW]], %c96], read, locality<2>, data
//       CHECK:     memref.prefetch %[[K]][%c0, %c0, %[[ROW]], %c127], read, locality<2>, data
//   CHECK-NOT:     memref.prefetch %[[K]]
//       CHECK:     memref.prefetch %[[V:.+]][%c0, %c0, %[[ROW]], %c0], read, locality<2>, data
func.func @decode_bf16(%q: memref<1x4x1x128xbf16, strided<[?, ?, ?, ?], offset: ?>>,
                       %k: memref<1x1x?x128xbf16, strided<[?, ?, ?, ?], offset: ?>>,
                       %v: memref<1x1x?x128xbf16, strided<[?, ?, ?, ?], offset: ?>>,
                       %acc: memref<1x4x1x128xf32>, %m: memref<1x4x1xf32>, %s: memref<1x4x1xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x4x1x128xbf16, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x128xbf16, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x128xbf16, strided<[?, ?, ?, ?], offset: ?>>)
      outs(%acc, %m, %s : memref<1x4x1x128xf32>, memref<1x4x1xf32>, memref<1x4x1xf32>)
  return
}

// Two tiles of rows (a group of 8): only the first asks for the keys'
// lines; the second would ask for the same ones again.

// CHECK-LABEL: func @decode_two_tiles
//       CHECK: scf.for %[[ROWS:.+]] = %c0 to %c8 step %c4 {
//       CHECK:   scf.for %{{.+}} = %c0 to %{{.+}} step %c4 {
//       CHECK:     %[[FIRST:.+]] = arith.cmpi eq, %[[ROWS]], %c0 : index
//       CHECK:     scf.if %[[FIRST]] {
//       CHECK-COUNT-4: memref.prefetch
//       CHECK:     }
//   CHECK-NOT:     memref.prefetch
//       CHECK:     vector.fma
func.func @decode_two_tiles(%q: memref<1x8x1x64xf32, strided<[?, ?, ?, ?], offset: ?>>,
                            %k: memref<1x1x?x64xf32, strided<[?, ?, ?, ?], offset: ?>>,
                            %v: memref<1x1x?x64xf32, strided<[?, ?, ?, ?], offset: ?>>,
                            %acc: memref<1x8x1x64xf32>, %m: memref<1x8x1xf32>, %s: memref<1x8x1xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x8x1x64xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x64xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x64xf32, strided<[?, ?, ?, ?], offset: ?>>)
      outs(%acc, %m, %s : memref<1x8x1x64xf32>, memref<1x8x1xf32>, memref<1x8x1xf32>)
  return
}
