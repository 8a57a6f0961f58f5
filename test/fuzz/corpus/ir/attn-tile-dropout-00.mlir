func.func @causal_dropout(%q: tensor<1x2x?x16xf32>, %k: tensor<1x2x?x16xf32>, %v: tensor<1x2x?x16xf32>,
                          %o: tensor<1x2x?x16xf32>, %lse: tensor<1x2x?xf32>, %p: f32, %seed: i64)
    -> (tensor<1x2x?x16xf32>, tensor<1x2x?xf32>) {
  %r:2 = attn.attention ins(%q, %k, %v : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      dropout(%p, %seed)
      outs(%o, %lse : tensor<1x2x?x16xf32>, tensor<1x2x?xf32>) causal align(top_left)
      -> tensor<1x2x?x16xf32>, tensor<1x2x?xf32>
  return %r#0, %r#1 : tensor<1x2x?x16xf32>, tensor<1x2x?xf32>
}
