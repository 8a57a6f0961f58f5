func.func @separate_bf16(%q: tensor<2x?x32xbf16>, %k: tensor<2x?x12xbf16>, %v: tensor<2x?x20xbf16>,
                         %wq: tensor<32x32xbf16>, %wk: tensor<32x12xbf16>, %wv: tensor<32x20xbf16>,
                         %wo: tensor<32x32xbf16>, %y: tensor<2x?x32xbf16>) -> tensor<2x?x32xbf16> {
  %r = attn.mha ins(%q, %k, %v : tensor<2x?x32xbf16>, tensor<2x?x12xbf16>, tensor<2x?x20xbf16>)
      in_proj(%wq, %wk, %wv : tensor<32x32xbf16>, tensor<32x12xbf16>, tensor<32x20xbf16>)
      out_proj(%wo : tensor<32x32xbf16>)
      outs(%y : tensor<2x?x32xbf16>) heads(2)
      -> tensor<2x?x32xbf16>
  return %r : tensor<2x?x32xbf16>
}
