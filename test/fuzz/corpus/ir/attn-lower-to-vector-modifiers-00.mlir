func.func @alibi_documents_tile(%q: memref<1x1x64x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                      %slopes: memref<?xf32>, %docs: memref<?xi32>,
                      %b: index, %h: index, %i: index, %j: index,
                      %acc: memref<1x1x64x16xf32>, %max: memref<1x1x64xf32>, %sum: memref<1x1x64xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x64x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      origin(%b, %h, %i, %j) captures(%slopes, %docs : memref<?xf32>, memref<?xi32>)
      outs(%acc, %max, %sum : memref<1x1x64x16xf32>, memref<1x1x64xf32>, memref<1x1x64xf32>)
      kernel <packed, query_tile = 64, key_block = 64, row_block = 2>
      score_mod {
      ^bb0(%s: f32, %bb: index, %hh: index, %ii: index, %jj: index):
        %slope = attn.captured 0 [%hh] : f32
        %d = arith.subi %jj, %ii : index
        %di = arith.index_cast %d : index to i64
        %df = arith.sitofp %di : i64 to f32
        %bias = arith.mulf %slope, %df : f32
        %t = arith.addf %s, %bias : f32
        attn.yield %t : f32
      }
      mask_mod {
      ^bb0(%bb: index, %hh: index, %ii: index, %jj: index):
        %di = attn.captured 1 [%ii] : i32
        %dj = attn.captured 1 [%jj] : i32
        %same = arith.cmpi eq, %di, %dj : i32
        attn.yield %same : i1
      }
  return
}
func.func @block_table_tile(%q: memref<1x1x64x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                      %docs: memref<?xi32>, %table: memref<?x?x?x?xi32>,
                      %b: index, %h: index, %i: index, %j: index,
                      %acc: memref<1x1x64x16xf32>, %max: memref<1x1x64xf32>, %sum: memref<1x1x64xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x64x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      origin(%b, %h, %i, %j) captures(%docs, %table : memref<?xi32>, memref<?x?x?x?xi32>)
      outs(%acc, %max, %sum : memref<1x1x64x16xf32>, memref<1x1x64xf32>, memref<1x1x64xf32>)
      kernel <packed, query_tile = 64, key_block = 64, row_block = 2>
      mask_mod {
      ^bb0(%bb: index, %hh: index, %ii: index, %jj: index):
        %di = attn.captured 0 [%ii] : i32
        %dj = attn.captured 0 [%jj] : i32
        %same = arith.cmpi eq, %di, %dj : i32
        attn.yield %same : i1
      } {attn.block_mask = array<i64: 1, 128, 32>}
  return
}
func.func @alibi_lane_rows_tile(%q: memref<1x1x64x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                      %slopes: memref<?xf32>,
                      %b: index, %h: index, %i: index, %j: index,
                      %acc: memref<1x1x64x16xf32>, %max: memref<1x1x64xf32>, %sum: memref<1x1x64xf32>) {
  attn.online_attention ins(%q, %k, %v : memref<1x1x64x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      origin(%b, %h, %i, %j) captures(%slopes : memref<?xf32>)
      outs(%acc, %max, %sum : memref<1x1x64x16xf32>, memref<1x1x64xf32>, memref<1x1x64xf32>)
      kernel <lane_rows, query_tile = 64, key_block = 64, row_block = 4, lane_rows = 64>
      score_mod {
      ^bb0(%s: f32, %bb: index, %hh: index, %ii: index, %jj: index):
        %slope = attn.captured 0 [%hh] : f32
        %d = arith.subi %jj, %ii : index
        %di = arith.index_cast %d : index to i64
        %df = arith.sitofp %di : i64 to f32
        %bias = arith.mulf %slope, %df : f32
        %t = arith.addf %s, %bias : f32
        attn.yield %t : f32
      }
  return
}
