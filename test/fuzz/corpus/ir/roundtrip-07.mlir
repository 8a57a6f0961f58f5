func.func @d_differs_from_dv(%q: tensor<1x1x3x2xf32>, %k: tensor<1x1x5x2xf32>,
                             %v: tensor<1x1x5x4xf32>, %o: tensor<1x1x3x4xf32>)
    -> tensor<1x1x3x4xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x1x3x2xf32>, tensor<1x1x5x2xf32>, tensor<1x1x5x4xf32>)
      outs(%o : tensor<1x1x3x4xf32>) -> tensor<1x1x3x4xf32>
  return %r : tensor<1x1x3x4xf32>
}
