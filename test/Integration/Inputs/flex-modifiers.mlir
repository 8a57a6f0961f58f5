// The score and mask modifiers that attn-compile --modifiers gives every
// --spec kernel (what attn.flex_attention writes for a traced T5-style bias
// and a document mask). Its constants print as %c0, %c8...: they must not
// clash with the names of the function that carries the regions.
func.func @modifiers(%q: tensor<1x1x1x1xf32>, %table: tensor<?x?xf32>,
                     %docs: tensor<?xi32>) {
  %o = attn.attention ins(%q, %q, %q : tensor<1x1x1x1xf32>, tensor<1x1x1x1xf32>, tensor<1x1x1x1xf32>)
      captures(%table, %docs : tensor<?x?xf32>, tensor<?xi32>)
      outs(%q : tensor<1x1x1x1xf32>)
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %d = arith.subi %j, %i : index
    %lo = arith.maxsi %d, %c0 : index
    %bucket = arith.minsi %lo, %c8 : index
    %bias = attn.captured 0 [%h, %bucket] : f32
    %r = arith.addf %s, %bias : f32
    attn.yield %r : f32
  } mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %di = attn.captured 1 [%i] : i32
    %dj = attn.captured 1 [%j] : i32
    %same = arith.cmpi eq, %di, %dj : i32
    attn.yield %same : i1
  } -> tensor<1x1x1x1xf32>
  return
}
