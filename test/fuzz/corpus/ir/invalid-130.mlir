func.func @linear_eps(%q: tensor<1x1x8x16xf32>, %o: tensor<1x1x8x16xf32>) {
  %r = attn.linear ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      outs(%o : tensor<1x1x8x16xf32>) eps(-1.0) -> tensor<1x1x8x16xf32>
  return
}
