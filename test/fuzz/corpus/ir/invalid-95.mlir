func.func @origin_of_three(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x32x16xf32>,
                           %v: tensor<1x2x32x8xf32>, %o: tensor<1x4x8x8xf32>, %p: f32,
                           %s: i64, %i: index) {
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
      dropout(%p, %s) origin(%i, %i, %i)
      outs(%o : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}
