// RUN: attn-opt %s -split-input-file -attn-lower-to-vector="key-block=32 direct-rows=0 lane-rows=32" -canonicalize | FileCheck %s
// RUN: not attn-opt %s -split-input-file -attn-lower-to-vector="lane-rows=24" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: attn-opt %s -split-input-file -attn-lower-to-vector="vector-width=8 key-block=32 direct-rows=0 lane-rows=24" -canonicalize | FileCheck %s --check-prefix=AVX2
// RUN: attn-opt %s -split-input-file -attn-lower-to-vector="key-block=32 direct-rows=0 lane-rows=32 prefetch-bytes=0" | FileCheck %s --check-prefix=NOPF

// The lane-rows micro-kernel: a tile of 32 query rows lives in the lanes of
// two 16-lane vectors. Qᵀ (scaled) and the accumulator Oᵀ are transposed
// into stack buffers once per tile; per block of 32 keys the scores are
// made transposed, Sᵀ[key][row], 8 keys x 2 row vectors of FMAs per head
// dimension (each K element broadcast, K read in place: no K or V
// packing); max, exp and sum run vertically down the keys, and P·V
// broadcasts each V element against a vector of weights.

// prefetch-bytes=0 turns the P·V loop's prefetches off too.
// NOPF-LABEL: func @causal_softcap
//   NOPF-NOT: memref.prefetch
//       NOPF: return

// BAD: lane-rows must be 0 or a multiple of vector-width up to 256, found 24

