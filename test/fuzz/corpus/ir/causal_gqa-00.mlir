func.func @causal_gqa(%q: tensor<1x8x?x64xf32>, %k: tensor<1x2x?x64xf32>,
                      %v: tensor<1x2x?x64xf32>, %o: tensor<1x8x?x64xf32>,
                      %lse: tensor<1x8x?xf32>)
    -> (tensor<1x8x?x64xf32>, tensor<1x8x?xf32>) {
  %r:2 = attn.attention
      ins(%q, %k, %v : tensor<1x8x?x64xf32>, tensor<1x2x?x64xf32>, tensor<1x2x?x64xf32>)
      outs(%o, %lse : tensor<1x8x?x64xf32>, tensor<1x8x?xf32>)
      causal align(bottom_right)
      -> tensor<1x8x?x64xf32>, tensor<1x8x?xf32>
  return %r#0, %r#1 : tensor<1x8x?x64xf32>, tensor<1x8x?xf32>
}
