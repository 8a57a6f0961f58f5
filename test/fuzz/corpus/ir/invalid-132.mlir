func.func @additive_key_weight(%q: tensor<1x4x8xf32>, %k: tensor<1x6x10xf32>,
                               %wq: tensor<16x8xf32>, %wk: tensor<16x8xf32>,
                               %va: tensor<16xf32>, %o: tensor<1x4x10xf32>) {
  %r = attn.additive ins(%q, %k, %k, %wq, %wk, %va : tensor<1x4x8xf32>, tensor<1x6x10xf32>, tensor<1x6x10xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16xf32>)
      outs(%o : tensor<1x4x10xf32>) -> tensor<1x4x10xf32>
  return
}
