func.func @unmapped_folded_forall(%q: tensor<?x?x1x64xf16>, %k: tensor<?x?x?x64xf16>, %v: tensor<?x?x?x64xf16>, %o: tensor<?x?x1x64xf16>) -> tensor<?x?x1x64xf16> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x1x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>) outs(%o : tensor<?x?x1x64xf16>) -> tensor<?x?x1x64xf16>
  return %r : tensor<?x?x1x64xf16>
}
