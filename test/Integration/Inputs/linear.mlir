// An attn.linear in a function: attn-compile makes a kernel named after the
// function, its spec read from the op (causal, chunk, feature map, the
// state, the static sizes).
func.func @decode_step(%q: tensor<1x8x1x64xbf16>, %k: tensor<1x2x1x64xbf16>,
                       %v: tensor<1x2x1x32xbf16>, %s0: tensor<1x2x64x32xf32>,
                       %z0: tensor<1x2x64xf32>, %o: tensor<1x8x1x32xbf16>,
                       %s1: tensor<1x2x64x32xf32>, %z1: tensor<1x2x64xf32>)
    -> (tensor<1x8x1x32xbf16>, tensor<1x2x64x32xf32>, tensor<1x2x64xf32>) {
  %r:3 = attn.linear ins(%q, %k, %v : tensor<1x8x1x64xbf16>, tensor<1x2x1x64xbf16>, tensor<1x2x1x32xbf16>)
      state(%s0, %z0 : tensor<1x2x64x32xf32>, tensor<1x2x64xf32>)
      outs(%o, %s1, %z1 : tensor<1x8x1x32xbf16>, tensor<1x2x64x32xf32>, tensor<1x2x64xf32>)
      causal chunk(32) feature_map(relu)
      -> tensor<1x8x1x32xbf16>, tensor<1x2x64x32xf32>, tensor<1x2x64xf32>
  return %r#0, %r#1, %r#2 : tensor<1x8x1x32xbf16>, tensor<1x2x64x32xf32>, tensor<1x2x64xf32>
}
