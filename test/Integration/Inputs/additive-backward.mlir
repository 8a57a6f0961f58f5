// An attn.additive_backward in a function: attn-compile makes its kernel
// (spec key 'additive,backward'), named after the function.
func.func @bahdanau_grads(%q: tensor<4x?x256xbf16>, %k: tensor<4x?x128xbf16>, %v: tensor<4x?x128xbf16>,
                          %wq: tensor<64x256xbf16>, %wk: tensor<64x128xbf16>, %va: tensor<64xbf16>,
                          %do: tensor<4x?x128xbf16>, %m: tensor<4x?x?xi1>,
                          %dqp: tensor<4x?x64xf32>, %dkp: tensor<4x?x?x64xf32>,
                          %dv: tensor<4x?x?x128xf32>, %dva: tensor<4x?x64xf32>)
    -> (tensor<4x?x64xf32>, tensor<4x?x?x64xf32>, tensor<4x?x?x128xf32>, tensor<4x?x64xf32>) {
  %r:4 = attn.additive_backward ins(%q, %k, %v, %wq, %wk, %va, %do : tensor<4x?x256xbf16>, tensor<4x?x128xbf16>, tensor<4x?x128xbf16>, tensor<64x256xbf16>, tensor<64x128xbf16>, tensor<64xbf16>, tensor<4x?x128xbf16>)
      mask(%m : tensor<4x?x?xi1>)
      outs(%dqp, %dkp, %dv, %dva : tensor<4x?x64xf32>, tensor<4x?x?x64xf32>, tensor<4x?x?x128xf32>, tensor<4x?x64xf32>)
      -> tensor<4x?x64xf32>, tensor<4x?x?x64xf32>, tensor<4x?x?x128xf32>, tensor<4x?x64xf32>
  return %r#0, %r#1, %r#2, %r#3 : tensor<4x?x64xf32>, tensor<4x?x?x64xf32>, tensor<4x?x?x128xf32>, tensor<4x?x64xf32>
}
