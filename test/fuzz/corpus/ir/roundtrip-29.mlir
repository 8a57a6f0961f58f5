func.func @mha_packed(%x: tensor<?x?x32xf32>, %w: tensor<96x32xf32>, %b: tensor<96xf32>,
                      %wo: tensor<32x32xf32>, %bo: tensor<32xf32>, %m: tensor<1x1x?x?xi1>,
                      %y: tensor<?x?x32xf32>) -> tensor<?x?x32xf32> {
  %r = attn.mha ins(%x, %x, %x : tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>)
      in_proj(%w : tensor<96x32xf32>) in_bias(%b : tensor<96xf32>)
      out_proj(%wo : tensor<32x32xf32>) out_bias(%bo : tensor<32xf32>)
      mask(%m : tensor<1x1x?x?xi1>)
      outs(%y : tensor<?x?x32xf32>) heads(4) causal align(bottom_right) scale(0.25)
      -> tensor<?x?x32xf32>
  return %r : tensor<?x?x32xf32>
}
func.func @mha_separate(%q: tensor<2x?x32xbf16>, %k: tensor<2x?x12xbf16>, %v: tensor<2x?x20xbf16>,
                        %wq: tensor<32x32xbf16>, %wk: tensor<32x12xbf16>, %wv: tensor<32x20xbf16>,
                        %wo: tensor<32x32xbf16>, %y: tensor<2x?x32xbf16>) -> tensor<2x?x32xbf16> {
  %r = attn.mha ins(%q, %k, %v : tensor<2x?x32xbf16>, tensor<2x?x12xbf16>, tensor<2x?x20xbf16>)
      in_proj(%wq, %wk, %wv : tensor<32x32xbf16>, tensor<32x12xbf16>, tensor<32x20xbf16>)
      out_proj(%wo : tensor<32x32xbf16>)
      outs(%y : tensor<2x?x32xbf16>) heads(2) align(top_left) window <left = 8> softcap(30.0)
      -> tensor<2x?x32xbf16>
  return %r : tensor<2x?x32xbf16>
}
