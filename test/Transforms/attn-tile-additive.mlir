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

// attn.additive_backward is tiled by batch and part of the query rows (the
// outs' dim 1, P): part p's work item reads rows [min(Sq, p·R), min(Sq,
// (p + 1)·R)), R = ⌈Sq / P⌉, of the query, dO and the mask (here
// broadcast over rows: index 0), its batch's keys and values whole, and
// writes those rows of grad_qp and its own part of the partial sums.

// CHECK-LABEL: func @backward_parts
//       CHECK: %[[P:.+]] = tensor.dim %arg9, %c1
//       CHECK: scf.forall (%[[B:.+]], %[[PART:.+]]) in (2, %[[P]]) shared_outs(%[[DQP:.+]] = %arg8, %[[DKP:.+]] = %arg9, %[[DV:.+]] = %arg10, %[[DVA:.+]] = %arg11)
//       CHECK:   %[[SQ:.+]] = tensor.dim %arg0, %c1
//       CHECK:   %[[R:.+]] = arith.ceildivui %[[SQ]], %{{.+}} : index
//       CHECK:   %[[AT:.+]] = arith.muli %[[PART]], %[[R]] : index
//       CHECK:   %[[START:.+]] = arith.minui %[[AT]], %[[SQ]] : index
//       CHECK:   %[[AFTER:.+]] = arith.addi %[[START]], %[[R]] : index
//       CHECK:   %[[END:.+]] = arith.minui %[[AFTER]], %[[SQ]] : index
//       CHECK:   %[[ROWS:.+]] = arith.subi %[[END]], %[[START]] : index
//       CHECK:   %[[M:.+]] = tensor.extract_slice %arg7[%[[B]], 0, 0] [1, 1, %{{.+}}]
//       CHECK:   %[[DQPT:.+]] = tensor.extract_slice %[[DQP]][%[[B]], %[[START]], 0] [1, %[[ROWS]], 36]
//       CHECK:   %[[DKPT:.+]] = tensor.extract_slice %[[DKP]][%[[B]], %[[PART]], 0, 0] [1, 1, %{{.+}}, 36]
//       CHECK:   %[[DVT:.+]] = tensor.extract_slice %[[DV]][%[[B]], %[[PART]], 0, 0] [1, 1, %{{.+}}, 40]
//       CHECK:   %[[DVAT:.+]] = tensor.extract_slice %[[DVA]][%[[B]], %[[PART]], 0] [1, 1, 36]
//       CHECK:   %[[Q:.+]] = tensor.extract_slice %arg0[%[[B]], %[[START]], 0] [1, %[[ROWS]], 24]
//       CHECK:   %[[K:.+]] = tensor.extract_slice %arg1[%[[B]], 0, 0] [1, %{{.+}}, 20]
//       CHECK:   %[[V:.+]] = tensor.extract_slice %arg2[%[[B]], 0, 0] [1, %{{.+}}, 40]
//       CHECK:   %[[DO:.+]] = tensor.extract_slice %arg6[%[[B]], %[[START]], 0] [1, %[[ROWS]], 40]
//       CHECK:   attn.additive_backward ins(%[[Q]], %[[K]], %[[V]], %arg3, %arg4, %arg5, %[[DO]] : {{.*}}) mask(%[[M]] : tensor<1x1x?xi1>) outs(%[[DQPT]], %[[DKPT]], %[[DVT]], %[[DVAT]] :
//       CHECK:   tensor.parallel_insert_slice %{{.+}}#0 into %[[DQP]][%[[B]], %{{.+}}, 0] [1, %{{.+}}, 36]
//       CHECK:   tensor.parallel_insert_slice %{{.+}}#1 into %[[DKP]][%[[B]], %[[PART]], 0, 0] [1, 1, %{{.+}}, 36]
//       CHECK:   tensor.parallel_insert_slice %{{.+}}#2 into %[[DV]][%[[B]], %[[PART]], 0, 0] [1, 1, %{{.+}}, 40]
//       CHECK:   tensor.parallel_insert_slice %{{.+}}#3 into %[[DVA]][%[[B]], %[[PART]], 0] [1, 1, 36]
func.func @backward_parts(%q: tensor<2x?x24xf32>, %k: tensor<2x?x20xf32>, %v: tensor<2x?x40xf32>,
                          %wq: tensor<36x24xf32>, %wk: tensor<36x20xf32>, %va: tensor<36xf32>,
                          %do: tensor<2x?x40xf32>, %m: tensor<2x1x?xi1>,
                          %dqp: tensor<2x?x36xf32>, %dkp: tensor<2x?x?x36xf32>,
                          %dv: tensor<2x?x?x40xf32>, %dva: tensor<2x?x36xf32>)
    -> (tensor<2x?x36xf32>, tensor<2x?x?x36xf32>, tensor<2x?x?x40xf32>, tensor<2x?x36xf32>) {
  %r:4 = attn.additive_backward ins(%q, %k, %v, %wq, %wk, %va, %do : tensor<2x?x24xf32>, tensor<2x?x20xf32>, tensor<2x?x40xf32>, tensor<36x24xf32>, tensor<36x20xf32>, tensor<36xf32>, tensor<2x?x40xf32>)
      mask(%m : tensor<2x1x?xi1>)
      outs(%dqp, %dkp, %dv, %dva : tensor<2x?x36xf32>, tensor<2x?x?x36xf32>, tensor<2x?x?x40xf32>, tensor<2x?x36xf32>)
      -> tensor<2x?x36xf32>, tensor<2x?x?x36xf32>, tensor<2x?x?x40xf32>, tensor<2x?x36xf32>
  return %r#0, %r#1, %r#2, %r#3 : tensor<2x?x36xf32>, tensor<2x?x?x36xf32>, tensor<2x?x?x40xf32>, tensor<2x?x36xf32>
}
