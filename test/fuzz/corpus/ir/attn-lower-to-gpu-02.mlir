func.func @window_f32(%q: tensor<?x?x?x20xf32>, %k: tensor<?x?x?x20xf32>, %v: tensor<?x?x?x20xf32>, %o: tensor<?x?x?x20xf32>) -> tensor<?x?x?x20xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x20xf32>, tensor<?x?x?x20xf32>, tensor<?x?x?x20xf32>) outs(%o : tensor<?x?x?x20xf32>) align(bottom_right) window <left = 8, right = 0> softcap(5.0) -> tensor<?x?x?x20xf32>
  return %r : tensor<?x?x?x20xf32>
}
