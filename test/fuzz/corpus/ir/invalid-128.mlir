func.func @linear_final_normalizer(%q: tensor<1x1x8x16xf32>, %s: tensor<1x1x16x16xf32>,
                                   %z: tensor<1x1x15xf32>, %o: tensor<1x1x8x16xf32>) {
  %r:3 = attn.linear ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      outs(%o, %s, %z : tensor<1x1x8x16xf32>, tensor<1x1x16x16xf32>, tensor<1x1x15xf32>)
      -> tensor<1x1x8x16xf32>, tensor<1x1x16x16xf32>, tensor<1x1x15xf32>
  return
}
