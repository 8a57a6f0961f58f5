// RUN: attn-opt %s -attn-tiling="query-tile-size=32 key-tile-size=32 block-mapping=true decode-rows=0" -attn-lower-to-gpu -canonicalize -cse | FileCheck %s

// The score_mod and mask_mod on the GPU (docs/spec.md, "Score and mask
// modifiers"): each score of the thread's fragment goes through the
// score_mod after the scale, then the mask_mod and the key tail exclude it,
// at the position's global indices: the query head is blockIdx.y, the row
// the query tile's first (blockIdx.x · 32) plus the fragment's row, the key
// the key tile's first (the loop's index) plus the fragment's column. Each
// captured tensor is its kernel argument's pointer seen with the
// argument's sizes and strides; every read is clamped into its bounds.

// CHECK-LABEL: gpu.func @alibi_documents
// CHECK-DAG:   %[[HEAD:.+]] = gpu.block_id y
// CHECK-DAG:   %[[TILE:.+]] = gpu.block_id x
// CHECK:       %[[FIRSTROW:.+]] = arith.muli %[[TILE]], %c32 : index
// CHECK:       scf.for %[[KEYS:.+]] = %c0 to %{{.+}} step %c32 iter_args
// CHECK:         %[[SLOPES:.+]] = memref.reinterpret_cast %arg27 to offset: [0], sizes: [%{{.+}}], strides: [%{{.+}}] : memref<?xf32> to memref<?xf32, strided<[?]>>
// CHECK:         %[[DOCS:.+]] = memref.reinterpret_cast %arg30 to offset: [0], sizes: [%{{.+}}], strides: [%{{.+}}] : memref<?xi32> to memref<?xi32, strided<[?]>>
// The scale first; then the score_mod: slope[h] · (j − i) added.
// CHECK:         %[[SCALED:.+]] = arith.mulf %{{.+}}, %[[SCALE:cst(_[0-9]+)?]] : f32
// CHECK:         %[[INTILE:.+]] = arith.cmpi slt, %[[COL:.+]], %{{.+}} : index
// CHECK:         %[[ROW:.+]] = arith.addi %[[FIRSTROW]], %{{.+}} : index
// CHECK:         %[[KEY:.+]] = arith.addi %[[KEYS]], %[[COL]] : index
// CHECK:         %[[LAST:.+]] = arith.subi %{{.+}}, %c1 : index
// CHECK:         %[[LO:.+]] = arith.maxsi %[[HEAD]], %c0 : index
// CHECK:         %[[H:.+]] = arith.minsi %[[LO]], %[[LAST]] : index
// CHECK:         %[[SLOPE:.+]] = memref.load %[[SLOPES]][%[[H]]]
// CHECK:         %[[D:.+]] = arith.subi %[[KEY]], %[[ROW]] : index
// CHECK:         %[[DI:.+]] = arith.index_cast %[[D]] : index to i64
// CHECK:         %[[DF:.+]] = arith.sitofp %[[DI]] : i64 to f32
// CHECK:         %[[BIAS:.+]] = arith.mulf %[[SLOPE]], %[[DF]] : f32
// CHECK:         %[[MODIFIED:.+]] = arith.addf %[[SCALED]], %[[BIAS]] : f32
// The mask_mod: doc[i] == doc[j], both reads clamped, with the key tail.
// CHECK:         memref.dim %[[DOCS]], %c0
// CHECK:         %[[DOCI:.+]] = memref.load %[[DOCS]][%{{.+}}] : memref<?xi32, strided<[?]>>
// CHECK:         %[[DOCJ:.+]] = memref.load %[[DOCS]][%{{.+}}] : memref<?xi32, strided<[?]>>
// CHECK:         %[[SAME:.+]] = arith.cmpi eq, %[[DOCI]], %[[DOCJ]] : i32
// CHECK:         %[[KEEP:.+]] = arith.andi %[[INTILE]], %[[SAME]] : i1
// CHECK:         arith.select %[[KEEP]], %[[MODIFIED]], %cst_{{[0-9]+}} : f32
// The modifiers may exclude a key for some rows only (weight 0): P·V first
// asks the whole block whether the staged V tile holds an inf or NaN
// (exponent bits all set), which 0 · NaN would leak into those rows; only
// then does it drop the excluded keys one by one.
// CHECK:         %[[VBITS:.+]] = vector.bitcast %{{.+}} : vector<8xf16> to vector<8xi16>
// CHECK:         %[[EXPONENT:.+]] = arith.andi %[[VBITS]], %[[INF:.+]] : vector<8xi16>
// CHECK:         arith.cmpi eq, %[[EXPONENT]], %[[INF]] : vector<8xi16>
// CHECK:         nvvm.barrier #nvvm.reduction<or>
// CHECK:         nvvm.mma.sync
// CHECK:   gpu.return
func.func @alibi_documents(%q: tensor<?x4x?x32xf16>, %k: tensor<?x2x?x32xf16>, %v: tensor<?x2x?x32xf16>,
                           %slopes: tensor<4xf32>, %docs: tensor<?xi32>, %o: tensor<?x4x?x32xf16>) -> tensor<?x4x?x32xf16> {
  %r = attn.attention
      ins(%q, %k, %v : tensor<?x4x?x32xf16>, tensor<?x2x?x32xf16>, tensor<?x2x?x32xf16>)
      captures(%slopes, %docs : tensor<4xf32>, tensor<?xi32>)
      outs(%o : tensor<?x4x?x32xf16>)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %slope = attn.captured 0 [%h] : f32
        %d = arith.subi %j, %i : index
        %di = arith.index_cast %d : index to i64
        %df = arith.sitofp %di : i64 to f32
        %bias = arith.mulf %slope, %df : f32
        %r = arith.addf %s, %bias : f32
        attn.yield %r : f32
      }
      mask_mod {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %di = attn.captured 1 [%i] : i32
        %dj = attn.captured 1 [%j] : i32
        %same = arith.cmpi eq, %di, %dj : i32
        attn.yield %same : i1
      } -> tensor<?x4x?x32xf16>
  return %r : tensor<?x4x?x32xf16>
}

