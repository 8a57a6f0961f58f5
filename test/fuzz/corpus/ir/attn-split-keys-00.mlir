func.func @decode(%q: tensor<?x8x1x64xf32>, %k: tensor<?x2x?x64xf32>,
                  %v: tensor<?x2x?x64xf32>, %m: tensor<?x8x1x?xi1>,
                  %o: tensor<?x8x1x64xf32>, %l: tensor<?x8x1xf32>)
    -> (tensor<?x8x1x64xf32>, tensor<?x8x1xf32>)
    attributes {attn.kernel, attn.split_keys} {
  %0:2 = attn.attention ins(%q, %k, %v : tensor<?x8x1x64xf32>, tensor<?x2x?x64xf32>, tensor<?x2x?x64xf32>)
      mask(%m : tensor<?x8x1x?xi1>)
      outs(%o, %l : tensor<?x8x1x64xf32>, tensor<?x8x1xf32>) causal align(bottom_right)
      -> tensor<?x8x1x64xf32>, tensor<?x8x1xf32>
  return %0#0, %0#1 : tensor<?x8x1x64xf32>, tensor<?x8x1xf32>
}
func.func @not_marked(%q: tensor<1x8x1x64xf32>, %k: tensor<1x2x?x64xf32>,
                      %v: tensor<1x2x?x64xf32>, %o: tensor<1x8x1x64xf32>)
    -> tensor<1x8x1x64xf32> attributes {attn.kernel} {
  %0 = attn.attention ins(%q, %k, %v : tensor<1x8x1x64xf32>, tensor<1x2x?x64xf32>, tensor<1x2x?x64xf32>)
      outs(%o : tensor<1x8x1x64xf32>) -> tensor<1x8x1x64xf32>
  return %0 : tensor<1x8x1x64xf32>
}
