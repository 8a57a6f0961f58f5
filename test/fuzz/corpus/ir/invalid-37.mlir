func.func @align_and_diagonal(%q: tensor<1x4x8x16xf32>,
                              %k: tensor<1x2x32x16xf32>,
                              %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>,
                              %d: index) {
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      diagonal(%d)
      outs(%o : tensor<1x4x8x8xf32>) causal align(top_left) -> tensor<1x4x8x8xf32>
  return
}
