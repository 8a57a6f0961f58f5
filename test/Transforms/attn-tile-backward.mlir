// RUN: attn-opt %s -attn-tile | FileCheck %s

// attn.attention_backward is tiled by batch and whole GQA groups (here G =
// 8 / 2 = 4 query heads per key/value head): each tile owns the dQ rows of
// its four query heads and the dK/dV rows of their key/value head, all rows
// and all keys, so that no two tiles add to one gradient. The tile carries
// the diagonal as an operand (Sk - Sq for bottom-right alignment).

// CHECK-LABEL: func @causal_gqa
//       CHECK: scf.forall (%[[B:.+]], %[[H:.+]]) = (0, 0) to (2, 8) step (1, 4)
//       CHECK:   %[[KVH:.+]] = arith.divui %[[H]], %c4
//       CHECK:   tensor.extract_slice %{{.+}}[%[[B]], %[[H]], 0, 0] [1, 4, %{{.+}}, 64]
//       CHECK:   tensor.extract_slice %{{.+}}[%[[B]], %[[KVH]], 0, 0] [1, 1, %{{.+}}, 64]
//       CHECK:   attn.attention_backward {{.*}} diagonal(%{{.+}}) forward({{.*}} : tensor<1x4x?x32xf32>, tensor<1x4x?xf32>) grads({{.*}} : tensor<1x4x?x32xf32>) outs({{.*}} : tensor<1x4x?x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x32xf32>) causal
//   CHECK-NOT:   align
//       CHECK:   tensor.parallel_insert_slice %{{.+}} into %{{.+}}[%[[B]], %[[H]], 0, 0] [1, 4, %{{.+}}, 64]
//       CHECK:   tensor.parallel_insert_slice %{{.+}} into %{{.+}}[%[[B]], %{{.+}}, 0, 0] [1, 1, %{{.+}}, 64]
//       CHECK:   tensor.parallel_insert_slice %{{.+}} into %{{.+}}[%[[B]], %{{.+}}, 0, 0] [1, 1, %{{.+}}, 32]
func.func @causal_gqa(%q: tensor<2x8x?x64xf32>, %k: tensor<2x2x?x64xf32>, %v: tensor<2x2x?x32xf32>,
                      %o: tensor<2x8x?x32xf32>, %lse: tensor<2x8x?xf32>, %do: tensor<2x8x?x32xf32>,
                      %dq: tensor<2x8x?x64xf32>, %dk: tensor<2x2x?x64xf32>, %dv: tensor<2x2x?x32xf32>)
    -> (tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x32xf32>) {
  %r:3 = attn.attention_backward
      ins(%q, %k, %v : tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x32xf32>)
      forward(%o, %lse : tensor<2x8x?x32xf32>, tensor<2x8x?xf32>)
      grads(%do : tensor<2x8x?x32xf32>)
      outs(%dq, %dk, %dv : tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x32xf32>)
      causal align(bottom_right)
      -> tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x32xf32>
  return %r#0, %r#1, %r#2 : tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x32xf32>
}

// A dynamic group: the head tile is Hq / Hkv at run time, at least 1 (a
// call without query heads then has no work item).

// CHECK-LABEL: func @dynamic_group
//       CHECK: %[[Q:.+]] = arith.divui
//       CHECK: %[[G:.+]] = arith.maxui %[[Q]], %c1
//       CHECK: scf.forall ({{.+}}) = (0, 0) to ({{.+}}) step (1, %[[G]])
func.func @dynamic_group(%q: tensor<1x?x?x16xf32>, %k: tensor<1x?x?x16xf32>, %v: tensor<1x?x?x16xf32>,
                         %o: tensor<1x?x?x16xf32>, %lse: tensor<1x?x?xf32>, %do: tensor<1x?x?x16xf32>,
                         %dq: tensor<1x?x?x16xf32>, %dk: tensor<1x?x?x16xf32>, %dv: tensor<1x?x?x16xf32>)
    -> (tensor<1x?x?x16xf32>, tensor<1x?x?x16xf32>, tensor<1x?x?x16xf32>) {
  %r:3 = attn.attention_backward
      ins(%q, %k, %v : tensor<1x?x?x16xf32>, tensor<1x?x?x16xf32>, tensor<1x?x?x16xf32>)
      forward(%o, %lse : tensor<1x?x?x16xf32>, tensor<1x?x?xf32>)
      grads(%do : tensor<1x?x?x16xf32>)
      outs(%dq, %dk, %dv : tensor<1x?x?x16xf32>, tensor<1x?x?x16xf32>, tensor<1x?x?x16xf32>)
      -> tensor<1x?x?x16xf32>, tensor<1x?x?x16xf32>, tensor<1x?x?x16xf32>
  return %r#0, %r#1, %r#2 : tensor<1x?x?x16xf32>, tensor<1x?x?x16xf32>, tensor<1x?x?x16xf32>
}

// The bias's gradient dM [B, Hq, Sq, Sk] is tiled as the query heads are:
// each tile writes the scores of its batch and query heads, all rows and
// keys, and inserts them back as its fourth result.

