func.func @sinks_per_head(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                          %v: tensor<1x2x32x16xf32>, %s: tensor<2xf32>,
                          %o: tensor<1x4x8x16xf32>) {
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x16xf32>)
      sinks(%s : tensor<2xf32>) outs(%o : tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return
}