// CHECK-LABEL: func @causal_softcap
//  CHECK-SAME: (%[[Q:[a-z0-9]+]]: {{.+}}, %[[K:[a-z0-9]+]]: {{.+}}, %[[V:[a-z0-9]+]]: {{.+}}, %[[ACC:[a-z0-9]+]]: {{.+}}, %[[MAX:[a-z0-9]+]]: {{.+}}, %[[SUM:[a-z0-9]+]]: {{.+}}, %[[D:[a-z0-9]+]]: index)
// (after the packed path's V buffer, zeroed at entry; its other buffers go
// unused)
//       CHECK: memref.alloca() {alignment = 64 : i64} : memref<32x32xf32>
//       CHECK: %[[QT:.+]] = memref.alloca() {alignment = 64 : i64} : memref<32x32xf32>
//       CHECK: %[[OT:.+]] = memref.alloca() {alignment = 64 : i64} : memref<32x32xf32>
//       CHECK: %[[ST:.+]] = memref.alloca() {alignment = 64 : i64} : memref<32x32xf32>
//       CHECK: %[[STATS:.+]] = memref.alloca() {alignment = 64 : i64} : memref<2x32xf32>
// Tiles of 32 rows; Qᵀ by 16x16 transposes of scaled rows where Q's rows
// have unit stride (one scf.if on the stride), element copies otherwise.
//       CHECK: scf.for %[[TILE:.+]] = %c0 to %{{.+}} step %c32
//       CHECK:   scf.if
//       CHECK:     vector.load %{{.+}} : memref<1x1x?x32xf32, strided<[?, ?, ?, 1], offset: ?>>, vector<16xf32>
//       CHECK:     arith.mulf %{{.+}}, %{{.+}} : vector<16xf32>
//       CHECK:     vector.store %{{.+}}, %[[QT]][%{{.+}}, %{{.+}}] : memref<32x32xf32>, vector<16xf32>
//       CHECK:   } else {
//       CHECK:     memref.load %[[Q]]
//       CHECK:     memref.store %{{.+}}, %[[QT]]
// Oᵀ likewise; its 20 columns end in a masked chunk.
//       CHECK:   vector.maskedload %{{.+}}[%c0, %c0, %{{.+}}, %c16]
//       CHECK:     vector.store %{{.+}}, %[[OT]]
//       CHECK:   memref.load %[[MAX]]
//       CHECK:   memref.load %[[SUM]]
// Key blocks up to the last key the tile's rows see (tile + diagonal +
// its row count, within [0, Sk]). A block that every row sees whole (its
// last key within the first row's reach) takes the code without the band;
// the others apply the causal band of each row vector, as lane indices.
//       CHECK:   %[[BASE:.+]] = arith.addi %[[TILE]], %[[D]] : index
//       CHECK:   %[[END:.+]] = arith.addi %[[BASE]], %{{.+}} : index
//       CHECK:   %[[POS:.+]] = arith.maxsi %[[END]], %c0 : index
//       CHECK:   %[[LAST:.+]] = arith.minsi %[[POS]], %{{.+}} : index
//       CHECK:   scf.for %[[KB:.+]] = %c0 to %[[LAST]] step %c32
//       CHECK:     %[[LASTKEY:.+]] = arith.subi %{{.+}}, %c1 : index
//       CHECK:     %[[WHOLE:.+]] = arith.cmpi sle, %[[LASTKEY]], %{{.+}} : index
//       CHECK:     scf.if %[[WHOLE]] {
//   CHECK-NOT:       vector.step
//       CHECK:       vector.fma
//       CHECK:     } else {
//       CHECK:     vector.step : vector<16xindex>
// The keys past the first row vector's reach (rel + 16 for a block at
// rel = tile + diagonal - block, rounded up to 16 keys, within the block)
// concern only the second row vector.
//       CHECK:     %[[REACH:.+]] = arith.addi %{{.+}}, %c16 : index
//       CHECK:     %[[UP:.+]] = arith.maxsi %[[REACH]], %c0 : index
//       CHECK:     %[[ROUND:.+]] = arith.addi %[[UP]], %c15 : index
//       CHECK:     %[[WHOLE16:.+]] = arith.divui %[[ROUND]], %c16 : index
//       CHECK:     %[[KEYS16:.+]] = arith.muli %[[WHOLE16]], %c16 : index
//       CHECK:     %[[SPLIT:.+]] = arith.minsi %[[KEYS16]], %c32 : index
// Sᵀ up to the split: 8 keys x 2 row vectors, K elements broadcast; the
// block max of each row vector is carried along.
//       CHECK:     %[[BMAX:.+]]:2 = scf.for %[[J:.+]] = %c0 to %[[SPLIT]] step %c8 iter_args(
//       CHECK:       %[[S:.+]]:16 = scf.for %[[DD:.+]] = %c0 to %c32 step %c1 iter_args(
//       CHECK:         %[[Q0:.+]] = vector.load %[[QT]][%[[DD]], %c0]
//       CHECK:         %[[Q1:.+]] = vector.load %[[QT]][%[[DD]], %c16]
//       CHECK:         %[[K0:.+]] = memref.load %[[K]][%c0, %c0, %{{.+}}, %[[DD]]]
//       CHECK:         %[[KB0:.+]] = vector.broadcast %[[K0]] : f32 to vector<16xf32>
//       CHECK:         vector.fma %[[KB0]], %[[Q0]], %{{.+}} : vector<16xf32>
//       CHECK:         vector.fma %[[KB0]], %[[Q1]], %{{.+}} : vector<16xf32>
// The band (key <= row + diagonal) and the block's key count; the soft
// cap waits for the softmax.
//   CHECK-NOT:       math.tanh
//       CHECK:       %[[IN:.+]] = arith.cmpi sle, %{{.+}}, %{{.+}} : vector<16xi32>
//       CHECK:       arith.select %[[IN]], %{{.+}}, %{{.+}} : vector<16xi1>, vector<16xf32>
//       CHECK:       %[[S0:.+]] = arith.select %{{.+}}, %{{.+}}, %{{.+}} : vector<16xf32>
//       CHECK:       vector.store %[[S0]], %[[ST]][%[[J]], %c0]
// The running max as x86 takes it (s > m ? s : m: one vmaxps).
//       CHECK:       %[[GT:.+]] = arith.cmpf ogt, %[[S0]], %[[M:.+]] : vector<16xf32>
//       CHECK:       arith.select %[[GT]], %[[S0]], %[[M]] : vector<16xi1>, vector<16xf32>
// From the split on, the second row vector alone, 16 keys a step.
//       CHECK:     %[[BMAX1:.+]] = scf.for %{{.+}} = %[[SPLIT]] to %c32 step %c16 iter_args(%{{.+}} = %[[BMAX]]#1) -> (vector<16xf32>)
//       CHECK:       scf.for %{{.+}} = %c0 to %c32 step %c1 iter_args({{.+}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
//       CHECK:         vector.load %[[QT]][%{{.+}}, %c16]
//   CHECK-NOT:         vector.load %[[QT]][%{{.+}}, %c0]
//       CHECK:       vector.store %{{.+}}, %[[ST]][%{{.+}}, %c16]
// Per row vector: the rows' running max and sum, p = exp(s - m') in place,
// the scores capped as read (the block max once; -inf stays -inf), the
// first row vector's up to the split.
//       CHECK:     %[[NOMAX:.+]] = arith.cmpf oeq, %[[BMAX]]#0, %{{.+}} : vector<16xf32>
//       CHECK:     %[[CAP:.+]] = math.tanh
//       CHECK:     %[[CAPPED:.+]] = arith.mulf %[[CAP]]
//       CHECK:     %[[CMAX:.+]] = arith.select %[[NOMAX]], %[[BMAX]]#0, %[[CAPPED]]
//       CHECK:     %[[OLDMAX:.+]] = vector.load %[[STATS]][%c0, %c0]
//       CHECK:     vector.load %[[STATS]][%c1, %c0]
//       CHECK:     %[[UP:.+]] = arith.cmpf ogt, %[[CMAX]], %[[OLDMAX]]
//       CHECK:     arith.select %[[UP]], %[[CMAX]], %[[OLDMAX]]
//       CHECK:     arith.cmpf oeq
//       CHECK:     %[[ALPHA0:.+]] = math.exp2
//       CHECK:     scf.for %{{.+}} = %c0 to %[[SPLIT]] step %c2 iter_args(
//       CHECK:       math.tanh
//       CHECK:       math.exp2
//       CHECK:       vector.store %{{.+}}, %[[ST]]
//       CHECK:     vector.store %{{.+}}, %[[STATS]][%c0, %c0]
//       CHECK:     vector.store %{{.+}}, %[[STATS]][%c1, %c0]
//       CHECK:     arith.cmpf oeq, %[[BMAX1]]
//       CHECK:     %[[ALPHA1:.+]] = math.exp2
//       CHECK:     scf.for %{{.+}} = %c0 to %c32 step %c2 iter_args(
// P·V: 8 columns of Oᵀ x 2 row vectors, rescaled by α, over the block's
// keys up to the split, then the second row vector's over the rest; an
// excluded key (p = 0) leaves the accumulator as it was (a select that
// AVX-512 makes a masked FMA).
//       CHECK:     %[[SHORT:.+]] = arith.subi %{{.+}}, %c32 : index
//       CHECK:     %[[LATEST:.+]] = arith.minsi %{{.+}}, %[[SHORT]] : index
//       CHECK:     %[[START:.+]] = arith.maxsi %[[LATEST]], %c0 : index
//       CHECK:     scf.for %[[E:.+]] = %c0 to %c16 step %c8
//       CHECK:       arith.mulf %{{.+}}, %[[ALPHA0]]
//       CHECK:       arith.mulf %{{.+}}, %[[ALPHA1]]
//       CHECK:       %[[TO:.+]] = arith.minsi %[[SPLIT]], %{{.+}} : index
//       CHECK:       %[[PV:.+]]:16 = scf.for %[[JJ:.+]] = %c0 to %[[TO]] step %c1 iter_args(
// Each step prefetches into L2 the K and V rows of the key one block on
// (from a start moved back by what the next block lacks of 32 keys), at
// this chunk's column of V and K's matching one (of 32 for 20): over the
// block's chunks, the next block.
//       CHECK:         %[[AHEAD:.+]] = arith.addi %[[START]], %[[JJ]] : index
//       CHECK:         %[[KCOL:.+]] = arith.muli %[[E]], %c32 : index
//       CHECK:         %[[KCOLS:.+]] = arith.divui %[[KCOL]], %c20 : index
//       CHECK:         %[[KC:.+]] = arith.minsi %[[KCOLS]], %c31 : index
//       CHECK:         memref.prefetch %[[K]][%c0, %c0, %[[AHEAD]], %[[KC]]], read, locality<2>, data
//       CHECK:         memref.prefetch %[[V]][%c0, %c0, %[[AHEAD]], %[[E]]], read, locality<2>, data
//       CHECK:         %[[P0:.+]] = vector.load %[[ST]][%[[JJ]], %c0]
//       CHECK:         %[[IN:.+]] = arith.cmpf une, %[[P0]]
//       CHECK:         %[[VE:.+]] = memref.load %[[V]]
//       CHECK:         %[[VB:.+]] = vector.broadcast %[[VE]] : f32 to vector<16xf32>
//       CHECK:         %[[F:.+]] = vector.fma %[[VB]], %[[P0]], %[[OLD:.+]] : vector<16xf32>
//       CHECK:         arith.select %[[IN]], %[[F]], %[[OLD]]
//       CHECK:       scf.for %[[JU:.+]] = %[[SPLIT]] to %{{.+}} step %c1 iter_args(%{{.+}} = %[[PV]]#1, %{{.+}} = %[[PV]]#3,
//       CHECK:         vector.load %[[ST]][%[[JU]], %c16]
//   CHECK-NOT:         vector.load %[[ST]][%[[JU]], %c0]
//       CHECK:       vector.store %{{.+}}, %[[OT]]
// The last 4 columns (20 = 2 x 8 + 4).
//       CHECK:     scf.for %{{.+}} = %c0 to %{{.+}} step %c1 iter_args(
//       CHECK:       vector.fma
// Back to the rows: only the tile's real rows are stored, the last chunk
// masked.
//       CHECK:   scf.if
//       CHECK:     vector.store %{{.+}}, %{{.+}}[%c0, %c0, %{{.+}}, %c0] : memref<1x1x?x20xf32, strided<[?, ?, ?, 1], offset: ?>>, vector<16xf32>
//       CHECK:   vector.maskedstore %{{.+}}[%c0, %c0, %{{.+}}, %c16]
//       CHECK:   memref.store %{{.+}}, %[[MAX]]
//       CHECK:   memref.store %{{.+}}, %[[SUM]]
func.func @causal_softcap(%q: memref<1x1x?x32xf32, strided<[?, ?, ?, ?], offset: ?>>,
                          %k: memref<1x1x?x32xf32>, %v: memref<1x1x?x20xf32>,
                          %acc: memref<1x1x?x20xf32, strided<[?, ?, ?, ?], offset: ?>>,
                          %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>, %d: index) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x32xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x32xf32>, memref<1x1x?x20xf32>)
      diagonal(%d)
      outs(%acc, %m, %s : memref<1x1x?x20xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?xf32>, memref<1x1x?xf32>) causal softcap(30.0)
  return
}

