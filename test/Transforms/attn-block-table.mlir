// RUN: attn-opt %s -split-input-file -verify-diagnostics -attn-block-table -canonicalize -cse | FileCheck %s

// A kernel whose op names a block table (attn.block_mask = [capture, QB,
// KB]) gets @<f>_block_table: its arguments, an attn.kernel forall over the
// table's rows [TB, TH, ceil(Sq/QB)], and per key block the mask_mod on
// 16 keys at a time (keys in lanes, those past the block's end not
// counted), reduced to "any kept" and "all kept" over the batches, heads
// and rows the entry covers, then 0 / 1 / 2 (2 only for a whole QB x KB
// block). The mask_mod reads h, so a table dim of 1 for the heads covers
// them all (select on TH == 1); it does not read b: one batch per entry.
// CHECK-LABEL: func.func @heads(
// CHECK-LABEL: func.func @heads_block_table(
//  CHECK-SAME:   %[[Q:[a-z0-9]+]]: memref<?x?x?x16xf32>, %[[K:[a-z0-9]+]]: memref<?x?x?x16xf32>, %{{.+}}: memref<?x?x?x16xf32>, %[[T:[a-z0-9]+]]: memref<?x?x?x?xi32>, %{{.+}}: memref<?x?x?x16xf32>) attributes {attn.kernel}
//   CHECK-DAG:   %[[HQ:.+]] = memref.dim %[[Q]], %c1
//   CHECK-DAG:   %[[SQ:.+]] = memref.dim %[[Q]], %c2
//   CHECK-DAG:   %[[SK:.+]] = memref.dim %[[K]], %c2
//   CHECK-DAG:   %[[TB:.+]] = memref.dim %[[T]], %c0
//   CHECK-DAG:   %[[TH:.+]] = memref.dim %[[T]], %c1
//   CHECK-DAG:   %[[TQ:.+]] = memref.dim %[[T]], %c2
//   CHECK-DAG:   %[[TK:.+]] = memref.dim %[[T]], %c3
//       CHECK:   scf.forall (%[[TBI:.+]], %[[THI:.+]], %[[QB:.+]]) in (%[[TB]], %[[TH]], %[[TQ]]) {
//       CHECK:     %[[R0:.+]] = arith.muli %[[QB]], %c128
//       CHECK:     %[[R1:.+]] = arith.addi %[[R0]], %c128
//       CHECK:     %[[REND:.+]] = arith.minsi %[[R1]], %[[SQ]]
//       CHECK:     %[[WHOLEROWS:.+]] = arith.cmpi eq, %[[R1]], %[[REND]]
//       CHECK:     %[[BCAST:.+]] = arith.cmpi eq, %[[TH]], %c1
//       CHECK:     %[[HLO:.+]] = arith.select %[[BCAST]], %c0, %[[THI]]
//       CHECK:     %[[HHI:.+]] = arith.select %[[BCAST]], %[[HQ]], %{{.+}}
//       CHECK:     %[[LANES:.+]] = vector.step : vector<16xindex>
//       CHECK:     scf.for %[[KB:.+]] = %c0 to %[[TK]] step %c1 {
//       CHECK:       %[[K0:.+]] = arith.muli %[[KB]], %c64
//       CHECK:       %[[KEND:.+]] = arith.minsi %{{.+}}, %[[SK]]
//       CHECK:       scf.for %{{.+}} = %[[TBI]] to %{{.+}} step %c1 iter_args(%{{.+}} = %false, %{{.+}} = %true)
//       CHECK:         scf.for %[[H:.+]] = %[[HLO]] to %[[HHI]] step %c1
//       CHECK:           scf.for %[[I:.+]] = %[[R0]] to %[[REND]] step %c1
//       CHECK:             scf.for %[[J:.+]] = %[[K0]] to %[[KEND]] step %c16
//       CHECK:               %[[JS:.+]] = arith.addi %{{.+}}, %[[LANES]] : vector<16xindex>
//       CHECK:               %[[INSIDE:.+]] = arith.cmpi slt, %[[JS]], %{{.+}} : vector<16xindex>
//       CHECK:               %[[D:.+]] = arith.addi %[[H]], %[[I]] : index
//       CHECK:               %[[DV:.+]] = vector.broadcast %[[D]]
//       CHECK:               %[[KEEP:.+]] = arith.cmpi ule, %[[JS]], %[[DV]] : vector<16xindex>
//       CHECK:               %[[KEPT:.+]] = arith.andi %[[KEEP]], %[[INSIDE]]
//       CHECK:               vector.reduction <or>, %[[KEPT]]
//       CHECK:               vector.reduction <and>
//       CHECK:       %[[ENTRY:.+]] = arith.select %{{.+}}, %{{.+}}, %c0_i32 : i32
//       CHECK:       memref.store %[[ENTRY]], %[[T]][%[[TBI]], %[[THI]], %[[QB]], %[[KB]]]
func.func @heads(%q: memref<?x?x?x16xf32>, %k: memref<?x?x?x16xf32>, %v: memref<?x?x?x16xf32>,
                 %table: memref<?x?x?x?xi32>, %o: memref<?x?x?x16xf32>) attributes {attn.kernel} {
  %c0 = arith.constant 0 : index
  %b = memref.dim %q, %c0 : memref<?x?x?x16xf32>
  scf.forall (%i) in (%b) {
    %acc = memref.alloca() : memref<1x1x64x16xf32>
    %max = memref.alloca() : memref<1x1x64xf32>
    %sum = memref.alloca() : memref<1x1x64xf32>
    %qs = memref.subview %q[%i, 0, 0, 0] [1, 1, 64, 16] [1, 1, 1, 1] : memref<?x?x?x16xf32> to memref<1x1x64x16xf32, strided<[?, ?, 16, 1], offset: ?>>
    %ks = memref.subview %k[%i, 0, 0, 0] [1, 1, 64, 16] [1, 1, 1, 1] : memref<?x?x?x16xf32> to memref<1x1x64x16xf32, strided<[?, ?, 16, 1], offset: ?>>
    %vs = memref.subview %v[%i, 0, 0, 0] [1, 1, 64, 16] [1, 1, 1, 1] : memref<?x?x?x16xf32> to memref<1x1x64x16xf32, strided<[?, ?, 16, 1], offset: ?>>
    attn.online_attention ins(%qs, %ks, %vs : memref<1x1x64x16xf32, strided<[?, ?, 16, 1], offset: ?>>, memref<1x1x64x16xf32, strided<[?, ?, 16, 1], offset: ?>>, memref<1x1x64x16xf32, strided<[?, ?, 16, 1], offset: ?>>)
        origin(%i, %c0, %c0, %c0) captures(%table : memref<?x?x?x?xi32>)
        outs(%acc, %max, %sum : memref<1x1x64x16xf32>, memref<1x1x64xf32>, memref<1x1x64xf32>)
        mask_mod {
        ^bb0(%bb: index, %hh: index, %ii: index, %jj: index):
          %d = arith.addi %hh, %ii : index
          %keep = arith.cmpi ule, %jj, %d : index
          attn.yield %keep : i1
        } {attn.block_mask = array<i64: 0, 128, 64>}
  }
  return
}

