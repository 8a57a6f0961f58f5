func.func @backward_score_mod(%q: tensor<1x1x8x16xf32>, %l: tensor<1x1x8xf32>) {
  %r:3 = attn.attention_backward ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      forward(%q, %l : tensor<1x1x8x16xf32>, tensor<1x1x8xf32>)
      grads(%q : tensor<1x1x8x16xf32>)
      outs(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        attn.yield %s : f32
      } -> tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>
  return
}
