func.func @whole_ops(%q: tensor<1x1x?x64xf32>, %k: tensor<1x1x?x64xf32>, %v: tensor<1x1x?x64xf32>,
                         %mask: tensor<1x1x?x?xi1>,
                         %qb: tensor<1x1x?x64xbf16>, %kb: tensor<1x1x?x64xbf16>, %vb: tensor<1x1x?x64xbf16>,
                         %acc: tensor<1x1x?x64xf32>, %m: tensor<1x1x?xf32>, %s: tensor<1x1x?xf32>, %d: index)
    -> (tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>) {
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>)
      diagonal(%d) outs(%acc, %m, %s : tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>) causal
      -> tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>
  %r2:3 = attn.online_attention ins(%q, %k, %v : tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>)
      mask(%mask : tensor<1x1x?x?xi1>)
      diagonal(%d) outs(%r#0, %r#1, %r#2 : tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>) causal
      -> tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>
  %r3:3 = attn.online_attention ins(%qb, %kb, %vb : tensor<1x1x?x64xbf16>, tensor<1x1x?x64xbf16>, tensor<1x1x?x64xbf16>)
      diagonal(%d) outs(%r2#0, %r2#1, %r2#2 : tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>) causal
      -> tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>
  return %r3#0, %r3#1, %r3#2 : tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>
}
