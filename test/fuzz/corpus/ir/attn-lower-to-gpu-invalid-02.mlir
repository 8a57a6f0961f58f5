func.func @in_a_loop(%q: tensor<?x?x?x64xf16>, %k: tensor<?x?x?x64xf16>, %v: tensor<?x?x?x64xf16>, %o: tensor<?x?x?x64xf16>, %n: index) -> tensor<?x?x?x64xf16> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %o) -> tensor<?x?x?x64xf16> {
    %a = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>) outs(%acc : tensor<?x?x?x64xf16>) -> tensor<?x?x?x64xf16>
    scf.yield %a : tensor<?x?x?x64xf16>
  }
  return %r : tensor<?x?x?x64xf16>
}
