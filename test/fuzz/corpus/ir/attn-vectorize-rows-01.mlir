func.func @epilogue_masked_tail(%acc: memref<?x40xf32>, %sum: memref<?xf32>,
                                %out: memref<?x40xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                   affine_map<(d0, d1) -> (d0)>,
                                   affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%acc, %sum : memref<?x40xf32>, memref<?xf32>)
      outs(%out : memref<?x40xf32>) {
  ^bb0(%a: f32, %l: f32, %o: f32):
    %div = arith.divf %a, %l : f32
    linalg.yield %div : f32
  }
  return
}
