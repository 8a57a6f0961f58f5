func.func @kernel_choice(%q: tensor<1x4x8x16xbf16>, %k: tensor<1x2x32x16xbf16>,
                         %v: tensor<1x2x32x8xbf16>, %o: tensor<1x4x8x8xbf16>)
    -> (tensor<1x4x8x8xbf16>, tensor<1x4x8x8xbf16>, tensor<1x4x8x8xbf16>) {
  %0 = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xbf16>, tensor<1x2x32x16xbf16>, tensor<1x2x32x8xbf16>)
      outs(%o : tensor<1x4x8x8xbf16>) causal align(top_left)
      kernel <lane_rows, query_tile = 128, key_block = 64, row_block = 4, lane_rows = 64>
      -> tensor<1x4x8x8xbf16>
  %1 = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xbf16>, tensor<1x2x32x16xbf16>, tensor<1x2x32x8xbf16>)
      outs(%o : tensor<1x4x8x8xbf16>) kernel #attn.kernel<mma_sync, query_tile = 64, key_block = 64>
      -> tensor<1x4x8x8xbf16>
  %2 = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xbf16>, tensor<1x2x32x16xbf16>, tensor<1x2x32x8xbf16>)
      outs(%o : tensor<1x4x8x8xbf16>)
      kernel <packed, query_tile = 256, key_block = 128, row_block = 3, lane_rows = 0, bf16_dot = true>
      -> tensor<1x4x8x8xbf16>
  return %0, %1, %2 : tensor<1x4x8x8xbf16>, tensor<1x4x8x8xbf16>, tensor<1x4x8x8xbf16>
}
