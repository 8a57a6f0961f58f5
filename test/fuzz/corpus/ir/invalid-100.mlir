func.func @weights_mixed_forms(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                               %w: memref<1x4x8x32xf32>) {
  attn.attention_weights ins(%q, %k : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>)
      outs(%w : memref<1x4x8x32xf32>)
  return
}
