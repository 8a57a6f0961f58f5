func.func @mha_causal_alignment(%x: tensor<1x4x32xf32>, %w: tensor<96x32xf32>, %wo: tensor<32x32xf32>, %y: tensor<1x4x32xf32>) {
  %r = attn.mha ins(%x, %x, %x : tensor<1x4x32xf32>, tensor<1x4x32xf32>, tensor<1x4x32xf32>)
      in_proj(%w : tensor<96x32xf32>) out_proj(%wo : tensor<32x32xf32>)
      outs(%y : tensor<1x4x32xf32>) heads(4) causal -> tensor<1x4x32xf32>
  return
}
