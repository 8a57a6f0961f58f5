func.func @causal_alibi(%q: tensor<1x4x?x16xf32>, %k: tensor<1x2x?x16xf32>, %v: tensor<1x2x?x16xf32>,
                        %slopes: tensor<4xf32>, %o: tensor<1x4x?x16xf32>) -> tensor<1x4x?x16xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      captures(%slopes : tensor<4xf32>)
      outs(%o : tensor<1x4x?x16xf32>) causal align(bottom_right)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %slope = attn.captured 0 [%h] : f32
        %d = arith.subi %j, %i : index
        %di = arith.index_cast %d : index to i64
        %df = arith.sitofp %di : i64 to f32
        %bias = arith.mulf %slope, %df : f32
        %t = arith.addf %s, %bias : f32
        attn.yield %t : f32
      }
      -> tensor<1x4x?x16xf32>
  return %r : tensor<1x4x?x16xf32>
}
func.func @decode_documents(%q: tensor<?x4x1x16xf32>, %k: tensor<?x2x?x16xf32>, %v: tensor<?x2x?x16xf32>,
                            %docs: tensor<?xi32>, %o: tensor<?x4x1x16xf32>) -> tensor<?x4x1x16xf32>
    attributes {attn.kernel, attn.split_keys} {
  %r = attn.attention ins(%q, %k, %v : tensor<?x4x1x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
      captures(%docs : tensor<?xi32>)
      outs(%o : tensor<?x4x1x16xf32>)
      mask_mod {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %dj = attn.captured 0 [%j] : i32
        %c0 = arith.constant 0 : i32
        %keep = arith.cmpi sge, %dj, %c0 : i32
        attn.yield %keep : i1
      }
      -> tensor<?x4x1x16xf32>
  return %r : tensor<?x4x1x16xf32>
}
func.func @block_table_only(%q: tensor<1x4x?x16xf32>, %k: tensor<1x4x?x16xf32>, %v: tensor<1x4x?x16xf32>,
                            %table: tensor<?x?x?x?xi32>, %o: tensor<1x4x?x16xf32>) -> tensor<1x4x?x16xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x?x16xf32>, tensor<1x4x?x16xf32>, tensor<1x4x?x16xf32>)
      captures(%table : tensor<?x?x?x?xi32>)
      outs(%o : tensor<1x4x?x16xf32>) causal align(top_left) {attn.block_mask = array<i64: 0, 128, 128>}
      -> tensor<1x4x?x16xf32>
  return %r : tensor<1x4x?x16xf32>
}
