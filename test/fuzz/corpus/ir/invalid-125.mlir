func.func @linear_output_type(%q: tensor<1x1x8x16xbf16>, %o: tensor<1x1x8x16xf32>) {
  %r = attn.linear ins(%q, %q, %q : tensor<1x1x8x16xbf16>, tensor<1x1x8x16xbf16>, tensor<1x1x8x16xbf16>)
      outs(%o : tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32>
  return
}
