func.func @window(%q: tensor<1x2x?x16xf32>) -> tensor<1x2x?x16xf32> {
  %r = attn.attention ins(%q, %q, %q : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      outs(%q : tensor<1x2x?x16xf32>)
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %half = arith.constant 0.5 : f32
    %r = arith.mulf %s, %half : f32
    attn.yield %r : f32
  } mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %c0 = arith.constant 0 : index
    %w = arith.constant 256 : index
    %d = arith.subi %i, %j : index
    %nd = arith.subi %c0, %d : index
    %ad = arith.maxsi %d, %nd : index
    %keep = arith.cmpi sle, %ad, %w : index
    attn.yield %keep : i1
  } -> tensor<1x2x?x16xf32>
  return %r : tensor<1x2x?x16xf32>
}
