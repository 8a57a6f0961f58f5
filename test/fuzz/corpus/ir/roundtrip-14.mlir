func.func @softcap(%q: tensor<1x1x4x4xf16>, %k: tensor<1x1x4x4xf16>,
                   %v: tensor<1x1x4x4xf16>, %o: tensor<1x1x4x4xf16>)
    -> tensor<1x1x4x4xf16> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x1x4x4xf16>, tensor<1x1x4x4xf16>, tensor<1x1x4x4xf16>)
      outs(%o : tensor<1x1x4x4xf16>) scale(0.5) softcap(30.0) -> tensor<1x1x4x4xf16>
  return %r : tensor<1x1x4x4xf16>
}
