// RUN: attn-opt %s -attn-tile="query-tile-size=32" | FileCheck %s

// attn.attention_weights is tiled by batch, query head and query rows (each
// row is normalized by its own LSE): a tile reads its query head's
// key/value head (h / G, here G = 4), the rows of the LSE it normalizes by,
// and writes its rows of the weights, every key. The diagonal moves with
// the row tile (bottom-right: Sk - Sq, plus the tile's first row).

// CHECK-LABEL: func @causal_gqa
//       CHECK: scf.forall (%[[B:.+]], %[[H:.+]], %[[I:.+]]) = (0, 0, 0) to (2, 8, %{{.+}}) step (1, 1, 32)
//       CHECK:   %[[KVH:.+]] = arith.divui %[[H]], %c4
//       CHECK:   tensor.extract_slice %{{.+}}[%[[B]], %[[H]], %[[I]], 0] [1, 1, %{{.+}}, 64]
//       CHECK:   tensor.extract_slice %{{.+}}[%[[B]], %[[KVH]], 0, 0] [1, 1, %{{.+}}, 64]
//       CHECK:   tensor.extract_slice %{{.+}}[%[[B]], %[[H]], %[[I]]] [1, 1, %{{.+}}]
//       CHECK:   tensor.extract_slice %{{.+}}[%[[B]], %[[H]], %[[I]], 0] [1, 1, %{{.+}}, %{{.+}}]
//       CHECK:   attn.attention_weights {{.*}} diagonal(%{{.+}}) lse({{.*}} : tensor<1x1x?xf32>) outs({{.*}} : tensor<1x1x?x?xf32>) causal
//   CHECK-NOT:   align
//       CHECK:   tensor.parallel_insert_slice %{{.+}} into %{{.+}}[%[[B]], %[[H]], %[[I]], 0] [1, 1, %{{.+}}, %{{.+}}]
func.func @causal_gqa(%q: tensor<2x8x?x64xf32>, %k: tensor<2x2x?x64xf32>,
                      %lse: tensor<2x8x?xf32>, %w: tensor<2x8x?x?xf32>)
    -> tensor<2x8x?x?xf32> {
  %r = attn.attention_weights ins(%q, %k : tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>)
      lse(%lse : tensor<2x8x?xf32>)
      outs(%w : tensor<2x8x?x?xf32>) causal align(bottom_right)
      -> tensor<2x8x?x?xf32>
  return %r : tensor<2x8x?x?xf32>
}

// With dropout the tile carries its global indices (b, h, i, 0) as the
// origin, so that its keep bits are the untiled op's.

// CHECK-LABEL: func @dropout
//       CHECK: scf.forall (%[[B:.+]], %[[H:.+]], %[[I:.+]]) =
//       CHECK:   attn.attention_weights {{.*}} dropout(%{{.+}}, %{{.+}}) origin(%[[B]], %[[H]], %[[I]], %c0{{.*}}) outs
func.func @dropout(%q: tensor<1x2x?x16xbf16>, %k: tensor<1x2x?x16xbf16>,
                   %w: tensor<1x2x?x?xf32>, %p: f32, %seed: i64)
    -> tensor<1x2x?x?xf32> {
  %r = attn.attention_weights ins(%q, %k : tensor<1x2x?x16xbf16>, tensor<1x2x?x16xbf16>)
      dropout(%p, %seed)
      outs(%w : tensor<1x2x?x?xf32>) -> tensor<1x2x?x?xf32>
  return %r : tensor<1x2x?x?xf32>
}
