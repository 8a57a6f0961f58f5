// RUN: attn-opt %s -split-input-file -attn-online-softmax | FileCheck %s
// RUN: attn-opt %s -split-input-file -attn-tile=query-tile-size=64 -attn-online-softmax | FileCheck %s --check-prefix=TILED

// attn.attention becomes the online-softmax recurrence: f32 state (an
// accumulator at 0, a running max at -inf, a running sum at 0) updated by
// attn.online_attention, then one normalization. Rows that saw no allowed
// key (max still -inf and sum 0) give O = 0 and LSE = -inf; a row whose
// sum is NaN (all its scores NaN, which a maximum that passes NaN over
// leaves at max = -inf) is not one of them, and its NaN reaches O and LSE.
// The output is rounded to its element type once, at the end.

// CHECK-LABEL: func @bf16_with_lse
//  CHECK-SAME: (%[[Q:.+]]: tensor<1x2x?x64xbf16>, %[[K:.+]]: tensor<1x2x?x64xbf16>, %[[V:.+]]: tensor<1x2x?x64xbf16>, %[[O:.+]]: tensor<1x2x?x64xbf16>, %[[L:.+]]: tensor<1x2x?xf32>)
//       CHECK: %[[ACC0:.+]] = bufferization.alloc_tensor(%{{.+}}) : tensor<1x2x?x64xf32>
//       CHECK: %[[ACC:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%[[ACC0]] : tensor<1x2x?x64xf32>)
//       CHECK: %[[MAX:.+]] = linalg.fill ins(%{{.+}} : f32)
//       CHECK: %[[SUM:.+]] = linalg.fill ins(%{{.+}} : f32)
//       CHECK: %[[STATE:.+]]:3 = attn.online_attention ins(%[[Q]], %[[K]], %[[V]] : {{.+}}) outs(%[[ACC]], %[[MAX]], %[[SUM]] : tensor<1x2x?x64xf32>, tensor<1x2x?xf32>, tensor<1x2x?xf32>) scale(1.250000e-01)
//       CHECK: %[[OUT:.+]] = linalg.generic {{.+}} ins(%[[STATE]]#0, %[[STATE]]#1, %[[STATE]]#2 : {{.+}}) outs(%[[O]] : tensor<1x2x?x64xbf16>)
//       CHECK:   ^bb0(%[[A:.+]]: f32, %[[M:.+]]: f32, %[[S:.+]]: f32, %{{.+}}: bf16):
//       CHECK:   %[[NOMAX:.+]] = arith.cmpf oeq, %[[M]], %{{.+}} : f32
//       CHECK:   %[[NOSUM:.+]] = arith.cmpf oeq, %[[S]], %{{.+}} : f32
//       CHECK:   %[[EMPTY:.+]] = arith.andi %[[NOMAX]], %[[NOSUM]] : i1
//       CHECK:   %[[NORM:.+]] = arith.divf %[[A]], %[[S]] : f32
//       CHECK:   %[[SEL:.+]] = arith.select %[[EMPTY]], %{{.+}}, %[[NORM]] : f32
// A NaN max (a NaN score was allowed) makes the row NaN.
//       CHECK:   %[[ISNAN:.+]] = arith.cmpf uno, %[[M]], %[[M]] : f32
//       CHECK:   %[[RES:.+]] = arith.select %[[ISNAN]], %[[M]], %[[SEL]] : f32
//       CHECK:   %[[ROUND:.+]] = arith.truncf %[[RES]] : f32 to bf16
//       CHECK:   linalg.yield %[[ROUND]] : bf16
//       CHECK: %[[LSE:.+]] = linalg.generic {{.+}} ins(%[[STATE]]#1, %[[STATE]]#2 : {{.+}}) outs(%[[L]] : tensor<1x2x?xf32>)
//       CHECK:   ^bb0(%[[M2:.+]]: f32, %[[S2:.+]]: f32, %{{.+}}: f32):
//       CHECK:   %[[NOMAX2:.+]] = arith.cmpf oeq, %[[M2]], %{{.+}} : f32
//       CHECK:   %[[NOSUM2:.+]] = arith.cmpf oeq, %[[S2]], %{{.+}} : f32
//       CHECK:   %[[EMPTY2:.+]] = arith.andi %[[NOMAX2]], %[[NOSUM2]] : i1
//       CHECK:   %[[LOG:.+]] = math.log %[[S2]] : f32
//       CHECK:   %[[ML:.+]] = arith.addf %[[M2]], %[[LOG]] : f32
//       CHECK:   arith.select %[[EMPTY2]], %{{.+}}, %[[ML]] : f32
//       CHECK: return %[[OUT]], %[[LSE]]
//   CHECK-NOT: attn.attention
func.func @bf16_with_lse(%q: tensor<1x2x?x64xbf16>, %k: tensor<1x2x?x64xbf16>,
                         %v: tensor<1x2x?x64xbf16>, %o: tensor<1x2x?x64xbf16>,
                         %l: tensor<1x2x?xf32>) -> (tensor<1x2x?x64xbf16>, tensor<1x2x?xf32>) {
  %r:2 = attn.attention ins(%q, %k, %v : tensor<1x2x?x64xbf16>, tensor<1x2x?x64xbf16>, tensor<1x2x?x64xbf16>)
      outs(%o, %l : tensor<1x2x?x64xbf16>, tensor<1x2x?xf32>) scale(0.125) -> tensor<1x2x?x64xbf16>, tensor<1x2x?xf32>
  return %r#0, %r#1 : tensor<1x2x?x64xbf16>, tensor<1x2x?xf32>
}

