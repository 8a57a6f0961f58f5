func.func @own_tile_size(%q: tensor<1x1x32x64xf32>, %k: tensor<1x1x?x64xf32>, %v: tensor<1x1x?x32xf32>,
                         %acc: tensor<1x1x32x32xf32>, %m: tensor<1x1x32xf32>, %s: tensor<1x1x32xf32>)
    -> (tensor<1x1x32x32xf32>, tensor<1x1x32xf32>, tensor<1x1x32xf32>) {
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x1x32x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x32xf32>)
      outs(%acc, %m, %s : tensor<1x1x32x32xf32>, tensor<1x1x32xf32>, tensor<1x1x32xf32>)
      kernel <lane_rows, query_tile = 32, key_block = 32, lane_rows = 64>
      -> tensor<1x1x32x32xf32>, tensor<1x1x32xf32>, tensor<1x1x32xf32>
  return %r#0, %r#1, %r#2 : tensor<1x1x32x32xf32>, tensor<1x1x32xf32>, tensor<1x1x32xf32>
}
