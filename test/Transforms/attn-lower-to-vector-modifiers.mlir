// RUN: attn-opt %s -attn-lower-to-vector -canonicalize -cse | FileCheck %s

// The modifiers in the packed micro-kernel (docs/spec.md, "Score and mask
// modifiers"): each vector of 16 keys gets its global key indices (the
// origin's j plus the block's start plus the lane), the row's global
// indices are scalars. What reads a captured tensor by the key alone (the
// keys' document ids: a clamped gather) is read once per key block, before
// its rows; where the capture's row holds at most 32 elements (known at run
// time) the read is two masked loads and a permute of two registers, the
// index clamped on i32 lanes, instead of the gather; in a longer contiguous
// row, 16 consecutive elements inside it (checked at run time: the lanes'
// indices against the first's plus 0..15) are one vector load, with a
// prefetch into L1 of the element a key block further (what the row reads
// at the next block), and only other reads gather. Before the products, a block of rows to which the mask_mod
// leaves no key is skipped (its keep bits or'ed). The score_mod's ops run
// on vectors where they involve a key index and on scalars where not (the
// head's slope is one clamped scalar load; the key-minus-row distance is
// an i32 subtraction, converted to f32 from i32); it takes the score in natural
// units (the base-2 score times ln 2) and gives it back times log2(e). The mask_mod compares the row's
// document id with the keys' and its false lanes join the exclusions,
// applied after the score_mod. As either may exclude a key for some rows
// only (weight 0, and 0 · NaN is NaN), each key block's packed V is summed
// times 0 once (NaN exactly where it holds an inf or a NaN): P·V then runs
// plain FMAs, or, on a block with a non-finite V, drops each row's
// excluded keys.

