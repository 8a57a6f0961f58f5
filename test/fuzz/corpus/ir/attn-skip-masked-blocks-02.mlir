func.func @unmasked(%q: tensor<1x1x64x64xf32>, %k: tensor<1x1x?x64xf32>, %v: tensor<1x1x?x64xf32>,
                    %acc: tensor<1x1x64x64xf32>, %m: tensor<1x1x64xf32>, %s: tensor<1x1x64xf32>)
    -> (tensor<1x1x64x64xf32>, tensor<1x1x64xf32>, tensor<1x1x64xf32>) {
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x1x64x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>)
      outs(%acc, %m, %s : tensor<1x1x64x64xf32>, tensor<1x1x64xf32>, tensor<1x1x64xf32>)
      -> tensor<1x1x64x64xf32>, tensor<1x1x64xf32>, tensor<1x1x64xf32>
  return %r#0, %r#1, %r#2 : tensor<1x1x64x64xf32>, tensor<1x1x64xf32>, tensor<1x1x64xf32>
}
