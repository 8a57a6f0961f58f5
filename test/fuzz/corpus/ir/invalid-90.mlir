func.func @backward_lse_type(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
    %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>, %lse: tensor<1x4x8xf16>,
    %do: tensor<1x4x8x8xf32>, %dq: tensor<1x4x8x16xf32>, %dk: tensor<1x2x32x16xf32>,
    %dv: tensor<1x2x32x8xf32>) {
  %r:3 = attn.attention_backward ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      forward(%o, %lse : tensor<1x4x8x8xf32>, tensor<1x4x8xf16>) grads(%do : tensor<1x4x8x8xf32>)
      outs(%dq, %dk, %dv : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      -> tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>
  return
}