// -----

// Inside a tile, the state has a constant bound (the query tile's rows):
// it is a slice of a statically shaped tensor, so that it bufferizes to a
// fixed-size stack buffer. Masks and attributes carry over to the online op.

// TILED-LABEL: func @tiled_causal_with_mask
//       TILED: scf.forall
//       TILED:   %[[ACC0:.+]] = bufferization.alloc_tensor() : tensor<1x1x64x64xf32>
//       TILED:   %[[ACC1:.+]] = tensor.extract_slice %[[ACC0]][0, 0, 0, 0] [1, 1, %{{.+}}, 64]
//       TILED:   linalg.fill ins(%{{.+}} : f32) outs(%[[ACC1]] : tensor<1x1x?x64xf32>)
//       TILED:   attn.online_attention {{.*}} mask(%{{.+}} : tensor<1x1x?x?xf32>) diagonal(%{{.+}}) outs({{.+}}) causal
func.func @tiled_causal_with_mask(%q: tensor<1x1x?x64xf32>, %k: tensor<1x1x?x64xf32>,
                                  %v: tensor<1x1x?x64xf32>, %m: tensor<1x1x?x?xf32>,
                                  %o: tensor<1x1x?x64xf32>) -> tensor<1x1x?x64xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>)
      mask(%m : tensor<1x1x?x?xf32>) outs(%o : tensor<1x1x?x64xf32>) causal align(top_left) -> tensor<1x1x?x64xf32>
  return %r : tensor<1x1x?x64xf32>
}

// -----

// Attention sinks join the state once, after the recurrence: a per-row
// generic reads max, sum and the row's head's sink (map (b, h, i) -> (h))
// and gives the divisor of the unchanged output epilogue, in the stable
// form m' = max(m, σ), c = e^(m - m'), l' = sum·c + e^(σ - m'),
// divisor = l' / c (+inf where c = 0; the keys' own sum where σ = -inf).
// The LSE is m' + log(l') (+inf for σ = +inf). Tiled, each tile reads the
// sinks of its query heads.

