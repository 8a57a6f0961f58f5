func.func @causal_bottom_right(%q: tensor<1x2x1x8xf32>, %k: tensor<1x2x?x8xf32>,
                               %v: tensor<1x2x?x8xf32>, %o: tensor<1x2x1x8xf32>)
    -> tensor<1x2x1x8xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x2x1x8xf32>, tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32>)
      outs(%o : tensor<1x2x1x8xf32>) causal align(bottom_right) -> tensor<1x2x1x8xf32>
  return %r : tensor<1x2x1x8xf32>
}
