func.func @sliding_window_softcap(%q: tensor<1x8x?x128xf16>, %k: tensor<1x8x?x128xf16>,
                                  %v: tensor<1x8x?x128xf16>, %bias: tensor<1x8x?x?xf16>,
                                  %o: tensor<1x8x?x128xf16>) -> tensor<1x8x?x128xf16> {
  %r = attn.attention
      ins(%q, %k, %v : tensor<1x8x?x128xf16>, tensor<1x8x?x128xf16>, tensor<1x8x?x128xf16>)
      mask(%bias : tensor<1x8x?x?xf16>)
      outs(%o : tensor<1x8x?x128xf16>)
      causal align(top_left) window <left = 256> scale(0.0883883461) softcap(30.0)
      -> tensor<1x8x?x128xf16>
  return %r : tensor<1x8x?x128xf16>
}
