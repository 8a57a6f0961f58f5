func.func @capture_type(%q: tensor<1x1x8x16xf32>, %c: tensor<4xf16>, %o: tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32> {
  %r = attn.attention ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      captures(%c : tensor<4xf16>)
      outs(%o : tensor<1x1x8x16xf32>)
      mask_mod {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %keep = arith.constant true
        attn.yield %keep : i1
      } -> tensor<1x1x8x16xf32>
  return %r : tensor<1x1x8x16xf32>
}
