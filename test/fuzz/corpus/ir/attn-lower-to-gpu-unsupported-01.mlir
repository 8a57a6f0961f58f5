func.func @backward(%q: tensor<1x2x?x64xf16>, %k: tensor<1x2x?x64xf16>, %v: tensor<1x2x?x64xf16>,
                    %o: tensor<1x2x?x64xf16>, %lse: tensor<1x2x?xf32>, %do: tensor<1x2x?x64xf16>,
                    %dq: tensor<1x2x?x64xf16>, %dk: tensor<1x2x?x64xf16>, %dv: tensor<1x2x?x64xf16>)
    -> tensor<1x2x?x64xf16> {
  %r:3 = attn.attention_backward ins(%q, %k, %v : tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>)
      forward(%o, %lse : tensor<1x2x?x64xf16>, tensor<1x2x?xf32>) grads(%do : tensor<1x2x?x64xf16>)
      outs(%dq, %dk, %dv : tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>)
      -> tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>
  return %r#0 : tensor<1x2x?x64xf16>
}
