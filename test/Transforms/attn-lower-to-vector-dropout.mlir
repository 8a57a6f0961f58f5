// RUN: attn-opt %s -attn-lower-to-vector="key-block=64 row-block=1 direct-rows=0 lane-rows=0" -canonicalize | FileCheck %s
// RUN: attn-opt %s -attn-lower-to-vector="key-block=64 row-block=2 direct-rows=0 lane-rows=0" -canonicalize | FileCheck %s --check-prefix=PAIR
// RUN: attn-opt %s -attn-lower-to-vector="key-block=128 row-block=2 direct-rows=0 lane-rows=0" -canonicalize | FileCheck %s --check-prefix=WIDE
// RUN: attn-opt %s -attn-lower-to-vector="vector-width=8 key-block=32 row-block=2 direct-rows=0 lane-rows=0" -canonicalize | FileCheck %s --check-prefix=AVX2
// RUN: attn-opt %s -split-input-file -attn-lower-to-vector -canonicalize | FileCheck %s --check-prefix=BWD

// Dropout's keep bits in the packed micro-kernel (docs/spec.md: Philox
// 4x32-10 on the counter (⌊j/8⌋, i, h, b), key j taking 16 bits of word
// ⌊(j mod 8)/2⌋, the low half for even j). A block's key vectors are
// aligned to 8 keys whenever the global index of its first key is (always,
// in tiled kernels): then one Philox serves 8 keys a counter lane. A 64-key
// block (4 vectors of 16) is one Philox on 8 counters (its 32x32-bit
// products on lane pairs, vector<4xi64>), the counters in the order of the
// transpose that follows (lane 4L + r holds counter 2r + L): two rounds of
// unpack shuffles within 128-bit lanes put each counter's four words in
// order, so that the words seen as i16 are the keys' 16 bits in key order,
// compared unsigned with ⌊p·2¹⁶⌋ (the threshold's high half), one
// comparison per key vector. Otherwise (the first key not a multiple of 8)
// every lane has its own Philox, its word chosen and shifted by its key.
// CHECK-LABEL: func @dropout
//  CHECK-SAME: %[[P:[a-z0-9]+]]: f32, %[[SEED:[a-z0-9]+]]: i64
//       CHECK: %[[ORDER:.+]] = arith.constant dense<[0, 2, 4, 6, 1, 3, 5, 7]> : vector<8xi32>
//       CHECK: %[[T16:.+]] = arith.fptoui %{{.+}} : f64 to i32
//       CHECK: %[[THRESHOLD:.+]] = arith.shli %[[T16]], %c16_i32 : i32
//       CHECK: %[[HIGH:.+]] = arith.shrui %[[THRESHOLD]], %c16_i32 : i32
//       CHECK: %[[LIMIT:.+]] = arith.trunci %[[HIGH]] : i32 to i16
//       CHECK: %[[LOW:.+]] = arith.andi %[[KEY:[0-9]+]], %c7_i32 : i32
//       CHECK: %[[ALIGNED:.+]] = arith.cmpi eq, %[[LOW]], %c0_i32 : i32
//       CHECK: %[[KEEP:.+]]:4 = scf.if %[[ALIGNED]] -> (vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>) {
//       CHECK:   %[[COUNTER:.+]] = arith.shrui %[[KEY]], %c3_i32 : i32
//       CHECK:   %[[FIRST:.+]] = vector.broadcast %[[COUNTER]] : i32 to vector<8xi32>
//       CHECK:   arith.addi %[[FIRST]], %[[ORDER]] : vector<8xi32>
//       CHECK:   arith.muli %{{.+}}, %{{.+}} : vector<4xi64>
//       CHECK:   %[[T0:.+]] = vector.shuffle %[[C0:.+]], %[[C1:.+]] [0, 8, 1, 9, 4, 12, 5, 13] : vector<8xi32>, vector<8xi32>
//       CHECK:   %[[T1:.+]] = vector.shuffle %[[C0]], %[[C1]] [2, 10, 3, 11, 6, 14, 7, 15] : vector<8xi32>, vector<8xi32>
//       CHECK:   %[[T2:.+]] = vector.shuffle %[[C2:.+]], %[[C3:.+]] [0, 8, 1, 9, 4, 12, 5, 13] : vector<8xi32>, vector<8xi32>
//       CHECK:   %[[T3:.+]] = vector.shuffle %[[C2]], %[[C3]] [2, 10, 3, 11, 6, 14, 7, 15] : vector<8xi32>, vector<8xi32>
//       CHECK:   %[[O0:.+]] = vector.shuffle %[[T0]], %[[T2]] [0, 1, 8, 9, 4, 5, 12, 13] : vector<8xi32>, vector<8xi32>
//       CHECK:   %[[O1:.+]] = vector.shuffle %[[T0]], %[[T2]] [2, 3, 10, 11, 6, 7, 14, 15] : vector<8xi32>, vector<8xi32>
//       CHECK:   %[[O2:.+]] = vector.shuffle %[[T1]], %[[T3]] [0, 1, 8, 9, 4, 5, 12, 13] : vector<8xi32>, vector<8xi32>
//       CHECK:   %[[O3:.+]] = vector.shuffle %[[T1]], %[[T3]] [2, 3, 10, 11, 6, 7, 14, 15] : vector<8xi32>, vector<8xi32>
//       CHECK:   %[[LIMITS:.+]] = vector.broadcast %[[LIMIT]] : i16 to vector<16xi16>
//       CHECK:   %[[BITS0:.+]] = vector.bitcast %[[O0]] : vector<8xi32> to vector<16xi16>
//       CHECK:   %[[K0:.+]] = arith.cmpi uge, %[[BITS0]], %[[LIMITS]] : vector<16xi16>
//       CHECK:   %[[BITS1:.+]] = vector.bitcast %[[O1]] : vector<8xi32> to vector<16xi16>
//       CHECK:   %[[K1:.+]] = arith.cmpi uge, %[[BITS1]], %[[LIMITS]] : vector<16xi16>
//       CHECK:   vector.bitcast %[[O2]]
//       CHECK:   vector.bitcast %[[O3]]
//       CHECK:   scf.yield %[[K0]], %[[K1]], %{{.+}}, %{{.+}} : vector<16xi1>
//       CHECK: } else {
//       CHECK:   arith.shrui %{{.+}}, %{{.+}} : vector<16xi32>
//       CHECK:   arith.muli %{{.+}}, %{{.+}} : vector<8xi64>
//       CHECK:   %[[HALF:.+]] = arith.shli %{{.+}}, %{{.+}} : vector<16xi32>
//       CHECK:   %[[MINE:.+]] = arith.shli %{{.+}}, %[[HALF]] : vector<16xi32>
//       CHECK:   arith.cmpi uge, %[[MINE]], %{{.+}} : vector<16xi32>
//       CHECK:   scf.yield
//       CHECK: }
//       CHECK: %[[P0:.+]] = math.exp2 %{{.+}} {attn.nonpositive} : vector<16xf32>
//       CHECK: %[[KEPT:.+]] = arith.mulf %[[P0]], %{{.+}} : vector<16xf32>
//  CHECK-NEXT: arith.select %[[KEEP]]#0, %[[KEPT]], %{{.+}} : vector<16xi1>, vector<16xf32>