// -----

// A kernel without a block table gets no such function.
// CHECK-LABEL: func.func @no_table(
//   CHECK-NOT: no_table_block_table
func.func @no_table(%q: memref<1x1x64x16xf32>, %ids: memref<?xi32>,
                    %acc: memref<1x1x64x16xf32>, %max: memref<1x1x64xf32>, %sum: memref<1x1x64xf32>) attributes {attn.kernel} {
  %c0 = arith.constant 0 : index
  attn.online_attention ins(%q, %q, %q : memref<1x1x64x16xf32>, memref<1x1x64x16xf32>, memref<1x1x64x16xf32>)
      origin(%c0, %c0, %c0, %c0) captures(%ids : memref<?xi32>)
      outs(%acc, %max, %sum : memref<1x1x64x16xf32>, memref<1x1x64xf32>, memref<1x1x64xf32>)
      mask_mod {
      ^bb0(%bb: index, %hh: index, %ii: index, %jj: index):
        %x = attn.captured 0 [%ii] : i32
        %y = attn.captured 0 [%jj] : i32
        %keep = arith.cmpi eq, %x, %y : i32
        attn.yield %keep : i1
      }
  return
}

// -----

// The captures must be the kernel's arguments (after bufferization).
func.func @local_table(%q: memref<1x1x64x16xf32>,
                       %acc: memref<1x1x64x16xf32>, %max: memref<1x1x64xf32>, %sum: memref<1x1x64xf32>) attributes {attn.kernel} {
  %c0 = arith.constant 0 : index
  %table = memref.alloca() : memref<1x1x1x1xi32>
  // expected-error @+1 {{attn-block-table: the captures must be the kernel function's arguments}}
  attn.online_attention ins(%q, %q, %q : memref<1x1x64x16xf32>, memref<1x1x64x16xf32>, memref<1x1x64x16xf32>)
      origin(%c0, %c0, %c0, %c0) captures(%table : memref<1x1x1x1xi32>)
      outs(%acc, %max, %sum : memref<1x1x64x16xf32>, memref<1x1x64xf32>, memref<1x1x64xf32>)
      mask_mod {
      ^bb0(%bb: index, %hh: index, %ii: index, %jj: index):
        %keep = arith.cmpi ule, %jj, %ii : index
        attn.yield %keep : i1
      } {attn.block_mask = array<i64: 0, 64, 64>}
  return
}
