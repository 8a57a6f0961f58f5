// RUN: attn-opt %s -attn-tile | FileCheck %s

// attn.linear is tiled by batch and key/value head: a tile owns one state
// and normalizer (its key/value head's) and the query heads of that head's
// GQA group (h·G to h·G + G, here G = 2), every row. The tile's state
// operands and outs are its key/value head's slices; its output rows are
// its query heads'.

// CHECK: #[[TIMES2:.+]] = affine_map<()[s0] -> (s0 * 2)>
// CHECK-LABEL: func @causal_gqa_state
//       CHECK: scf.forall (%[[B:.+]], %[[H:.+]]) in (2, 2) shared_outs(%[[O:.+]] = %{{.+}}, %[[S:.+]] = %{{.+}}, %[[Z:.+]] = %{{.+}})
//       CHECK:   %[[QH:.+]] = affine.apply #[[TIMES2]]()[%[[H]]]
//       CHECK:   %[[Q:.+]] = tensor.extract_slice %arg0[%[[B]], %[[QH]], 0, 0] [1, 2, %{{.+}}, 64]
//       CHECK:   %[[K:.+]] = tensor.extract_slice %arg1[%[[B]], %[[H]], 0, 0] [1, 1, %{{.+}}, 64]
//       CHECK:   %[[V:.+]] = tensor.extract_slice %arg2[%[[B]], %[[H]], 0, 0] [1, 1, %{{.+}}, 32]
//       CHECK:   %[[S0:.+]] = tensor.extract_slice %arg3[%[[B]], %[[H]], 0, 0] [1, 1, 64, 32]
//       CHECK:   %[[Z0:.+]] = tensor.extract_slice %arg4[%[[B]], %[[H]], 0] [1, 1, 64]
//       CHECK:   %[[OT:.+]] = tensor.extract_slice %[[O]][%[[B]], %[[QH]], 0, 0] [1, 2, %{{.+}}, 32]
//       CHECK:   %[[ST:.+]] = tensor.extract_slice %[[S]][%[[B]], %[[H]], 0, 0] [1, 1, 64, 32]
//       CHECK:   %[[ZT:.+]] = tensor.extract_slice %[[Z]][%[[B]], %[[H]], 0] [1, 1, 64]
//       CHECK:   %[[R:.+]]:3 = attn.linear ins(%[[Q]], %[[K]], %[[V]] : tensor<1x2x?x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x32xf32>) state(%[[S0]], %[[Z0]] : {{.*}}) outs(%[[OT]], %[[ST]], %[[ZT]] : {{.*}}) causal chunk(32) feature_map(relu)
//       CHECK:   tensor.parallel_insert_slice %[[R]]#0 into %[[O]][%[[B]], %{{.+}}, 0, 0] [1, 2, %{{.+}}, 32]
//       CHECK:   tensor.parallel_insert_slice %[[R]]#1 into %[[S]][%[[B]], %[[H]], 0, 0] [1, 1, 64, 32]
//       CHECK:   tensor.parallel_insert_slice %[[R]]#2 into %[[Z]][%[[B]], %[[H]], 0] [1, 1, 64]
func.func @causal_gqa_state(%q: tensor<2x4x?x64xf32>, %k: tensor<2x2x?x64xf32>,
                            %v: tensor<2x2x?x32xf32>, %s0: tensor<2x2x64x32xf32>,
                            %z0: tensor<2x2x64xf32>, %o: tensor<2x4x?x32xf32>,
                            %s1: tensor<2x2x64x32xf32>, %z1: tensor<2x2x64xf32>)
    -> (tensor<2x4x?x32xf32>, tensor<2x2x64x32xf32>, tensor<2x2x64xf32>) {
  %r:3 = attn.linear ins(%q, %k, %v : tensor<2x4x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x32xf32>)
      state(%s0, %z0 : tensor<2x2x64x32xf32>, tensor<2x2x64xf32>)
      outs(%o, %s1, %z1 : tensor<2x4x?x32xf32>, tensor<2x2x64x32xf32>, tensor<2x2x64xf32>)
      causal chunk(32) feature_map(relu)
      -> tensor<2x4x?x32xf32>, tensor<2x2x64x32xf32>, tensor<2x2x64xf32>
  return %r#0, %r#1, %r#2 : tensor<2x4x?x32xf32>, tensor<2x2x64x32xf32>, tensor<2x2x64xf32>
}

// With dynamic heads the group is Hq / Hkv at run time.

