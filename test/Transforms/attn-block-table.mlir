// RUN: attn-opt %s -split-input-file -verify-diagnostics -attn-block-table -canonicalize -cse | FileCheck %s

// A kernel whose op names a block table (attn.block_mask = [capture, QB,
// KB]) gets @<f>_block_table: Q, K and the captures as memrefs of any
// strides, an attn.kernel forall over the table's rows [TB, TH,
// ceil(Sq/QB)], and per key block the mask_mod on 16 keys at a time (keys
// in lanes, those past the block's end not counted), reduced to "any kept"
// and "all kept" over the batches, heads and rows the entry covers, then
// 0 / 1 / 2 (2 only for a whole QB x KB block). The mask_mod reads h, so a
// table dim of 1 for the heads covers them all (select on TH == 1); it does
// not read b: one batch per entry. The kernel itself is left as it was.
// CHECK-LABEL: func.func @heads(
//       CHECK:   attn.attention
// CHECK-LABEL: func.func @heads_block_table(
//  CHECK-SAME:   %[[Q:[a-z0-9]+]]: memref<?x?x?x16xf32, strided<[?, ?, ?, ?], offset: ?>>, %[[K:[a-z0-9]+]]: memref<?x?x?x16xf32, strided<[?, ?, ?, ?], offset: ?>>, %[[T:[a-z0-9]+]]: memref<?x?x?x?xi32, strided<[?, ?, ?, ?], offset: ?>>) attributes {attn.kernel}
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
func.func @heads(%q: tensor<?x?x?x16xf32>, %k: tensor<?x?x?x16xf32>, %v: tensor<?x?x?x16xf32>,
                 %table: tensor<?x?x?x?xi32>, %o: tensor<?x?x?x16xf32>) -> tensor<?x?x?x16xf32> attributes {attn.kernel} {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x16xf32>, tensor<?x?x?x16xf32>, tensor<?x?x?x16xf32>)
      captures(%table : tensor<?x?x?x?xi32>) outs(%o : tensor<?x?x?x16xf32>)
      mask_mod {
      ^bb0(%bb: index, %hh: index, %ii: index, %jj: index):
        %d = arith.addi %hh, %ii : index
        %keep = arith.cmpi ule, %jj, %d : index
        attn.yield %keep : i1
      } {attn.block_mask = array<i64: 0, 128, 64>} -> tensor<?x?x?x16xf32>
  return %r : tensor<?x?x?x16xf32>
}

// -----

// A kernel without a block table gets no such function.
// CHECK-LABEL: func.func @no_table(
//   CHECK-NOT: no_table_block_table
func.func @no_table(%q: tensor<1x1x64x16xf32>, %ids: tensor<?xi32>, %o: tensor<1x1x64x16xf32>) -> tensor<1x1x64x16xf32> attributes {attn.kernel} {
  %r = attn.attention ins(%q, %q, %q : tensor<1x1x64x16xf32>, tensor<1x1x64x16xf32>, tensor<1x1x64x16xf32>)
      captures(%ids : tensor<?xi32>) outs(%o : tensor<1x1x64x16xf32>)
      mask_mod {
      ^bb0(%bb: index, %hh: index, %ii: index, %jj: index):
        %x = attn.captured 0 [%ii] : i32
        %y = attn.captured 0 [%jj] : i32
        %keep = arith.cmpi eq, %x, %y : i32
        attn.yield %keep : i1
      } -> tensor<1x1x64x16xf32>
  return %r : tensor<1x1x64x16xf32>
}

// -----

// Q, K and the captures must be the kernel's arguments.
func.func @local_table(%q: tensor<1x1x64x16xf32>, %o: tensor<1x1x64x16xf32>) -> tensor<1x1x64x16xf32> attributes {attn.kernel} {
  %table = tensor.empty() : tensor<1x1x1x1xi32>
  // expected-error @+1 {{attn-block-table: Q, K and the captures must be tensor arguments of the kernel function}}
  %r = attn.attention ins(%q, %q, %q : tensor<1x1x64x16xf32>, tensor<1x1x64x16xf32>, tensor<1x1x64x16xf32>)
      captures(%table : tensor<1x1x1x1xi32>) outs(%o : tensor<1x1x64x16xf32>)
      mask_mod {
      ^bb0(%bb: index, %hh: index, %ii: index, %jj: index):
        %keep = arith.cmpi ule, %jj, %ii : index
        attn.yield %keep : i1
      } {attn.block_mask = array<i64: 0, 64, 64>} -> tensor<1x1x64x16xf32>
  return %r : tensor<1x1x64x16xf32>
}

// -----

// A mask_mod that was all band (attn-band-from-mask-mod made it the causal
// attribute and took the region out) leaves its table: the band is
// evaluated, keys <= i + (Sk - Sq) under bottom-right alignment.
// CHECK-LABEL: func.func @band_only_block_table(
//       CHECK:   %[[SQ:.+]] = memref.dim %{{.+}}, %c2
//       CHECK:   %[[SK:.+]] = memref.dim %{{.+}}, %c2
//       CHECK:   %[[OFF:.+]] = arith.subi %[[SK]], %[[SQ]] : index
//       CHECK:   scf.forall
//       CHECK:               %[[D:.+]] = arith.addi %[[I:.+]], %[[OFF]] : index
//       CHECK:               %[[DV:.+]] = vector.broadcast %[[D]] : index to vector<16xindex>
//       CHECK:               arith.cmpi sle, %{{.+}}, %[[DV]] : vector<16xindex>
func.func @band_only(%q: tensor<1x2x?x16xf32>, %k: tensor<1x2x?x16xf32>, %table: tensor<1x1x?x?xi32>,
                     %o: tensor<1x2x?x16xf32>) -> tensor<1x2x?x16xf32> attributes {attn.kernel} {
  %r = attn.attention ins(%q, %k, %k : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      captures(%table : tensor<1x1x?x?xi32>) outs(%o : tensor<1x2x?x16xf32>) causal align(bottom_right)
      {attn.block_mask = array<i64: 0, 64, 64>} -> tensor<1x2x?x16xf32>
  return %r : tensor<1x2x?x16xf32>
}
