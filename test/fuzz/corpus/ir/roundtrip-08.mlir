func.func @with_lse(%q: tensor<2x4x16x32xf16>, %k: tensor<2x4x16x32xf16>,
                    %v: tensor<2x4x16x32xf16>, %o: tensor<2x4x16x32xf16>,
                    %l: tensor<2x4x16xf32>)
    -> (tensor<2x4x16x32xf16>, tensor<2x4x16xf32>) {
  %r:2 = attn.attention ins(%q, %k, %v : tensor<2x4x16x32xf16>, tensor<2x4x16x32xf16>, tensor<2x4x16x32xf16>)
      outs(%o, %l : tensor<2x4x16x32xf16>, tensor<2x4x16xf32>)
      -> tensor<2x4x16x32xf16>, tensor<2x4x16xf32>
  return %r#0, %r#1 : tensor<2x4x16x32xf16>, tensor<2x4x16xf32>
}
