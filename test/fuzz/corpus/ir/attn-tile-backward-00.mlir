func.func @causal_gqa(%q: tensor<2x8x?x64xf32>, %k: tensor<2x2x?x64xf32>, %v: tensor<2x2x?x32xf32>,
                      %o: tensor<2x8x?x32xf32>, %lse: tensor<2x8x?xf32>, %do: tensor<2x8x?x32xf32>,
                      %dq: tensor<2x8x?x64xf32>, %dk: tensor<2x2x?x64xf32>, %dv: tensor<2x2x?x32xf32>)
    -> (tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x32xf32>) {
  %r:3 = attn.attention_backward
      ins(%q, %k, %v : tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x32xf32>)
      forward(%o, %lse : tensor<2x8x?x32xf32>, tensor<2x8x?xf32>)
      grads(%do : tensor<2x8x?x32xf32>)
      outs(%dq, %dk, %dv : tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x32xf32>)
      causal align(bottom_right)
      -> tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x32xf32>
  return %r#0, %r#1, %r#2 : tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x32xf32>
}
func.func @dynamic_group(%q: tensor<1x?x?x16xf32>, %k: tensor<1x?x?x16xf32>, %v: tensor<1x?x?x16xf32>,
                         %o: tensor<1x?x?x16xf32>, %lse: tensor<1x?x?xf32>, %do: tensor<1x?x?x16xf32>,
                         %dq: tensor<1x?x?x16xf32>, %dk: tensor<1x?x?x16xf32>, %dv: tensor<1x?x?x16xf32>)
    -> (tensor<1x?x?x16xf32>, tensor<1x?x?x16xf32>, tensor<1x?x?x16xf32>) {
  %r:3 = attn.attention_backward
      ins(%q, %k, %v : tensor<1x?x?x16xf32>, tensor<1x?x?x16xf32>, tensor<1x?x?x16xf32>)
      forward(%o, %lse : tensor<1x?x?x16xf32>, tensor<1x?x?xf32>)
      grads(%do : tensor<1x?x?x16xf32>)
      outs(%dq, %dk, %dv : tensor<1x?x?x16xf32>, tensor<1x?x?x16xf32>, tensor<1x?x?x16xf32>)
      -> tensor<1x?x?x16xf32>, tensor<1x?x?x16xf32>, tensor<1x?x?x16xf32>
  return %r#0, %r#1, %r#2 : tensor<1x?x?x16xf32>, tensor<1x?x?x16xf32>, tensor<1x?x?x16xf32>
}
func.func @bias_gradient(%q: tensor<2x4x?x16xf32>, %k: tensor<2x2x?x16xf32>, %v: tensor<2x2x?x16xf32>,
                         %m: tensor<1x4x?x?xf32>,
                         %o: tensor<2x4x?x16xf32>, %lse: tensor<2x4x?xf32>, %do: tensor<2x4x?x16xf32>,
                         %dq: tensor<2x4x?x16xf32>, %dk: tensor<2x2x?x16xf32>, %dv: tensor<2x2x?x16xf32>,
                         %dm: tensor<2x4x?x?xf32>) -> tensor<2x4x?x?xf32> {
  %r:4 = attn.attention_backward
      ins(%q, %k, %v : tensor<2x4x?x16xf32>, tensor<2x2x?x16xf32>, tensor<2x2x?x16xf32>)
      mask(%m : tensor<1x4x?x?xf32>)
      forward(%o, %lse : tensor<2x4x?x16xf32>, tensor<2x4x?xf32>)
      grads(%do : tensor<2x4x?x16xf32>)
      outs(%dq, %dk, %dv : tensor<2x4x?x16xf32>, tensor<2x2x?x16xf32>, tensor<2x2x?x16xf32>
           grad_mask(%dm : tensor<2x4x?x?xf32>))
      -> tensor<2x4x?x16xf32>, tensor<2x2x?x16xf32>, tensor<2x2x?x16xf32>, tensor<2x4x?x?xf32>
  return %r#3 : tensor<2x4x?x?xf32>
}
