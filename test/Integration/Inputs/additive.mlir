// An attn.additive in a function: attn-compile makes a kernel named after
// the function, its spec read from the op (dims, the mask's broadcast dims,
// the weights out, the static sizes).
func.func @bahdanau(%q: tensor<4x1x256xf32>, %k: tensor<4x?x128xf32>, %v: tensor<4x?x128xf32>,
                    %wq: tensor<64x256xf32>, %wk: tensor<64x128xf32>, %va: tensor<64xf32>,
                    %m: tensor<4x1x?xi1>, %o: tensor<4x1x128xf32>, %w: tensor<4x1x?xf32>)
    -> (tensor<4x1x128xf32>, tensor<4x1x?xf32>) {
  %r:2 = attn.additive ins(%q, %k, %v, %wq, %wk, %va : tensor<4x1x256xf32>, tensor<4x?x128xf32>, tensor<4x?x128xf32>, tensor<64x256xf32>, tensor<64x128xf32>, tensor<64xf32>)
      mask(%m : tensor<4x1x?xi1>)
      outs(%o, %w : tensor<4x1x128xf32>, tensor<4x1x?xf32>) -> tensor<4x1x128xf32>, tensor<4x1x?xf32>
  return %r#0, %r#1 : tensor<4x1x128xf32>, tensor<4x1x?xf32>
}
