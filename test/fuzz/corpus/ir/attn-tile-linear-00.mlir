func.func @causal_gqa_state(%q: tensor<2x4x?x64xf32>, %k: tensor<2x2x?x64xf32>,
                            %v: tensor<2x2x?x32xf32>, %s0: tensor<2x2x64x32xf32>,
                            %z0: tensor<2x2x64xf32>, %o: tensor<2x4x?x32xf32>,
                            %s1: tensor<2x2x64x32xf32>, %z1: tensor<2x2x64xf32>)
    -> (tensor<2x4x?x32xf32>, tensor<2x2x64x32xf32>, tensor<2x2x64xf32>) {
  %r:3 = attn.linear ins(%q, %k, %v : tensor<2x4x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x32xf32>)
      state(%s0, %z0 : tensor<2x2x64x32xf32>, tensor<2x2x64xf32>)
      outs(%o, %s1, %z1 : tensor<2x4x?x32xf32>, tensor<2x2x64x32xf32>, tensor<2x2x64xf32>)
      causal chunk(32) feature_map(relu)
      -> tensor<2x4x?x32xf32>, tensor<2x2x64x32xf32>, tensor<2x2x64xf32>
  return %r#0, %r#1, %r#2 : tensor<2x4x?x32xf32>, tensor<2x2x64x32xf32>, tensor<2x2x64xf32>
}
func.func @dynamic_heads(%q: tensor<?x?x?x16xbf16>, %k: tensor<?x?x?x16xbf16>,
                         %o: tensor<?x?x?x16xbf16>) -> tensor<?x?x?x16xbf16> {
  %r = attn.linear ins(%q, %k, %k : tensor<?x?x?x16xbf16>, tensor<?x?x?x16xbf16>, tensor<?x?x?x16xbf16>)
      outs(%o : tensor<?x?x?x16xbf16>) -> tensor<?x?x?x16xbf16>
  return %r : tensor<?x?x?x16xbf16>
}
