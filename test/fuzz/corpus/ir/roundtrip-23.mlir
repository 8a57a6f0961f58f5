func.func @weights_mask_mod(%q: memref<1x1x8x16xf32>, %k: memref<1x1x8x16xf32>,
                            %w: memref<1x1x8x8xf32>) {
  attn.attention_weights ins(%q, %k : memref<1x1x8x16xf32>, memref<1x1x8x16xf32>)
      outs(%w : memref<1x1x8x8xf32>)
      mask_mod {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %keep = arith.cmpi sle, %j, %i : index
        attn.yield %keep : i1
      }
  return
}
