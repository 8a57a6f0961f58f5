// RUN: attn-opt %s -attn-lower-to-vector="key-block=64 direct-rows=0 lane-rows=0" -canonicalize | FileCheck %s
// RUN: attn-opt %s -attn-lower-to-vector="key-block=128 direct-rows=0 lane-rows=0" -canonicalize | FileCheck %s --check-prefix=WIDE
// RUN: attn-opt %s -attn-lower-to-vector="vector-width=8 key-block=32 direct-rows=0 lane-rows=0" -canonicalize | FileCheck %s --check-prefix=AVX2

// Dropout's keep bits in the packed micro-kernel (docs/spec.md: Philox
// 4x32-10 on the counter (⌊j/8⌋, i, h, b), key j taking 16 bits of word
// ⌊(j mod 8)/2⌋, the low half for even j). A block's key vectors are
// aligned to 8 keys whenever the global index of its first key is (always,
// in tiled kernels): then one Philox serves 8 keys a counter lane. A 64-key
// block (4 vectors of 16) is one Philox on 8 counters (its 32x32-bit
// products on lane pairs, vector<4xi64>); each key vector takes its words
// by two shuffles of the four outputs and a blend, shifts the even keys'
// low halves to the top (16, 0, 16, ...) and compares with ⌊p·2¹⁶⌋·2¹⁶.
// Otherwise (the first key not a multiple of 8) every lane has its own
// Philox, its word chosen and shifted by its key.
// CHECK-LABEL: func @dropout
//  CHECK-SAME: %[[P:[a-z0-9]+]]: f32, %[[SEED:[a-z0-9]+]]: i64
//       CHECK: %[[IOTA:.+]] = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : vector<8xi32>
//       CHECK: %[[EVEN:.+]] = arith.constant dense<[16, 0, 16, 0, 16, 0, 16, 0, 16, 0, 16, 0, 16, 0, 16, 0]> : vector<16xi32>
//       CHECK: %[[T16:.+]] = arith.fptoui %{{.+}} : f64 to i32
//       CHECK: %[[THRESHOLD:.+]] = arith.shli %[[T16]], %c16_i32 : i32
//       CHECK: %[[LOW:.+]] = arith.andi %[[KEY:[0-9]+]], %c7_i32 : i32
//       CHECK: %[[ALIGNED:.+]] = arith.cmpi eq, %[[LOW]], %c0_i32 : i32
//       CHECK: %[[KEEP:.+]]:4 = scf.if %[[ALIGNED]] -> (vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>) {
//       CHECK:   %[[COUNTER:.+]] = arith.shrui %[[KEY]], %c3_i32 : i32
//       CHECK:   %[[LIMIT:.+]] = vector.broadcast %[[THRESHOLD]] : i32 to vector<16xi32>
//       CHECK:   %[[FIRST:.+]] = vector.broadcast %[[COUNTER]] : i32 to vector<8xi32>
//       CHECK:   arith.addi %[[FIRST]], %[[IOTA]] : vector<8xi32>
//       CHECK:   arith.muli %{{.+}}, %{{.+}} : vector<4xi64>
//       CHECK:   %[[W01:.+]] = vector.shuffle %{{.+}}, %{{.+}} [0, 0, 8, 8, 0, 0, 0, 0, 1, 1, 9, 9, 1, 1, 1, 1] : vector<8xi32>, vector<8xi32>
//       CHECK:   %[[W23:.+]] = vector.shuffle %{{.+}}, %{{.+}} [0, 0, 0, 0, 0, 0, 8, 8, 1, 1, 1, 1, 1, 1, 9, 9] : vector<8xi32>, vector<8xi32>
//       CHECK:   %[[WORDS:.+]] = vector.shuffle %[[W01]], %[[W23]] [0, 1, 2, 3, 20, 21, 22, 23, 8, 9, 10, 11, 28, 29, 30, 31] : vector<16xi32>, vector<16xi32>
//       CHECK:   %[[BITS:.+]] = arith.shli %[[WORDS]], %[[EVEN]] : vector<16xi32>
//       CHECK:   arith.cmpi uge, %[[BITS]], %[[LIMIT]] : vector<16xi32>
//       CHECK:   vector.shuffle %{{.+}}, %{{.+}} [2, 2, 10, 10, 2, 2, 2, 2, 3, 3, 11, 11, 3, 3, 3, 3]
// CHECK-COUNT-3:   arith.cmpi uge
//       CHECK:   scf.yield
//       CHECK: } else {
//       CHECK:   arith.shrui %{{.+}}, %{{.+}} : vector<16xi32>
//       CHECK:   arith.muli %{{.+}}, %{{.+}} : vector<8xi64>
//       CHECK:   %[[HALF:.+]] = arith.shli %{{.+}}, %{{.+}} : vector<16xi32>
//       CHECK:   %[[MINE:.+]] = arith.shli %{{.+}}, %[[HALF]] : vector<16xi32>
//       CHECK:   arith.cmpi uge, %[[MINE]], %{{.+}} : vector<16xi32>
//       CHECK:   scf.yield
//       CHECK: }
//       CHECK: arith.select %[[KEEP]]#0

// A 128-key block (8 vectors of 16) is one Philox on 16 counters.
// WIDE-LABEL: func @dropout
//       WIDE: scf.if %{{.+}} -> (vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>) {
//       WIDE:   arith.muli %{{.+}}, %{{.+}} : vector<8xi64>
//       WIDE:   vector.shuffle %{{.+}}, %{{.+}} [0, 0, 16, 16, 0, 0, 0, 0, 1, 1, 17, 17, 1, 1, 1, 1] : vector<16xi32>, vector<16xi32>
//   WIDE-NOT:   arith.muli %{{.+}}, %{{.+}} : vector<8xi64>
//       WIDE:   vector.shuffle %{{.+}}, %{{.+}} [14, 14, 30, 30, 14, 14, 14, 14, 15, 15, 31, 31, 15, 15, 15, 15] : vector<16xi32>, vector<16xi32>
//       WIDE:   scf.yield

// With AVX2 a 32-key block (4 vectors of 8) is one Philox on 4 counters.
// AVX2-LABEL: func @dropout
//       AVX2: arith.constant dense<[16, 0, 16, 0, 16, 0, 16, 0]> : vector<8xi32>
//       AVX2: scf.if %{{.+}} -> (vector<8xi1>, vector<8xi1>, vector<8xi1>, vector<8xi1>) {
//       AVX2:   arith.muli %{{.+}}, %{{.+}} : vector<2xi64>
//       AVX2:   vector.shuffle %{{.+}}, %{{.+}} [0, 0, 4, 4, 0, 0, 0, 0] : vector<4xi32>, vector<4xi32>
//       AVX2:   vector.shuffle %{{.+}}, %{{.+}} [0, 0, 0, 0, 0, 0, 4, 4] : vector<4xi32>, vector<4xi32>
//       AVX2:   vector.shuffle %{{.+}}, %{{.+}} [0, 1, 2, 3, 12, 13, 14, 15] : vector<8xi32>, vector<8xi32>
//       AVX2:   vector.shuffle %{{.+}}, %{{.+}} [3, 3, 7, 7, 3, 3, 3, 3] : vector<4xi32>, vector<4xi32>
//       AVX2:   scf.yield
func.func @dropout(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                   %acc: memref<1x1x?x16xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>,
                   %p: f32, %seed: i64, %b: index, %h: index, %i: index, %j: index) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      dropout(%p, %seed) origin(%b, %h, %i, %j)
      outs(%acc, %m, %s : memref<1x1x?x16xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
  return
}
