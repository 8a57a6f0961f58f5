// An attention op in a function named @main: its kernel would be `main`.
func.func @main(%q: tensor<1x1x4x8xf32>, %k: tensor<1x1x4x8xf32>,
                %v: tensor<1x1x4x8xf32>, %o: tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>)
      outs(%o : tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return %r : tensor<1x1x4x8xf32>
}
