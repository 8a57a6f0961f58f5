func.func @modifiers(%q: tensor<1x8x?x16xf32>, %k: tensor<1x2x?x16xf32>,
                     %v: tensor<1x2x?x16xf32>, %slopes: tensor<8xf32>,
                     %docs: tensor<?x?xi64>, %o: tensor<1x8x?x16xf32>)
    -> tensor<1x8x?x16xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x8x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      captures(%slopes, %docs : tensor<8xf32>, tensor<?x?xi64>)
      outs(%o : tensor<1x8x?x16xf32>) causal align(bottom_right)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %slope = attn.captured 0 [%h] : f32
        %t = arith.addf %s, %slope : f32
        attn.yield %t : f32
      }
      mask_mod {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %di = attn.captured 1 [%b, %i] : i64
        %dj = attn.captured 1 [%b, %j] : i64
        %same = arith.cmpi eq, %di, %dj : i64
        attn.yield %same : i1
      }
      -> tensor<1x8x?x16xf32>
  return %r : tensor<1x8x?x16xf32>
}
