func.func @weights(%q: tensor<2x8x?x64xbf16>, %k: tensor<2x2x?x64xbf16>,
                   %m: tensor<1x1x?x?xi1>, %lse: tensor<2x8x?xf32>,
                   %w: tensor<2x8x?x?xf32>, %p: f32, %s: i64,
                   %qm: memref<2x8x?x64xbf16>, %km: memref<2x2x?x64xbf16>,
                   %wm: memref<2x8x?x?xf32>) -> tensor<2x8x?x?xf32> {
  %r = attn.attention_weights ins(%q, %k : tensor<2x8x?x64xbf16>, tensor<2x2x?x64xbf16>)
      mask(%m : tensor<1x1x?x?xi1>) dropout(%p, %s) lse(%lse : tensor<2x8x?xf32>)
      outs(%w : tensor<2x8x?x?xf32>) causal align(bottom_right) window <left = 128>
      softcap(30.0) -> tensor<2x8x?x?xf32>
  attn.attention_weights ins(%qm, %km : memref<2x8x?x64xbf16>, memref<2x2x?x64xbf16>)
      outs(%wm : memref<2x8x?x?xf32>)
  return %r : tensor<2x8x?x?xf32>
}
