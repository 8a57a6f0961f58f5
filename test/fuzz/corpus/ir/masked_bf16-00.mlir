func.func @masked_bf16(%q: tensor<2x4x128x64xbf16>, %k: tensor<2x4x256x64xbf16>,
                       %v: tensor<2x4x256x32xbf16>, %m: tensor<1x1x128x256xi1>,
                       %o: tensor<2x4x128x32xbf16>) -> tensor<2x4x128x32xbf16> {
  %r = attn.attention
      ins(%q, %k, %v : tensor<2x4x128x64xbf16>, tensor<2x4x256x64xbf16>, tensor<2x4x256x32xbf16>)
      mask(%m : tensor<1x1x128x256xi1>)
      outs(%o : tensor<2x4x128x32xbf16>)
      -> tensor<2x4x128x32xbf16>
  return %r : tensor<2x4x128x32xbf16>
}
