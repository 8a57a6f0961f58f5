func.func @additive_score_vector(%q: tensor<1x4x8xf32>, %w: tensor<16x8xf32>,
                                 %va: tensor<15xf32>, %o: tensor<1x4x8xf32>) {
  %r = attn.additive ins(%q, %q, %q, %w, %w, %va : tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<15xf32>)
      outs(%o : tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  return
}
