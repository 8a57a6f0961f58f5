// RUN: attn-opt %s -split-input-file -attn-lower-to-vector="direct-rows=0" -canonicalize | FileCheck %s
// RUN: attn-opt %s -split-input-file -attn-lower-to-vector="direct-rows=0" -convert-scf-to-cf -convert-vector-to-llvm="enable-amx enable-x86vector" | FileCheck %s --check-prefix=LLVM
// RUN: attn-opt %s -split-input-file -attn-lower-to-vector="direct-rows=0" -attn-emulate-amx | FileCheck %s --check-prefix=EMULATED

// #attn.kernel<amx>: the packed path with blocks of 16 query rows (a
// tile's) whose two products run on AMX tiles. K is packed as bf16 pairs of
// head dims (KP[d/2][2j + d%2]) and V as key pairs (VP2[j/2][2e + j%2]):
// the VNNI layout of a tile multiply's right operand. Per block of rows the
// Q rows are copied into a bf16 buffer (the left tiles); Q·Kᵀ is 4 f32
// tiles of 16 keys, each summed over D in steps of 32 (one Q tile shared
// by the 4 K tiles of a step), stored for the softmax; the rows' updates
// (AVX-512) store p as bf16; P·V is one f32 tile per 16 columns of Dv,
// summed over the block's keys 32 at a time, stored, and added to each
// row's rescaled accumulator. A slot that repeats the last row (the last
// block's) copies the previous slot's weights and alpha and adds nothing.

// CHECK-LABEL: func @amx
//   CHECK-DAG: %[[KP:.+]] = memref.alloca() {alignment = 64 : i64} : memref<32x128xbf16>
//   CHECK-DAG: %[[VP:.+]] = memref.alloca() {alignment = 64 : i64} : memref<32x64xbf16>
//   CHECK-DAG: %[[PV:.+]] = memref.alloca() {alignment = 64 : i64} : memref<16x32xf32>
// The pair rows past a partial block's keys are zero.
//       CHECK: %[[LIVE:.+]] = arith.ceildivui %{{.+}}, %c2
//       CHECK: scf.for %[[ROW:.+]] = %[[LIVE]] to %c32 step %c1
//       CHECK:   vector.store %{{.+}}, %[[VP]][%[[ROW]], %c0] : memref<32x64xbf16>, vector<32xbf16>
//       CHECK:   vector.store %{{.+}}, %[[VP]][%[[ROW]], %c32] : memref<32x64xbf16>, vector<32xbf16>
// Blocks of 16 rows: Q copied, 32 head dims a store.
//       CHECK: scf.for %{{.+}} = %c0 to %{{.+}} step %c16
//       CHECK:   vector.store %{{.+}}, %[[QT:.+]][%c0, %c0] : memref<16x64xbf16>, vector<32xbf16>
//       CHECK:   vector.store %{{.+}}, %[[QT]][%c15, %c32] : memref<16x64xbf16>, vector<32xbf16>
// Q·Kᵀ: 4 score tiles, 2 steps of 32 head dims.
//  CHECK-COUNT-4:   amx.tile_zero : !amx.tile<16x16xf32>
//       CHECK:   %[[Q0:.+]] = amx.tile_load %[[QT]][%c0, %c0] : memref<16x64xbf16> into !amx.tile<16x32xbf16>
//       CHECK:   %[[K00:.+]] = amx.tile_load %[[KP]][%c0, %c0] : memref<32x128xbf16> into !amx.tile<16x32xbf16>
//       CHECK:   amx.tile_mulf %[[Q0]], %[[K00]], %{{.+}} : !amx.tile<16x32xbf16>, !amx.tile<16x32xbf16>, !amx.tile<16x16xf32>
//       CHECK:   amx.tile_load %[[KP]][%c0, %c96]
//       CHECK:   %[[Q1:.+]] = amx.tile_load %[[QT]][%c0, %c32]
//       CHECK:   %[[K10:.+]] = amx.tile_load %[[KP]][%c16, %c0]
//       CHECK:   %[[S0:.+]] = amx.tile_mulf %[[Q1]], %[[K10]]
//       CHECK:   amx.tile_store %[[S:.+]][%c0, %c0], %[[S0]] : memref<16x64xf32>, !amx.tile<16x16xf32>
//       CHECK:   amx.tile_store %[[S]][%c0, %c48], %{{.+}} : memref<16x64xf32>, !amx.tile<16x16xf32>
// The first row's update: its 4 score vectors, p stored as bf16.
//       CHECK:   vector.load %[[S]][%c0, %c0] : memref<16x64xf32>, vector<16xf32>
//       CHECK:   math.exp2
//       CHECK:   vector.store %{{.+}}, %[[PP:.+]][%c0, %c48] : memref<16x64xbf16>, vector<16xbf16>
// The next rows' under a check that the slot is a new row, else the
// previous slot's weights and alpha.
//       CHECK:   %[[ALPHA1:.+]] = scf.if %{{.+}} -> (f32) {
//       CHECK:     vector.load %[[S]][%c1, %c0]
//       CHECK:   } else {
//       CHECK:     %[[COPY:.+]] = vector.load %[[PP]][%c0, %c0] : memref<16x64xbf16>, vector<16xbf16>
//       CHECK:     vector.store %[[COPY]], %[[PP]][%c1, %c0]
//       CHECK:     scf.yield %{{.+}} : f32
// P·V: 2 column tiles (Dv = 32), 2 steps of 32 keys.
//       CHECK:   %[[Z0:.+]] = amx.tile_zero : !amx.tile<16x16xf32>
//       CHECK:   %[[Z1:.+]] = amx.tile_zero : !amx.tile<16x16xf32>
//       CHECK:   %[[P0:.+]] = amx.tile_load %[[PP]][%c0, %c0] : memref<16x64xbf16> into !amx.tile<16x32xbf16>
//       CHECK:   %[[V00:.+]] = amx.tile_load %[[VP]][%c0, %c0] : memref<32x64xbf16> into !amx.tile<16x32xbf16>
//       CHECK:   amx.tile_mulf %[[P0]], %[[V00]], %[[Z0]]
//       CHECK:   amx.tile_load %[[VP]][%c0, %c32]
//       CHECK:   %[[P1:.+]] = amx.tile_load %[[PP]][%c0, %c32]
//       CHECK:   amx.tile_load %[[VP]][%c16, %c0]
//       CHECK:   amx.tile_store %[[PV]][%c0, %c0], %{{.+}} : memref<16x32xf32>, !amx.tile<16x16xf32>
//       CHECK:   amx.tile_store %[[PV]][%c0, %c16], %{{.+}} : memref<16x32xf32>, !amx.tile<16x16xf32>
// acc = alpha·acc + P·V, the first row at once, the others if new.
//       CHECK:   %[[BLOCK:.+]] = vector.load %[[PV]][%c0, %c0] : memref<16x32xf32>, vector<16xf32>
//       CHECK:   %[[NEW:.+]] = vector.fma %{{.+}}, %{{.+}}, %[[BLOCK]] : vector<16xf32>
//       CHECK:   vector.store %[[NEW]], %{{.+}} : memref<1x1x?x32xf32>, vector<16xf32>
//       CHECK:   scf.if
//       CHECK:     vector.broadcast %[[ALPHA1]]
//       CHECK:     vector.load %[[PV]][%c1, %c0]

