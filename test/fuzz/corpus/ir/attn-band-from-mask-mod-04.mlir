func.func @left_alone(%q: tensor<1x2x?x16xf32>) -> (tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>) {
  %r0 = attn.attention ins(%q, %q, %q : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      outs(%q : tensor<1x2x?x16xf32>)
  mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %keep = arith.cmpi sgt, %i, %j : index
    attn.yield %keep : i1
  } -> tensor<1x2x?x16xf32>
  %r1 = attn.attention ins(%q, %q, %q : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      outs(%q : tensor<1x2x?x16xf32>) causal align(bottom_right)
  mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %keep = arith.cmpi sge, %i, %j : index
    attn.yield %keep : i1
  } -> tensor<1x2x?x16xf32>
  %r2 = attn.attention ins(%q, %q, %q : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      outs(%q : tensor<1x2x?x16xf32>)
  mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %twice = arith.addi %i, %i : index
    %keep = arith.cmpi sge, %twice, %j : index
    %head = arith.cmpi sge, %b, %h : index
    %both = arith.andi %keep, %head : i1
    attn.yield %both : i1
  } -> tensor<1x2x?x16xf32>
  return %r0, %r1, %r2 : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>
}
