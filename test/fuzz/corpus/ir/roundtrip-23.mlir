func.func @weights_mask_mod(%q: memref<1x1x8x16xf32>, %k: memref<1x1x8x16xf32>,
                            %w: memref<1x1x8x8xf32>) {
  attn.attention_weights ins(%q, %k : memref<1x1x8x16xf32>, memref<1x1x8x16xf32>)
      outs(%w : memref<1x1x8x8xf32>)
      mask_mod {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %keep = arith.cmpi sle, %j, %i : index
        attn.yield %keep : i1
      }
  return
}
func.func @block_mask(%q: tensor<1x2x?x16xf32>, %docs: tensor<?xi32>, %t: tensor<?x?x?x?xi32>)
    -> (tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>) {
  %r = attn.attention ins(%q, %q, %q : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      captures(%docs, %t : tensor<?xi32>, tensor<?x?x?x?xi32>) outs(%q : tensor<1x2x?x16xf32>)
      mask_mod {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %di = attn.captured 0 [%i] : i32
        %dj = attn.captured 0 [%j] : i32
        %same = arith.cmpi eq, %di, %dj : i32
        attn.yield %same : i1
      } {attn.block_mask = array<i64: 1, 128, 64>} -> tensor<1x2x?x16xf32>
  %s = attn.attention ins(%q, %q, %q : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      captures(%t : tensor<?x?x?x?xi32>) outs(%q : tensor<1x2x?x16xf32>)
      causal align(top_left) {attn.block_mask = array<i64: 0, 128, 128>} -> tensor<1x2x?x16xf32>
  return %r, %s : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>
}
