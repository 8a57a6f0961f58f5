func.func @f32_causal(%q: tensor<?x8x?x64xf32>, %k: tensor<?x2x?x64xf32>, %v: tensor<?x2x?x64xf32>,
                      %o: tensor<?x8x?x64xf32>) -> tensor<?x8x?x64xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x8x?x64xf32>, tensor<?x2x?x64xf32>, tensor<?x2x?x64xf32>)
      outs(%o : tensor<?x8x?x64xf32>) causal align(bottom_right) -> tensor<?x8x?x64xf32>
  return %r : tensor<?x8x?x64xf32>
}
func.func @bf16_d64(%q: tensor<?x?x?x64xbf16>, %k: tensor<?x?x?x64xbf16>, %v: tensor<?x?x?x64xbf16>,
                    %o: tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>)
      outs(%o : tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16>
  return %r : tensor<?x?x?x64xbf16>
}
func.func @bf16_d128(%q: tensor<?x?x?x128xbf16>, %k: tensor<?x?x?x128xbf16>, %v: tensor<?x?x?x128xbf16>,
                     %o: tensor<?x?x?x128xbf16>) -> tensor<?x?x?x128xbf16> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>)
      outs(%o : tensor<?x?x?x128xbf16>) -> tensor<?x?x?x128xbf16>
  return %r : tensor<?x?x?x128xbf16>
}
func.func @f16_masked(%q: tensor<?x?x?x64xf16>, %k: tensor<?x?x?x64xf16>, %v: tensor<?x?x?x64xf16>,
                      %m: tensor<1x1x?x?xi1>, %o: tensor<?x?x?x64xf16>) -> tensor<?x?x?x64xf16> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>)
      mask(%m : tensor<1x1x?x?xi1>) outs(%o : tensor<?x?x?x64xf16>) -> tensor<?x?x?x64xf16>
  return %r : tensor<?x?x?x64xf16>
}
func.func @f32_wide(%q: tensor<?x?x?x256xf32>, %k: tensor<?x?x?x256xf32>, %v: tensor<?x?x?x256xf32>,
                    %o: tensor<?x?x?x256xf32>) -> tensor<?x?x?x256xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x256xf32>, tensor<?x?x?x256xf32>, tensor<?x?x?x256xf32>)
      outs(%o : tensor<?x?x?x256xf32>) -> tensor<?x?x?x256xf32>
  return %r : tensor<?x?x?x256xf32>
}
func.func @f32_decoding(%q: tensor<?x8x1x128xf32>, %k: tensor<?x2x?x128xf32>, %v: tensor<?x2x?x128xf32>,
                        %o: tensor<?x8x1x128xf32>) -> tensor<?x8x1x128xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x8x1x128xf32>, tensor<?x2x?x128xf32>, tensor<?x2x?x128xf32>)
      outs(%o : tensor<?x8x1x128xf32>) causal align(bottom_right) -> tensor<?x8x1x128xf32>
  return %r : tensor<?x8x1x128xf32>
}
func.func @score_mod_only(%q: tensor<?x?x?x64xf32>, %k: tensor<?x?x?x64xf32>, %v: tensor<?x?x?x64xf32>,
                          %o: tensor<?x?x?x64xf32>) -> tensor<?x?x?x64xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>)
      outs(%o : tensor<?x?x?x64xf32>)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %c = arith.constant 0.5 : f32
        %t = arith.addf %s, %c : f32
        attn.yield %t : f32
      } -> tensor<?x?x?x64xf32>
  return %r : tensor<?x?x?x64xf32>
}
func.func @mask_mod(%q: tensor<?x?x?x64xf32>, %k: tensor<?x?x?x64xf32>, %v: tensor<?x?x?x64xf32>,
                    %o: tensor<?x?x?x64xf32>) -> tensor<?x?x?x64xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>)
      outs(%o : tensor<?x?x?x64xf32>)
      mask_mod {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %keep = arith.cmpi sge, %i, %j : index
        attn.yield %keep : i1
      } -> tensor<?x?x?x64xf32>
  return %r : tensor<?x?x?x64xf32>
}
func.func @given(%q: tensor<?x?x?x64xf32>, %k: tensor<?x?x?x64xf32>, %v: tensor<?x?x?x64xf32>,
                 %o: tensor<?x?x?x64xf32>) -> tensor<?x?x?x64xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>)
      outs(%o : tensor<?x?x?x64xf32>) kernel <packed, query_tile = 32, key_block = 16, row_block = 1>
      -> tensor<?x?x?x64xf32>
  return %r : tensor<?x?x?x64xf32>
}
