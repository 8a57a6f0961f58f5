#full = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#row = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
func.func @epilogue_bf16(%acc: memref<1x1x?x64xf32, strided<[4096, 4096, 64, 1]>>,
                         %max: memref<1x1x?xf32, strided<[64, 64, 1]>>,
                         %sum: memref<1x1x?xf32, strided<[64, 64, 1]>>,
                         %out: memref<1x1x?x64xbf16, strided<[?, ?, ?, ?], offset: ?>>) {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#full, #row, #row, #full],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%acc, %max, %sum : memref<1x1x?x64xf32, strided<[4096, 4096, 64, 1]>>,
          memref<1x1x?xf32, strided<[64, 64, 1]>>, memref<1x1x?xf32, strided<[64, 64, 1]>>)
      outs(%out : memref<1x1x?x64xbf16, strided<[?, ?, ?, ?], offset: ?>>) {
  ^bb0(%a: f32, %m: f32, %l: f32, %o: bf16):
    %empty = arith.cmpf oeq, %m, %ninf : f32
    %div = arith.divf %a, %l : f32
    %r = arith.select %empty, %zero, %div : f32
    %nan = arith.cmpf uno, %m, %m : f32
    %r2 = arith.select %nan, %m, %r : f32
    %t = arith.truncf %r2 : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}
