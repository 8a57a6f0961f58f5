func.func @causal_top_left(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>,
                           %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>)
    -> tensor<1x2x16x8xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
      outs(%o : tensor<1x2x16x8xf32>) causal align(top_left) -> tensor<1x2x16x8xf32>
  return %r : tensor<1x2x16x8xf32>
}
