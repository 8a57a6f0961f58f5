func.func @own_key_tile(%q: tensor<1x1x?x64xf32>, %k: tensor<1x1x?x64xf32>, %v: tensor<1x1x?x64xf32>,
                        %acc: tensor<1x1x?x64xf32>, %m: tensor<1x1x?xf32>, %s: tensor<1x1x?xf32>, %d: index)
    -> (tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>)
    {
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>)
      diagonal(%d) outs(%acc, %m, %s : tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>) causal
      kernel <packed, query_tile = 64, key_block = 16, row_block = 2>
      -> tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>
  return %r#0, %r#1, %r#2 : tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>
}
