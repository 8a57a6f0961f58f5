func.func @dead_attention(%q: tensor<1x1x4x8xf32>, %o: tensor<1x1x4x8xf32>) {
  %r = attn.attention ins(%q, %q, %q : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>)
      outs(%o : tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return
}
