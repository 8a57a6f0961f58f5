func.func @backward_score_mod(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                              %o: memref<1x1x?x16xf32>, %lse: memref<1x1x?xf32>, %do: memref<1x1x?x16xf32>,
                              %dq: memref<1x1x?x16xf32>, %dk: memref<1x1x?x16xf32>, %dv: memref<1x1x?x16xf32>) {
  attn.attention_backward
      ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      forward(%o, %lse : memref<1x1x?x16xf32>, memref<1x1x?xf32>)
      grads(%do : memref<1x1x?x16xf32>)
      outs(%dq, %dk, %dv : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %c = arith.constant 20.0 : f32
        %x = arith.divf %s, %c : f32
        %t = math.tanh %x : f32
        %r = arith.mulf %t, %c : f32
        attn.yield %r : f32
      }
  return
}
