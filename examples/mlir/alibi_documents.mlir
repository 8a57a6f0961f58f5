// Programmable attention (docs/spec.md, "Score and mask modifiers"): ALiBi
// as a score_mod reading a slope per query head, and document masking of
// packed sequences as a mask_mod reading each position's document id, on
// causal grouped-query attention. attn-compile makes a C-callable kernel of
// it whose args->captures[0] are the slopes [8] f32 and captures[1] the ids
// [S] i32:
//
//   attn-compile examples/mlir/alibi_documents.mlir -o alibi.so --header alibi.h
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
        // s + slope[h] * (j - i): j <= i under the causal mask.
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
        // Queries see the keys of their own document. (Here Sq = Sk: with
        // a KV cache, capture the keys' ids separately.)
        %di = attn.captured 1 [%i] : i32
        %dj = attn.captured 1 [%j] : i32
        %same = arith.cmpi eq, %di, %dj : i32
        attn.yield %same : i1
      }
      -> tensor<?x8x?x64xbf16>
  return %r : tensor<?x8x?x64xbf16>
}
