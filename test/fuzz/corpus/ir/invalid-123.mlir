func.func @linear_causal_lengths(%q: tensor<1x1x8x16xf32>, %k: tensor<1x1x9x16xf32>,
                                 %o: tensor<1x1x8x16xf32>) {
  %r = attn.linear ins(%q, %k, %k : tensor<1x1x8x16xf32>, tensor<1x1x9x16xf32>, tensor<1x1x9x16xf32>)
      outs(%o : tensor<1x1x8x16xf32>) causal -> tensor<1x1x8x16xf32>
  return
}
