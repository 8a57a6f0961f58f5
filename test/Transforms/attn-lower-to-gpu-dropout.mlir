// RUN: attn-opt %s -split-input-file -attn-tiling="query-tile-size=64 decode-rows=0 block-mapping=true" -attn-lower-to-gpu -canonicalize -cse | FileCheck %s

// Dropout on the GPU forward: the probability and seed are the kernel's last
// parameters, as themselves (f32, i64). After the online update has summed
// the undropped weights into each row's l, every weight is multiplied by Z:
// 1/(1 - p) where its keep bit holds, else 0; the keep bits are Philox
// 4x32-10 keyed by the seed on the counter (j/8, i, h, b). Where the key
// tile starts at a multiple of 8 (the branch), one Philox gives a lane's two
// keys of a group (the low and high halves of word lane % 4); else one
// Philox a weight. Then P·V on tensor cores.

// CHECK-LABEL: gpu.func @dropout(
// CHECK-SAME: %[[P:arg36]]: f32, %[[SEED:arg37]]: i64)
// CHECK: nvvm.mma.sync
// CHECK: math.exp
// CHECK: gpu.shuffle xor
// The threshold ⌊p·2¹⁶⌋·2¹⁶ and 1/(1 − p).
// CHECK: %[[P64:.+]] = arith.extf %[[P]] : f32 to f64
// CHECK: %[[SCALED:.+]] = arith.mulf %[[P64]], %{{.+}} : f64
// CHECK: %[[BITS:.+]] = arith.fptoui %[[SCALED]] : f64 to i32
// CHECK: %[[THRESHOLD:.+]] = arith.shli %[[BITS]], %c16_i32 : i32
// CHECK: %[[ONEMINUS:.+]] = arith.subf %{{.+}}, %[[P]] : f32
// CHECK: %[[KEPT:.+]] = arith.divf %{{.+}}, %[[ONEMINUS]] : f32
// CHECK: %[[PHASE:.+]] = arith.remui %[[J0:.+]], %c8 : index
// CHECK: %[[ALIGNED:.+]] = arith.cmpi eq, %[[PHASE]], %c0 : index
// CHECK: scf.if %[[ALIGNED]] -> (f32,
// CHECK: arith.trunci %[[SEED]] : i64 to i32
// CHECK: arith.muli %{{.+}}, %c3528531795_i64 : i64
// CHECK: arith.muli %{{.+}}, %c3449720151_i64 : i64
// Two keys of one Philox word.
// CHECK: %[[EVEN:.+]] = arith.cmpi uge, %{{.+}}, %[[THRESHOLD]] : i32
// CHECK: %[[ODD:.+]] = arith.cmpi uge, %{{.+}}, %[[THRESHOLD]] : i32
// CHECK: arith.select %[[EVEN]], %[[KEPT]], %{{.+}} : f32
// CHECK: arith.mulf
// CHECK: arith.select %[[ODD]], %[[KEPT]], %{{.+}} : f32
// CHECK: } else {
// CHECK: arith.trunci %[[SEED]] : i64 to i32
// CHECK: arith.cmpi uge, %{{.+}}, %[[THRESHOLD]] : i32
// CHECK: arith.select %{{.+}}, %[[KEPT]], %{{.+}} : f32
// CHECK: nvvm.mma.sync
// CHECK: gpu.return
func.func @dropout(%q: tensor<1x2x?x64xf16>, %k: tensor<1x2x?x64xf16>, %v: tensor<1x2x?x64xf16>,
                   %o: tensor<1x2x?x64xf16>, %p: f32, %seed: i64) -> tensor<1x2x?x64xf16> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>)
      dropout(%p, %seed) outs(%o : tensor<1x2x?x64xf16>) -> tensor<1x2x?x64xf16>
  return %r : tensor<1x2x?x64xf16>
}

// -----

// The backward regenerates the forward's bits per cell (i, j) at its global
// indices: dS = P·(Z·dP − Δ), and the P tile that dV sums holds P·Z.

// CHECK-LABEL: gpu.func @backward_dropout(
// CHECK-SAME: %[[BP:arg[0-9]+]]: f32, %[[BSEED:arg[0-9]+]]: i64)
// CHECK: arith.extf %[[BP]] : f32 to f64
// CHECK: math.exp
// CHECK: arith.trunci %[[BSEED]] : i64 to i32
// CHECK: %[[KEEP:.+]] = arith.cmpi uge
// CHECK: %[[Z:.+]] = arith.select %[[KEEP]], %{{.+}}, %{{.+}} : f32
// CHECK: %[[ZDP:.+]] = arith.mulf %{{.+}}, %[[Z]] : f32
// CHECK: %[[PZ:.+]] = arith.mulf %[[EXP:.+]], %[[Z]] : f32
// CHECK: %[[DIFF:.+]] = arith.subf %[[ZDP]], %{{.+}} : f32
// CHECK: arith.mulf %[[EXP]], %[[DIFF]] : f32
// CHECK: scf.yield %[[PZ]],
// CHECK: gpu.return
func.func @backward_dropout(%q: tensor<1x2x?x64xf16>, %k: tensor<1x2x?x64xf16>, %v: tensor<1x2x?x64xf16>,
                            %o: tensor<1x2x?x64xf16>, %lse: tensor<1x2x?xf32>, %do: tensor<1x2x?x64xf16>,
                            %dq: tensor<1x2x?x64xf16>, %dk: tensor<1x2x?x64xf16>, %dv: tensor<1x2x?x64xf16>,
                            %p: f32, %s: i64)
    -> tensor<1x2x?x64xf16> {
  %r:3 = attn.attention_backward ins(%q, %k, %v : tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>)
      dropout(%p, %s)
      forward(%o, %lse : tensor<1x2x?x64xf16>, tensor<1x2x?xf32>) grads(%do : tensor<1x2x?x64xf16>)
      outs(%dq, %dk, %dv : tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>)
      -> tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>
  return %r#0 : tensor<1x2x?x64xf16>
}
