// RUN: attn-opt %s -attn-tile=query-tile-size=64 -attn-online-softmax -attn-skip-masked-blocks -attn-tile-keys=key-tile-size=32 -canonicalize | FileCheck %s

// Dropout's keep bits are a function of the global indices (docs/spec.md),
// so every tile of an op with dropout carries its origin: attn-tile gives
// each tile (b, h, i0, 0), attn-skip-masked-blocks adds a key range's first
// key and attn-tile-keys each key tile's.

// CHECK-LABEL: func @causal_dropout
//       CHECK: scf.forall (%[[H:.+]], %[[I:.+]]) = (0, 0) to (2, %{{.+}}) step (1, 64)
// The unmasked keys [0, n) by tiles of 32, then the diagonal's from n.
//       CHECK:   scf.for %[[J:.+]] = %c0 to %[[N:.+]] step %c32
//       CHECK:     attn.online_attention {{.*}} dropout(%arg5, %arg6) origin(%c0, %[[H]], %[[I]], %[[J]])
//       CHECK:   scf.for %[[J2:.+]] = %c0 to %{{.+}} step %c32
//       CHECK:     %[[KEY:.+]] = arith.addi %[[N]], %[[J2]]
//       CHECK:     attn.online_attention {{.*}} diagonal(%{{.+}}) dropout(%arg5, %arg6) origin(%c0, %[[H]], %[[I]], %[[KEY]])
func.func @causal_dropout(%q: tensor<1x2x?x16xf32>, %k: tensor<1x2x?x16xf32>, %v: tensor<1x2x?x16xf32>,
                          %o: tensor<1x2x?x16xf32>, %lse: tensor<1x2x?xf32>, %p: f32, %seed: i64)
    -> (tensor<1x2x?x16xf32>, tensor<1x2x?xf32>) {
  %r:2 = attn.attention ins(%q, %k, %v : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      dropout(%p, %seed)
      outs(%o, %lse : tensor<1x2x?x16xf32>, tensor<1x2x?xf32>) causal align(top_left)
      -> tensor<1x2x?x16xf32>, tensor<1x2x?xf32>
  return %r#0, %r#1 : tensor<1x2x?x16xf32>, tensor<1x2x?xf32>
}
