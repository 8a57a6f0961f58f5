func.func @grad_mask_without_bias(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>,
                                  %m: tensor<1x1x8x8xi1>, %o: tensor<1x2x8x16xf32>,
                                  %l: tensor<1x2x8xf32>, %dm: tensor<1x2x8x8xf32>) {
  %r:4 = attn.attention_backward ins(%q, %k, %k : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>)
      mask(%m : tensor<1x1x8x8xi1>)
      forward(%o, %l : tensor<1x2x8x16xf32>, tensor<1x2x8xf32>) grads(%o : tensor<1x2x8x16xf32>)
      outs(%q, %k, %k : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>
           grad_mask(%dm : tensor<1x2x8x8xf32>))
      -> tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x8xf32>
  return
}
