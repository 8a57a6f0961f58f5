func.func @static_group(%q: tensor<?x32x1x128xf32>, %k: tensor<?x8x?x128xf32>,
                        %v: tensor<?x8x?x128xf32>, %o: tensor<?x32x1x128xf32>)
    -> tensor<?x32x1x128xf32> {
  %0 = attn.attention ins(%q, %k, %v : tensor<?x32x1x128xf32>, tensor<?x8x?x128xf32>, tensor<?x8x?x128xf32>)
      outs(%o : tensor<?x32x1x128xf32>) -> tensor<?x32x1x128xf32>
  return %0 : tensor<?x32x1x128xf32>
}
