func.func @lse_element(%q: tensor<1x4x8x16xf16>, %k: tensor<1x2x32x16xf16>,
                       %v: tensor<1x2x32x8xf16>, %o: tensor<1x4x8x8xf16>,
                       %l: tensor<1x4x8xf16>) {
  %r:2 = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf16>, tensor<1x2x32x16xf16>, tensor<1x2x32x8xf16>)
      outs(%o, %l : tensor<1x4x8x8xf16>, tensor<1x4x8xf16>) -> tensor<1x4x8x8xf16>, tensor<1x4x8xf16>
  return
}
