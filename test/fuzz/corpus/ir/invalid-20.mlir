func.func @huge_dv(%q: tensor<1x1x8x16xf32>, %k: tensor<1x1x32x16xf32>,
                   %v: tensor<1x1x32x1025xf32>, %o: tensor<1x1x8x1025xf32>) {
  %r = attn.attention ins(%q, %k, %v : tensor<1x1x8x16xf32>, tensor<1x1x32x16xf32>, tensor<1x1x32x1025xf32>)
      outs(%o : tensor<1x1x8x1025xf32>) -> tensor<1x1x8x1025xf32>
  return
}
