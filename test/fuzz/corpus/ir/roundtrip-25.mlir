func.func @linear_state(%q: tensor<1x4x?x16xbf16>, %k: tensor<1x2x?x16xbf16>,
                        %v: tensor<1x2x?x8xbf16>, %s0: tensor<1x2x16x8xf32>,
                        %z0: tensor<1x2x16xf32>, %o: tensor<1x4x?x8xbf16>,
                        %s1: tensor<1x2x16x8xf32>, %z1: tensor<1x2x16xf32>)
    -> (tensor<1x4x?x8xbf16>, tensor<1x2x16x8xf32>, tensor<1x2x16xf32>) {
  %r:3 = attn.linear ins(%q, %k, %v : tensor<1x4x?x16xbf16>, tensor<1x2x?x16xbf16>, tensor<1x2x?x8xbf16>)
      state(%s0, %z0 : tensor<1x2x16x8xf32>, tensor<1x2x16xf32>)
      outs(%o, %s1, %z1 : tensor<1x4x?x8xbf16>, tensor<1x2x16x8xf32>, tensor<1x2x16xf32>)
      causal chunk(32) eps(1.0e-3) feature_map(relu)
      -> tensor<1x4x?x8xbf16>, tensor<1x2x16x8xf32>, tensor<1x2x16xf32>
  return %r#0, %r#1, %r#2 : tensor<1x4x?x8xbf16>, tensor<1x2x16x8xf32>, tensor<1x2x16xf32>
}
