func.func @huge_d(%q: tensor<1x1x8x1048576xf32>, %k: tensor<1x1x32x1048576xf32>,
                  %v: tensor<1x1x32x8xf32>, %o: tensor<1x1x8x8xf32>) {
  %r = attn.attention ins(%q, %k, %v : tensor<1x1x8x1048576xf32>, tensor<1x1x32x1048576xf32>, tensor<1x1x32x8xf32>)
      outs(%o : tensor<1x1x8x8xf32>) -> tensor<1x1x8x8xf32>
  return
}