// CHECK-LABEL: func @alibi_documents_tile
//  CHECK-SAME: (%{{.+}}, %{{.+}}, %{{.+}}, %[[SLOPES:[a-z0-9]+]]: memref<?xf32>, %[[DOCS:[a-z0-9]+]]: memref<?xi32>, %[[B:[a-z0-9]+]]: index, %[[H:[a-z0-9]+]]: index, %[[I:[a-z0-9]+]]: index, %[[J:[a-z0-9]+]]: index,
//       CHECK: scf.for %[[KB:.+]] = %c0 to %{{.+}} step %c64 {
//       CHECK:   %[[VSUM:.+]] = scf.for {{.+}} -> (vector<16xf32>) {
//       CHECK:     %[[VROW:.+]] = vector.load %[[VPACKED:.+]][%{{.+}}, %c0] : memref<64x16xf32>, vector<16xf32>
//       CHECK:     vector.fma %[[VROW]], %[[ZERO:.+]], %{{.+}} : vector<16xf32>
//       CHECK:   %[[VTOTAL:.+]] = vector.reduction <add>, %[[VSUM]] : vector<16xf32> into f32
//       CHECK:   %[[FINITE:.+]] = arith.cmpf ord, %[[VTOTAL]], %[[VTOTAL]] : f32
//       CHECK:   %[[KEY0:.+]] = arith.addi %[[J]], %[[KB]] : index
//       CHECK:   %[[KEYS:.+]] = arith.addi %{{.+}}, %{{.+}} : vector<16xi32>
//       CHECK:   %[[KEYSX:.+]] = arith.index_cast %[[KEYS]] : vector<16xi32> to vector<16xindex>
//       CHECK:   %[[SHORT:.+]] = arith.cmpi ule, %{{.+}}, %c32 : index
//       CHECK:   %[[DJ:.+]] = scf.if %[[SHORT]] -> (vector<16xi32>) {
//       CHECK:     %[[LOW:.+]] = vector.maskedload %[[DOCS]][%c0]
//       CHECK:     %[[HIGH:.+]] = vector.maskedload %[[DOCS]]
//       CHECK:     %[[JC32:.+]] = arith.minsi %{{.+}}, %{{.+}} : vector<16xi32>
//       CHECK:     llvm.call_intrinsic "llvm.x86.avx512.vpermi2var.d.512"(%[[LOW]], %[[JC32]], %[[HIGH]])
//       CHECK:   } else {
//       CHECK:     %[[FIRST:.+]] = vector.extract %[[KEYSX]][0] : index from vector<16xindex>
//       CHECK:     %[[STEPS:.+]] = arith.addi %{{.+}}, %{{.+}} : vector<16xindex>
//       CHECK:     %[[SAME:.+]] = arith.cmpi eq, %[[KEYSX]], %[[STEPS]] : vector<16xindex>
//       CHECK:     vector.reduction <and>, %[[SAME]] : vector<16xi1> into i1
//       CHECK:     scf.if %{{.+}} -> (vector<16xi32>) {
//       CHECK:       %[[AHEAD:.+]] = arith.addi %[[FIRST]], %c64 : index
//       CHECK:       memref.prefetch %[[DOCS]][%[[AHEAD]]], read, locality<3>, data : memref<?xi32>
//       CHECK:       vector.load %[[DOCS]][%[[FIRST]]] : memref<?xi32>, vector<16xi32>
//       CHECK:     } else {
//       CHECK:     %[[JC:.+]] = arith.minsi %{{.+}}, %{{.+}} : vector<16xindex>
//       CHECK:     vector.gather %{{.+}}[%c0] [%[[JC]]], %{{.+}}, %{{.+}} : memref<?xi32, strided<[1], offset: ?>>, vector<16xindex>, vector<16xi1>, vector<16xi32> into vector<16xi32>
// CHECK-COUNT-3:   vector.gather
//       CHECK:   scf.for %{{.+}} = %c0 to %c64 step %c2 {
//       CHECK:     %[[DI0:.+]] = memref.load %[[DOCS]][%{{.+}}] : memref<?xi32>
//       CHECK:     %[[DIS:.+]] = vector.broadcast %[[DI0]] : i32 to vector<16xi32>
//       CHECK:     arith.cmpi eq, %[[DIS]], %[[DJ]] : vector<16xi32>
//       CHECK:     %[[ANY:.+]] = vector.reduction <or>, %{{.+}} : vector<16xi1> into i1
//       CHECK:     scf.if %[[ANY]] {
//       CHECK:       %[[SCALED:.+]] = arith.mulf %{{.+}}#0, %{{.+}} : vector<16xf32>
//       CHECK:       %[[NATURAL:.+]] = arith.mulf %[[SCALED]], %{{.+}} : vector<16xf32>
//       CHECK:       %[[HC:.+]] = arith.minsi %{{.+}}, %{{.+}} : index
//       CHECK:       %[[SLOPE:.+]] = memref.load %[[SLOPES]][%[[HC]]] : memref<?xf32>
//       CHECK:       %[[D:.+]] = arith.subi %[[KEYS]], %{{.+}} : vector<16xi32>
//       CHECK:       arith.sitofp %[[D]] : vector<16xi32> to vector<16xf32>
//       CHECK:       %[[BIAS:.+]] = arith.mulf %{{.+}}, %{{.+}} : vector<16xf32>
//       CHECK:       %[[MODDED:.+]] = arith.addf %[[NATURAL]], %[[BIAS]] : vector<16xf32>
//       CHECK:       arith.mulf %[[MODDED]], %{{.+}} : vector<16xf32>
//       CHECK:       %[[DI:.+]] = memref.load %[[DOCS]][%{{.+}}] : memref<?xi32>
//   CHECK-NOT:       vector.gather
//       CHECK:       arith.cmpi eq, %{{.+}}, %[[DJ]] : vector<16xi32>
//       CHECK:       scf.if %[[FINITE]] -> (vector<16xf32>, vector<16xf32>) {
//   CHECK-NOT:         arith.select
//       CHECK:         vector.fma
//       CHECK:       } else {
//       CHECK:         arith.cmpf oeq
//       CHECK:         arith.select
//       CHECK:         vector.fma
func.func @alibi_documents_tile(%q: memref<1x1x64x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                      %slopes: memref<?xf32>, %docs: memref<?xi32>,
                      %b: index, %h: index, %i: index, %j: index,
                      %acc: memref<1x1x64x16xf32>, %max: memref<1x1x64xf32>, %sum: memref<1x1x64xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x64x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      origin(%b, %h, %i, %j) captures(%slopes, %docs : memref<?xf32>, memref<?xi32>)
      outs(%acc, %max, %sum : memref<1x1x64x16xf32>, memref<1x1x64xf32>, memref<1x1x64xf32>)
      kernel <packed, query_tile = 64, key_block = 64, row_block = 2>
      score_mod {
      ^bb0(%s: f32, %bb: index, %hh: index, %ii: index, %jj: index):
        %slope = attn.captured 0 [%hh] : f32
        %d = arith.subi %jj, %ii : index
        %di = arith.index_cast %d : index to i64
        %df = arith.sitofp %di : i64 to f32
        %bias = arith.mulf %slope, %df : f32
        %t = arith.addf %s, %bias : f32
        attn.yield %t : f32
      }
      mask_mod {
      ^bb0(%bb: index, %hh: index, %ii: index, %jj: index):
        %di = attn.captured 1 [%ii] : i32
        %dj = attn.captured 1 [%jj] : i32
        %same = arith.cmpi eq, %di, %dj : i32
        attn.yield %same : i1
      }
  return
}

