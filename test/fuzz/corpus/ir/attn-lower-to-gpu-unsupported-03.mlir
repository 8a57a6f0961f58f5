func.func @sinks(%q: tensor<1x2x?x64xf16>, %k: tensor<1x2x?x64xf16>, %v: tensor<1x2x?x64xf16>,
                 %s: tensor<2xf32>, %o: tensor<1x2x?x64xf16>) -> tensor<1x2x?x64xf16> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>)
      sinks(%s : tensor<2xf32>) outs(%o : tensor<1x2x?x64xf16>) -> tensor<1x2x?x64xf16>
  return %r : tensor<1x2x?x64xf16>
}
