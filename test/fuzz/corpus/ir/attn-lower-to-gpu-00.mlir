func.func @causal_f16(%q: tensor<?x?x?x64xf16>, %k: tensor<?x?x?x64xf16>, %v: tensor<?x?x?x64xf16>, %o: tensor<?x?x?x64xf16>, %lse: tensor<?x?x?xf32>) -> (tensor<?x?x?x64xf16>, tensor<?x?x?xf32>) {
  %r:2 = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>) outs(%o, %lse : tensor<?x?x?x64xf16>, tensor<?x?x?xf32>) causal align(top_left) -> tensor<?x?x?x64xf16>, tensor<?x?x?xf32>
  return %r#0, %r#1 : tensor<?x?x?x64xf16>, tensor<?x?x?xf32>
}
