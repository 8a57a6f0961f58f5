func.func @additive_dynamic_attn_dim(%q: tensor<1x4x8xf32>, %w: tensor<?x8xf32>, %va: tensor<?xf32>,
                                     %o: tensor<1x4x8xf32>) {
  %r = attn.additive ins(%q, %q, %q, %w, %w, %va : tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?xf32>)
      outs(%o : tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  return
}