// CHECK-LABEL: func @dynamic_heads
//       CHECK: scf.forall (%{{.+}}, %[[H:.+]]) in (%{{.+}}, %{{.+}})
//       CHECK:   %[[G:.+]] = arith.divui
//       CHECK:   affine.apply #{{.+}}()[%[[H]], %[[G]]]
//       CHECK:   attn.linear
func.func @dynamic_heads(%q: tensor<?x?x?x16xbf16>, %k: tensor<?x?x?x16xbf16>,
                         %o: tensor<?x?x?x16xbf16>) -> tensor<?x?x?x16xbf16> {
  %r = attn.linear ins(%q, %k, %k : tensor<?x?x?x16xbf16>, tensor<?x?x?x16xbf16>, tensor<?x?x?x16xbf16>)
      outs(%o : tensor<?x?x?x16xbf16>) -> tensor<?x?x?x16xbf16>
  return %r : tensor<?x?x?x16xbf16>
}

// attn.linear_backward is tiled as attn.linear: a tile's dQ (and O, dO,
// Q) are its group's query heads, its dK, dV, state and state gradients its
// key/value head's.

// CHECK-LABEL: func @backward_gqa
//       CHECK: scf.forall (%[[B:.+]], %[[H:.+]]) in (2, 2) shared_outs(%[[DQ:.+]] = %{{.+}}, %[[DK:.+]] = %{{.+}}, %[[DV:.+]] = %{{.+}}, %[[DS:.+]] = %{{.+}}, %[[DZ:.+]] = %{{.+}})
//       CHECK:   %[[QH:.+]] = affine.apply #[[TIMES2]]()[%[[H]]]
//       CHECK:   tensor.extract_slice %[[DQ]][%[[B]], %[[QH]], 0, 0] [1, 2, %{{.+}}, 64]
//       CHECK:   tensor.extract_slice %[[DK]][%[[B]], %[[H]], 0, 0] [1, 1, %{{.+}}, 64]
//       CHECK:   tensor.extract_slice %[[DV]][%[[B]], %[[H]], 0, 0] [1, 1, %{{.+}}, 32]
//       CHECK:   %[[R:.+]]:5 = attn.linear_backward ins({{.*}} : tensor<1x2x?x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x32xf32>, tensor<1x2x?x32xf32>, tensor<1x2x?x32xf32>) state({{.*}} : tensor<1x1x64x32xf32>, tensor<1x1x64xf32>) state_grads({{.*}} : tensor<1x1x64x32xf32>, tensor<1x1x64xf32>) outs({{.*}}) feature_map(relu)
//       CHECK:   tensor.parallel_insert_slice %[[R]]#0 into %[[DQ]][%[[B]], %{{.+}}, 0, 0] [1, 2, %{{.+}}, 64]
//       CHECK:   tensor.parallel_insert_slice %[[R]]#1 into %[[DK]][%[[B]], %[[H]], 0, 0] [1, 1, %{{.+}}, 64]
//       CHECK:   tensor.parallel_insert_slice %[[R]]#2 into %[[DV]][%[[B]], %[[H]], 0, 0] [1, 1, %{{.+}}, 32]
//       CHECK:   tensor.parallel_insert_slice %[[R]]#3 into %[[DS]][%[[B]], %[[H]], 0, 0] [1, 1, 64, 32]
//       CHECK:   tensor.parallel_insert_slice %[[R]]#4 into %[[DZ]][%[[B]], %[[H]], 0] [1, 1, 64]
func.func @backward_gqa(%q: tensor<2x4x?x64xf32>, %k: tensor<2x2x?x64xf32>,
                        %v: tensor<2x2x?x32xf32>, %o: tensor<2x4x?x32xf32>,
                        %s: tensor<2x2x64x32xf32>, %z: tensor<2x2x64xf32>,
                        %dk: tensor<2x2x?x64xf32>, %dv: tensor<2x2x?x32xf32>,
                        %ds: tensor<2x2x64x32xf32>, %dz: tensor<2x2x64xf32>)
    -> (tensor<2x4x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x32xf32>,
        tensor<2x2x64x32xf32>, tensor<2x2x64xf32>) {
  %r:5 = attn.linear_backward ins(%q, %k, %v, %o, %o : tensor<2x4x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x32xf32>, tensor<2x4x?x32xf32>, tensor<2x4x?x32xf32>)
      state(%s, %z : tensor<2x2x64x32xf32>, tensor<2x2x64xf32>)
      state_grads(%s, %z : tensor<2x2x64x32xf32>, tensor<2x2x64xf32>)
      outs(%q, %dk, %dv, %ds, %dz : tensor<2x4x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x32xf32>, tensor<2x2x64x32xf32>, tensor<2x2x64xf32>)
      feature_map(relu)
      -> tensor<2x4x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x32xf32>, tensor<2x2x64x32xf32>, tensor<2x2x64xf32>
  return %r#0, %r#1, %r#2, %r#3, %r#4 : tensor<2x4x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x32xf32>, tensor<2x2x64x32xf32>, tensor<2x2x64xf32>
}
