func.func @mask_weights(%q: tensor<2x?x24xf32>, %k: tensor<2x?x20xf32>, %v: tensor<2x?x40xf32>,
                        %wq: tensor<36x24xf32>, %wk: tensor<36x20xf32>, %va: tensor<36xf32>,
                        %m: tensor<2x1x?xi1>, %o: tensor<2x?x40xf32>, %w: tensor<2x?x?xf32>)
    -> (tensor<2x?x40xf32>, tensor<2x?x?xf32>) {
  %r:2 = attn.additive ins(%q, %k, %v, %wq, %wk, %va : tensor<2x?x24xf32>, tensor<2x?x20xf32>, tensor<2x?x40xf32>, tensor<36x24xf32>, tensor<36x20xf32>, tensor<36xf32>)
      mask(%m : tensor<2x1x?xi1>)
      outs(%o, %w : tensor<2x?x40xf32>, tensor<2x?x?xf32>) -> tensor<2x?x40xf32>, tensor<2x?x?xf32>
  return %r#0, %r#1 : tensor<2x?x40xf32>, tensor<2x?x?xf32>
}
