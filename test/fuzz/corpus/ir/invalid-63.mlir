func.func @online_acc_element(%q: tensor<1x4x8x16xf16>,
                              %k: tensor<1x2x32x16xf16>,
                              %v: tensor<1x2x32x8xf16>,
                              %acc: tensor<1x4x8x8xf16>,
                              %max: tensor<1x4x8xf32>,
                              %sum: tensor<1x4x8xf32>) {
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x4x8x16xf16>, tensor<1x2x32x16xf16>, tensor<1x2x32x8xf16>)
      outs(%acc, %max, %sum : tensor<1x4x8x8xf16>, tensor<1x4x8xf32>, tensor<1x4x8xf32>)
      -> tensor<1x4x8x8xf16>, tensor<1x4x8xf32>, tensor<1x4x8xf32>
  return
}
