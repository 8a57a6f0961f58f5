// RUN: attn-opt %s -split-input-file -attn-tile="query-tile-size=64 group-rows=4" | FileCheck %s
// RUN: attn-opt %s -split-input-file -attn-tile=query-tile-size=64 | FileCheck %s --check-prefix=OFF

// Decoding (static Sq <= group-rows): a tile takes a whole GQA group of
// query heads and its one key/value head, so that the group shares each
// K/V load; a static Sq also becomes the row tile.

// CHECK-LABEL: func @static_group
//       CHECK: scf.forall (%[[B:.+]], %[[H:.+]], %[[I:.+]]) = (0, 0, 0) to (%{{.+}}, 32, 1) step (1, 4, 1)
//       CHECK:   %[[KVH:.+]] = arith.divui %[[H]], %c4
//       CHECK:   tensor.extract_slice %{{.+}}[%[[B]], %[[H]], %[[I]], 0] [1, 4, 1, 128]
//       CHECK:   tensor.extract_slice %{{.+}}[%[[B]], %[[KVH]], 0, 0] [1, 1, %{{.+}}, 128]
//       CHECK:   attn.attention {{.+}} -> tensor<1x4x1x128xf32>
// OFF-LABEL: func @static_group
//       OFF: scf.forall {{.+}} to (%{{.+}}, 32, 1) step (1, 1, 64)
//       OFF:   attn.attention {{.+}} -> tensor<1x1x?x128xf32>
func.func @static_group(%q: tensor<?x32x1x128xf32>, %k: tensor<?x8x?x128xf32>,
                        %v: tensor<?x8x?x128xf32>, %o: tensor<?x32x1x128xf32>)
    -> tensor<?x32x1x128xf32> {
  %0 = attn.attention ins(%q, %k, %v : tensor<?x32x1x128xf32>, tensor<?x8x?x128xf32>, tensor<?x8x?x128xf32>)
      outs(%o : tensor<?x32x1x128xf32>) -> tensor<?x32x1x128xf32>
  return %0 : tensor<?x32x1x128xf32>
}

// -----

// Dynamic head counts: the head tile is G where 1 <= G <= 16, else the
// largest power of two up to 16 that divides G, chosen at run time; the
// affine.min states the bound (16) that the tile's state buffers need. The
// kv heads of a tile: [h / G, ceil(size / G)).

// CHECK-LABEL: func @dynamic_group
//       CHECK: %[[G:.+]] = arith.divui %{{.+}}, %{{.+}} : index
//       CHECK: arith.remui %[[G]], %c2
//       CHECK: arith.remui %[[G]], %c4
//       CHECK: arith.remui %[[G]], %c8
//       CHECK: %[[R16:.+]] = arith.remui %[[G]], %c16
//       CHECK: %[[D16:.+]] = arith.cmpi eq, %[[R16]], %c0
//       CHECK: %[[POW:.+]] = arith.select %[[D16]], %c16{{.*}}, %{{.+}}
//       CHECK: %[[GM1:.+]] = arith.subi %[[G]], %c1
//       CHECK: %[[SMALL:.+]] = arith.cmpi ule, %[[GM1]], %c15
//       CHECK: %[[SEL:.+]] = arith.select %[[SMALL]], %[[G]], %[[POW]]
//       CHECK: %[[T:.+]] = affine.min #{{.+}}()[%[[SEL]]]
//       CHECK: scf.forall (%{{.+}}, %[[H:.+]], %{{.+}}) = (0, 0, 0) to (%{{.+}}, %{{.+}}, 2) step (1, %[[T]], 2)
//       CHECK:   %[[HS:.+]] = affine.min
//       CHECK:   arith.divui %[[H]], %{{.+}}
//       CHECK:   arith.ceildivui %[[HS]], %{{.+}}
//       CHECK:   attn.attention {{.+}} causal
func.func @dynamic_group(%q: tensor<?x?x2x64xf32>, %k: tensor<?x?x?x64xf32>,
                         %v: tensor<?x?x?x64xf32>, %o: tensor<?x?x2x64xf32>)
    -> tensor<?x?x2x64xf32> {
  %0 = attn.attention ins(%q, %k, %v : tensor<?x?x2x64xf32>, tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>)
      outs(%o : tensor<?x?x2x64xf32>) causal align(bottom_right) -> tensor<?x?x2x64xf32>
  return %0 : tensor<?x?x2x64xf32>
}

