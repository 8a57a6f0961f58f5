func.func @query_element_i32(%q: tensor<1x4x8x16xi32>,
                             %k: tensor<1x2x32x16xi32>,
                             %v: tensor<1x2x32x8xi32>,
                             %o: tensor<1x4x8x8xi32>) {
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xi32>, tensor<1x2x32x16xi32>, tensor<1x2x32x8xi32>)
      outs(%o : tensor<1x4x8x8xi32>) -> tensor<1x4x8x8xi32>
  return
}
