func.func @mqa(%q: tensor<2x8x16x32xf32>, %k: tensor<2x1x16x32xf32>,
               %v: tensor<2x1x16x32xf32>, %o: tensor<2x8x16x32xf32>)
    -> tensor<2x8x16x32xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<2x8x16x32xf32>, tensor<2x1x16x32xf32>, tensor<2x1x16x32xf32>)
      outs(%o : tensor<2x8x16x32xf32>) -> tensor<2x8x16x32xf32>
  return %r : tensor<2x8x16x32xf32>
}
