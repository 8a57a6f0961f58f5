func.func @windows(%q: tensor<1x1x16x8xf32>, %k: tensor<1x1x16x8xf32>,
                   %v: tensor<1x1x16x8xf32>, %o: tensor<1x1x16x8xf32>)
    -> (tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>) {
  %r0 = attn.attention ins(%q, %k, %v : tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>)
      outs(%o : tensor<1x1x16x8xf32>) align(top_left) window <left = 4> -> tensor<1x1x16x8xf32>
  %r1 = attn.attention ins(%q, %k, %v : tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>)
      outs(%o : tensor<1x1x16x8xf32>) align(bottom_right) window <right = 2> -> tensor<1x1x16x8xf32>
  %r2 = attn.attention ins(%q, %k, %v : tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>)
      outs(%o : tensor<1x1x16x8xf32>) align(top_left) window <left = 4, right = 0> -> tensor<1x1x16x8xf32>
  return %r0, %r1, %r2 : tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>
}
