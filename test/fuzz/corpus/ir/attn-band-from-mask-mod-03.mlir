func.func @lookback(%q: tensor<1x2x?x16xf32>) -> tensor<1x2x?x16xf32> {
  %r = attn.attention ins(%q, %q, %q : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      outs(%q : tensor<1x2x?x16xf32>)
  mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %c0 = arith.constant 0 : index
    %c101 = arith.constant 101 : index
    %d = arith.subi %i, %j : index
    %behind = arith.cmpi sle, %c0, %d : index
    %far = arith.addi %j, %c101 : index
    %near = arith.cmpi slt, %i, %far : index
    %keep = arith.andi %behind, %near : i1
    attn.yield %keep : i1
  } -> tensor<1x2x?x16xf32>
  return %r : tensor<1x2x?x16xf32>
}
