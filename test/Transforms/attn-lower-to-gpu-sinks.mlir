// RUN: attn-opt %s -attn-tiling="query-tile-size=64 decode-rows=0 block-mapping=true" -attn-lower-to-gpu -canonicalize -cse | FileCheck %s

// Attention sinks on the GPU: the key loop never sees them; after it, each
// lane folds the sink of its tile's query head (blockIdx.y) into its rows'
// statistics, as the per-row generic of the tiling says (m' = max(m, σ),
// c = exp(m − m'), l' = l·c + exp(σ − m'), the divisor l'/c, +inf where c
// = 0), then O = acc / (l'/c) and LSE = m' + log(l') are stored. The sink
// is read from global memory at the head: sinks[h · stride].

// CHECK: gpu.func @sinks(
// CHECK-SAME: %[[SINKS:arg27]]: memref<?xf32>, %{{.+}}: i64, %[[STRIDE:arg29]]: i64,
// CHECK-SAME: %[[O:arg30]]: memref<?xf16>
// CHECK-SAME: %[[LSE:arg39]]: memref<?xf32>
// CHECK: %[[S:.+]] = arith.index_cast %[[STRIDE]] : i64 to index
// CHECK: nvvm.mma.sync
// CHECK: %[[AT:.+]] = arith.muli %block_id_y, %[[S]] : index
// CHECK: %[[SINK:.+]] = memref.load %[[SINKS]][%[[AT]]] : memref<?xf32>
// Row 0 of the thread: the statistics with the sink.
// CHECK: %[[M0:.+]] = arith.maximumf %{{.+}}, %[[SINK]] : f32
// CHECK: arith.subf %{{.+}}, %[[M0]]
// CHECK: %[[C0:.+]] = math.exp
// CHECK: arith.subf %[[SINK]], %[[M0]]
// CHECK: math.exp
// CHECK: arith.divf %{{.+}}, %[[C0]]
// Row 1.
// CHECK: arith.maximumf %{{.+}}, %[[SINK]] : f32
// O, by the divisor with the sink.
// CHECK: scf.if
// CHECK:   arith.divf
// CHECK:   arith.truncf %{{.+}} : f32 to f16
// CHECK:   memref.store %{{.+}}, %[[O]]
// The LSE, m' + log(l'), one lane of four a row.
// CHECK: memref.load %[[SINKS]][%[[AT]]] : memref<?xf32>
// CHECK: math.log
// CHECK: memref.store %{{.+}}, %[[LSE]]
// CHECK: gpu.return
func.func @sinks(%q: tensor<1x2x?x64xf16>, %k: tensor<1x2x?x64xf16>, %v: tensor<1x2x?x64xf16>,
                 %s: tensor<2xf32>, %o: tensor<1x2x?x64xf16>, %l: tensor<1x2x?xf32>)
    -> (tensor<1x2x?x64xf16>, tensor<1x2x?xf32>) {
  %r:2 = attn.attention ins(%q, %k, %v : tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>)
      sinks(%s : tensor<2xf32>) outs(%o, %l : tensor<1x2x?x64xf16>, tensor<1x2x?xf32>)
      -> tensor<1x2x?x64xf16>, tensor<1x2x?xf32>
  return %r#0, %r#1 : tensor<1x2x?x64xf16>, tensor<1x2x?xf32>
}
