func.func @block_mask_no_capture(%q: tensor<1x1x8x16xf32>, %t: tensor<?x?x?x?xi32>, %o: tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32> {
  %r = attn.attention ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      captures(%t : tensor<?x?x?x?xi32>) outs(%o : tensor<1x1x8x16xf32>)
      {attn.block_mask = array<i64: 1, 128, 128>} -> tensor<1x1x8x16xf32>
  return %r : tensor<1x1x8x16xf32>
}
