func.func @score_mod_signature(%q: tensor<1x1x8x16xf32>, %o: tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32> {
  %r = attn.attention ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      outs(%o : tensor<1x1x8x16xf32>)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: i32):
        attn.yield %s : f32
      } -> tensor<1x1x8x16xf32>
  return %r : tensor<1x1x8x16xf32>
}
