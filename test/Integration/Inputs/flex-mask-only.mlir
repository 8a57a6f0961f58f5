// A mask_mod alone (a backward kernel may take it: it needs no derivative).
func.func @modifiers(%q: tensor<1x1x1x1xf32>, %docs: tensor<?xi64>) {
  %o = attn.attention ins(%q, %q, %q : tensor<1x1x1x1xf32>, tensor<1x1x1x1xf32>, tensor<1x1x1x1xf32>)
      captures(%docs : tensor<?xi64>) outs(%q : tensor<1x1x1x1xf32>)
  mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %di = attn.captured 0 [%i] : i64
    %dj = attn.captured 0 [%j] : i64
    %same = arith.cmpi eq, %di, %dj : i64
    attn.yield %same : i1
  } -> tensor<1x1x1x1xf32>
  return
}
