// RUN: attn-opt %s -attn-lower-to-vector="key-block=32 direct-rows=4" -canonicalize | FileCheck %s
// RUN: attn-opt %s -attn-lower-to-vector="key-block=32 direct-rows=4 vector-width=8" -canonicalize | FileCheck %s --check-prefix=AVX2

// Decoding: a tile of at most 4 query rows whose K and V rows have unit
// stride (checked at run time) reads them in place. The rows of the tile's
// heads go, up to 16 at a time, to a zero-padded f32 buffer once; per key
// block, whole groups of 4 rows take 4 x 4 register tiles (@decode_group
// below), and each key's K row is loaded once (two 16-lane chunks for
// D = 20, the second masked) and scored against every other buffered row
// (a dot product and one horizontal sum, reassociable: a tree). Then per row the online
// update, and P·V from V's rows. Other tiles take the packed path.

// CHECK-LABEL: func @decode
//   CHECK-DAG: %[[QROWS:.+]] = memref.alloca() {alignment = 64 : i64} : memref<16x32xf32>
//   CHECK-DAG: %[[SCORES:.+]] = memref.alloca() {alignment = 64 : i64} : memref<16x32xf32>
//       CHECK: %[[FEW:.+]] = arith.cmpi sle, %{{.+}}, %c4 : index
//       CHECK: %[[KROWS:.+]] = memref.reinterpret_cast %{{.+}} to offset: [%{{.+}}], sizes: [1, 1, %{{.+}}, 20], strides: [%{{.+}}, %{{.+}}, %{{.+}}, 1]
//       CHECK: %[[VROWS:.+]] = memref.reinterpret_cast
//       CHECK: arith.cmpi eq, %{{.+}}, %c1 : index
//       CHECK: scf.if
// Query rows, 16 at a time, once.
//       CHECK:   scf.for %{{.+}} step %c16 {
//       CHECK:     scf.for
//       CHECK:       scf.for
//       CHECK:         memref.store %{{.+}}, %[[QROWS]]
// Per key block, per key: K's row once, then a score per buffered row
// (Sq is dynamic: a prefill kernel's fallback for calls of few rows, which
// takes no score tiles).
//       CHECK:     scf.for %{{.+}} step %c32 {
//   CHECK-NOT:       vector.shuffle
//       CHECK:       scf.for
//       CHECK:         vector.load %[[KROWS]]{{.+}} vector<16xf32>
//       CHECK:         vector.maskedload %[[KROWS]]
//       CHECK:         scf.for
//       CHECK:           vector.load %[[QROWS]]
//       CHECK:           vector.fma
//       CHECK:           vector.reduction <add>, %{{.+}} fastmath<reassoc>
//       CHECK:           memref.store %{{.+}}, %[[SCORES]]
// Per row: the online update and P·V from V's rows.
//       CHECK:       scf.for
//       CHECK:         vector.load %[[SCORES]]
//       CHECK:         math.exp2
//       CHECK:         scf.for {{.+}} iter_args
//       CHECK:           vector.load %[[VROWS]]
//       CHECK:           vector.fma
// The packed path for everything else.
//       CHECK: } else {
//       CHECK:   memref.store %{{.+}} : memref<20x32xf32>
func.func @decode(%q: memref<1x1x?x20xf32, strided<[?, ?, ?, ?], offset: ?>>,
                  %k: memref<1x1x?x20xf32, strided<[?, ?, ?, ?], offset: ?>>,
                  %v: memref<1x1x?x20xf32, strided<[?, ?, ?, ?], offset: ?>>,
                  %acc: memref<1x1x?x20xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x20xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x20xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x20xf32, strided<[?, ?, ?, ?], offset: ?>>)
      outs(%acc, %m, %s : memref<1x1x?x20xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
  return
}

// A tile of a whole GQA group (4 query heads on one key/value head, as
// attn-tile makes for decoding kernels): the direct path buffers the
// group's 4 rows and scores them against each K row load, so that each
// K/V block is read from memory once for the group. The packed path keeps
// one head at a time.

