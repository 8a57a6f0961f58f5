func.func @dropout(%q: tensor<1x1x16x8xf32>, %k: tensor<1x1x?x8xf32>, %v: tensor<1x1x?x8xf32>,
                   %acc: tensor<1x1x16x8xf32>, %max: tensor<1x1x16xf32>, %sum: tensor<1x1x16xf32>,
                   %p: f32, %seed: i64, %i: index) {
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x1x16x8xf32>, tensor<1x1x?x8xf32>, tensor<1x1x?x8xf32>)
      dropout(%p, %seed) origin(%i, %i, %i, %i)
      outs(%acc, %max, %sum : tensor<1x1x16x8xf32>, tensor<1x1x16xf32>, tensor<1x1x16xf32>)
      -> tensor<1x1x16x8xf32>, tensor<1x1x16xf32>, tensor<1x1x16xf32>
  return
}
