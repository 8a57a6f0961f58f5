func.func @bf16(%q: tensor<1x2x8x64xbf16>, %k: tensor<1x2x8x64xbf16>,
                %v: tensor<1x2x8x64xbf16>, %o: tensor<1x2x8x64xbf16>)
    -> tensor<1x2x8x64xbf16> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x2x8x64xbf16>, tensor<1x2x8x64xbf16>, tensor<1x2x8x64xbf16>)
      outs(%o : tensor<1x2x8x64xbf16>) -> tensor<1x2x8x64xbf16>
  return %r : tensor<1x2x8x64xbf16>
}