// CHECK-LABEL: func @decode_group
//       CHECK: scf.if
//       CHECK:   scf.for %{{.+}} = %c0 to %c4 step %c1 {
//       CHECK:     memref.store
// The group's 4 rows scored 4 keys at a time (a 4 x 4 register tile of
// accumulators, two 16-lane chunks for D = 20: 32 FMAs, one transposing
// tree); no row is left for the per-row loop.
//       CHECK:   scf.for %{{.+}} = %c0 to %{{.+}} step %c32 {
//       CHECK:     scf.for %{{.+}} = %c0 to %{{.+}} step %c4 {
//       CHECK-COUNT-32: vector.fma
//       CHECK-COUNT-30: vector.shuffle
//   CHECK-NOT:     vector.reduction
// The online update and P·V two rows at a time: each V vector loaded once
// for both rows' accumulators (2 x 2 vectors for Dv = 20).
//       CHECK:     scf.for %{{.+}} = %c0 to %c4 step %c2 {
//       CHECK:       math.exp2
//       CHECK:       math.exp2
//       CHECK:       scf.for {{.+}} iter_args({{.+}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
//       CHECK:         %[[V0:.+]] = vector.load %{{.+}} : memref<1x1x?x20xf32, strided<[?, ?, ?, 1], offset: ?>>, vector<16xf32>
//       CHECK:         %[[V1:.+]] = vector.maskedload
//       CHECK:         vector.fma %{{.+}}, %[[V0]]
//       CHECK:         vector.fma %{{.+}}, %[[V1]]
//       CHECK:         vector.fma %{{.+}}, %[[V0]]
//       CHECK:         vector.fma %{{.+}}, %[[V1]]
//       CHECK: } else {
//       CHECK:   scf.for %{{.+}} = %c0 to %c4 step %c1 {
//       CHECK:     scf.for %{{.+}} = %c0 to %{{.+}} step %c32 {
func.func @decode_group(%q: memref<1x4x1x20xf32, strided<[?, ?, ?, ?], offset: ?>>,
                        %k: memref<1x1x?x20xf32, strided<[?, ?, ?, ?], offset: ?>>,
                        %v: memref<1x1x?x20xf32, strided<[?, ?, ?, ?], offset: ?>>,
                        %acc: memref<1x4x1x20xf32>, %m: memref<1x4x1xf32>, %s: memref<1x4x1xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x4x1x20xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x20xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x20xf32, strided<[?, ?, ?, ?], offset: ?>>)
      outs(%acc, %m, %s : memref<1x4x1x20xf32>, memref<1x4x1xf32>, memref<1x4x1xf32>)
  return
}

// Dv = 256 in pairs of rows would need 32 accumulator vectors: P·V goes
// over the block's keys twice, 8 chunks of each row at a time (16 vectors
// in registers), the second pass from column 128.

// CHECK-LABEL: func @decode_wide
//       CHECK: vector.load %arg3[%c0, %c1, %c0, %c112]
//   CHECK-NOT: vector.load %arg3
//       CHECK: scf.for {{.+}} iter_args({{.+}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
//       CHECK:   vector.load %{{.+}}[%c0, %c0, %{{.+}}, %c0]
//       CHECK: vector.store %{{.+}}, %arg3[%c0, %c1, %c0, %c112]
//       CHECK: vector.load %arg3[%c0, %c0, %c0, %c128]
//       CHECK: scf.for {{.+}} iter_args({{.+}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
//       CHECK:   vector.load %{{.+}}[%c0, %c0, %{{.+}}, %c128]
//       CHECK: vector.store %{{.+}}, %arg3[%c0, %c1, %c0, %c240]
func.func @decode_wide(%q: memref<1x2x1x256xf32>, %k: memref<1x1x?x256xf32>, %v: memref<1x1x?x256xf32>,
                       %acc: memref<1x2x1x256xf32>, %m: memref<1x2x1xf32>, %s: memref<1x2x1xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x2x1x256xf32>, memref<1x1x?x256xf32>, memref<1x1x?x256xf32>)
      outs(%acc, %m, %s : memref<1x2x1x256xf32>, memref<1x2x1xf32>, memref<1x2x1xf32>)
  return
}

// 16-bit K (f16 here): whole groups of 4 rows are scored 4 keys at a time
// (4 x 4 accumulators, K widened as loaded, one transposing tree of
// shuffles for the 16 scores, stored as 4 rows of 4); the rows left over
// (a dynamic count here) take the per-row loop. f32 K takes the same tiles
// (the groups above). P·V over f16 V then takes whole groups of 4 rows:
// each key's V row is widened once (two chunks) for 4 rows x 2 chunks of
// accumulators; a pair and an odd row follow.

