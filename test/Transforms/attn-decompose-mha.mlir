// RUN: attn-opt %s -attn-decompose-mha -split-input-file | FileCheck %s

// A packed layer with biases: one batch per forall iteration; the three
// projections slice the packed weight and bias by rows, accumulate in f32
// (the bias broadcast first) by linalg.matmul with the weight transposed,
// split into heads [1, H, S, E/H] by a transpose; the attention takes the
// batch's mask slice (batch 0 of a broadcast mask) and the attributes; the
// heads merge back and the output projection accumulates into the batch's
// rows of the output in place. Every heap buffer is freed at the end of
// the iteration.

// CHECK-LABEL: func @packed
//       CHECK: scf.forall (%[[B:.+]]) in (%{{.+}}) shared_outs(%[[Y:.+]] = %arg5)
//   CHECK-DAG:   %[[WQ:.+]] = tensor.extract_slice %arg1[0, 0] [32, 32] [1, 1]
//   CHECK-DAG:   %[[WK:.+]] = tensor.extract_slice %arg1[32, 0] [32, 32] [1, 1]
//   CHECK-DAG:   %[[WV:.+]] = tensor.extract_slice %arg1[64, 0] [32, 32] [1, 1]
//   CHECK-DAG:   %[[BQ:.+]] = tensor.extract_slice %arg2[0] [32] [1]
//       CHECK:   %[[XQ:.+]] = tensor.extract_slice %arg0[%[[B]], 0, 0] [1, %{{.+}}, 32] [1, 1, 1] : tensor<?x?x32xf32> to tensor<?x32xf32>
//       CHECK:   %[[ALLOC:.+]] = memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?x32xf32>
//       CHECK:   %[[ACC:.+]] = bufferization.to_tensor %[[ALLOC]] restrict writable
//       CHECK:   %[[BIAS:.+]] = linalg.generic {{.*}} ins(%[[BQ]] : tensor<32xf32>) outs(%[[ACC]] : tensor<?x32xf32>)
//       CHECK:   %[[QP:.+]] = linalg.matmul indexing_maps = [#{{.+}}, #{{.+}}, #{{.+}}] ins(%[[XQ]], %[[WQ]] : tensor<?x32xf32>, tensor<32x32xf32>) outs(%[[BIAS]] : tensor<?x32xf32>)
//       CHECK:   %[[SPLIT:.+]] = tensor.expand_shape %[[QP]] {{\[\[}}0], [1, 2]] output_shape [%{{.+}}, 4, 8]
//       CHECK:   %[[HEADS:.+]] = linalg.transpose ins(%[[SPLIT]] : tensor<?x4x8xf32>) outs(%{{.+}} : tensor<4x?x8xf32>) permutation = [1, 0, 2]
//       CHECK:   %[[Q:.+]] = tensor.expand_shape %[[HEADS]] {{\[\[}}0, 1], [2], [3]] output_shape [1, 4, %{{.+}}, 8]
//       CHECK:   %[[M:.+]] = tensor.extract_slice %arg6[0, 0, 0, 0] [1, 1, %{{.+}}, %{{.+}}] [1, 1, 1, 1]
//       CHECK:   %[[O:.+]] = attn.attention ins(%[[Q]], %{{.+}}, %{{.+}} : tensor<1x4x?x8xf32>, tensor<1x4x?x8xf32>, tensor<1x4x?x8xf32>) mask(%[[M]] : tensor<1x1x?x?xi1>) outs(%{{.+}} : tensor<1x4x?x8xf32>) causal align(bottom_right) scale(2.500000e-01)
//       CHECK:   %[[ROWS:.+]] = tensor.extract_slice %[[Y]][%[[B]], 0, 0] [1, %{{.+}}, 32] [1, 1, 1] : tensor<?x?x32xf32> to tensor<?x32xf32>
//       CHECK:   %[[BYHEAD:.+]] = tensor.collapse_shape %[[O]] {{\[\[}}0, 1], [2], [3]]
//       CHECK:   %[[BYROW:.+]] = linalg.transpose ins(%[[BYHEAD]] : tensor<4x?x8xf32>) outs(%{{.+}} : tensor<?x4x8xf32>) permutation = [1, 0, 2]
//       CHECK:   %[[MERGED:.+]] = tensor.collapse_shape %[[BYROW]] {{\[\[}}0], [1, 2]]
//       CHECK:   %[[OUTB:.+]] = linalg.generic {{.*}} ins(%arg4 : tensor<32xf32>) outs(%[[ROWS]] : tensor<?x32xf32>)
//       CHECK:   %[[OUT:.+]] = linalg.matmul indexing_maps = [#{{.+}}, #{{.+}}, #{{.+}}] ins(%[[MERGED]], %arg3 : tensor<?x32xf32>, tensor<32x32xf32>) outs(%[[OUTB]] : tensor<?x32xf32>)
// CHECK-COUNT-8:   memref.dealloc
//   CHECK-NOT:   memref.dealloc
//       CHECK:   scf.forall.in_parallel
//  CHECK-NEXT:     tensor.parallel_insert_slice %[[OUT]] into %[[Y]][%[[B]], 0, 0] [1, %{{.+}}, 32] [1, 1, 1]
func.func @packed(%x: tensor<?x?x32xf32>, %w: tensor<96x32xf32>, %b: tensor<96xf32>,
                  %wo: tensor<32x32xf32>, %bo: tensor<32xf32>, %y: tensor<?x?x32xf32>,
                  %m: tensor<1x1x?x?xi1>) -> tensor<?x?x32xf32> {
  %r = attn.mha ins(%x, %x, %x : tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>)
      in_proj(%w : tensor<96x32xf32>) in_bias(%b : tensor<96xf32>)
      out_proj(%wo : tensor<32x32xf32>) out_bias(%bo : tensor<32xf32>)
      mask(%m : tensor<1x1x?x?xi1>)
      outs(%y : tensor<?x?x32xf32>) heads(4) causal align(bottom_right) scale(0.25)
      -> tensor<?x?x32xf32>
  return %r : tensor<?x?x32xf32>
}

