func.func @gqa(%q: tensor<1x8x16x32xf32>, %k: tensor<1x2x16x32xf32>,
               %v: tensor<1x2x16x32xf32>, %o: tensor<1x8x16x32xf32>)
    -> tensor<1x8x16x32xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x8x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>)
      outs(%o : tensor<1x8x16x32xf32>) -> tensor<1x8x16x32xf32>
  return %r : tensor<1x8x16x32xf32>
}
