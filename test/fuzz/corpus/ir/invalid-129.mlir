func.func @linear_chunk(%q: tensor<1x1x8x16xf32>, %o: tensor<1x1x8x16xf32>) {
  %r = attn.linear ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      outs(%o : tensor<1x1x8x16xf32>) causal chunk(0) -> tensor<1x1x8x16xf32>
  return
}
