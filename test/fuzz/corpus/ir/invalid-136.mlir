func.func @additive_mask_rows(%q: tensor<1x4x8xf32>, %w: tensor<16x8xf32>, %va: tensor<16xf32>,
                              %m: tensor<1x3x4xi1>, %o: tensor<1x4x8xf32>) {
  %r = attn.additive ins(%q, %q, %q, %w, %w, %va : tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16xf32>)
      mask(%m : tensor<1x3x4xi1>)
      outs(%o : tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  return
}
