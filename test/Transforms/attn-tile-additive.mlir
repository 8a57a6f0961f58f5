// RUN: attn-opt %s -attn-tile="query-tile-size=32" | FileCheck %s

// attn.additive is tiled by batch and query rows (each row is its own
// softmax over every key): a tile reads its rows of the query, its batch's
// keys and values whole, the network's weights whole, and its rows of the
// mask (a dim of static size 1 broadcasts: the tile reads its index 0); it
// writes its rows of O and of the weights.

// CHECK-LABEL: func @mask_weights
//       CHECK: scf.forall (%[[B:.+]], %[[I:.+]]) = (0, 0) to (2, %{{.+}}) step (1, 32) shared_outs(%[[O:.+]] = %arg7, %[[W:.+]] = %arg8)
//       CHECK:   %[[ROWS:.+]] = affine.min
//       CHECK:   %[[Q:.+]] = tensor.extract_slice %arg0[%[[B]], %[[I]], 0] [1, %[[ROWS]], 24]
//       CHECK:   %[[K:.+]] = tensor.extract_slice %arg1[%[[B]], 0, 0] [1, %{{.+}}, 20]
//       CHECK:   %[[V:.+]] = tensor.extract_slice %arg2[%[[B]], 0, 0] [1, %{{.+}}, 40]
//       CHECK:   %[[M:.+]] = tensor.extract_slice %arg6[%[[B]], 0, 0] [1, 1, %{{.+}}]
//       CHECK:   %[[OT:.+]] = tensor.extract_slice %[[O]][%[[B]], %[[I]], 0] [1, %[[ROWS]], 40]
//       CHECK:   %[[WT:.+]] = tensor.extract_slice %[[W]][%[[B]], %[[I]], 0] [1, %[[ROWS]], %{{.+}}]
//       CHECK:   attn.additive ins(%[[Q]], %[[K]], %[[V]], %arg3, %arg4, %arg5 : {{.*}}) mask(%[[M]] : tensor<1x1x?xi1>) outs(%[[OT]], %[[WT]] :
//       CHECK:   tensor.parallel_insert_slice %{{.+}}#0 into %[[O]][%[[B]], %[[I]], 0] [1, %[[ROWS]], 40]
//       CHECK:   tensor.parallel_insert_slice %{{.+}}#1 into %[[W]][%[[B]], %[[I]], 0] [1, %[[ROWS]], %{{.+}}]
func.func @mask_weights(%q: tensor<2x?x24xf32>, %k: tensor<2x?x20xf32>, %v: tensor<2x?x40xf32>,
                        %wq: tensor<36x24xf32>, %wk: tensor<36x20xf32>, %va: tensor<36xf32>,
                        %m: tensor<2x1x?xi1>, %o: tensor<2x?x40xf32>, %w: tensor<2x?x?xf32>)
    -> (tensor<2x?x40xf32>, tensor<2x?x?xf32>) {
  %r:2 = attn.additive ins(%q, %k, %v, %wq, %wk, %va : tensor<2x?x24xf32>, tensor<2x?x20xf32>, tensor<2x?x40xf32>, tensor<36x24xf32>, tensor<36x20xf32>, tensor<36xf32>)
      mask(%m : tensor<2x1x?xi1>)
      outs(%o, %w : tensor<2x?x40xf32>, tensor<2x?x?xf32>) -> tensor<2x?x40xf32>, tensor<2x?x?xf32>
  return %r#0, %r#1 : tensor<2x?x40xf32>, tensor<2x?x?xf32>
}
