func.func @additive_mask_weights(%q: tensor<2x?x8xbf16>, %k: tensor<2x?x8xbf16>, %w: tensor<4x8xbf16>,
                                 %va: tensor<4xbf16>, %m: tensor<1x?x?xi1>, %o: tensor<2x?x8xbf16>,
                                 %p: tensor<2x?x?xf32>) -> (tensor<2x?x8xbf16>, tensor<2x?x?xf32>) {
  %r:2 = attn.additive ins(%q, %k, %k, %w, %w, %va : tensor<2x?x8xbf16>, tensor<2x?x8xbf16>, tensor<2x?x8xbf16>, tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4xbf16>)
      mask(%m : tensor<1x?x?xi1>)
      outs(%o, %p : tensor<2x?x8xbf16>, tensor<2x?x?xf32>) -> tensor<2x?x8xbf16>, tensor<2x?x?xf32>
  return %r#0, %r#1 : tensor<2x?x8xbf16>, tensor<2x?x?xf32>
}
