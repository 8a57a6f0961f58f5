func.func @prefill(%q: tensor<1x8x8x64xf32>, %k: tensor<1x2x?x64xf32>,
                   %v: tensor<1x2x?x64xf32>, %o: tensor<1x8x8x64xf32>)
    -> tensor<1x8x8x64xf32> {
  %0 = attn.attention ins(%q, %k, %v : tensor<1x8x8x64xf32>, tensor<1x2x?x64xf32>, tensor<1x2x?x64xf32>)
      outs(%o : tensor<1x8x8x64xf32>) -> tensor<1x8x8x64xf32>
  return %0 : tensor<1x8x8x64xf32>
}
func.func @dynamic_rows(%q: tensor<1x8x?x64xf32>, %k: tensor<1x2x?x64xf32>,
                        %v: tensor<1x2x?x64xf32>, %o: tensor<1x8x?x64xf32>)
    -> tensor<1x8x?x64xf32> {
  %0 = attn.attention ins(%q, %k, %v : tensor<1x8x?x64xf32>, tensor<1x2x?x64xf32>, tensor<1x2x?x64xf32>)
      outs(%o : tensor<1x8x?x64xf32>) -> tensor<1x8x?x64xf32>
  return %0 : tensor<1x8x?x64xf32>
}
func.func @big_group(%q: tensor<1x32x1x64xf32>, %k: tensor<1x1x?x64xf32>,
                     %v: tensor<1x1x?x64xf32>, %o: tensor<1x32x1x64xf32>)
    -> tensor<1x32x1x64xf32> {
  %0 = attn.attention ins(%q, %k, %v : tensor<1x32x1x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>)
      outs(%o : tensor<1x32x1x64xf32>) -> tensor<1x32x1x64xf32>
  return %0 : tensor<1x32x1x64xf32>
}
func.func @group_24(%q: tensor<1x48x1x64xf32>, %k: tensor<1x2x?x64xf32>,
                    %v: tensor<1x2x?x64xf32>, %o: tensor<1x48x1x64xf32>)
    -> tensor<1x48x1x64xf32> {
  %0 = attn.attention ins(%q, %k, %v : tensor<1x48x1x64xf32>, tensor<1x2x?x64xf32>, tensor<1x2x?x64xf32>)
      outs(%o : tensor<1x48x1x64xf32>) -> tensor<1x48x1x64xf32>
  return %0 : tensor<1x48x1x64xf32>
}
func.func @group_17(%q: tensor<1x17x1x64xf32>, %k: tensor<1x1x?x64xf32>,
                    %v: tensor<1x1x?x64xf32>, %o: tensor<1x17x1x64xf32>)
    -> tensor<1x17x1x64xf32> {
  %0 = attn.attention ins(%q, %k, %v : tensor<1x17x1x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>)
      outs(%o : tensor<1x17x1x64xf32>) -> tensor<1x17x1x64xf32>
  return %0 : tensor<1x17x1x64xf32>
}
