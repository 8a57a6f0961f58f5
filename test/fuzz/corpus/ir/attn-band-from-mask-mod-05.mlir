func.func @backward(%q: tensor<1x2x?x16xf32>, %lse: tensor<1x2x?xf32>) -> (tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>) {
  %r:3 = attn.attention_backward
      ins(%q, %q, %q : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      forward(%q, %lse : tensor<1x2x?x16xf32>, tensor<1x2x?xf32>)
      grads(%q : tensor<1x2x?x16xf32>)
      outs(%q, %q, %q : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
  mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %keep = arith.cmpi sle, %j, %i : index
    attn.yield %keep : i1
  } -> tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>
  return %r#0, %r#1, %r#2 : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>
}