// A block mask's table (attn.block_mask = [capture, query block, key
// block]): before each key block, the packed micro-kernel reads the table
// entries its rows and keys cover (the tile's global rows / 128, the
// block's global keys / 32, each clamped into the table: a [1, 1, ...]
// table broadcasts): where all are 0 it skips the block, K/V packing
// included. Then each block of rows reads its own entries: where all are
// 0 it skips the rows; where all are 2 (full) it runs them without the
// mask_mod (no compare with the keys' ids, gathered once per key block),
// else with it.
// CHECK-LABEL: func @block_table_tile
//  CHECK-SAME: %[[TABLE:[a-z0-9]+]]: memref<?x?x?x?xi32>
//       CHECK: scf.for %[[KB:.+]] =
//       CHECK:   %[[ENTRIES:.+]]:2 = scf.for %[[QBI:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%{{.+}} = %false, %{{.+}} = %true) -> (i1, i1) {
//       CHECK:     scf.for %[[KBI:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[ANY:.+]] = %{{.+}}, %[[ALL:.+]] = %{{.+}}) -> (i1, i1) {
//       CHECK:       %[[E:.+]] = memref.load %[[TABLE]][%{{.+}}, %{{.+}}, %[[QBI]], %[[KBI]]] : memref<?x?x?x?xi32>
//       CHECK:       %[[NZ:.+]] = arith.cmpi ne, %[[E]], %c0_i32 : i32
//       CHECK:       %[[FULL:.+]] = arith.cmpi eq, %[[E]], %c2_i32 : i32
//       CHECK:       arith.ori %[[ANY]], %[[NZ]] : i1
//       CHECK:       arith.andi %[[ALL]], %[[FULL]] : i1
//       CHECK:   scf.if %[[ENTRIES]]#0 {
//       CHECK:     %[[DJ:.+]] = scf.if %{{.+}} -> (vector<16xi32>) {
//       CHECK:     scf.for %[[FIRST:.+]] = %c0 to %c64 step %c2 {
//       CHECK:       %[[ROWS:.+]]:2 = scf.for %{{.+}} iter_args(%{{.+}} = %false, %{{.+}} = %true) -> (i1, i1) {
//       CHECK:         memref.load %[[TABLE]]
//       CHECK:       scf.if %[[ROWS]]#0 {
//       CHECK:         scf.if %[[ROWS]]#1 {
//   CHECK-NOT:           arith.cmpi eq, %{{.+}}, %[[DJ]]
//       CHECK:         } else {
//       CHECK:           arith.cmpi eq, %{{.+}}, %[[DJ]]
func.func @block_table_tile(%q: memref<1x1x64x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                      %docs: memref<?xi32>, %table: memref<?x?x?x?xi32>,
                      %b: index, %h: index, %i: index, %j: index,
                      %acc: memref<1x1x64x16xf32>, %max: memref<1x1x64xf32>, %sum: memref<1x1x64xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x64x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      origin(%b, %h, %i, %j) captures(%docs, %table : memref<?xi32>, memref<?x?x?x?xi32>)
      outs(%acc, %max, %sum : memref<1x1x64x16xf32>, memref<1x1x64xf32>, memref<1x1x64xf32>)
      kernel <packed, query_tile = 64, key_block = 64, row_block = 2>
      mask_mod {
      ^bb0(%bb: index, %hh: index, %ii: index, %jj: index):
        %di = attn.captured 0 [%ii] : i32
        %dj = attn.captured 0 [%jj] : i32
        %same = arith.cmpi eq, %di, %dj : i32
        attn.yield %same : i1
      } {attn.block_mask = array<i64: 1, 128, 32>}
  return
}

