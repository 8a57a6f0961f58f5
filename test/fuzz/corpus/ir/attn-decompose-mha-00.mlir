func.func @packed(%x: tensor<?x?x32xf32>, %w: tensor<96x32xf32>, %b: tensor<96xf32>,
                  %wo: tensor<32x32xf32>, %bo: tensor<32xf32>, %y: tensor<?x?x32xf32>,
                  %m: tensor<1x1x?x?xi1>) -> tensor<?x?x32xf32> {
  %r = attn.mha ins(%x, %x, %x : tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>)
      in_proj(%w : tensor<96x32xf32>) in_bias(%b : tensor<96xf32>)
      out_proj(%wo : tensor<32x32xf32>) out_bias(%bo : tensor<32xf32>)
      mask(%m : tensor<1x1x?x?xi1>)
      outs(%y : tensor<?x?x32xf32>) heads(4) causal align(bottom_right) scale(0.25)
      -> tensor<?x?x32xf32>
  return %r : tensor<?x?x32xf32>
}
