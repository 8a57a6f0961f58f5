func.func @own_blocking(%q: memref<1x1x?x16xf32>, %k: memref<1x1x?x16xf32>, %v: memref<1x1x?x16xf32>,
                        %acc: memref<1x1x?x16xf32>, %m: memref<1x1x?xf32>, %s: memref<1x1x?xf32>)
    {
  attn.online_attention ins(%q, %k, %v : memref<1x1x?x16xf32>, memref<1x1x?x16xf32>, memref<1x1x?x16xf32>)
      outs(%acc, %m, %s : memref<1x1x?x16xf32>, memref<1x1x?xf32>, memref<1x1x?xf32>)
      kernel <packed, query_tile = 64, key_block = 64, row_block = 3>
  return
}
