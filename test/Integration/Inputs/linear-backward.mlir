// The gradients of non-causal linear attention in bf16 with the state's
// gradients (GQA 8/2): attn-compile takes the spec from the op.
func.func @train_step(%q: tensor<?x8x?x64xbf16>, %k: tensor<?x2x?x64xbf16>,
                      %v: tensor<?x2x?x32xbf16>, %o: tensor<?x8x?x32xbf16>,
                      %do: tensor<?x8x?x32xbf16>, %s: tensor<?x2x64x32xf32>,
                      %z: tensor<?x2x64xf32>, %ds1: tensor<?x2x64x32xf32>,
                      %dz1: tensor<?x2x64xf32>, %dq: tensor<?x8x?x64xbf16>,
                      %dk: tensor<?x2x?x64xbf16>, %dv: tensor<?x2x?x32xbf16>,
                      %ds0: tensor<?x2x64x32xf32>, %dz0: tensor<?x2x64xf32>)
    -> (tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x32xbf16>,
        tensor<?x2x64x32xf32>, tensor<?x2x64xf32>) {
  %r:5 = attn.linear_backward
      ins(%q, %k, %v, %o, %do : tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16>,
          tensor<?x2x?x32xbf16>, tensor<?x8x?x32xbf16>, tensor<?x8x?x32xbf16>)
      state(%s, %z : tensor<?x2x64x32xf32>, tensor<?x2x64xf32>)
      state_grads(%ds1, %dz1 : tensor<?x2x64x32xf32>, tensor<?x2x64xf32>)
      outs(%dq, %dk, %dv, %ds0, %dz0 : tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16>,
           tensor<?x2x?x32xbf16>, tensor<?x2x64x32xf32>, tensor<?x2x64xf32>)
      feature_map(relu)
      -> tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x32xbf16>,
         tensor<?x2x64x32xf32>, tensor<?x2x64xf32>
  return %r#0, %r#1, %r#2, %r#3, %r#4 : tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16>,
      tensor<?x2x?x32xbf16>, tensor<?x2x64x32xf32>, tensor<?x2x64xf32>
}
