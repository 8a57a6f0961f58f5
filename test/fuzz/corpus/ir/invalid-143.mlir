func.func @mha_bias_type(%x: tensor<1x4x32xf32>, %w: tensor<96x32xf32>, %b: tensor<96xbf16>, %wo: tensor<32x32xf32>, %y: tensor<1x4x32xf32>) {
  %r = attn.mha ins(%x, %x, %x : tensor<1x4x32xf32>, tensor<1x4x32xf32>, tensor<1x4x32xf32>)
      in_proj(%w : tensor<96x32xf32>) in_bias(%b : tensor<96xbf16>) out_proj(%wo : tensor<32x32xf32>)
      outs(%y : tensor<1x4x32xf32>) heads(4) -> tensor<1x4x32xf32>
  return
}
