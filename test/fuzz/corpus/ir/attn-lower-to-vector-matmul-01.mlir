func.func @plain(%x: memref<?x40xf32>, %w: memref<40x72xf32>, %c: memref<?x72xf32>) {
  linalg.matmul ins(%x, %w : memref<?x40xf32>, memref<40x72xf32>)
      outs(%c : memref<?x72xf32>)
  return
}
