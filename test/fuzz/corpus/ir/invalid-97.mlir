func.func @weights_wrong_keys(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                              %w: tensor<1x4x8x31xf32>) {
  %r = attn.attention_weights ins(%q, %k : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>)
      outs(%w : tensor<1x4x8x31xf32>) -> tensor<1x4x8x31xf32>
  return
}
