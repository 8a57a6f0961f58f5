func.func @attention(%q: tensor<1x2x?x32xf32>, %k: tensor<1x2x?x32xf32>,
                     %v: tensor<1x2x?x32xf32>, %o: tensor<1x2x?x32xf32>) -> tensor<1x2x?x32xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x2x?x32xf32>, tensor<1x2x?x32xf32>, tensor<1x2x?x32xf32>)
      outs(%o : tensor<1x2x?x32xf32>) causal align(top_left) -> tensor<1x2x?x32xf32>
  return %r : tensor<1x2x?x32xf32>
}