// Two rows of a 64-key block fill one vector of 16 counters: one Philox
// for both, the second row's counters (and its row, and head, by a select)
// after the first's (lane 4L + r holds counter 4r + L: rows 0, 0, 1, 1 in
// each 128-bit lane); the transpose's first two outputs are the first
// row's 64 keys, the last two the second's.
// PAIR-LABEL: func @dropout
//       PAIR: %[[SECOND:.+]] = arith.constant dense<[false, false, true, true, false, false, true, true, false, false, true, true, false, false, true, true]> : vector<16xi1>
//       PAIR: %[[ORDER:.+]] = arith.constant dense<[0, 4, 0, 4, 1, 5, 1, 5, 2, 6, 2, 6, 3, 7, 3, 7]> : vector<16xi32>
//       PAIR: %[[KEEP:.+]]:8 = scf.if %{{.+}} -> (vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>) {
//       PAIR:   arith.addi %{{.+}}, %[[ORDER]] : vector<16xi32>
//       PAIR:   arith.select %[[SECOND]], %{{.+}}, %{{.+}} : vector<16xi1>, vector<16xi32>
//       PAIR:   arith.muli %{{.+}}, %{{.+}} : vector<8xi64>
//   PAIR-NOT:   vector<4xi64>
//       PAIR:   vector.shuffle %{{.+}}, %{{.+}} [2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31] : vector<16xi32>, vector<16xi32>
// PAIR-COUNT-4:   arith.cmpi uge, %{{.+}}, %{{.+}} : vector<32xi16>
//       PAIR:   scf.yield
//       PAIR: } else {
//       PAIR: arith.select %[[KEEP]]#0,
//       PAIR: arith.select %[[KEEP]]#4,

