func.func @banded_attribute(%q: tensor<1x2x?x16xf32>, %k: tensor<1x2x?x16xf32>,
                            %v: tensor<1x2x?x16xf32>, %o: tensor<1x2x?x16xf32>)
    -> tensor<1x2x?x16xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      outs(%o : tensor<1x2x?x16xf32>) causal align(top_left)
      kernel <lane_rows, query_tile = 8, key_block = 64, lane_rows = 64> -> tensor<1x2x?x16xf32>
  return %r : tensor<1x2x?x16xf32>
}
