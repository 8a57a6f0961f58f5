func.func @dropout(%q: tensor<?x?x?x64xf16>, %k: tensor<?x?x?x64xf16>, %v: tensor<?x?x?x64xf16>, %o: tensor<?x?x?x64xf16>, %p: f32, %s: i64) -> tensor<?x?x?x64xf16> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>) dropout(%p, %s) outs(%o : tensor<?x?x?x64xf16>) -> tensor<?x?x?x64xf16>
  return %r : tensor<?x?x?x64xf16>
}
