func.func @mask_mod_yield(%q: tensor<1x1x8x16xf32>, %o: tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32> {
  %r = attn.attention ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      outs(%o : tensor<1x1x8x16xf32>)
      mask_mod {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        attn.yield %i : index
      } -> tensor<1x1x8x16xf32>
  return %r : tensor<1x1x8x16xf32>
}
