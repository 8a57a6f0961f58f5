func.func @grad_mask_shape(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x9x16xf32>,
                           %m: tensor<1x1x8x9xf32>, %o: tensor<1x2x8x16xf32>,
                           %l: tensor<1x2x8xf32>, %dm: tensor<1x1x8x9xf32>) {
  %r:4 = attn.attention_backward ins(%q, %k, %k : tensor<1x2x8x16xf32>, tensor<1x2x9x16xf32>, tensor<1x2x9x16xf32>)
      mask(%m : tensor<1x1x8x9xf32>)
      forward(%o, %l : tensor<1x2x8x16xf32>, tensor<1x2x8xf32>) grads(%o : tensor<1x2x8x16xf32>)
      outs(%q, %k, %k : tensor<1x2x8x16xf32>, tensor<1x2x9x16xf32>, tensor<1x2x9x16xf32>
           grad_mask(%dm : tensor<1x1x8x9xf32>))
      -> tensor<1x2x8x16xf32>, tensor<1x2x9x16xf32>, tensor<1x2x9x16xf32>, tensor<1x1x8x9xf32>
  return
}
