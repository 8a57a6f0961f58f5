func.func @backward_grad_value_type(%q: tensor<1x4x8x16xbf16>, %k: tensor<1x2x32x16xbf16>,
    %v: tensor<1x2x32x8xbf16>, %o: tensor<1x4x8x8xbf16>, %lse: tensor<1x4x8xf32>,
    %do: tensor<1x4x8x8xbf16>, %dq: tensor<1x4x8x16xbf16>, %dk: tensor<1x2x32x16xbf16>,
    %dv: tensor<1x2x32x8xf32>) {
  %r:3 = attn.attention_backward ins(%q, %k, %v : tensor<1x4x8x16xbf16>, tensor<1x2x32x16xbf16>, tensor<1x2x32x8xbf16>)
      forward(%o, %lse : tensor<1x4x8x8xbf16>, tensor<1x4x8xf32>) grads(%do : tensor<1x4x8x8xbf16>)
      outs(%dq, %dk, %dv : tensor<1x4x8x16xbf16>, tensor<1x2x32x16xbf16>, tensor<1x2x32x8xf32>)
      -> tensor<1x4x8x16xbf16>, tensor<1x2x32x16xbf16>, tensor<1x2x32x8xf32>
  return
}
