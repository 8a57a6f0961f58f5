func.func @tiled_causal_with_mask(%q: tensor<1x1x?x64xf32>, %k: tensor<1x1x?x64xf32>,
                                  %v: tensor<1x1x?x64xf32>, %m: tensor<1x1x?x?xf32>,
                                  %o: tensor<1x1x?x64xf32>) -> tensor<1x1x?x64xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>)
      mask(%m : tensor<1x1x?x?xf32>) outs(%o : tensor<1x1x?x64xf32>) causal align(top_left) -> tensor<1x1x?x64xf32>
  return %r : tensor<1x1x?x64xf32>
}
