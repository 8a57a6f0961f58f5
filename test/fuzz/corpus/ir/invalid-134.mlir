func.func @additive_element_types(%q: tensor<1x4x8xf32>, %w: tensor<16x8xbf16>,
                                  %va: tensor<16xf32>, %o: tensor<1x4x8xf32>) {
  %r = attn.additive ins(%q, %q, %q, %w, %w, %va : tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<16x8xbf16>, tensor<16x8xbf16>, tensor<16xf32>)
      outs(%o : tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  return
}
