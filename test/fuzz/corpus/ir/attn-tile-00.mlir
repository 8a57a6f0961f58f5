func.func @causal_gqa(%q: tensor<2x8x?x64xf32>, %k: tensor<2x2x?x64xf32>,
                      %v: tensor<2x2x?x32xf32>, %o: tensor<2x8x?x32xf32>)
    -> tensor<2x8x?x32xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x32xf32>)
      outs(%o : tensor<2x8x?x32xf32>) causal align(bottom_right) -> tensor<2x8x?x32xf32>
  return %r : tensor<2x8x?x32xf32>
}
