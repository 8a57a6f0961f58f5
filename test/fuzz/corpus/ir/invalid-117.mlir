func.func @backward_score_mod_undifferentiable(%q: tensor<1x1x8x16xf32>, %l: tensor<1x1x8xf32>) {
  %r:3 = attn.attention_backward ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      forward(%q, %l : tensor<1x1x8x16xf32>, tensor<1x1x8xf32>)
      grads(%q : tensor<1x1x8x16xf32>)
      outs(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %f = math.floor %s : f32
        %t = arith.addf %s, %f : f32
        %c = math.cbrt %t : f32
        attn.yield %c : f32
      } -> tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>
  return
}
