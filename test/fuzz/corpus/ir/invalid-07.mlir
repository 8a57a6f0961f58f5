func.func @query_element_f64(%q: tensor<1x4x8x16xf64>,
                             %k: tensor<1x2x32x16xf64>,
                             %v: tensor<1x2x32x8xf64>,
                             %o: tensor<1x4x8x8xf64>) {
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf64>, tensor<1x2x32x16xf64>, tensor<1x2x32x8xf64>)
      outs(%o : tensor<1x4x8x8xf64>) -> tensor<1x4x8x8xf64>
  return
}
