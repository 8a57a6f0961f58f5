func.func @backward_block_table(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                                %o: memref<1x1x?x16xf32>, %lse: memref<1x1x?xf32>, %do: memref<1x1x?x16xf32>,
                                %dq: memref<1x1x?x16xf32>, %dk: memref<1x1x?x16xf32>, %dv: memref<1x1x?x16xf32>,
                                %docs: memref<?xi32>, %table: memref<?x?x?x?xi32>) {
  attn.attention_backward
      ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      captures(%docs, %table : memref<?xi32>, memref<?x?x?x?xi32>)
      forward(%o, %lse : memref<1x1x?x16xf32>, memref<1x1x?xf32>)
      grads(%do : memref<1x1x?x16xf32>)
      outs(%dq, %dk, %dv : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      mask_mod {
      ^bb0(%bb: index, %hh: index, %ii: index, %jj: index):
        %di = attn.captured 0 [%ii] : i32
        %dj = attn.captured 0 [%jj] : i32
        %same = arith.cmpi eq, %di, %dj : i32
        attn.yield %same : i1
      } {attn.block_mask = array<i64: 1, 128, 128>}
  return
}