// CHECK-LABEL: func @decode_f16_tiles
//       CHECK: %[[REM:.+]] = arith.remui %[[COUNT:.+]], %c4 : index
//       CHECK: %[[TILED:.+]] = arith.subi %[[COUNT]], %[[REM]] : index
//       CHECK: scf.for %[[ROW:.+]] = %c0 to %[[TILED]] step %c4 {
//       CHECK:   scf.for %[[J:.+]] = %c0 to %{{.+}} step %c4 {
//       CHECK:     arith.extf %{{.+}} : vector<16xf16> to vector<16xf32>
//       CHECK-COUNT-16: vector.fma
//       CHECK-COUNT-30: vector.shuffle
//       CHECK:     vector.extract_strided_slice %{{.+}} {offsets = [0], sizes = [4], strides = [1]}
//       CHECK:     vector.store %{{.+}}, %{{.+}}[%[[ROW]], %[[J]]] : memref<16x32xf32>, vector<4xf32>
//       CHECK: %[[LEFT:.+]] = arith.cmpi slt, %[[TILED]], %[[COUNT]] : index
//       CHECK: scf.if %[[LEFT]] {
//       CHECK:   scf.for
//       CHECK:     scf.for %{{.+}} = %[[TILED]] to %[[COUNT]] step %c1 {
//       CHECK:       vector.reduction <add>
//       CHECK: %[[EVEN:.+]] = arith.subi %[[COUNT]], %{{.+}} : index
//       CHECK: %[[REM4:.+]] = arith.remui %[[COUNT]], %c4 : index
//       CHECK: %[[QUADS:.+]] = arith.subi %[[COUNT]], %[[REM4]] : index
//       CHECK: scf.for %{{.+}} = %c0 to %[[QUADS]] step %c4 {
//       CHECK:   scf.for %{{.+}} iter_args({{.+}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
//       CHECK-COUNT-2: arith.extf %{{.+}} : vector<16xf16> to vector<16xf32>
//   CHECK-NOT:     arith.extf
//       CHECK-COUNT-8: vector.fma
//       CHECK:     scf.yield
//       CHECK: scf.for %{{.+}} = %[[QUADS]] to %[[EVEN]] step %c2 {
func.func @decode_f16_tiles(%q: memref<1x?x1x20xf16>, %k: memref<1x1x?x20xf16>, %v: memref<1x1x?x20xf16>,
                            %acc: memref<1x?x1x20xf32>, %m: memref<1x?x1xf32>, %s: memref<1x?x1xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x?x1x20xf16>, memref<1x1x?x20xf16>, memref<1x1x?x20xf16>)
      outs(%acc, %m, %s : memref<1x?x1x20xf32>, memref<1x?x1xf32>, memref<1x?x1xf32>)
  return
}

// bf16 V without the dot product (this run has no bf16-dot: a CPU without
// AVX-512 BF16, or an Intel core, where widening is faster) takes P·V four
// rows a pass as f16 does: each V row widened once for 4 rows x 2 chunks
// of accumulators, then a pair and an odd row.

// CHECK-LABEL: func @decode_bf16_widened_quads
//       CHECK: arith.remui %[[COUNT:.+]], %c2 : index
//       CHECK: %[[REM4:.+]] = arith.remui %[[COUNT]], %c4 : index
//       CHECK: %[[QUADS:.+]] = arith.subi %[[COUNT]], %[[REM4]] : index
//       CHECK: scf.for %{{.+}} = %c0 to %[[QUADS]] step %c4 {
//       CHECK:   scf.for %{{.+}} iter_args({{.+}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
//       CHECK-COUNT-2: arith.extf %{{.+}} : vector<16xbf16> to vector<16xf32>
//   CHECK-NOT:     arith.extf
//       CHECK-COUNT-8: vector.fma
//       CHECK:     scf.yield
//       CHECK: scf.for %{{.+}} = %[[QUADS]] to %{{.+}} step %c2 {
func.func @decode_bf16_widened_quads(%q: memref<1x?x1x20xbf16>, %k: memref<1x1x?x20xbf16>, %v: memref<1x1x?x20xbf16>,
                                     %acc: memref<1x?x1x20xf32>, %m: memref<1x?x1xf32>, %s: memref<1x?x1xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x?x1x20xbf16>, memref<1x1x?x20xbf16>, memref<1x1x?x20xbf16>)
      outs(%acc, %m, %s : memref<1x?x1x20xf32>, memref<1x?x1xf32>, memref<1x?x1xf32>)
  return
}

// A row of 16 chunks (f32 D = 256): the score tiles take its chunks in a
// loop, 16 FMAs (4 rows x 4 keys) an iteration on the 16 accumulators,
// rather than 256 FMAs unrolled.

