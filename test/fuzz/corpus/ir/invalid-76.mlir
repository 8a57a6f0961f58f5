func.func @missing_value(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                         %o: tensor<1x4x8x8xf32>) {
  %r = attn.attention ins(%q, %k : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>) outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}
