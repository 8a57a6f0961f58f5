func.func @sinks_decode(%q: tensor<?x8x1x64xbf16>, %k: tensor<?x2x?x64xbf16>,
                        %v: tensor<?x2x?x64xbf16>, %sinks: tensor<8xf32>,
                        %o: tensor<?x8x1x64xbf16>, %lse: tensor<?x8x1xf32>)
    -> (tensor<?x8x1x64xbf16>, tensor<?x8x1xf32>) {
  %r:2 = attn.attention
      ins(%q, %k, %v : tensor<?x8x1x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x64xbf16>)
      sinks(%sinks : tensor<8xf32>)
      outs(%o, %lse : tensor<?x8x1x64xbf16>, tensor<?x8x1xf32>)
      causal align(bottom_right) window <left = 128, right = 0>
      -> tensor<?x8x1x64xbf16>, tensor<?x8x1xf32>
  return %r#0, %r#1 : tensor<?x8x1x64xbf16>, tensor<?x8x1xf32>
}
