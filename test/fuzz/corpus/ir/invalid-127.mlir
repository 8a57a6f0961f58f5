func.func @linear_state_type(%q: tensor<1x1x8x16xf32>, %s: tensor<1x1x16x16xbf16>,
                             %z: tensor<1x1x16xf32>, %o: tensor<1x1x8x16xf32>) {
  %r = attn.linear ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
      state(%s, %z : tensor<1x1x16x16xbf16>, tensor<1x1x16xf32>)
      outs(%o : tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32>
  return
}
