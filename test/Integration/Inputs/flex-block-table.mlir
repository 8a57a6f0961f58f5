// Document masking with its block table: capture 1, blocks of 16 x 16.
func.func @modifiers(%q: tensor<1x1x1x1xf32>, %docs: tensor<?xi64>, %table: tensor<1x?x?x?xi32>) {
  %o = attn.attention ins(%q, %q, %q : tensor<1x1x1x1xf32>, tensor<1x1x1x1xf32>, tensor<1x1x1x1xf32>)
      captures(%docs, %table : tensor<?xi64>, tensor<1x?x?x?xi32>) outs(%q : tensor<1x1x1x1xf32>)
  mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %di = attn.captured 0 [%i] : i64
    %dj = attn.captured 0 [%j] : i64
    %same = arith.cmpi eq, %di, %dj : i64
    attn.yield %same : i1
  } {attn.block_mask = array<i64: 1, 16, 16>} -> tensor<1x1x1x1xf32>
  return
}
