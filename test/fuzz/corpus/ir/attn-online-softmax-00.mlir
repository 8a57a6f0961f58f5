func.func @bf16_with_lse(%q: tensor<1x2x?x64xbf16>, %k: tensor<1x2x?x64xbf16>,
                         %v: tensor<1x2x?x64xbf16>, %o: tensor<1x2x?x64xbf16>,
                         %l: tensor<1x2x?xf32>) -> (tensor<1x2x?x64xbf16>, tensor<1x2x?xf32>) {
  %r:2 = attn.attention ins(%q, %k, %v : tensor<1x2x?x64xbf16>, tensor<1x2x?x64xbf16>, tensor<1x2x?x64xbf16>)
      outs(%o, %l : tensor<1x2x?x64xbf16>, tensor<1x2x?xf32>) scale(0.125) -> tensor<1x2x?x64xbf16>, tensor<1x2x?xf32>
  return %r#0, %r#1 : tensor<1x2x?x64xbf16>, tensor<1x2x?xf32>
}
