func.func @mha_packed_widths(%x: tensor<1x4x32xf32>, %k: tensor<1x4x16xf32>, %w: tensor<96x32xf32>, %wo: tensor<32x32xf32>, %y: tensor<1x4x32xf32>) {
  %r = attn.mha ins(%x, %k, %k : tensor<1x4x32xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
      in_proj(%w : tensor<96x32xf32>) out_proj(%wo : tensor<32x32xf32>)
      outs(%y : tensor<1x4x32xf32>) heads(4) -> tensor<1x4x32xf32>
  return
}
