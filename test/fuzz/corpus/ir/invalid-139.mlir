func.func @mha_heads(%x: tensor<1x4x30xf32>, %w: tensor<90x30xf32>, %wo: tensor<30x30xf32>, %y: tensor<1x4x30xf32>) {
  %r = attn.mha ins(%x, %x, %x : tensor<1x4x30xf32>, tensor<1x4x30xf32>, tensor<1x4x30xf32>)
      in_proj(%w : tensor<90x30xf32>) out_proj(%wo : tensor<30x30xf32>)
      outs(%y : tensor<1x4x30xf32>) heads(4) -> tensor<1x4x30xf32>
  return
}
