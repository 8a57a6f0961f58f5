func.func @keep_right_window_without_causal(
    %q: tensor<1x1x16x8xf32>, %k: tensor<1x1x16x8xf32>,
    %v: tensor<1x1x16x8xf32>, %o: tensor<1x1x16x8xf32>) -> tensor<1x1x16x8xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>)
      outs(%o : tensor<1x1x16x8xf32>) align(top_left) window <left = 4, right = 2>
      -> tensor<1x1x16x8xf32>
  return %r : tensor<1x1x16x8xf32>
}
