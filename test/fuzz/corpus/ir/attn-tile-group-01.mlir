func.func @dynamic_group(%q: tensor<?x?x2x64xf32>, %k: tensor<?x?x?x64xf32>,
                         %v: tensor<?x?x?x64xf32>, %o: tensor<?x?x2x64xf32>)
    -> tensor<?x?x2x64xf32> {
  %0 = attn.attention ins(%q, %k, %v : tensor<?x?x2x64xf32>, tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>)
      outs(%o : tensor<?x?x2x64xf32>) causal align(bottom_right) -> tensor<?x?x2x64xf32>
  return %0 : tensor<?x?x2x64xf32>
}
