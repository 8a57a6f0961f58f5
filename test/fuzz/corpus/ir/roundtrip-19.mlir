func.func @backward(%q: tensor<2x8x?x64xbf16>, %k: tensor<2x2x?x64xbf16>, %v: tensor<2x2x?x32xbf16>,
                    %m: tensor<1x1x?x?xbf16>, %o: tensor<2x8x?x32xbf16>, %lse: tensor<2x8x?xf32>,
                    %do: tensor<2x8x?x32xbf16>, %dlse: tensor<2x8x?xf32>, %dq: tensor<2x8x?x64xbf16>,
                    %dk: tensor<2x2x?x64xbf16>, %dv: tensor<2x2x?x32xbf16>) {
  %r:3 = attn.attention_backward
      ins(%q, %k, %v : tensor<2x8x?x64xbf16>, tensor<2x2x?x64xbf16>, tensor<2x2x?x32xbf16>)
      mask(%m : tensor<1x1x?x?xbf16>)
      forward(%o, %lse : tensor<2x8x?x32xbf16>, tensor<2x8x?xf32>)
      grads(%do : tensor<2x8x?x32xbf16>) grad_lse(%dlse : tensor<2x8x?xf32>)
      outs(%dq, %dk, %dv : tensor<2x8x?x64xbf16>, tensor<2x2x?x64xbf16>, tensor<2x2x?x32xbf16>)
      causal align(bottom_right) window <left = 128> scale(0.125) softcap(30.0)
      -> tensor<2x8x?x64xbf16>, tensor<2x2x?x64xbf16>, tensor<2x2x?x32xbf16>
  return
}
