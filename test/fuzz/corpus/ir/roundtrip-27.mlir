func.func @additive_minimal(%q: tensor<2x?x24xf32>, %k: tensor<2x?x20xf32>, %v: tensor<2x?x40xf32>,
                            %wq: tensor<36x24xf32>, %wk: tensor<36x20xf32>, %va: tensor<36xf32>,
                            %o: tensor<2x?x40xf32>) -> tensor<2x?x40xf32> {
  %r = attn.additive ins(%q, %k, %v, %wq, %wk, %va : tensor<2x?x24xf32>, tensor<2x?x20xf32>, tensor<2x?x40xf32>, tensor<36x24xf32>, tensor<36x20xf32>, tensor<36xf32>)
      outs(%o : tensor<2x?x40xf32>) -> tensor<2x?x40xf32>
  return %r : tensor<2x?x40xf32>
}
