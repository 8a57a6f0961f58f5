func.func @additive_weights_type(%q: tensor<1x4x8xf32>, %w: tensor<16x8xf32>, %va: tensor<16xf32>,
                                 %o: tensor<1x4x8xf32>, %p: tensor<1x4x4xbf16>) {
  %r:2 = attn.additive ins(%q, %q, %q, %w, %w, %va : tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16xf32>)
      outs(%o, %p : tensor<1x4x8xf32>, tensor<1x4x4xbf16>) -> tensor<1x4x8xf32>, tensor<1x4x4xbf16>
  return
}
