func.func @tensors(%q: tensor<1x1x4x16xf32>, %acc: tensor<1x1x4x16xf32>, %m: tensor<1x1x4xf32>)
    -> (tensor<1x1x4x16xf32>, tensor<1x1x4xf32>, tensor<1x1x4xf32>) {
  %r:3 = attn.online_attention ins(%q, %q, %q : tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32>)
      outs(%acc, %m, %m : tensor<1x1x4x16xf32>, tensor<1x1x4xf32>, tensor<1x1x4xf32>)
      -> tensor<1x1x4x16xf32>, tensor<1x1x4xf32>, tensor<1x1x4xf32>
  return %r#0, %r#1, %r#2 : tensor<1x1x4x16xf32>, tensor<1x1x4xf32>, tensor<1x1x4xf32>
}