// -----

// Without masking, P·V takes no select.
// CHECK-LABEL: func @full
//  CHECK-SAME: (%{{[a-z0-9]+}}: {{.+}}, %[[K:[a-z0-9]+]]: {{.+}}, %[[V:[a-z0-9]+]]: {{.+}}, %{{[a-z0-9]+}}: {{.+}}, %{{[a-z0-9]+}}: {{.+}}, %{{[a-z0-9]+}}: {{.+}})
//       CHECK: memref.load %[[K]]
//  CHECK-NEXT: vector.broadcast
//  CHECK-NEXT: vector.fma
//  CHECK-NEXT: vector.fma
//       CHECK: %[[VE:.+]] = memref.load %[[V]]
//  CHECK-NEXT: %[[VB:.+]] = vector.broadcast %[[VE]]
//  CHECK-NEXT: vector.fma %[[VB]]
//  CHECK-NEXT: vector.fma %[[VB]]
//  CHECK-NEXT: arith.addi
//  CHECK-NEXT: memref.load %[[V]]
// With 8 lanes (AVX2, 16 registers) the register tiles hold 12
// accumulators: 3 row vectors by 4 keys, and by 4 columns of Oᵀ in P·V.
// AVX2-LABEL: func @full
//       AVX2: memref.alloca() {alignment = 64 : i64} : memref<16x24xf32>
//       AVX2: scf.for %{{.+}} = %c0 to %c32 step %c4 iter_args(
//       AVX2:   %{{.+}}:12 = scf.for %{{.+}} = %c0 to %c16 step %c1 iter_args(
//       AVX2:     vector.fma {{.+}} : vector<8xf32>
//       AVX2: scf.for %{{.+}} = %c0 to %c16 step %c4 {
//       AVX2:   %{{.+}}:12 = scf.for %{{.+}} = %c0 to %{{.+}} step %c1 iter_args(
//       AVX2:     vector.fma {{.+}} : vector<8xf32>
func.func @full(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                %acc: memref<1x1x?x16xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      outs(%acc, %m, %s : memref<1x1x?x16xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
  return
}

// -----

// An op with a mask operand: per block, the tile's mask transposed into a
// [key][row] buffer of f32 biases (a keep mask's false -inf, true 0; rows
// past the op's read the last row, keys past the block the last key). The
// score loop takes a key's vector of biases as the scores leave the
// registers: a -inf bias excludes the key by a select (NaN + -inf is NaN),
// and P·V leaves an excluded key's accumulators as they were.
// CHECK-LABEL: func @keep_mask
//  CHECK-SAME: %[[MASK:[a-z0-9]+]]: memref<1x1x?x?xi1>
//   CHECK-DAG: %[[ALL:.+]] = arith.constant dense<true> : vector<16xi1>
//   CHECK-DAG: %[[NEGINFV:.+]] = arith.constant dense<0xFF800000> : vector<16xf32>
//   CHECK-DAG: %[[ZEROV:.+]] = arith.constant dense<0.000000e+00> : vector<16xf32>
//   CHECK-DAG: %[[NOBYTES:.+]] = arith.constant dense<0> : vector<16xi8>
//   CHECK-DAG: %[[NEGINF:.+]] = arith.constant 0xFF800000 : f32
//   CHECK-DAG: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
//       CHECK: memref.alloca() {alignment = 64 : i64} : memref<2x32xf32>
//       CHECK: %[[BIAS:.+]] = memref.alloca() {alignment = 64 : i64} : memref<32x32xf32>
//       CHECK: scf.for %[[TILE:.+]] = %c0 to %{{.+}} step %c32
//       CHECK:   scf.for %[[KB:.+]] = %c0 to %{{.+}} step %c32
// A mask with one row for all (a row stride of 0 or one row: a padding
// mask as the runtime passes it): one load and splat per key.
//       CHECK:     %[[STRIDE0:.+]] = arith.cmpi eq, %{{.+}}#2, %c0 : index
//       CHECK:     %[[ONE:.+]] = arith.cmpi eq, %{{.+}}, %c1 : index
//       CHECK:     %[[SAME:.+]] = arith.ori %[[STRIDE0]], %[[ONE]] : i1
//       CHECK:     scf.if %[[SAME]] {
//       CHECK:       scf.for %[[JK:.+]] = %c0 to %c32 step %c1
//       CHECK:         %[[KEEP0:.+]] = memref.load %[[MASK]][%c0, %c0, %c0, %{{.+}}] : memref<1x1x?x?xi1>
//       CHECK:         %[[B0:.+]] = arith.select %[[KEEP0]], %[[ZERO]], %[[NEGINF]] : f32
//       CHECK:         %[[SPLAT:.+]] = vector.broadcast %[[B0]] : f32 to vector<16xf32>
//       CHECK:         vector.store %[[SPLAT]], %[[BIAS]][%[[JK]], %c0]
//       CHECK:         vector.store %[[SPLAT]], %[[BIAS]][%[[JK]], %c16]
//       CHECK:     } else {
// Else (its keys have unit stride: here static) per 16 rows and 16 keys,
// 16 loads of the mask's bytes through a pointer (an i1 vector would be a
// bit vector in memory), each byte's test a 0 or -inf bias, one 16x16
// transpose (two-vector shuffles) and 16 stores of a key's 16 rows. A
// whole block's loads are plain (an all-true mask, which LLVM folds); a
// partial block's lanes past the last key are masked off.
//       CHECK:       %[[END:.+]] = arith.addi %[[KB]], %c32 : index
//       CHECK:       %[[WHOLE:.+]] = arith.cmpi sle, %[[END]], %{{.+}} : index
//       CHECK:       scf.if %[[WHOLE]] {
//       CHECK:         scf.for %[[FIRST:.+]] = %c0 to %c32 step %c16
//       CHECK:           scf.for %[[C0:.+]] = %c0 to %c32 step %c16
//       CHECK:             %[[BASE:.+]] = memref.extract_aligned_pointer_as_index
//       CHECK:             %[[AT:.+]] = arith.addi %[[BASE]], %{{.+}} : index
//       CHECK:             %[[AT64:.+]] = arith.index_cast %[[AT]] : index to i64
//       CHECK:             %[[PTR:.+]] = llvm.inttoptr %[[AT64]] : i64 to !llvm.ptr
//       CHECK:             %[[BYTES:.+]] = llvm.intr.masked.load %[[PTR]], %[[ALL]], %[[NOBYTES]] {alignment = 1 : i32} : (!llvm.ptr, vector<16xi1>, vector<16xi8>) -> vector<16xi8>
//       CHECK:             %[[KEEPV:.+]] = arith.cmpi ne, %[[BYTES]], %[[NOBYTES]] : vector<16xi8>
//       CHECK:             arith.select %[[KEEPV]], %[[ZEROV]], %[[NEGINFV]] : vector<16xi1>, vector<16xf32>
// CHECK-COUNT-15:          llvm.intr.masked.load %{{.+}}, %[[ALL]], %[[NOBYTES]]
//       CHECK:             vector.shuffle %{{.+}}, %{{.+}} [0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29]
//       CHECK:             vector.store %{{.+}}, %[[BIAS]][%[[C0]], %[[FIRST]]]
//       CHECK:       } else {
//       CHECK:           scf.for %{{.+}} = %c0 to %c32 step %c16
//       CHECK:             %[[LIVE:.+]] = vector.create_mask %{{.+}} : vector<16xi1>
//       CHECK:             llvm.intr.masked.load %{{.+}}, %[[LIVE]], %[[NOBYTES]]
// CHECK-COUNT-15:          llvm.intr.masked.load %{{.+}}, %[[LIVE]], %[[NOBYTES]]
//       CHECK:     scf.for %[[SJ:.+]] = %c0 to %c32 step %c8 iter_args(
//       CHECK:       %[[S:.+]]:16 = scf.for
//       CHECK:       %[[B0:.+]] = vector.load %[[BIAS]][%[[SJ]], %c0]
//       CHECK:       %[[OUT:.+]] = arith.cmpf oeq, %[[B0]], %{{.+}} : vector<16xf32>
//       CHECK:       arith.select %[[OUT]], %{{.+}}, %[[S]]#0 : vector<16xi1>, vector<16xf32>
//       CHECK:     scf.for %[[E:.+]] = %c0 to %c16 step %c8
//       CHECK:       scf.for %[[JJ:.+]] = %c0 to %{{.+}} step %c1 iter_args(
//       CHECK:         %[[P0:.+]] = vector.load %{{.+}}[%[[JJ]], %c0]
//       CHECK:         %[[IN:.+]] = arith.cmpf une, %[[P0]]
//       CHECK:         %[[F:.+]] = vector.fma %{{.+}}, %[[P0]], %[[OLD:.+]] : vector<16xf32>
//       CHECK:         arith.select %[[IN]], %[[F]], %[[OLD]]
func.func @keep_mask(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                     %mask: memref<1x1x?x?xi1>,
                     %acc: memref<1x1x?x16xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      mask(%mask : memref<1x1x?x?xi1>)
      outs(%acc, %m, %s : memref<1x1x?x16xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
  return
}

// -----

// A float mask broadcast over the rows by its type (a padding bias,
// [B, 1, 1, Sk]): no run-time test and no transposition; each key's bias
// is loaded once and splat into the block's bias buffer, which the score
// loop adds to the base-2 scores (times log2(e)) before the -inf test.
// CHECK-LABEL: func @padding_bias
//  CHECK-SAME: %[[MASK:[a-z0-9]+]]: memref<1x1x1x?xf32>
//       CHECK: memref.alloca() {alignment = 64 : i64} : memref<2x32xf32>
//       CHECK: %[[BIAS:.+]] = memref.alloca() {alignment = 64 : i64} : memref<32x32xf32>
//   CHECK-NOT: scf.if
//       CHECK: %[[B:.+]] = memref.load %[[MASK]][%c0, %c0, %c0, %{{.+}}] : memref<1x1x1x?xf32>
//  CHECK-NEXT: %[[SPLAT:.+]] = vector.broadcast %[[B]] : f32 to vector<16xf32>
//  CHECK-NEXT: vector.store %[[SPLAT]], %[[BIAS]][%[[J:.+]], %c0]
//  CHECK-NEXT: vector.store %[[SPLAT]], %[[BIAS]][%[[J]], %c16]
//       CHECK: %[[S:.+]]:16 = scf.for
//       CHECK: %[[BV:.+]] = vector.load %[[BIAS]]
//  CHECK-NEXT: %[[SUM:.+]] = vector.fma %[[BV]], %{{.+}}, %[[S]]#0 : vector<16xf32>
//  CHECK-NEXT: %[[OUT:.+]] = arith.cmpf oeq, %[[BV]], %{{.+}} : vector<16xf32>
//  CHECK-NEXT: arith.select %[[OUT]], %{{.+}}, %[[SUM]] : vector<16xi1>, vector<16xf32>
func.func @padding_bias(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                        %mask: memref<1x1x1x?xf32>,
                        %acc: memref<1x1x?x16xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      mask(%mask : memref<1x1x1x?xf32>)
      outs(%acc, %m, %s : memref<1x1x?x16xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
  return
}

// -----

// f16 K and V are widened into f32 heap buffers once per chunk of 4 key
// blocks (K a block further, where the chunk ends at the last key) for
// all of the head's tiles, when it has more than one tile; each tile then
// takes the chunk's blocks it sees (its state back to the outs between
// chunks) and broadcasts from the widened rows at the block's offset. A
// head of one tile takes one chunk of all its keys and widens each block
// as it reaches it (K: the whole block, repeating the last key; V: the
// block's keys) at offset 0.
// CHECK-LABEL: func @f16_widened
//       CHECK: %[[KW:.+]] = memref.alloc() {alignment = 64 : i64} : memref<160x16xf32>
//       CHECK: %[[VW:.+]] = memref.alloc() {alignment = 64 : i64} : memref<160x16xf32>
//       CHECK: %[[CHUNKED:.+]] = arith.cmpi sgt, %{{.+}}, %c32 : index
//       CHECK: %[[STEP:.+]] = arith.select %[[CHUNKED]], %c128, %{{.+}} : index
//       CHECK: scf.for %[[CHUNK:.+]] = %c0 to %{{.+}} step %[[STEP]] {
//       CHECK:   scf.if %[[CHUNKED]] {
//       CHECK:     arith.select %{{.+}}, %c32, %c0 : index
//       CHECK:     vector.store %{{.+}}, %[[KW]][%{{.+}}, %c0] : memref<160x16xf32>, vector<16xf32>
//       CHECK:     vector.store %{{.+}}, %[[VW]][%{{.+}}, %c0] : memref<160x16xf32>, vector<16xf32>
//       CHECK:   scf.for %{{.+}} = %c0 to %{{.+}} step %c32 {
//       CHECK:     scf.if
//       CHECK:       scf.for %[[KB:.+]] = %{{.+}} to %{{.+}} step %c32 {
//       CHECK:         %[[REL:.+]] = arith.subi %[[KB]], %[[CHUNK]] : index
//       CHECK:         %[[OFF:.+]] = arith.select %[[CHUNKED]], %[[REL]], %c0 : index
//       CHECK:         scf.if %[[CHUNKED]] {
//  CHECK-NEXT:         } else {
//       CHECK:           vector.store %{{.+}}, %[[KW]]
//       CHECK:           vector.store %{{.+}}, %[[VW]]
//       CHECK:         scf.for %[[SJ:.+]] = %c0 to %c32 step %c8 iter_args(
//       CHECK:           scf.for %[[D:.+]] = %c0 to %c16 step %c1 iter_args(
//       CHECK:             %[[ROW:.+]] = arith.addi %[[OFF]], %[[SJ]] : index
//       CHECK:             memref.load %[[KW]][%[[ROW]], %[[D]]]
//       CHECK:         memref.load %[[VW]]
// Widening reads each row once, in order: nothing to prefetch.
//   CHECK-NOT: memref.prefetch
//       CHECK: memref.dealloc %[[KW]]
//       CHECK: memref.dealloc %[[VW]]
//       CHECK: return
func.func @f16_widened(%q: memref<1x1x?x16xf16>, %k: memref<1x1x?x16xf16>, %v: memref<1x1x?x16xf16>,
                             %acc: memref<1x1x?x16xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x16xf16>, memref<1x1x?x16xf16>, memref<1x1x?x16xf16>)
      outs(%acc, %m, %s : memref<1x1x?x16xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
  return
}

// -----

// A window (8, 0) of a top-left diagonal: each tile walks keys
// [tile - 8, tile + rows) within [0, Sk]; a block is whole for the tile
// when its last key is within the first row's reach and its first key
// within the last row's window; otherwise each row vector's band has a
// lower bound as well.
// CHECK-LABEL: func @window
//       CHECK: scf.for %[[TILE:.+]] = %c0 to %{{.+}} step %c32
//       CHECK:   %[[COUNT:.+]] = arith.minsi %{{.+}}, %c32 : index
//       CHECK:   %[[END:.+]] = arith.addi %[[TILE]], %[[COUNT]] : index
//       CHECK:   %[[POS:.+]] = arith.maxsi %[[END]], %c0 : index
//       CHECK:   %[[LAST:.+]] = arith.minsi %[[POS]], %{{.+}} : index
//       CHECK:   %[[START:.+]] = arith.subi %[[TILE]], %c8 : index
//       CHECK:   %[[NONNEG:.+]] = arith.maxsi %[[START]], %c0 : index
//       CHECK:   %[[FIRST:.+]] = arith.minsi %[[NONNEG]], %[[LAST]] : index
//       CHECK:   scf.for %[[KB:.+]] = %[[FIRST]] to %[[LAST]] step %c32
//       CHECK:     arith.cmpi sle, %{{.+}}, %{{.+}} : index
//       CHECK:     arith.cmpi sge, %[[KB]], %{{.+}} : index
//       CHECK:     scf.if
//       CHECK:     } else {
//       CHECK:       arith.cmpi sle, %{{.+}}, %{{.+}} : vector<16xi32>
//       CHECK:       arith.cmpi sge, %{{.+}}, %{{.+}} : vector<16xi32>
func.func @window(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                  %acc: memref<1x1x?x16xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      outs(%acc, %m, %s : memref<1x1x?x16xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
      align(top_left) window <left = 8, right = 0>
  return
}

// -----

// Dropout in lane rows: the statistics walk the block's keys 8 at a time;
// where the first one's global index is a multiple of 8 (always, in tiled
// kernels) the 8 keys share each row's Philox counter (⌊j/8⌋, row, h, b):
// one Philox on the row vector (its even and its odd lanes each in the low
// halves of a vector<8xi64>, whose 32x32-bit products and xors need no
// shuffle; one shuffle a word interleaves them back at the end) gives the 8
// keys' 16 bits in order, two a word: the low half shifted to the top for
// the even key, the word as it is for the odd one, each compared with
// ⌊p·2¹⁶⌋·2¹⁶; otherwise a Philox per key. The running sum takes the
// undropped weight; the weight stored for P·V is kept (1/(1 − p)) or 0.
// CHECK-LABEL: func @dropout
//  CHECK-SAME: %[[P:[a-z0-9]+]]: f32, %[[SEED:[a-z0-9]+]]: i64
//       CHECK: %[[P64:.+]] = arith.extf %[[P]] : f32 to f64
//       CHECK: %[[PS:.+]] = arith.mulf %[[P64]], %{{.+}} : f64
//       CHECK: %[[T16:.+]] = arith.fptoui %[[PS]] : f64 to i32
//       CHECK: %[[THRESHOLD:.+]] = arith.shli %[[T16]], %c16_i32 : i32
//       CHECK: %[[STAT:.+]]:2 = scf.for %[[J:.+]] = %c0 to %c32 step %c8 iter_args(%[[S0:.+]] = %{{.+}}, %[[S1:.+]] = %{{.+}}) -> (vector<16xf32>, vector<16xf32>) {
//       CHECK:   %[[KEY:.+]] = arith.index_cast %{{.+}} : index to i32
//       CHECK:   %[[LOW:.+]] = arith.andi %[[KEY]], %c7_i32 : i32
//       CHECK:   %[[ALIGNED:.+]] = arith.cmpi eq, %[[LOW]], %c0_i32 : i32
//       CHECK:   %[[KEEP:.+]]:8 = scf.if %[[ALIGNED]] -> (vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>, vector<16xi1>) {
//       CHECK:     arith.shrui %[[KEY]], %c3_i32 : i32
//       CHECK:     arith.muli %{{.+}}, %{{.+}} : vector<8xi64>
//   CHECK-NOT:     vector.shuffle
//       CHECK:     arith.xori %{{.+}}, %{{.+}} : vector<8xi64>
// CHECK-COUNT-4:   vector.shuffle %{{.+}}, %{{.+}} [0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30]
//       CHECK:     %[[LIMIT:.+]] = vector.broadcast %[[THRESHOLD]] : i32 to vector<16xi32>
//       CHECK:     %[[EVEN:.+]] = arith.shli %[[WORD:.+]], %{{.+}} : vector<16xi32>
//       CHECK:     arith.cmpi uge, %[[EVEN]], %[[LIMIT]] : vector<16xi32>
//       CHECK:     arith.cmpi uge, %[[WORD]], %[[LIMIT]] : vector<16xi32>
// CHECK-COUNT-3:   arith.shli
//  CHECK-SAME:     vector<16xi32>
//       CHECK:     scf.yield
//       CHECK:   } else {
// CHECK-COUNT-8:   arith.cmpi uge, %{{.+}}, %{{.+}} : vector<16xi32>
//       CHECK:     scf.yield
//       CHECK:   }
//       CHECK:   %[[E0:.+]] = math.exp2
//       CHECK:   arith.addf %[[S0]], %[[E0]] : vector<16xf32>
//       CHECK:   %[[Z0:.+]] = arith.select %[[KEEP]]#0, %{{.+}}, %{{.+}} : vector<16xi1>, vector<16xf32>
//       CHECK:   %[[W0:.+]] = arith.mulf %[[E0]], %[[Z0]] : vector<16xf32>
//       CHECK:   vector.store %[[W0]], %{{.+}}[%[[J]], %c0]
//       CHECK:   %[[E1:.+]] = math.exp2
//       CHECK:   arith.addf %[[S1]], %[[E1]] : vector<16xf32>
//       CHECK:   arith.select %[[KEEP]]#1
//       CHECK:   arith.select %[[KEEP]]#2
//       CHECK:   arith.select %[[KEEP]]#3
//       CHECK:   arith.select %[[KEEP]]#4
//       CHECK:   arith.select %[[KEEP]]#5
//       CHECK:   arith.select %[[KEEP]]#6
//       CHECK:   arith.select %[[KEEP]]#7
func.func @dropout(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                   %acc: memref<1x1x?x16xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>,
                   %p: f32, %seed: i64, %b: index, %h: index, %i: index, %j: index) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      dropout(%p, %seed) origin(%b, %h, %i, %j)
      outs(%acc, %m, %s : memref<1x1x?x16xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
  return
}

// -----

// K and V rows that are not dense (the [B, S, H, D] views of projections:
// rows H·D apart, each on a page of its own) are copied dense once per
// key/value head when its rows are read more than once (more than one
// lane-rows tile, or a GQA group) and fit 32 MiB, into a heap buffer viewed
// with the operand's type (strides 0, 0, 16, 1); dense rows are read in
// place.
// CHECK-LABEL: func @strided_rows
//  CHECK-SAME: %[[K:[a-z0-9]+]]: memref<1x1x?x16xf32, strided<[?, ?, ?, 1], offset: ?>>
//       CHECK: %[[TILES:.+]] = arith.ceildivui %{{.+}}, %c32 : index
//       CHECK: %[[REREAD:.+]] = arith.cmpi ugt, %[[TILES]], %c1 : index
//       CHECK: %{{.+}}, %{{.+}}, %{{.+}}:4, %[[STRIDES:.+]]:4 = memref.extract_strided_metadata %[[K]]
//       CHECK: %[[APART:.+]] = arith.cmpi ne, %[[STRIDES]]#2, %c16 : index
// (at most 32 MiB a head: 524288 rows of 64 bytes)
//       CHECK: %[[SMALL:.+]] = arith.cmpi ule, %{{.+}}, %c524288 : index
//       CHECK: %[[BOTH:.+]] = arith.andi %[[REREAD]], %[[APART]] : i1
//       CHECK: %[[COPY:.+]] = arith.andi %[[BOTH]], %[[SMALL]] : i1
//       CHECK: %[[KEYS:.+]] = scf.if %[[COPY]] -> (memref<1x1x?x16xf32, strided<[?, ?, ?, 1], offset: ?>>) {
//       CHECK:   %[[BUF:.+]] = memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?x16xf32>
//       CHECK:   scf.for
//       CHECK:     vector.load %{{.+}}[%c0, %c0, %{{.+}}, %c0]
//       CHECK:     vector.store %{{.+}}, %[[BUF]][%{{.+}}, %c0] : memref<?x16xf32>, vector<16xf32>
//       CHECK:   %[[VIEW:.+]] = memref.reinterpret_cast %[[BUF]] to offset: [0], sizes: [1, 1, %{{.+}}, 16], strides: [0, 0, 16, 1]
//       CHECK:   %[[CAST:.+]] = memref.cast %[[VIEW]]
//       CHECK:   scf.yield %[[CAST]]
//       CHECK: } else {
//       CHECK:   scf.yield %[[K]]
//       CHECK: %[[VALUES:.+]] = scf.if
// The kernel reads the copy (or the operand) ...
//       CHECK: memref.load %[[KEYS]]
// ... and frees the copy after the head, where it made one.
//       CHECK: scf.if %[[COPY]] {
//       CHECK:   memref.dealloc %[[KEYS]]
func.func @strided_rows(%q: memref<1x1x?x16xf32>,
                        %k: memref<1x1x?x16xf32, strided<[?, ?, ?, 1], offset: ?>>,
                        %v: memref<1x1x?x16xf32, strided<[?, ?, ?, 1], offset: ?>>,
                        %acc: memref<1x1x?x16xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32, strided<[?, ?, ?, 1], offset: ?>>, memref<1x1x?x16xf32, strided<[?, ?, ?, 1], offset: ?>>)
      outs(%acc, %m, %s : memref<1x1x?x16xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
  return
}

// -----

// A float mask of every row whose keys have unit stride (checked at run
// time): per 16 rows and 16 keys, 16 row loads (plain where the block is
// whole; masked to the keys there are in a partial one, 0 past them), one
// 16x16 transpose (shuffles after canonicalization), 16 stores of a key's
// 16 rows. What the tile's rows read at the next block is prefetched into
// L2 in the P·V loop, a few lines a step: at key j, row j of the tile, the
// chunks of V's columns taking the lines of its run in turn (here 2
// chunks, the 3 lines of 32 f32 keys: at keys 0, 16 and 31, the last for
// a row that does not start a line), keys clamped to the mask's last.
// CHECK-LABEL: func @bias_mask
//  CHECK-SAME: %[[MASK:[a-z0-9]+]]: memref<1x1x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
//       CHECK: memref.alloca() {alignment = 64 : i64} : memref<2x32xf32>
//       CHECK: %[[BIAS:.+]] = memref.alloca() {alignment = 64 : i64} : memref<32x32xf32>
//       CHECK: scf.for %[[TILE:.+]] = %c0 to %{{.+}} step %c32 {
//       CHECK: scf.for %[[START:.+]] = %c0 to %{{.+}} step %c32 {
//       CHECK: scf.if
//       CHECK:   scf.for %{{.+}} = %c0 to %c32 step %c16
//       CHECK:     scf.for %{{.+}} = %c0 to %c32 step %c16
// CHECK-COUNT-16:      vector.load %{{.+}} : memref<1x1x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, vector<16xf32>
//   CHECK-NOT:     memref.prefetch
//       CHECK:   } else {
//       CHECK:   scf.for %[[FIRST:.+]] = %c0 to %c32 step %c16
//       CHECK:     scf.for %[[C0:.+]] = %c0 to %c32 step %c16
//       CHECK:       %[[LIVE:.+]] = vector.create_mask %{{.+}} : vector<16xi1>
// CHECK-COUNT-16:    vector.maskedload %{{.+}}, %[[LIVE]], %{{.+}} : memref<1x1x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, vector<16xi1>, vector<16xf32> into vector<16xf32>
//       CHECK:       vector.store %{{.+}}, %[[BIAS]][%[[C0]], %[[FIRST]]]
//       CHECK: } else {
//       CHECK:   memref.load %[[MASK]]
//       CHECK:   memref.store %{{.+}}, %[[BIAS]]
//   CHECK-NOT: memref.prefetch %[[MASK]]
//       CHECK: scf.for %[[COLUMN:.+]] = %c0 to %c16 step %c8 {
//       CHECK:   scf.for %[[J:.+]] = %c0 to %{{.+}} step %c1 iter_args
//       CHECK:     %[[CHUNK:.+]] = arith.divui %[[COLUMN]], %c8 : index
//       CHECK:     %[[TILEROW:.+]] = arith.addi %[[TILE]], %[[J]] : index
//       CHECK:     %[[ROW:.+]] = arith.minsi %[[TILEROW]], %{{.+}} : index
//       CHECK:     %[[NEXT:.+]] = arith.addi %[[START]], %c32 : index
//       CHECK:     %[[LINE0:.+]] = arith.muli %[[CHUNK]], %c2 : index
//       CHECK:     arith.cmpi ult, %[[LINE0]], %c3 : index
//       CHECK:     scf.if
//       CHECK:       %[[AT0:.+]] = arith.muli %[[CHUNK]], %c32 : index
//       CHECK:       %[[OFF0:.+]] = arith.minsi %[[AT0]], %c31 : index
//       CHECK:       %[[KEY0:.+]] = arith.addi %[[NEXT]], %[[OFF0]] : index
//       CHECK:       %[[CLAMP0:.+]] = arith.minsi %[[KEY0]], %{{.+}} : index
//       CHECK:       memref.prefetch %[[MASK]][%c0, %c0, %[[ROW]], %[[CLAMP0]]], read, locality<2>, data
//       CHECK:     %[[LINE1:.+]] = arith.addi %{{.+}}, %c1 : index
//       CHECK:     arith.cmpi ult, %[[LINE1]], %c3 : index
//       CHECK:     scf.if
//       CHECK:       arith.muli %[[LINE1]], %c16 : index
//       CHECK:       memref.prefetch %[[MASK]][%c0, %c0, %[[ROW]], %{{.+}}], read, locality<2>, data
//       CHECK:     vector.fma
func.func @bias_mask(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                     %mask: memref<1x1x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>,
                     %acc: memref<1x1x?x16xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      mask(%mask : memref<1x1x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>)
      outs(%acc, %m, %s : memref<1x1x?x16xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
  return
}

// -----

// #attn.kernel's block_prefetch = false (attn-choose-kernels' choice for
// AMD Zen 3, whose lane-rows kernels run faster without it): P·V issues no
// prefetch of the next block, whatever prefetch-bytes says; with the
// default (true) the same op prefetches a K and a V line a step.
// CHECK-LABEL: func @no_block_prefetch
//       CHECK: vector.fma
//   CHECK-NOT: memref.prefetch
// CHECK-LABEL: func @block_prefetch
//       CHECK: memref.prefetch %{{.+}}, read, locality<2>, data
//       CHECK: memref.prefetch %{{.+}}, read, locality<2>, data
//       CHECK: vector.fma
func.func @no_block_prefetch(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                             %acc: memref<1x1x?x16xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      outs(%acc, %m, %s : memref<1x1x?x16xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
      kernel <lane_rows, query_tile = 64, key_block = 32, lane_rows = 32, block_prefetch = false>
  return
}

func.func @block_prefetch(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                          %acc: memref<1x1x?x16xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      outs(%acc, %m, %s : memref<1x1x?x16xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
      kernel <lane_rows, query_tile = 64, key_block = 32, lane_rows = 32>
  return
}