// CHECK-LABEL: func @decode_group_wide
//       CHECK: scf.for %{{.+}} = %c0 to %{{.+}} step %c4 {
//       CHECK:   %[[TILE:.+]]:16 = scf.for %[[COL:.+]] = %c0 to %c256 step %c16 iter_args(
//       CHECK:     vector.load %{{.+}}[%c0, %c0, %{{.+}}, %[[COL]]] : memref<1x1x?x256xf32, strided<[?, ?, 256, 1]>>, vector<16xf32>
//       CHECK-COUNT-16: vector.fma
//   CHECK-NOT:     vector.fma
//       CHECK:     scf.yield
//       CHECK-COUNT-30: vector.shuffle
func.func @decode_group_wide(%q: memref<1x4x1x256xf32>, %k: memref<1x1x?x256xf32>, %v: memref<1x1x?x256xf32>,
                             %acc: memref<1x4x1x256xf32>, %m: memref<1x4x1xf32>, %s: memref<1x4x1xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x4x1x256xf32>, memref<1x1x?x256xf32>, memref<1x1x?x256xf32>)
      outs(%acc, %m, %s : memref<1x4x1x256xf32>, memref<1x4x1xf32>, memref<1x4x1xf32>)
  return
}

// A soft cap (and the scale before it) goes over the chunk's scores in
// place, one loop over rows and score vectors, before the rows' online
// update: one tanh in the direct path, none in the updates.

// CHECK-LABEL: func @decode_softcap
//       CHECK: scf.for %[[COL:.+]] = %c0 to %c32 step %c16 {
//  CHECK-NEXT:   %[[S:.+]] = vector.load %[[SCORES:.+]][%[[ROW:.+]], %[[COL]]] : memref<16x32xf32>, vector<16xf32>
//  CHECK-NEXT:   %[[SCALED:.+]] = arith.mulf %[[S]]
//  CHECK-NEXT:   %[[DIV:.+]] = arith.mulf %[[SCALED]]
//  CHECK-NEXT:   math.tanh %[[DIV]]
//       CHECK:   vector.store %{{.+}}, %[[SCORES]][%[[ROW]], %[[COL]]]
//   CHECK-NOT: math.tanh
//       CHECK: math.exp2
//   CHECK-NOT: math.tanh
//       CHECK: return
func.func @decode_softcap(%q: memref<1x4x1x20xf32>, %k: memref<1x1x?x20xf32>, %v: memref<1x1x?x20xf32>,
                          %acc: memref<1x4x1x20xf32>, %m: memref<1x4x1xf32>, %s: memref<1x4x1xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x4x1x20xf32>, memref<1x1x?x20xf32>, memref<1x1x?x20xf32>)
      outs(%acc, %m, %s : memref<1x4x1x20xf32>, memref<1x4x1xf32>, memref<1x4x1xf32>) softcap(30.0)
  return
}

// AVX2 (8 lanes, 16 registers): the group's 4 rows take register tiles of
// 4 rows x 2 keys (8 accumulators, one transposing tree of 7 adds for the
// 8 scores; three 8-lane chunks for D = 20), and P·V keeps at most 8
// accumulators: a pair of rows with Dv = 40 (5 chunks each) goes over the
// block's keys twice, 4 chunks and then 1.

// AVX2-LABEL: func @decode_group_avx2
//       AVX2: scf.for %{{.+}} = %c0 to %{{.+}} step %c32 {
//       AVX2:   scf.for %{{.+}} = %c0 to %{{.+}} step %c2 {
//  AVX2-COUNT-24: vector.fma {{.+}} : vector<8xf32>
//  AVX2-COUNT-14: vector.shuffle
//   AVX2-NOT:   vector.reduction
//       AVX2:   scf.for %{{.+}} = %c0 to %c4 step %c2 {
//       AVX2:     scf.for {{.+}} iter_args({{.+}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>) {
//  AVX2-COUNT-8:    vector.fma
//       AVX2:     scf.for {{.+}} iter_args({{.+}}) -> (vector<8xf32>, vector<8xf32>) {
//  AVX2-COUNT-2:    vector.fma
func.func @decode_group_avx2(%q: memref<1x4x1x20xf32, strided<[?, ?, ?, ?], offset: ?>>,
                             %k: memref<1x1x?x20xf32, strided<[?, ?, ?, ?], offset: ?>>,
                             %v: memref<1x1x?x40xf32, strided<[?, ?, ?, ?], offset: ?>>,
                             %acc: memref<1x4x1x40xf32>, %m: memref<1x4x1xf32>, %s: memref<1x4x1xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x4x1x20xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x20xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<1x1x?x40xf32, strided<[?, ?, ?, ?], offset: ?>>)
      outs(%acc, %m, %s : memref<1x4x1x40xf32>, memref<1x4x1xf32>, memref<1x4x1xf32>)
  return
}
