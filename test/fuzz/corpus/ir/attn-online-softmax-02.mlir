func.func @sinks(%q: tensor<2x4x?x64xf32>, %k: tensor<2x2x?x64xf32>,
                 %v: tensor<2x2x?x32xf32>, %s: tensor<4xf32>,
                 %o: tensor<2x4x?x32xf32>, %l: tensor<2x4x?xf32>) -> (tensor<2x4x?x32xf32>, tensor<2x4x?xf32>) {
  %r:2 = attn.attention ins(%q, %k, %v : tensor<2x4x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x32xf32>)
      sinks(%s : tensor<4xf32>) outs(%o, %l : tensor<2x4x?x32xf32>, tensor<2x4x?xf32>) -> tensor<2x4x?x32xf32>, tensor<2x4x?xf32>
  return %r#0, %r#1 : tensor<2x4x?x32xf32>, tensor<2x4x?xf32>
}