// -----

// bf16, separate weights, no biases: each projection's f32 accumulator
// starts at 0 and is rounded to bf16 (into the output's rows for the last).

// CHECK-LABEL: func @separate_bf16
//       CHECK: scf.forall (%[[B:.+]]) in (2) shared_outs(%[[Y:.+]] = %arg7)
//       CHECK:   linalg.fill ins(%{{.+}} : f32) outs(%{{.+}} : tensor<?x32xf32>)
//       CHECK:   linalg.matmul {{.*}} ins(%{{.+}}, %arg3 : tensor<?x32xbf16>, tensor<32x32xbf16>) outs(%{{.+}} : tensor<?x32xf32>)
//       CHECK:   arith.truncf %{{.+}} : f32 to bf16
//       CHECK:   linalg.matmul {{.*}} ins(%{{.+}}, %arg4 : tensor<?x12xbf16>, tensor<32x12xbf16>) outs(%{{.+}} : tensor<?x32xf32>)
//       CHECK:   linalg.matmul {{.*}} ins(%{{.+}}, %arg5 : tensor<?x20xbf16>, tensor<32x20xbf16>) outs(%{{.+}} : tensor<?x32xf32>)
//       CHECK:   attn.attention ins({{.*}} : tensor<1x2x?x16xbf16>, tensor<1x2x?x16xbf16>, tensor<1x2x?x16xbf16>) outs(%{{.+}} : tensor<1x2x?x16xbf16>) -> tensor<1x2x?x16xbf16>
//       CHECK:   %[[ROWS:.+]] = tensor.extract_slice %[[Y]][%[[B]], 0, 0]
//       CHECK:   linalg.matmul {{.*}} ins(%{{.+}}, %arg6 : tensor<?x32xbf16>, tensor<32x32xbf16>) outs(%{{.+}} : tensor<?x32xf32>)
//       CHECK:   linalg.generic {{.*}} outs(%[[ROWS]] : tensor<?x32xbf16>)
func.func @separate_bf16(%q: tensor<2x?x32xbf16>, %k: tensor<2x?x12xbf16>, %v: tensor<2x?x20xbf16>,
                         %wq: tensor<32x32xbf16>, %wk: tensor<32x12xbf16>, %wv: tensor<32x20xbf16>,
                         %wo: tensor<32x32xbf16>, %y: tensor<2x?x32xbf16>) -> tensor<2x?x32xbf16> {
  %r = attn.mha ins(%q, %k, %v : tensor<2x?x32xbf16>, tensor<2x?x12xbf16>, tensor<2x?x20xbf16>)
      in_proj(%wq, %wk, %wv : tensor<32x32xbf16>, tensor<32x12xbf16>, tensor<32x20xbf16>)
      out_proj(%wo : tensor<32x32xbf16>)
      outs(%y : tensor<2x?x32xbf16>) heads(2)
      -> tensor<2x?x32xbf16>
  return %r : tensor<2x?x32xbf16>
}
