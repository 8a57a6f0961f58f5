func.func @documents_causal(%q: tensor<1x2x?x16xf32>, %docs: tensor<?xi32>) -> tensor<1x2x?x16xf32> {
  %r = attn.attention ins(%q, %q, %q : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      captures(%docs : tensor<?xi32>) outs(%q : tensor<1x2x?x16xf32>)
  mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %di = attn.captured 0 [%i] : i32
    %dj = attn.captured 0 [%j] : i32
    %same = arith.cmpi eq, %di, %dj : i32
    %t = arith.constant true
    %a = arith.andi %same, %t : i1
    %causal = arith.cmpi sge, %i, %j : index
    %keep = arith.andi %a, %causal : i1
    attn.yield %keep : i1
  } -> tensor<1x2x?x16xf32>
  return %r : tensor<1x2x?x16xf32>
}
