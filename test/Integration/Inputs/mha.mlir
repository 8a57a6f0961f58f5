// An attn.mha in a function: attn-compile makes a kernel named after the
// function, its spec read from the op (widths, heads, biases, the mask's
// kind and broadcast dims, the attributes, the static sizes).
func.func @cross(%q: tensor<2x?x64xbf16>, %k: tensor<2x?x48xbf16>, %v: tensor<2x?x32xbf16>,
                 %wq: tensor<64x64xbf16>, %wk: tensor<64x48xbf16>, %wv: tensor<64x32xbf16>,
                 %wo: tensor<64x64xbf16>, %m: tensor<2x1x1x?xbf16>,
                 %y: tensor<2x?x64xbf16>) -> tensor<2x?x64xbf16> {
  %r = attn.mha ins(%q, %k, %v : tensor<2x?x64xbf16>, tensor<2x?x48xbf16>, tensor<2x?x32xbf16>)
      in_proj(%wq, %wk, %wv : tensor<64x64xbf16>, tensor<64x48xbf16>, tensor<64x32xbf16>)
      out_proj(%wo : tensor<64x64xbf16>)
      mask(%m : tensor<2x1x1x?xbf16>)
      outs(%y : tensor<2x?x64xbf16>) heads(4) softcap(30.0)
      -> tensor<2x?x64xbf16>
  return %r : tensor<2x?x64xbf16>
}
