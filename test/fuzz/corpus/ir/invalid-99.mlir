func.func @weights_key_head_dim(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x8xf32>,
                                %w: tensor<1x4x8x32xf32>) {
  %r = attn.attention_weights ins(%q, %k : tensor<1x4x8x16xf32>, tensor<1x2x32x8xf32>)
      outs(%w : tensor<1x4x8x32xf32>) -> tensor<1x4x8x32xf32>
  return
}
