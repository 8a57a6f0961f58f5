// RUN: attn-opt %s --pass-pipeline='builtin.module(func.func(attn-tile{group-rows=4},attn-online-softmax),attn-split-keys{key-multiple=128},canonicalize,cse)' | FileCheck %s
// RUN: not attn-opt %s --pass-pipeline='builtin.module(attn-split-keys)' -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNTILED

// Split-KV decoding: a causal bottom-right decoding kernel with a boolean
// mask, tiled by GQA groups of 4. The kernel becomes the partial phase: one
// more forall dim over %splits key ranges of ceil(Sk / splits) keys rounded
// up to 128; its online op reads the range of K, V and the mask, with the
// diagonal moved back by the range's first key; it still writes O and LSE
// and also copies its state to the workspace tile [b, h, 0, s, :].

// CHECK-LABEL: func.func @decode(
//  CHECK-SAME:   %[[K:[a-z0-9]+]]: tensor<?x2x?x64xf32>, %{{.+}}: tensor<?x2x?x64xf32>,
//  CHECK-SAME:   %[[ACC:[a-z0-9]+]]: tensor<?x8x1x?x64xf32>, %[[MAX:[a-z0-9]+]]: tensor<?x8x1x?xf32>, %[[SUM:[a-z0-9]+]]: tensor<?x8x1x?xf32>, %[[SPLITS:[a-z0-9]+]]: index)
//  CHECK-SAME:   -> (tensor<?x8x1x64xf32>, tensor<?x8x1xf32>, tensor<?x8x1x?x64xf32>, tensor<?x8x1x?xf32>, tensor<?x8x1x?xf32>)
//  CHECK-SAME:   attributes {attn.kernel} {
//       CHECK:   %[[SK:.+]] = tensor.dim %[[K]], %c2
//       CHECK:   scf.forall (%[[B:.+]], %[[H:.+]], %[[S:.+]]) = (0, 0, 0) to (%{{.+}}, 8, %[[SPLITS]]) step (1, 4, 1)
//  CHECK-SAME:     shared_outs({{.+}}, %[[ACC_OUT:.+]] = %[[ACC]], %[[MAX_OUT:.+]] = %[[MAX]], %[[SUM_OUT:.+]] = %[[SUM]])
//       CHECK:     %[[DIAG:.+]] = arith.subi %[[SK]], %c1
//       CHECK:     %[[PER:.+]] = arith.ceildivui %[[SK]], %{{.+}}
//       CHECK:     %[[TILES:.+]] = arith.ceildivui %[[PER]], %c128
//       CHECK:     %[[CHUNK:.+]] = arith.muli %[[TILES]], %c128
//       CHECK:     %[[START:.+]] = arith.muli %[[S]], %[[CHUNK]]
//       CHECK:     %[[FIRST:.+]] = arith.minui %[[START]], %[[SK]]
//       CHECK:     %[[LEFT:.+]] = arith.subi %[[SK]], %[[FIRST]]
//       CHECK:     %[[COUNT:.+]] = arith.minui %[[CHUNK]], %[[LEFT]]
//       CHECK:     %[[KR:.+]] = tensor.extract_slice %{{.+}}[0, 0, %[[FIRST]], 0] [1, 1, %[[COUNT]], 64]
//       CHECK:     %[[VR:.+]] = tensor.extract_slice %{{.+}}[0, 0, %[[FIRST]], 0] [1, 1, %[[COUNT]], 64]
//       CHECK:     %[[MR:.+]] = tensor.extract_slice %{{.+}}[0, 0, 0, %[[FIRST]]] [1, 4, 1, %[[COUNT]]]
//       CHECK:     %[[RDIAG:.+]] = arith.subi %[[DIAG]], %[[FIRST]]
//       CHECK:     %[[STATE:.+]]:3 = attn.online_attention ins(%{{.+}}, %[[KR]], %[[VR]] : {{.+}}) mask(%[[MR]] : {{.+}}) diagonal(%[[RDIAG]])
//       CHECK:     %[[ACC_TILE:.+]] = tensor.extract_slice %[[ACC_OUT]][%[[B]], %[[H]], 0, %[[S]], 0] [1, 4, 1, 1, 64]
//       CHECK:     %[[ACC_COPY:.+]] = linalg.generic {{.+}} ins(%[[STATE]]#0 : tensor<1x4x1x64xf32>) outs(%[[ACC_TILE]] : tensor<1x4x1x1x64xf32>)
//       CHECK:     %[[MAX_COPY:.+]] = linalg.generic {{.+}} ins(%[[STATE]]#1 : tensor<1x4x1xf32>)
//       CHECK:     %[[SUM_COPY:.+]] = linalg.generic {{.+}} ins(%[[STATE]]#2 : tensor<1x4x1xf32>)
//       CHECK:     %[[O:.+]] = linalg.generic {{.+}} ins(%[[STATE]]#0, %[[STATE]]#1, %[[STATE]]#2
//       CHECK:     scf.forall.in_parallel
//  CHECK-NEXT:       tensor.parallel_insert_slice %[[O]]
//  CHECK-NEXT:       tensor.parallel_insert_slice
//  CHECK-NEXT:       tensor.parallel_insert_slice %[[ACC_COPY]] into %[[ACC_OUT]][%[[B]], %[[H]], 0, %[[S]], 0] [1, 4, 1, 1, 64]
//  CHECK-NEXT:       tensor.parallel_insert_slice %[[MAX_COPY]] into %[[MAX_OUT]][%[[B]], %[[H]], 0, %[[S]]] [1, 4, 1, 1]
//  CHECK-NEXT:       tensor.parallel_insert_slice %[[SUM_COPY]] into %[[SUM_OUT]][%[[B]], %[[H]], 0, %[[S]]] [1, 4, 1, 1]

