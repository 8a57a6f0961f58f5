func.func @sinks(%q: tensor<2x?x16x32xf32>, %k: tensor<2x2x64x32xf32>,
                 %v: tensor<2x2x64x32xf32>, %m: tensor<1x1x16x64xi1>,
                 %s: tensor<?xf32>, %o: tensor<2x?x16x32xf32>)
    -> tensor<2x?x16x32xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<2x?x16x32xf32>, tensor<2x2x64x32xf32>, tensor<2x2x64x32xf32>)
      mask(%m : tensor<1x1x16x64xi1>) sinks(%s : tensor<?xf32>)
      outs(%o : tensor<2x?x16x32xf32>) -> tensor<2x?x16x32xf32>
  return %r : tensor<2x?x16x32xf32>
}