// LLVM: llvm.call_intrinsic "llvm.x86.tilezero.internal"
// LLVM: llvm.call_intrinsic "llvm.x86.tileloadd64.internal"
// LLVM: llvm.call_intrinsic "llvm.x86.tdpbf16ps.internal"
// LLVM: llvm.call_intrinsic "llvm.x86.tilestored64.internal"

// The emulation: no tile operation is left; a multiply is a loop over the
// 16 pairs of a tile row, two products a step (B's VNNI pairs).
// EMULATED-LABEL: func @amx
//   EMULATED-NOT: amx.
//       EMULATED: scf.for %{{.+}} = %c0{{.*}} to %c16{{.*}} step %c1{{.*}} iter_args(%{{.+}} = %{{.+}}) -> (f32)
//       EMULATED:   arith.extf %{{.+}} : bf16 to f32
//       EMULATED:   arith.mulf
//       EMULATED:   arith.addf
//       EMULATED:   arith.mulf
//       EMULATED:   arith.addf
//   EMULATED-NOT: amx.
func.func @amx(%q: memref<1x1x?x64xbf16>, %k: memref<1x1x?x64xbf16>, %v: memref<1x1x?x32xbf16>,
               %acc: memref<1x1x?x32xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x64xbf16>, memref<1x1x?x64xbf16>, memref<1x1x?x32xbf16>)
      outs(%acc, %m, %s : memref<1x1x?x32xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
      kernel <amx, query_tile = 64, key_block = 64, row_block = 16, bf16_dot = true>
  return
}

// -----

// A masked op keeps P·V off the tiles (f32 FMAs drop an excluded key's V,
// even a NaN); its scores still take them.

// CHECK-LABEL: func @amx_masked
//       CHECK: amx.tile_mulf
//       CHECK: arith.cmpf oeq
//   CHECK-NOT: amx.tile_load %{{.+}} : memref<16x64xbf16>
//       CHECK: vector.fma
func.func @amx_masked(%q: memref<1x1x?x32xbf16>, %k: memref<1x1x?x32xbf16>, %v: memref<1x1x?x32xbf16>,
                      %mask: memref<1x1x?x?xi1>,
                      %acc: memref<1x1x?x32xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x32xbf16>, memref<1x1x?x32xbf16>, memref<1x1x?x32xbf16>)
      mask(%mask : memref<1x1x?x?xi1>)
      outs(%acc, %m, %s : memref<1x1x?x32xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
      kernel <amx, query_tile = 64, key_block = 64, row_block = 16, bf16_dot = true>
  return
}
