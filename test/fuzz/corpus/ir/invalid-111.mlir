func.func @captures_without_modifiers(%q: tensor<1x1x8x16xf32>, %c: tensor<4xf32>, %o: tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32> {
  %r = attn.attention ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      captures(%c : tensor<4xf32>)
      outs(%o : tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32>
  return %r : tensor<1x1x8x16xf32>
}
