func.func @linear_dynamic_head_dim(%q: tensor<1x1x8x?xf32>, %o: tensor<1x1x8x?xf32>) {
  %r = attn.linear ins(%q, %q, %q : tensor<1x1x8x?xf32>, tensor<1x1x8x?xf32>, tensor<1x1x8x?xf32>)
      outs(%o : tensor<1x1x8x?xf32>) -> tensor<1x1x8x?xf32>
  return
}
