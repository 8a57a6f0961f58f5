// A score_mod that the backward cannot differentiate (math.cbrt of the
// score): forward kernels take it, backward kernels are refused.
func.func @modifiers(%q: tensor<1x1x1x1xf32>) {
  %o = attn.attention ins(%q, %q, %q : tensor<1x1x1x1xf32>, tensor<1x1x1x1xf32>, tensor<1x1x1x1xf32>)
      outs(%q : tensor<1x1x1x1xf32>)
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %r = math.cbrt %s : f32
    attn.yield %r : f32
  } -> tensor<1x1x1x1xf32>
  return
}