// The score_mod in the lane-rows micro-kernel: query rows are in the lanes,
// so each score vector's row indices are a vector (the tile's global first
// row plus 16·v plus the lane, made once per block) and its key index a
// scalar (the origin's j plus the block's start plus the key). The head's
// slope is the same clamped scalar load; the score goes to natural units
// and back as in the packed kernel, before the keys past the block are
// excluded. P·V leaves a row's accumulator as it is where the key's weight
// is 0 (a masked FMA on AVX-512): the score_mod may exclude by −inf.
// CHECK-LABEL: func @alibi_lane_rows_tile
//  CHECK-SAME: %[[SLOPES:[a-z0-9]+]]: memref<?xf32>, %{{.+}}: index, %[[H:[a-z0-9]+]]: index, %[[I:[a-z0-9]+]]: index, %[[J:[a-z0-9]+]]: index,
//       CHECK: %[[ROW0:.+]] = arith.index_cast %[[I]] : index to i32
//       CHECK: %[[LANE:.+]] = vector.step : vector<16xindex>
//       CHECK: %[[LANE32:.+]] = arith.index_cast %[[LANE]] : vector<16xindex> to vector<16xi32>
//       CHECK: %[[ROW0V:.+]] = vector.broadcast %[[ROW0]] : i32 to vector<16xi32>
//       CHECK: %[[ROWS:.+]] = arith.addi %[[ROW0V]], %[[LANE32]] : vector<16xi32>
//       CHECK: %[[KEY:.+]] = arith.addi %[[J]], %{{.+}} : index
//       CHECK: %[[KEY32:.+]] = arith.index_cast %[[KEY]] : index to i32
//       CHECK: %[[NATURAL:.+]] = arith.mulf %{{.+}}, %{{.+}} : vector<16xf32>
//       CHECK: %[[SLOPE:.+]] = memref.load %[[SLOPES]][%{{.+}}] : memref<?xf32>
//       CHECK: %[[KEYV:.+]] = vector.broadcast %[[KEY32]] : i32 to vector<16xi32>
//       CHECK: %[[D:.+]] = arith.subi %[[KEYV]], %[[ROWS]] : vector<16xi32>
//       CHECK: arith.sitofp %[[D]] : vector<16xi32> to vector<16xf32>
//       CHECK: %[[BIAS:.+]] = arith.mulf %{{.+}}, %{{.+}} : vector<16xf32>
//       CHECK: %[[MODDED:.+]] = arith.addf %[[NATURAL]], %[[BIAS]] : vector<16xf32>
//       CHECK: %[[BASE2:.+]] = arith.mulf %[[MODDED]], %{{.+}} : vector<16xf32>
//       CHECK: arith.select %{{.+}}, %[[BASE2]], %{{.+}} : vector<16xf32>
//       CHECK: %[[KEPT:.+]] = arith.cmpf une, %[[WEIGHT:.+]], %{{.+}} : vector<16xf32>
//       CHECK: %[[PV:.+]] = vector.fma %{{.+}}, %[[WEIGHT]], %[[OLD:.+]] : vector<16xf32>
//       CHECK: arith.select %[[KEPT]], %[[PV]], %[[OLD]] : vector<16xi1>, vector<16xf32>
func.func @alibi_lane_rows_tile(%q: memref<1x1x64x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                      %slopes: memref<?xf32>,
                      %b: index, %h: index, %i: index, %j: index,
                      %acc: memref<1x1x64x16xf32>, %max: memref<1x1x64xf32>, %sum: memref<1x1x64xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x64x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      origin(%b, %h, %i, %j) captures(%slopes : memref<?xf32>)
      outs(%acc, %max, %sum : memref<1x1x64x16xf32>, memref<1x1x64xf32>, memref<1x1x64xf32>)
      kernel <lane_rows, query_tile = 64, key_block = 64, row_block = 4, lane_rows = 64>
      score_mod {
      ^bb0(%s: f32, %bb: index, %hh: index, %ii: index, %jj: index):
        %slope = attn.captured 0 [%hh] : f32
        %d = arith.subi %jj, %ii : index
        %di = arith.index_cast %d : index to i64
        %df = arith.sitofp %di : i64 to f32
        %bias = arith.mulf %slope, %df : f32
        %t = arith.addf %s, %bias : f32
        attn.yield %t : f32
      }
  return
}

