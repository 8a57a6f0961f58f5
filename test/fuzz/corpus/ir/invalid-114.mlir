func.func @captured_indices(%q: tensor<1x1x8x16xf32>, %c: tensor<4x4xf32>, %o: tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32> {
  %r = attn.attention ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      captures(%c : tensor<4x4xf32>)
      outs(%o : tensor<1x1x8x16xf32>)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %x = attn.captured 0 [%h] : f32
        attn.yield %x : f32
      } -> tensor<1x1x8x16xf32>
  return %r : tensor<1x1x8x16xf32>
}
