func.func @weights(%q: tensor<1x2x?x64xf16>, %k: tensor<1x2x?x64xf16>,
                   %w: tensor<1x2x?x?xf32>) -> tensor<1x2x?x?xf32> {
  %r = attn.attention_weights ins(%q, %k : tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>)
      outs(%w : tensor<1x2x?x?xf32>) -> tensor<1x2x?x?xf32>
  return %r : tensor<1x2x?x?xf32>
}
