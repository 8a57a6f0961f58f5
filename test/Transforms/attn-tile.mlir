// RUN: attn-opt %s -split-input-file -attn-tile=query-tile-size=64 | FileCheck %s
// RUN: attn-opt %s -split-input-file -attn-tile=query-tile-size=16 | FileCheck %s --check-prefix=TILE16
// RUN: attn-opt %s -split-input-file -attn-tile="query-tile-size=256 banded-query-tile-size=32" | FileCheck %s --check-prefix=BANDED

// Each (batch, query head, 64-row query tile) becomes one iteration of an
// scf.forall; query head h reads key/value head h / (Hq / Hkv); the tile
// carries the causal diagonal as an operand in its own coordinates:
// off + q_offset, with off = Sk - Sq for bottom-right alignment.

// CHECK-LABEL: func @causal_gqa
//  CHECK-SAME: (%[[Q:.+]]: tensor<2x8x?x64xf32>, %[[K:.+]]: tensor<2x2x?x64xf32>, %[[V:.+]]: tensor<2x2x?x32xf32>, %[[O:.+]]: tensor<2x8x?x32xf32>)
//   CHECK-DAG: %[[SQ:.+]] = tensor.dim %[[Q]], %c2
//       CHECK: scf.forall (%[[B:.+]], %[[H:.+]], %[[I:.+]]) = (0, 0, 0) to (2, 8, %[[SQ]]) step (1, 1, 64) shared_outs(%[[OUT:.+]] = %[[O]])
//       CHECK:   %[[ROWS:.+]] = affine.min
//       CHECK:   %[[KVH:.+]] = arith.divui %[[H]], %c4
//       CHECK:   %[[QT:.+]] = tensor.extract_slice %[[Q]][%[[B]], %[[H]], %[[I]], 0] [1, 1, %[[ROWS]], 64]
//       CHECK:   %[[KT:.+]] = tensor.extract_slice %[[K]][%[[B]], %[[KVH]], 0, 0] [1, 1, %{{.+}}, 64]
//       CHECK:   %[[VT:.+]] = tensor.extract_slice %[[V]][%[[B]], %[[KVH]], 0, 0] [1, 1, %{{.+}}, 32]
//       CHECK:   %[[OFF:.+]] = arith.subi %{{.+}}, %{{.+}} : index
//       CHECK:   %[[DIAG:.+]] = arith.addi %[[OFF]], %[[I]]
//       CHECK:   %[[OT:.+]] = tensor.extract_slice %[[OUT]][%[[B]], %[[H]], %[[I]], 0] [1, 1, %[[ROWS]], 32]
//       CHECK:   %[[R:.+]] = attn.attention ins(%[[QT]], %[[KT]], %[[VT]] : tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x32xf32>) diagonal(%{{.+}}) outs(%[[OT]] : tensor<1x1x?x32xf32>) causal
//   CHECK-NOT:   align
//       CHECK:   scf.forall.in_parallel
//       CHECK:     tensor.parallel_insert_slice %[[R]] into %[[OUT]][%[[B]], %[[H]], %[[I]], 0] [1, 1, %[[ROWS]], 32]

// TILE16-LABEL: func @causal_gqa
//       TILE16: scf.forall {{.*}} step (1, 1, 16)

// A causal (or windowed) op takes banded-query-tile-size rows when set; the
// other ops (@broadcast_mask_and_lse below) keep query-tile-size.
// BANDED-LABEL: func @causal_gqa
//       BANDED: scf.forall {{.*}} step (1, 1, 32)
// BANDED-LABEL: func @broadcast_mask_and_lse
//       BANDED: scf.forall {{.*}} step (1, 1, 256)
func.func @causal_gqa(%q: tensor<2x8x?x64xf32>, %k: tensor<2x2x?x64xf32>,
                      %v: tensor<2x2x?x32xf32>, %o: tensor<2x8x?x32xf32>)
    -> tensor<2x8x?x32xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x32xf32>)
      outs(%o : tensor<2x8x?x32xf32>) causal align(bottom_right) -> tensor<2x8x?x32xf32>
  return %r : tensor<2x8x?x32xf32>
}

// -----

// A mask dimension of size 1 broadcasts: its slice stays at index 0. The
// log-sum-exp is tiled like the output, without the value dim.

// CHECK-LABEL: func @broadcast_mask_and_lse
//  CHECK-SAME: %[[M:[a-z0-9]+]]: tensor<1x1x128x256xi1>
//       CHECK: scf.forall (%[[B:.+]], %[[H:.+]], %[[I:.+]]) = (0, 0, 0) to (1, 4, 128) step (1, 1, 64)
//       CHECK:   %[[MT:.+]] = tensor.extract_slice %[[M]][0, 0, %[[I]], 0] [1, 1, 64, 256]
//       CHECK:   %[[LT:.+]] = tensor.extract_slice %{{.+}}[%[[B]], %[[H]], %[[I]]] [1, 1, 64]
//       CHECK:   attn.attention {{.*}} mask(%[[MT]] : tensor<1x1x64x256xi1>) outs(%{{.+}}, %[[LT]] : tensor<1x1x64x16xf32>, tensor<1x1x64xf32>)
//       CHECK:   tensor.parallel_insert_slice %{{.+}}#1 into %{{.+}}[%[[B]], %[[H]], %[[I]]] [1, 1, 64]
func.func @broadcast_mask_and_lse(%q: tensor<1x4x128x16xf32>, %k: tensor<1x4x256x16xf32>,
                                  %v: tensor<1x4x256x16xf32>, %m: tensor<1x1x128x256xi1>,
                                  %o: tensor<1x4x128x16xf32>, %l: tensor<1x4x128xf32>)
    -> (tensor<1x4x128x16xf32>, tensor<1x4x128xf32>) {
  %r:2 = attn.attention ins(%q, %k, %v : tensor<1x4x128x16xf32>, tensor<1x4x256x16xf32>, tensor<1x4x256x16xf32>)
      mask(%m : tensor<1x1x128x256xi1>)
      outs(%o, %l : tensor<1x4x128x16xf32>, tensor<1x4x128xf32>) -> tensor<1x4x128x16xf32>, tensor<1x4x128xf32>
  return %r#0, %r#1 : tensor<1x4x128x16xf32>, tensor<1x4x128xf32>
}

// -----

// An op's chosen query tile (#attn.kernel, attn-choose-kernels' choice for
// the target) overrides query-tile-size and banded-query-tile-size.
// CHECK-LABEL: func @banded_attribute
//       CHECK: scf.forall {{.*}} step (1, 1, 8)
// BANDED-LABEL: func @banded_attribute
//       BANDED: scf.forall {{.*}} step (1, 1, 8)
func.func @banded_attribute(%q: tensor<1x2x?x16xf32>, %k: tensor<1x2x?x16xf32>,
                            %v: tensor<1x2x?x16xf32>, %o: tensor<1x2x?x16xf32>)
    -> tensor<1x2x?x16xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      outs(%o : tensor<1x2x?x16xf32>) causal align(top_left)
      kernel <lane_rows, query_tile = 8, key_block = 64, lane_rows = 64> -> tensor<1x2x?x16xf32>
  return %r : tensor<1x2x?x16xf32>
}