// -----

// One head per tile: more rows than group-rows, or a dynamic Sq.

// CHECK-LABEL: func @prefill
//       CHECK: scf.forall {{.+}} step (1, 1, 8)
func.func @prefill(%q: tensor<1x8x8x64xf32>, %k: tensor<1x2x?x64xf32>,
                   %v: tensor<1x2x?x64xf32>, %o: tensor<1x8x8x64xf32>)
    -> tensor<1x8x8x64xf32> {
  %0 = attn.attention ins(%q, %k, %v : tensor<1x8x8x64xf32>, tensor<1x2x?x64xf32>, tensor<1x2x?x64xf32>)
      outs(%o : tensor<1x8x8x64xf32>) -> tensor<1x8x8x64xf32>
  return %0 : tensor<1x8x8x64xf32>
}

// CHECK-LABEL: func @dynamic_rows
//       CHECK: scf.forall {{.+}} step (1, 1, 64)
func.func @dynamic_rows(%q: tensor<1x8x?x64xf32>, %k: tensor<1x2x?x64xf32>,
                        %v: tensor<1x2x?x64xf32>, %o: tensor<1x8x?x64xf32>)
    -> tensor<1x8x?x64xf32> {
  %0 = attn.attention ins(%q, %k, %v : tensor<1x8x?x64xf32>, tensor<1x2x?x64xf32>, tensor<1x2x?x64xf32>)
      outs(%o : tensor<1x8x?x64xf32>) -> tensor<1x8x?x64xf32>
  return %0 : tensor<1x8x?x64xf32>
}

// A static group of more than 16 heads: its largest divisor up to 16 (32:
// 16, two tiles per kv head; 24: 12; 17: 1).

// CHECK-LABEL: func @big_group
//       CHECK: scf.forall {{.+}} = (0, 0, 0) to (1, 32, 1) step (1, 16, 1)
//       CHECK:   tensor.extract_slice %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}, 0] [1, 16, 1, 64]
//       CHECK:   attn.attention ins({{.+}} : tensor<1x16x1x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>)
func.func @big_group(%q: tensor<1x32x1x64xf32>, %k: tensor<1x1x?x64xf32>,
                     %v: tensor<1x1x?x64xf32>, %o: tensor<1x32x1x64xf32>)
    -> tensor<1x32x1x64xf32> {
  %0 = attn.attention ins(%q, %k, %v : tensor<1x32x1x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>)
      outs(%o : tensor<1x32x1x64xf32>) -> tensor<1x32x1x64xf32>
  return %0 : tensor<1x32x1x64xf32>
}

// CHECK-LABEL: func @group_24
//       CHECK: step (1, 12, 1)
func.func @group_24(%q: tensor<1x48x1x64xf32>, %k: tensor<1x2x?x64xf32>,
                    %v: tensor<1x2x?x64xf32>, %o: tensor<1x48x1x64xf32>)
    -> tensor<1x48x1x64xf32> {
  %0 = attn.attention ins(%q, %k, %v : tensor<1x48x1x64xf32>, tensor<1x2x?x64xf32>, tensor<1x2x?x64xf32>)
      outs(%o : tensor<1x48x1x64xf32>) -> tensor<1x48x1x64xf32>
  return %0 : tensor<1x48x1x64xf32>
}

// CHECK-LABEL: func @group_17
//       CHECK: scf.forall {{.+}} in (1, 17, 1)
func.func @group_17(%q: tensor<1x17x1x64xf32>, %k: tensor<1x1x?x64xf32>,
                    %v: tensor<1x1x?x64xf32>, %o: tensor<1x17x1x64xf32>)
    -> tensor<1x17x1x64xf32> {
  %0 = attn.attention ins(%q, %k, %v : tensor<1x17x1x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>)
      outs(%o : tensor<1x17x1x64xf32>) -> tensor<1x17x1x64xf32>
  return %0 : tensor<1x17x1x64xf32>
}
