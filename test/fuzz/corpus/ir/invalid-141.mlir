func.func @mha_weight_shape(%x: tensor<1x4x32xf32>, %w: tensor<32x32xf32>, %wk: tensor<32x16xf32>, %wo: tensor<32x32xf32>, %y: tensor<1x4x32xf32>) {
  %r = attn.mha ins(%x, %x, %x : tensor<1x4x32xf32>, tensor<1x4x32xf32>, tensor<1x4x32xf32>)
      in_proj(%w, %wk, %w : tensor<32x32xf32>, tensor<32x16xf32>, tensor<32x32xf32>) out_proj(%wo : tensor<32x32xf32>)
      outs(%y : tensor<1x4x32xf32>) heads(4) -> tensor<1x4x32xf32>
  return
}
