func.func @drop_right_window_on_tile(
    %q: tensor<1x1x4x8xf32>, %k: tensor<1x1x16x8xf32>,
    %v: tensor<1x1x16x8xf32>, %o: tensor<1x1x4x8xf32>, %d: index)
    -> tensor<1x1x4x8xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x1x4x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>)
      diagonal(%d) outs(%o : tensor<1x1x4x8xf32>) causal window <left = 2, right = 1>
      -> tensor<1x1x4x8xf32>
  return %r : tensor<1x1x4x8xf32>
}
