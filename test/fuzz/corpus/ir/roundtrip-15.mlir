func.func @tiled_diagonal(%q: tensor<1x1x16x8xf32>, %k: tensor<1x1x64x8xf32>,
                          %v: tensor<1x1x64x8xf32>, %o: tensor<1x1x16x8xf32>,
                          %d: index) -> tensor<1x1x16x8xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x1x16x8xf32>, tensor<1x1x64x8xf32>, tensor<1x1x64x8xf32>)
      diagonal(%d) outs(%o : tensor<1x1x16x8xf32>) causal -> tensor<1x1x16x8xf32>
  return %r : tensor<1x1x16x8xf32>
}
