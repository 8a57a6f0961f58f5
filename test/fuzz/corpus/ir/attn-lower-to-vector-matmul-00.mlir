func.func @projection(%x: memref<?x40xf32, strided<[?, ?], offset: ?>>,
                      %w: memref<72x40xbf16, strided<[?, ?], offset: ?>>,
                      %c: memref<?x72xf32, strided<[?, ?], offset: ?>>) {
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                 affine_map<(m, n, k) -> (n, k)>,
                                 affine_map<(m, n, k) -> (m, n)>]
      ins(%x, %w : memref<?x40xf32, strided<[?, ?], offset: ?>>,
                   memref<72x40xbf16, strided<[?, ?], offset: ?>>)
      outs(%c : memref<?x72xf32, strided<[?, ?], offset: ?>>)
  return
}
