func.func @causal_gqa(%q: tensor<2x8x?x64xf32>, %k: tensor<2x2x?x64xf32>,
                      %lse: tensor<2x8x?xf32>, %w: tensor<2x8x?x?xf32>)
    -> tensor<2x8x?x?xf32> {
  %r = attn.attention_weights ins(%q, %k : tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>)
      lse(%lse : tensor<2x8x?xf32>)
      outs(%w : tensor<2x8x?x?xf32>) causal align(bottom_right)
      -> tensor<2x8x?x?xf32>
  return %r : tensor<2x8x?x?xf32>
}
func.func @dropout(%q: tensor<1x2x?x16xbf16>, %k: tensor<1x2x?x16xbf16>,
                   %w: tensor<1x2x?x?xf32>, %p: f32, %seed: i64)
    -> tensor<1x2x?x?xf32> {
  %r = attn.attention_weights ins(%q, %k : tensor<1x2x?x16xbf16>, tensor<1x2x?x16xbf16>)
      dropout(%p, %seed)
      outs(%w : tensor<1x2x?x?xf32>) -> tensor<1x2x?x?xf32>
  return %r : tensor<1x2x?x?xf32>
}
