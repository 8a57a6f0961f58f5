func.func @linear_wrong_value_heads(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>,
                                    %v: tensor<1x3x8x16xf32>, %o: tensor<1x4x8x16xf32>) {
  %r = attn.linear ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x3x8x16xf32>)
      outs(%o : tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return
}
