func.func @masks(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x32x8xf32>,
                 %v: tensor<2x4x32x8xf32>, %o: tensor<2x4x16x8xf32>,
                 %m0: tensor<1x1x1x32xi1>, %m1: tensor<2x1x16x32xi1>,
                 %m2: tensor<1x4x1x32xi1>, %m3: tensor<2x4x16x32xi1>,
                 %bias: tensor<2x4x16x32xf32>)
    -> (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>,
        tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) {
  %r0 = attn.attention ins(%q, %k, %v : tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x8xf32>)
      mask(%m0 : tensor<1x1x1x32xi1>)
      outs(%o : tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  %r1 = attn.attention ins(%q, %k, %v : tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x8xf32>)
      mask(%m1 : tensor<2x1x16x32xi1>)
      outs(%o : tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  %r2 = attn.attention ins(%q, %k, %v : tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x8xf32>)
      mask(%m2 : tensor<1x4x1x32xi1>)
      outs(%o : tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  %r3 = attn.attention ins(%q, %k, %v : tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x8xf32>)
      mask(%m3 : tensor<2x4x16x32xi1>)
      outs(%o : tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  %r4 = attn.attention ins(%q, %k, %v : tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x8xf32>)
      mask(%bias : tensor<2x4x16x32xf32>)
      outs(%o : tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  return %r0, %r1, %r2, %r3, %r4 : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>,
      tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>
}