// The mask_mod in the lane-rows micro-kernel: as the score_mod above, each
// score vector's row indices are a vector and its key index a scalar, so
// the query's document ids are a gather (clamped row indices) and the
// key's a scalar load, broadcast; the false lanes score -inf before the
// keys past the block are excluded. The block mask's table works as in
// the packed kernel, per lane-rows tile: a key block whose entries are all
// 0 is skipped, one whose entries are all 2 runs without the mask_mod. In
// the others the rows' document ids are gathered once, then the mask_mod
// runs over the block's keys for every row until one is kept: a block it
// leaves no key of is skipped too.
// CHECK-LABEL: func @documents_lane_rows_tile
//  CHECK-SAME: %[[DOCS:[a-z0-9]+]]: memref<?xi32>, %[[TABLE:[a-z0-9]+]]: memref<?x?x?x?xi32>
//       CHECK: %[[ENTRIES:.+]]:2 = scf.for
//       CHECK:   memref.load %[[TABLE]]
//       CHECK: scf.if %[[ENTRIES]]#0 {
//       CHECK:   scf.if %[[ENTRIES]]#1 {
//   CHECK-NOT:     vector.gather
//       CHECK:   } else {
//       CHECK:     %[[DI:.+]] = scf.if %{{.+}} -> (vector<16xi32>) {
//       CHECK:       vector.gather %{{.+}}[%c0] [%{{.+}}], %{{.+}}, %{{.+}} : memref<?xi32, strided<[1], offset: ?>>, vector<16xindex>, vector<16xi1>, vector<16xi32> into vector<16xi32>
// CHECK-COUNT-3:     vector.gather
//       CHECK:     %[[SEEN:.+]]:2 = scf.while (%{{.+}} = %c0, %{{.+}} = %false) : (index, i1) -> (index, i1) {
//       CHECK:     } do {
//   CHECK-NOT:       vector.gather
//       CHECK:       memref.load %[[DOCS]]
//       CHECK:       arith.cmpi eq, %[[DI]], %{{.+}} : vector<16xi32>
//       CHECK:       vector.reduction <or>, %{{.+}} : vector<16xi1> into i1
//       CHECK:     scf.if %[[SEEN]]#1 {
//   CHECK-NOT:       vector.gather
//       CHECK:       %[[DJ:.+]] = memref.load %[[DOCS]][%{{.+}}] : memref<?xi32>
//       CHECK:       %[[DJV:.+]] = vector.broadcast %[[DJ]] : i32 to vector<16xi32>
//       CHECK:       %[[SAME:.+]] = arith.cmpi eq, %[[DI]], %[[DJV]] : vector<16xi32>
//       CHECK:       %[[KEPT:.+]] = arith.select %[[SAME]], %{{.+}}, %[[NEGINF:.+]] : vector<16xi1>, vector<16xf32>
//       CHECK:       arith.select %{{.+}}, %[[KEPT]], %[[NEGINF]] : vector<16xf32>
func.func @documents_lane_rows_tile(%q: memref<1x1x64x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                      %docs: memref<?xi32>, %table: memref<?x?x?x?xi32>,
                      %b: index, %h: index, %i: index, %j: index,
                      %acc: memref<1x1x64x16xf32>, %max: memref<1x1x64xf32>, %sum: memref<1x1x64xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x64x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      origin(%b, %h, %i, %j) captures(%docs, %table : memref<?xi32>, memref<?x?x?x?xi32>)
      outs(%acc, %max, %sum : memref<1x1x64x16xf32>, memref<1x1x64xf32>, memref<1x1x64xf32>)
      kernel <lane_rows, query_tile = 64, key_block = 64, row_block = 4, lane_rows = 64>
      mask_mod {
      ^bb0(%bb: index, %hh: index, %ii: index, %jj: index):
        %di = attn.captured 0 [%ii] : i32
        %dj = attn.captured 0 [%jj] : i32
        %same = arith.cmpi eq, %di, %dj : i32
        attn.yield %same : i1
      } {attn.block_mask = array<i64: 1, 128, 32>}
  return
}

