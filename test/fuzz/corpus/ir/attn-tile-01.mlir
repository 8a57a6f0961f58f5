func.func @broadcast_mask_and_lse(%q: tensor<1x4x128x16xf32>, %k: tensor<1x4x256x16xf32>,
                                  %v: tensor<1x4x256x16xf32>, %m: tensor<1x1x128x256xi1>,
                                  %o: tensor<1x4x128x16xf32>, %l: tensor<1x4x128xf32>)
    -> (tensor<1x4x128x16xf32>, tensor<1x4x128xf32>) {
  %r:2 = attn.attention ins(%q, %k, %v : tensor<1x4x128x16xf32>, tensor<1x4x256x16xf32>, tensor<1x4x256x16xf32>)
      mask(%m : tensor<1x1x128x256xi1>)
      outs(%o, %l : tensor<1x4x128x16xf32>, tensor<1x4x128xf32>) -> tensor<1x4x128x16xf32>, tensor<1x4x128xf32>
  return %r#0, %r#1 : tensor<1x4x128x16xf32>, tensor<1x4x128xf32>
}
