func.func @causal(%q: tensor<1x2x?x16xf32>) -> tensor<1x2x?x16xf32> {
  %r = attn.attention ins(%q, %q, %q : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      outs(%q : tensor<1x2x?x16xf32>)
  mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %keep = arith.cmpi sge, %i, %j : index
    attn.yield %keep : i1
  } -> tensor<1x2x?x16xf32>
  return %r : tensor<1x2x?x16xf32>
}
