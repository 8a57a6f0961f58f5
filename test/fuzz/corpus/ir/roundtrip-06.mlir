func.func @dynamic_dims(%q: tensor<?x?x?x64xf16>, %k: tensor<?x?x?x64xf16>,
                        %v: tensor<?x?x?x32xf16>, %o: tensor<?x?x?x32xf16>)
    -> tensor<?x?x?x32xf16> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x32xf16>)
      outs(%o : tensor<?x?x?x32xf16>) -> tensor<?x?x?x32xf16>
  return %r : tensor<?x?x?x32xf16>
}
