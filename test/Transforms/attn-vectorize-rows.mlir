// RUN: attn-opt %s -split-input-file -attn-vectorize-rows | FileCheck %s
// RUN: attn-opt %s -split-input-file -attn-vectorize-rows=vector-width=8 | FileCheck %s --check-prefix=AVX2

// The epilogue of a tile (O = max == -inf ? 0 : acc / sum, NaN max passed
// on, converted to bf16) into a caller's output of unknown strides: where
// its innermost stride is 1, loops over the rows and 16-lane chunks of Dv
// (the row's max and sum broadcast, the divide on vectors); elsewhere the
// op as it was.

// CHECK-LABEL: func @epilogue_bf16
//  CHECK-SAME:   %[[OUT:[a-z0-9]+]]: memref<1x1x?x64xbf16, strided<[?, ?, ?, ?], offset: ?>>
//       CHECK:   %{{.+}}, %{{.+}}, %{{.+}}:4, %[[STRIDES:.+]]:4 = memref.extract_strided_metadata %[[OUT]] :
//       CHECK:   %[[UNIT:.+]] = arith.cmpi eq, %[[STRIDES]]#3, %{{.+}} : index
//       CHECK:   scf.if %[[UNIT]] {
//       CHECK:     %[[VIEW:.+]] = memref.reinterpret_cast %[[OUT]]
//  CHECK-SAME:       to memref<1x1x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
//       CHECK:     scf.for
//       CHECK:       scf.for
//       CHECK:         scf.for %[[ROW:.+]] =
//       CHECK:           memref.load %{{.+}}[{{.+}}, %[[ROW]]] : memref<1x1x?xf32
//       CHECK:           %[[SUM:.+]] = memref.load %{{.+}}[{{.+}}, %[[ROW]]] : memref<1x1x?xf32
//       CHECK:           %[[S:.+]] = vector.broadcast %[[SUM]] : f32 to vector<16xf32>
//       CHECK:           %[[ACC:.+]] = vector.load %{{.+}}[{{.+}}, %[[ROW]], %{{.+}}] : memref<1x1x?x64xf32{{.*}}>, vector<16xf32>
//       CHECK:           arith.divf %[[ACC]], %[[S]] : vector<16xf32>
//       CHECK:           %[[B:.+]] = arith.truncf %{{.+}} : vector<16xf32> to vector<16xbf16>
//       CHECK:           vector.store %[[B]], %[[VIEW]][{{.+}}, %[[ROW]], %{{.+}}] : memref<1x1x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>, vector<16xbf16>
// CHECK-COUNT-3:         vector.store
//   CHECK-NOT:           vector.store
//       CHECK:   } else {
//       CHECK:     linalg.generic
//       CHECK:       arith.divf {{.+}} : f32
//       CHECK:   }

// AVX2-LABEL: func @epilogue_bf16
// AVX2-COUNT-8: vector.store {{.+}} vector<8xbf16>
//   AVX2-NOT: vector.store

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

// -----

// Unit strides known statically: no run-time check. Dv = 40 is two whole
// chunks and a third masked to 8 lanes.

// CHECK-LABEL: func @epilogue_masked_tail
//   CHECK-NOT:   scf.if
//       CHECK:   scf.for
//   CHECK-NOT:   vector.maskedload
//       CHECK:   vector.load {{.+}} vector<16xf32>
//       CHECK:   vector.store {{.+}} vector<16xf32>
//       CHECK:   vector.load {{.+}} vector<16xf32>
//       CHECK:   vector.store {{.+}} vector<16xf32>
//       CHECK:   %[[MASK:.+]] = vector.constant_mask [8] : vector<16xi1>
//       CHECK:   vector.maskedload %{{.+}}[{{.+}}], %[[MASK]], %{{.+}} : memref<?x40xf32>, vector<16xi1>, vector<16xf32> into vector<16xf32>
//       CHECK:   vector.maskedstore %{{.+}}[{{.+}}], %[[MASK]], %{{.+}} : memref<?x40xf32>, vector<16xi1>, vector<16xf32>
//   CHECK-NOT:   linalg.generic

// With 8 lanes, Dv = 40 is five whole chunks.

// AVX2-LABEL: func @epilogue_masked_tail
// AVX2-COUNT-5: vector.store {{.+}} vector<8xf32>
//   AVX2-NOT:   vector.masked

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

// -----

// Left to convert-linalg-to-loops: a dynamic innermost dim (the LSE's rows),
// a transposed operand, a body that reads the output, a reduction, a fill
// of a scalar from above.

// CHECK-LABEL: func @not_rows
//   CHECK-NOT:   vector.
// CHECK-COUNT-5: linalg.generic
//   CHECK-NOT:   vector.

func.func @not_rows(%a: memref<?x?xf32>, %b: memref<?x16xf32>, %c: memref<16x16xf32>,
                    %d: memref<16x16xf32>, %r: memref<16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                   affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<?x?xf32>) outs(%a : memref<?x?xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>,
                                   affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<16x16xf32>) outs(%d : memref<16x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                   affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<16x16xf32>) outs(%d : memref<16x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.addf %x, %o : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                   affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%c : memref<16x16xf32>) outs(%r : memref<16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.addf %x, %o : f32
    linalg.yield %s : f32
  }
  %one = arith.constant 1.0 : f32
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      outs(%d : memref<16x16xf32>) {
  ^bb0(%o: f32):
    linalg.yield %one : f32
  }
  return
}