// A 128-key block (8 vectors of 16) is one Philox on 16 counters a row
// (lane 4L + r holding counter 4r + L); each output of the transpose is 32
// keys, two key vectors of one i16 comparison. The row block's second row
// has a Philox of its own.
// WIDE-LABEL: func @dropout
//       WIDE: arith.constant dense<[0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15]> : vector<16xi32>
//       WIDE: scf.if %{{.+}} -> (vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>) {
//       WIDE:   arith.muli %{{.+}}, %{{.+}} : vector<8xi64>
//   WIDE-NOT:   vector<4xi64>
//       WIDE:   vector.shuffle %{{.+}}, %{{.+}} [0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29] : vector<16xi32>, vector<16xi32>
//       WIDE:   vector.shuffle %{{.+}}, %{{.+}} [2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31] : vector<16xi32>, vector<16xi32>
//       WIDE:   %[[KEYS:.+]] = arith.cmpi uge, %{{.+}}, %{{.+}} : vector<32xi16>
//       WIDE:   vector.extract_strided_slice %[[KEYS]] {offsets = [0], sizes = [16], strides = [1]} : vector<32xi1> to vector<16xi1>
//       WIDE:   vector.extract_strided_slice %[[KEYS]] {offsets = [16], sizes = [16], strides = [1]} : vector<32xi1> to vector<16xi1>
// WIDE-COUNT-3:   arith.cmpi uge, %{{.+}}, %{{.+}} : vector<32xi16>
//       WIDE:   arith.muli %{{.+}}, %{{.+}} : vector<8xi64>
// WIDE-COUNT-4:   arith.cmpi uge, %{{.+}}, %{{.+}} : vector<32xi16>
//   WIDE-NOT:   arith.muli %{{.+}}, %{{.+}} : vector<8xi64>
//       WIDE:   scf.yield

// With AVX2 a 32-key block (4 vectors of 8) of two rows is one Philox on
// 8 counters (two 128-bit lanes), each output of the transpose two key
// vectors.
// AVX2-LABEL: func @dropout
//       AVX2: arith.constant dense<[0, 2, 0, 2, 1, 3, 1, 3]> : vector<8xi32>
//       AVX2: scf.if %{{.+}} -> (vector<8xi1>, vector<8xi1>, vector<8xi1>, vector<8xi1>, vector<8xi1>, vector<8xi1>, vector<8xi1>, vector<8xi1>) {
//       AVX2:   arith.muli %{{.+}}, %{{.+}} : vector<4xi64>
//       AVX2:   vector.shuffle %{{.+}}, %{{.+}} [0, 8, 1, 9, 4, 12, 5, 13] : vector<8xi32>, vector<8xi32>
//       AVX2:   vector.shuffle %{{.+}}, %{{.+}} [2, 3, 10, 11, 6, 7, 14, 15] : vector<8xi32>, vector<8xi32>
//       AVX2:   %[[KEYS:.+]] = arith.cmpi uge, %{{.+}}, %{{.+}} : vector<16xi16>
//       AVX2:   vector.extract_strided_slice %[[KEYS]] {offsets = [8], sizes = [8], strides = [1]} : vector<16xi1> to vector<8xi1>
// AVX2-COUNT-3:   arith.cmpi uge, %{{.+}}, %{{.+}} : vector<16xi16>
//       AVX2:   scf.yield
func.func @dropout(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                   %acc: memref<1x1x?x16xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>,
                   %p: f32, %seed: i64, %b: index, %h: index, %i: index, %j: index) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      dropout(%p, %seed) origin(%b, %h, %i, %j)
      outs(%acc, %m, %s : memref<1x1x?x16xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
  return
}

// -----

// The backward regenerates the forward's bits where it recomputes P: per
// tile of 4 rows of its 64-key blocks, two Philox on 16 counters, each for
// a pair of rows (row, then head, selected per lane), and the factors
// 1 / (1 − p) or 0 stored for dS.
// BWD-LABEL: func @backward_dropout
//       BWD: %[[SECOND:.+]] = arith.constant dense<[false, false, true, true, false, false, true, true, false, false, true, true, false, false, true, true]> : vector<16xi1>
//       BWD: scf.if %{{.+}} -> (vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>) {
//       BWD:   arith.select %[[SECOND]], %{{.+}}, %{{.+}} : vector<16xi1>, vector<16xi32>
//       BWD:   arith.muli %{{.+}}, %{{.+}} : vector<8xi64>
//   BWD-NOT:   vector<4xi64>
// BWD-COUNT-4:   arith.cmpi uge, %{{.+}}, %{{.+}} : vector<32xi16>
//       BWD:   arith.select %[[SECOND]], %{{.+}}, %{{.+}} : vector<16xi1>, vector<16xi32>
// BWD-COUNT-4:   arith.cmpi uge, %{{.+}}, %{{.+}} : vector<32xi16>
//       BWD:   scf.yield
func.func @backward_dropout(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                            %o: memref<1x1x?x16xf32>, %lse: memref<1x1x?xf32>, %do: memref<1x1x?x16xf32>,
                            %dq: memref<1x1x?x16xf32>, %dk: memref<1x1x?x16xf32>, %dv: memref<1x1x?x16xf32>,
                            %p: f32, %seed: i64, %b: index, %h: index, %i: index, %j: index) {
  attn.attention_backward
      ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      dropout(%p, %seed) origin(%b, %h, %i, %j)
      forward(%o, %lse : memref<1x1x?x16xf32>, memref<1x1x?xf32>)
      grads(%do : memref<1x1x?x16xf32>)
      outs(%dq, %dk, %dv : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
  return
}
