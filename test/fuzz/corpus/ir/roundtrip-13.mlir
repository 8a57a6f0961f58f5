func.func @scale(%q: tensor<1x1x4x64xf32>, %k: tensor<1x1x4x64xf32>,
                 %v: tensor<1x1x4x64xf32>, %o: tensor<1x1x4x64xf32>)
    -> tensor<1x1x4x64xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x1x4x64xf32>, tensor<1x1x4x64xf32>, tensor<1x1x4x64xf32>)
      outs(%o : tensor<1x1x4x64xf32>) scale(0.125) -> tensor<1x1x4x64xf32>
  return %r : tensor<1x1x4x64xf32>
}
