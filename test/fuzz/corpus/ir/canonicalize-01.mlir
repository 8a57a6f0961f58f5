func.func @keep_used_lse(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>,
                         %v: tensor<1x2x8x16xf32>, %o: tensor<1x2x8x16xf32>,
                         %l: tensor<1x2x8xf32>)
    -> (tensor<1x2x8x16xf32>, tensor<1x2x8xf32>) {
  %r:2 = attn.attention ins(%q, %k, %v : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>)
      outs(%o, %l : tensor<1x2x8x16xf32>, tensor<1x2x8xf32>)
      -> tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
  return %r#0, %r#1 : tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
}
