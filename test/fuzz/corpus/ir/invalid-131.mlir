func.func @linear_outs_count(%q: tensor<1x1x8x16xf32>, %o: tensor<1x1x8x16xf32>) {
  %r:2 = attn.linear ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      outs(%o, %o : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>
  return
}
