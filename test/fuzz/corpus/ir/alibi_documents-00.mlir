func.func @alibi_documents(
    %q: tensor<?x8x?x64xbf16>, %k: tensor<?x2x?x64xbf16>, %v: tensor<?x2x?x64xbf16>,
    %slopes: tensor<8xf32>, %docs: tensor<?xi32>,
    %o: tensor<?x8x?x64xbf16>) -> tensor<?x8x?x64xbf16> {
  %r = attn.attention
      ins(%q, %k, %v : tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x64xbf16>)
      captures(%slopes, %docs : tensor<8xf32>, tensor<?xi32>)
      outs(%o : tensor<?x8x?x64xbf16>)
      causal align(bottom_right)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %slope = attn.captured 0 [%h] : f32
        %d = arith.subi %j, %i : index
        %di = arith.index_cast %d : index to i64
        %df = arith.sitofp %di : i64 to f32
        %bias = arith.mulf %slope, %df : f32
        %r = arith.addf %s, %bias : f32
        attn.yield %r : f32
      }
      mask_mod {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %di = attn.captured 1 [%i] : i32
        %dj = attn.captured 1 [%j] : i32
        %same = arith.cmpi eq, %di, %dj : i32
        attn.yield %same : i1
      }
      -> tensor<?x8x?x64xbf16>
  return %r : tensor<?x8x?x64xbf16>
}