// CHECK-DAG: #[[ROW:.+]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[HEAD:.+]] = affine_map<(d0, d1, d2) -> (d1)>
// CHECK-LABEL: func @sinks
//  CHECK-SAME: %[[SINKS:[^:]+]]: tensor<4xf32>
//       CHECK: %[[STATE:.+]]:3 = attn.online_attention
//       CHECK: %[[DIV:.+]] = linalg.generic {indexing_maps = [#[[ROW]], #[[ROW]], #[[HEAD]], #[[ROW]]], {{.+}}} ins(%[[STATE]]#1, %[[STATE]]#2, %[[SINKS]] : {{.+}})
//       CHECK:   ^bb0(%[[M:.+]]: f32, %[[S:.+]]: f32, %[[SINK:.+]]: f32, %{{.+}}: f32):
//       CHECK:   %[[NEWMAX:.+]] = arith.maximumf %[[M]], %[[SINK]] : f32
//       CHECK:   %[[C:.+]] = math.exp %{{.+}} : f32
//       CHECK:   %[[E:.+]] = math.exp %{{.+}} : f32
//       CHECK:   %[[SC:.+]] = arith.mulf %[[S]], %[[C]] : f32
//       CHECK:   %[[L:.+]] = arith.addf %[[SC]], %[[E]] : f32
//       CHECK:   %[[VANISHED:.+]] = arith.cmpf oeq, %[[C]], %{{.+}} : f32
//       CHECK:   %[[RATIO:.+]] = arith.divf %[[L]], %[[C]] : f32
//       CHECK:   %[[D:.+]] = arith.select %[[VANISHED]], %{{.+}}, %[[RATIO]] : f32
//       CHECK:   %[[NOSINK:.+]] = arith.cmpf oeq, %[[SINK]], %{{.+}} : f32
//       CHECK:   arith.select %[[NOSINK]], %[[S]], %[[D]] : f32
//       CHECK: linalg.generic {{.+}} ins(%[[STATE]]#0, %[[STATE]]#1, %[[DIV]] : {{.+}})
//       CHECK:   arith.divf
//       CHECK: linalg.generic {indexing_maps = [#[[ROW]], #[[ROW]], #[[HEAD]], #[[ROW]]], {{.+}}} ins(%[[STATE]]#1, %[[STATE]]#2, %[[SINKS]] : {{.+}})
//       CHECK:   arith.maximumf
//       CHECK:   math.log
//       CHECK:   arith.select
//       CHECK:   math.log
//       CHECK:   arith.select

// TILED-LABEL: func @sinks
//  TILED-SAME: %[[SINKS:[^:]+]]: tensor<4xf32>
//       TILED: scf.forall (%{{.+}}, %[[H:.+]], %{{.+}}) =
//       TILED:   %[[TILE:.+]] = tensor.extract_slice %[[SINKS]][%[[H]]] [1] [1] : tensor<4xf32> to tensor<1xf32>
//       TILED:   attn.online_attention
//       TILED:   linalg.generic {{.+}} ins(%{{.+}}, %{{.+}}, %[[TILE]] : tensor<1x1x?xf32>, tensor<1x1x?xf32>, tensor<1xf32>)
func.func @sinks(%q: tensor<2x4x?x64xf32>, %k: tensor<2x2x?x64xf32>,
                 %v: tensor<2x2x?x32xf32>, %s: tensor<4xf32>,
                 %o: tensor<2x4x?x32xf32>, %l: tensor<2x4x?xf32>) -> (tensor<2x4x?x32xf32>, tensor<2x4x?xf32>) {
  %r:2 = attn.attention ins(%q, %k, %v : tensor<2x4x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x32xf32>)
      sinks(%s : tensor<4xf32>) outs(%o, %l : tensor<2x4x?x32xf32>, tensor<2x4x?xf32>) -> tensor<2x4x?x32xf32>, tensor<2x4x?xf32>
  return %r#0, %r#1 : tensor<2x4x?x32xf32>, tensor<2x4x?xf32>
}
