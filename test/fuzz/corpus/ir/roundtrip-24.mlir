func.func @linear_minimal(%q: tensor<1x2x?x16xf32>, %k: tensor<1x2x?x16xf32>,
                          %v: tensor<1x2x?x8xf32>, %o: tensor<1x2x?x8xf32>)
    -> tensor<1x2x?x8xf32> {
  %r = attn.linear ins(%q, %k, %v : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x8xf32>)
      outs(%o : tensor<1x2x?x8xf32>) -> tensor<1x2x?x8xf32>
  return %r : tensor<1x2x?x8xf32>
}
