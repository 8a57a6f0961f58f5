func.func @online_tensor(%q: tensor<1x1x64x64xf16>, %k: tensor<1x1x?x64xf16>,
                         %v: tensor<1x1x?x32xf16>, %m: tensor<1x1x64x?xi1>,
                         %d: index, %acc: tensor<1x1x64x32xf32>,
                         %max: tensor<1x1x64xf32>, %sum: tensor<1x1x64xf32>)
    -> (tensor<1x1x64x32xf32>, tensor<1x1x64xf32>, tensor<1x1x64xf32>) {
  %r:3 = attn.online_attention
      ins(%q, %k, %v : tensor<1x1x64x64xf16>, tensor<1x1x?x64xf16>, tensor<1x1x?x32xf16>)
      mask(%m : tensor<1x1x64x?xi1>) diagonal(%d)
      outs(%acc, %max, %sum : tensor<1x1x64x32xf32>, tensor<1x1x64xf32>, tensor<1x1x64xf32>)
      causal scale(0.125)
      -> tensor<1x1x64x32xf32>, tensor<1x1x64xf32>, tensor<1x1x64xf32>
  return %r#0, %r#1, %r#2 : tensor<1x1x64x32xf32>, tensor<1x1x64xf32>, tensor<1x1x64xf32>
}