// The merge phase: the kernel's forall over groups, no online op; the
// ranges' maxima reduce to m (NaN-propagating), the sums and accumulators
// to their e^(m_s - m)-weighted sums (0 for an empty range), then the
// kernel's own normalization writes O and LSE.

// CHECK-LABEL: func.func @decode_merge(
//  CHECK-SAME:   %[[MACC:[a-z0-9]+]]: tensor<?x8x1x?x64xf32>, %[[MMAX:[a-z0-9]+]]: tensor<?x8x1x?xf32>, %[[MSUM:[a-z0-9]+]]: tensor<?x8x1x?xf32>, %[[MSPLITS:[a-z0-9]+]]: index)
//  CHECK-SAME:   -> (tensor<?x8x1x64xf32>, tensor<?x8x1xf32>) attributes {attn.kernel} {
//   CHECK-NOT:   attn.online_attention
//       CHECK:   scf.forall (%[[MB:.+]], %[[MH:.+]]) = (0, 0) to (%{{.+}}, 8) step (1, 4)
//       CHECK:     %[[ACCS:.+]] = tensor.extract_slice %[[MACC]][%[[MB]], %[[MH]], 0, 0, 0] [1, 4, 1, %[[MSPLITS]], 64]
//       CHECK:     %[[MAXES:.+]] = tensor.extract_slice %[[MMAX]][%[[MB]], %[[MH]], 0, 0] [1, 4, 1, %[[MSPLITS]]]
//       CHECK:     %[[SUMS:.+]] = tensor.extract_slice %[[MSUM]][%[[MB]], %[[MH]], 0, 0] [1, 4, 1, %[[MSPLITS]]]
//       CHECK:     %[[M:.+]] = linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[MAXES]] :
//       CHECK:       arith.maximumf
//       CHECK:     %[[L:.+]] = linalg.generic {{.+}} ins(%[[SUMS]], %[[MAXES]], %[[M]] :
//       CHECK:       %[[EMPTY:.+]] = arith.cmpf oeq, %{{.+}}, %cst
//       CHECK:       %[[E:.+]] = math.exp
//       CHECK:       arith.select %[[EMPTY]], %cst_0, %[[E]]
//       CHECK:     %[[A:.+]] = linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]} ins(%[[ACCS]], %[[MAXES]], %[[M]] :
//       CHECK:     linalg.generic {{.+}} ins(%[[A]], %[[M]], %[[L]] :
//       CHECK:       arith.divf
//       CHECK:     linalg.generic {{.+}} ins(%[[M]], %[[L]] :
//       CHECK:       math.log
func.func @decode(%q: tensor<?x8x1x64xf32>, %k: tensor<?x2x?x64xf32>,
                  %v: tensor<?x2x?x64xf32>, %m: tensor<?x8x1x?xi1>,
                  %o: tensor<?x8x1x64xf32>, %l: tensor<?x8x1xf32>)
    -> (tensor<?x8x1x64xf32>, tensor<?x8x1xf32>)
    attributes {attn.kernel, attn.split_keys} {
  %0:2 = attn.attention ins(%q, %k, %v : tensor<?x8x1x64xf32>, tensor<?x2x?x64xf32>, tensor<?x2x?x64xf32>)
      mask(%m : tensor<?x8x1x?xi1>)
      outs(%o, %l : tensor<?x8x1x64xf32>, tensor<?x8x1xf32>) causal align(bottom_right)
      -> tensor<?x8x1x64xf32>, tensor<?x8x1xf32>
  return %0#0, %0#1 : tensor<?x8x1x64xf32>, tensor<?x8x1xf32>
}

// A function without the attribute is left alone.
// CHECK-LABEL: func.func @not_marked(
//   CHECK-NOT: func.func @not_marked_merge
func.func @not_marked(%q: tensor<1x8x1x64xf32>, %k: tensor<1x2x?x64xf32>,
                      %v: tensor<1x2x?x64xf32>, %o: tensor<1x8x1x64xf32>)
    -> tensor<1x8x1x64xf32> attributes {attn.kernel} {
  %0 = attn.attention ins(%q, %k, %v : tensor<1x8x1x64xf32>, tensor<1x2x?x64xf32>, tensor<1x2x?x64xf32>)
      outs(%o : tensor<1x8x1x64xf32>) -> tensor<1x8x1x64xf32>
  return %0 : tensor<1x8x1x64xf32>
}

// Before tiling there is nothing to split.
// UNTILED: error: attn-split-keys: a kernel to split must hold one top-level scf.forall (run attn-tile and attn-online-softmax first)
