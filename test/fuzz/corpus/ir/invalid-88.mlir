func.func @kernel_empty_block(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                              %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>) {
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      outs(%o : tensor<1x4x8x8xf32>) kernel <packed, query_tile = 64, key_block = 0> -> tensor<1x4x8x8xf32>
  return
}