// CHECK-LABEL: func @bias_gradient
//       CHECK: scf.forall (%[[B:.+]], %[[H:.+]]) = (0, 0) to (2, 4) step (1, 2)
//       CHECK:   %[[DM:.+]] = tensor.extract_slice %{{.+}}[%[[B]], %[[H]], 0, 0] [1, 2, %{{.+}}, %{{.+}}] [1, 1, 1, 1] : tensor<2x4x?x?xf32> to tensor<1x2x?x?xf32>
//       CHECK:   %[[R:.+]]:4 = attn.attention_backward {{.*}} mask({{.*}}) {{.*}} grad_mask(%[[DM]] : tensor<1x2x?x?xf32>))
//       CHECK:   tensor.parallel_insert_slice %[[R]]#3 into %{{.+}}[%[[B]], %[[H]], 0, 0] [1, 2, %{{.+}}, %{{.+}}]
func.func @bias_gradient(%q: tensor<2x4x?x16xf32>, %k: tensor<2x2x?x16xf32>, %v: tensor<2x2x?x16xf32>,
                         %m: tensor<1x4x?x?xf32>,
                         %o: tensor<2x4x?x16xf32>, %lse: tensor<2x4x?xf32>, %do: tensor<2x4x?x16xf32>,
                         %dq: tensor<2x4x?x16xf32>, %dk: tensor<2x2x?x16xf32>, %dv: tensor<2x2x?x16xf32>,
                         %dm: tensor<2x4x?x?xf32>) -> tensor<2x4x?x?xf32> {
  %r:4 = attn.attention_backward
      ins(%q, %k, %v : tensor<2x4x?x16xf32>, tensor<2x2x?x16xf32>, tensor<2x2x?x16xf32>)
      mask(%m : tensor<1x4x?x?xf32>)
      forward(%o, %lse : tensor<2x4x?x16xf32>, tensor<2x4x?xf32>)
      grads(%do : tensor<2x4x?x16xf32>)
      outs(%dq, %dk, %dv : tensor<2x4x?x16xf32>, tensor<2x2x?x16xf32>, tensor<2x2x?x16xf32>
           grad_mask(%dm : tensor<2x4x?x?xf32>))
      -> tensor<2x4x?x16xf32>, tensor<2x2x?x16xf32>, tensor<2x2x?x16xf32>, tensor<2x4x?x?xf32>
  return %r#3 : tensor<2x4x?x?xf32>
}

// The partial gradients of captured tensors (grad_captures, [B, Hkv,
// <the capture's shape>]) are tiled as dK is: each tile writes the partial
// of its batch and key/value head, the whole capture, and the captures
// themselves stay whole (the regions see global indices).

// CHECK-LABEL: func @grad_captures
//       CHECK: scf.forall (%[[B:.+]], %[[H:.+]]) = (0, 0) to (2, 8) step (1, 4) shared_outs({{.+}}, %[[DT:.+]] = %{{.+}}) ->
//       CHECK:   %[[KVH:.+]] = arith.divui %[[H]], %c4
//       CHECK:   %[[SLICE:.+]] = tensor.extract_slice %[[DT]][%[[B]], %[[KVH]], 0, 0] [1, 1, 8, 17]
//       CHECK:   attn.attention_backward {{.*}} captures(%{{.+}}, %{{.+}} : tensor<?xi32>, tensor<8x17xf32>) {{.*}} grad_captures [1](%[[SLICE]] : tensor<1x1x8x17xf32>))
//       CHECK:   tensor.parallel_insert_slice %{{.+}}#3 into %[[DT]][%[[B]], %{{.+}}, 0, 0] [1, 1, 8, 17]
func.func @grad_captures(%q: tensor<2x8x?x64xf32>, %k: tensor<2x2x?x64xf32>, %v: tensor<2x2x?x32xf32>,
                    %o: tensor<2x8x?x32xf32>, %lse: tensor<2x8x?xf32>, %do: tensor<2x8x?x32xf32>,
                    %dq: tensor<2x8x?x64xf32>, %dk: tensor<2x2x?x64xf32>, %dv: tensor<2x2x?x32xf32>,
                    %table: tensor<8x17xf32>, %ids: tensor<?xi32>, %dtable: tensor<2x2x8x17xf32>)
    -> (tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x32xf32>, tensor<2x2x8x17xf32>) {
  %r:4 = attn.attention_backward
      ins(%q, %k, %v : tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x32xf32>)
      captures(%ids, %table : tensor<?xi32>, tensor<8x17xf32>)
      forward(%o, %lse : tensor<2x8x?x32xf32>, tensor<2x8x?xf32>)
      grads(%do : tensor<2x8x?x32xf32>)
      outs(%dq, %dk, %dv : tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x32xf32>
           grad_captures [1](%dtable : tensor<2x2x8x17xf32>))
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %d = arith.subi %j, %i : index
        %c8 = arith.constant 8 : index
        %e = arith.addi %d, %c8 : index
        %t = attn.captured 1 [%h, %e] : f32
        %r = arith.addf %s, %t : f32
        attn.yield %r : f32
      }
      mask_mod {
      ^bb0(%bb: index, %hh: index, %ii: index, %jj: index):
        %di = attn.captured 0 [%ii] : i32
        %dj = attn.captured 0 [%jj] : i32
        %same = arith.cmpi eq, %di, %dj : i32
        attn.yield %same : i1
      }
      -> tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x32xf32>, tensor<2x2x8x17xf32>
  return %r#0, %r#1, %r#2, %r#3 : tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x32xf32>, tensor<2x2x8x17xf32>
}
