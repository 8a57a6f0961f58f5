// A misspelled clause (bogus) after causal.
func.func @k(%q: tensor<1x1x4x16xf32>, %k: tensor<1x1x8x16xf32>, %v: tensor<1x1x8x16xf32>, %o: tensor<1x1x4x16xf32>) -> tensor<1x1x4x16xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x1x4x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) outs(%o : tensor<1x1x4x16xf32>) causal bogus(3) -> tensor<1x1x4x16xf32>
  return %r : tensor<1x1x4x16xf32>
}