// A mask_mod as the Python package traces it compares the ids cast to
// index; on vectors the comparison takes the i32 ids themselves (sign
// extension keeps equality and order), one register of 16 lanes, not two
// of 16 i64.
// CHECK-LABEL: func @documents_as_index_tile
//       CHECK: %[[DJ:.+]] = scf.if %{{.+}} -> (vector<16xi32>) {
//       CHECK: scf.for %{{.+}} = %c0 to %c64 step %c2 {
//       CHECK:   arith.cmpi eq, %{{.+}}, %[[DJ]] : vector<16xi32>
//   CHECK-NOT:   arith.cmpi {{.+}} : vector<16xindex>
//       CHECK: return
func.func @documents_as_index_tile(%q: memref<1x1x64x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                      %docs: memref<?xi32>,
                      %b: index, %h: index, %i: index, %j: index,
                      %acc: memref<1x1x64x16xf32>, %max: memref<1x1x64xf32>, %sum: memref<1x1x64xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x64x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      origin(%b, %h, %i, %j) captures(%docs : memref<?xi32>)
      outs(%acc, %max, %sum : memref<1x1x64x16xf32>, memref<1x1x64xf32>, memref<1x1x64xf32>)
      kernel <packed, query_tile = 64, key_block = 64, row_block = 2>
      mask_mod {
      ^bb0(%bb: index, %hh: index, %ii: index, %jj: index):
        %di = attn.captured 0 [%ii] : i32
        %dix = arith.index_cast %di : i32 to index
        %dj = attn.captured 0 [%jj] : i32
        %djx = arith.index_cast %dj : i32 to index
        %same = arith.cmpi eq, %dix, %djx : index
        attn.yield %same : i1
      }
  return
}

// Index arithmetic on lanes runs in i32 where every value it makes lies in
// i32's range (the indices are below 2³¹: docs/spec.md): a chunked mask's
// floor divisions and their comparison take 16 lanes a register. A product
// of two indices may pass 2³¹ and stays on index lanes.
// CHECK-LABEL: func @index_arithmetic_tile
//       CHECK: scf.for %{{.+}} = %c0 to %c64 step %c2 {
//       CHECK:   arith.floordivsi %{{.+}}, %{{.+}} : vector<16xi32>
//       CHECK:   arith.cmpi eq, %{{.+}}, %{{.+}} : vector<16xi32>
//       CHECK:   arith.muli %{{.+}}, %{{.+}} : vector<16xindex>
//       CHECK:   arith.cmpi slt, %{{.+}}, %{{.+}} : vector<16xindex>
//       CHECK: return
func.func @index_arithmetic_tile(%q: memref<1x1x64x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                      %b: index, %h: index, %i: index, %j: index,
                      %acc: memref<1x1x64x16xf32>, %max: memref<1x1x64xf32>, %sum: memref<1x1x64xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x64x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      origin(%b, %h, %i, %j)
      outs(%acc, %max, %sum : memref<1x1x64x16xf32>, memref<1x1x64xf32>, memref<1x1x64xf32>)
      kernel <packed, query_tile = 64, key_block = 64, row_block = 2>
      mask_mod {
      ^bb0(%bb: index, %hh: index, %ii: index, %jj: index):
        %c7 = arith.constant 7 : index
        %c1000 = arith.constant 1000 : index
        %ci = arith.floordivsi %ii, %c7 : index
        %cj = arith.floordivsi %jj, %c7 : index
        %chunk = arith.cmpi eq, %ci, %cj : index
        %product = arith.muli %ii, %jj : index
        %small = arith.cmpi slt, %product, %c1000 : index
        %keep = arith.ori %chunk, %small : i1
        attn.yield %keep : i1
      }
  return
}
