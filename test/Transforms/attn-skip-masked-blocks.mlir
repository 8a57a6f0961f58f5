// RUN: attn-opt %s -split-input-file -attn-skip-masked-blocks -canonicalize | FileCheck %s
// RUN: attn-opt %s -split-input-file -attn-skip-masked-blocks=key-alignment=32 -canonicalize | FileCheck %s --check-prefix=ALIGN
// RUN: attn-opt %s -split-input-file -attn-skip-masked-blocks="whole-ops=true" -canonicalize | FileCheck %s --check-prefix=WHOLE

// Causal masking over tq query rows with diagonal d: row i sees keys
// j <= i + d. Keys past hi = tq + d are seen by no row and are dropped;
// keys below midHi = d + 1 are seen by every row and go to an op without
// the causal attribute (no mask arithmetic); only [midHi, hi) stays masked,
// with its diagonal shifted to its own first key.

// CHECK-LABEL: func @causal
//  CHECK-SAME: (%[[Q:[a-z0-9]+]]: {{.+}}, %[[K:[a-z0-9]+]]: {{.+}}, %[[V:[a-z0-9]+]]: {{.+}}, %[[ACC:[a-z0-9]+]]: {{.+}}, %[[M:[a-z0-9]+]]: {{.+}}, %[[S:[a-z0-9]+]]: {{.+}}, %[[D:[a-z0-9]+]]: index)
//   CHECK-DAG: %[[ROWS:.+]] = tensor.dim %[[Q]], %c2
//   CHECK-DAG: %[[KEYS:.+]] = tensor.dim %[[K]], %c2
//       CHECK: %[[END:.+]] = arith.addi %[[D]], %[[ROWS]]
//       CHECK: %[[HI0:.+]] = arith.maxsi %[[END]], %c0
//       CHECK: %[[HI:.+]] = arith.minsi %[[HI0]], %[[KEYS]]
//       CHECK: %[[FULL:.+]] = arith.addi %[[D]], %c1
//       CHECK: %[[MID0:.+]] = arith.maxsi %[[FULL]], %c0
//       CHECK: %[[MID:.+]] = arith.minsi %[[MID0]], %[[HI]]
//       CHECK: %[[KF:.+]] = tensor.extract_slice %[[K]][0, 0, 0, 0] [1, 1, %[[MID]], 64]
//       CHECK: %[[VF:.+]] = tensor.extract_slice %[[V]][0, 0, 0, 0] [1, 1, %[[MID]], 64]
//       CHECK: %[[R1:.+]]:3 = attn.online_attention ins(%[[Q]], %[[KF]], %[[VF]] : {{.+}}) outs(%[[ACC]], %[[M]], %[[S]] : {{.+}}) ->
//       CHECK: %[[LEN:.+]] = arith.subi %[[HI]], %[[MID]]
//       CHECK: %[[DIAG:.+]] = arith.subi %[[D]], %[[MID]]
//       CHECK: %[[KB:.+]] = tensor.extract_slice %[[K]][0, 0, %[[MID]], 0] [1, 1, %[[LEN]], 64]
//       CHECK: %[[VB:.+]] = tensor.extract_slice %[[V]][0, 0, %[[MID]], 0] [1, 1, %[[LEN]], 64]
//       CHECK: %[[R2:.+]]:3 = attn.online_attention ins(%[[Q]], %[[KB]], %[[VB]] : {{.+}}) diagonal(%[[DIAG]]) outs(%[[R1]]#0, %[[R1]]#1, %[[R1]]#2 : {{.+}}) causal
//       CHECK: return %[[R2]]#0, %[[R2]]#1, %[[R2]]#2
// With key-alignment=32 the unmasked range ends at midHi rounded down to a
// multiple of 32 (not below its start, 0): whole key tiles; the masked
// range starts there.
// ALIGN-LABEL: func @causal
//       ALIGN: %[[FULL:.+]] = arith.addi %{{.+}}, %c1
//       ALIGN: %[[MID0:.+]] = arith.maxsi %[[FULL]], %c0
//       ALIGN: %[[MID1:.+]] = arith.minsi %[[MID0]], %{{.+}}
//       ALIGN: %[[TILES:.+]] = arith.divui %[[MID1]], %c32
//       ALIGN: %[[DOWN:.+]] = arith.muli %[[TILES]], %c32
//       ALIGN: %[[MID:.+]] = arith.maxsi %[[DOWN]], %c0
//       ALIGN: tensor.extract_slice %{{.+}}[0, 0, 0, 0] [1, 1, %[[MID]], 64]
//       ALIGN: attn.online_attention
//       ALIGN: tensor.extract_slice %{{.+}}[0, 0, %[[MID]], 0]
//       ALIGN: attn.online_attention {{.+}} causal
func.func @causal(%q: tensor<1x1x?x64xf32>, %k: tensor<1x1x?x64xf32>, %v: tensor<1x1x?x64xf32>,
                  %acc: tensor<1x1x?x64xf32>, %m: tensor<1x1x?xf32>, %s: tensor<1x1x?xf32>, %d: index)
    -> (tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>) {
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>)
      diagonal(%d) outs(%acc, %m, %s : tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>) causal
      -> tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>
  return %r#0, %r#1, %r#2 : tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>
}

// -----

// A window that looks back 128 keys (top-left alignment, so d = 0 here):
// keys below lo = d - 128 are dropped, [lo, tq - 1 + d - 128) is masked,
// the interior is unmasked up to the causal edge, the rest masked again.

// Aligned, the unmasked range's start rounds up (to the next multiple of
// 32, not past its end) and its end rounds down (not below its start).
// ALIGN-LABEL: func @sliding_window
//       ALIGN: %[[UP0:.+]] = arith.addi %[[MIDLO:.+]], %c31
//       ALIGN: %[[UP1:.+]] = arith.divui %[[UP0]], %c32
//       ALIGN: %[[UP2:.+]] = arith.muli %[[UP1]], %c32
//       ALIGN: %[[START:.+]] = arith.minsi %[[UP2]], %[[MIDHI:.+]] : index
//       ALIGN: %[[DOWN0:.+]] = arith.divui %[[MIDHI]], %c32
//       ALIGN: %[[DOWN1:.+]] = arith.muli %[[DOWN0]], %c32
//       ALIGN: %[[END:.+]] = arith.maxsi %[[DOWN1]], %[[START]]
//       ALIGN: attn.online_attention {{.+}} causal window <left = 128>
//       ALIGN: %[[LEN:.+]] = arith.subi %[[END]], %[[START]]
//       ALIGN: tensor.extract_slice %{{.+}}[0, 0, %[[START]], 0] [1, 1, %[[LEN]], 64]
//       ALIGN: attn.online_attention
//       ALIGN: tensor.extract_slice %{{.+}}[0, 0, %[[END]], 0]
//       ALIGN: attn.online_attention {{.+}} causal window <left = 128>

// CHECK-LABEL: func @sliding_window
//       CHECK: %[[R1:.+]]:3 = attn.online_attention {{.+}} diagonal(%{{.+}}) outs({{.+}}) causal window <left = 128>
//       CHECK: %[[R2:.+]]:3 = attn.online_attention {{.+}} outs(%[[R1]]#0, %[[R1]]#1, %[[R1]]#2 : {{.+}}) -> {{.+}}
//       CHECK: %[[R3:.+]]:3 = attn.online_attention {{.+}} diagonal(%{{.+}}) outs(%[[R2]]#0, %[[R2]]#1, %[[R2]]#2 : {{.+}}) causal window <left = 128>
//       CHECK: return %[[R3]]#0
func.func @sliding_window(%q: tensor<1x1x64x64xf32>, %k: tensor<1x1x?x64xf32>, %v: tensor<1x1x?x64xf32>,
                          %acc: tensor<1x1x64x64xf32>, %m: tensor<1x1x64xf32>, %s: tensor<1x1x64xf32>)
    -> (tensor<1x1x64x64xf32>, tensor<1x1x64xf32>, tensor<1x1x64xf32>) {
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x1x64x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>)
      outs(%acc, %m, %s : tensor<1x1x64x64xf32>, tensor<1x1x64xf32>, tensor<1x1x64xf32>)
      causal align(top_left) window <left = 128>
      -> tensor<1x1x64x64xf32>, tensor<1x1x64xf32>, tensor<1x1x64xf32>
  return %r#0, %r#1, %r#2 : tensor<1x1x64x64xf32>, tensor<1x1x64xf32>, tensor<1x1x64xf32>
}

// -----

// Without causal masking or a window there is nothing to skip.

// CHECK-LABEL: func @unmasked
//       CHECK: attn.online_attention
//   CHECK-NOT: attn.online_attention
func.func @unmasked(%q: tensor<1x1x64x64xf32>, %k: tensor<1x1x?x64xf32>, %v: tensor<1x1x?x64xf32>,
                    %acc: tensor<1x1x64x64xf32>, %m: tensor<1x1x64xf32>, %s: tensor<1x1x64xf32>)
    -> (tensor<1x1x64x64xf32>, tensor<1x1x64xf32>, tensor<1x1x64xf32>) {
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x1x64x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>)
      outs(%acc, %m, %s : tensor<1x1x64x64xf32>, tensor<1x1x64xf32>, tensor<1x1x64xf32>)
      -> tensor<1x1x64x64xf32>, tensor<1x1x64xf32>, tensor<1x1x64xf32>
  return %r#0, %r#1, %r#2 : tensor<1x1x64x64xf32>, tensor<1x1x64xf32>, tensor<1x1x64xf32>
}

// -----

// When aligning, an op's chosen key block (#attn.kernel) is the alignment;
// without key-alignment the ranges stay exact.
// ALIGN-LABEL: func @own_key_tile
//       ALIGN: arith.divui %{{.+}}, %c16
//       ALIGN: arith.muli %{{.+}}, %c16
//   ALIGN-NOT: %c32
// CHECK-LABEL: func @own_key_tile
//   CHECK-NOT: arith.divui
//       CHECK: return
func.func @own_key_tile(%q: tensor<1x1x?x64xf32>, %k: tensor<1x1x?x64xf32>, %v: tensor<1x1x?x64xf32>,
                        %acc: tensor<1x1x?x64xf32>, %m: tensor<1x1x?xf32>, %s: tensor<1x1x?xf32>, %d: index)
    -> (tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>)
    {
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>)
      diagonal(%d) outs(%acc, %m, %s : tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>) causal
      kernel <packed, query_tile = 64, key_block = 16, row_block = 2>
      -> tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>
  return %r#0, %r#1, %r#2 : tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>
}

// -----

// With whole-ops (the CPU pipeline with lane rows on), causal and windowed
// ops stay whole: attn-lower-to-vector's micro-kernels clamp each tile's
// keys to the band themselves and apply it only in the blocks across it.
// All three kinds: f32 (the lane-rows path), with a mask operand and bf16
// (the packed path).
// CHECK-LABEL: func @whole_ops
// ALIGN-LABEL: func @whole_ops
// WHOLE-LABEL: func @whole_ops
//       WHOLE: attn.online_attention ins(%arg0, %arg1, %arg2 : {{.+}}) diagonal(%{{.+}}) outs({{.+}}) causal
//       WHOLE: attn.online_attention ins(%arg0, %arg1, %arg2 : {{.+}}) mask(%arg3 : {{.+}}) diagonal(%{{.+}}) outs({{.+}}) causal
//       WHOLE: attn.online_attention ins(%arg4, %arg5, %arg6 : {{.+}}) diagonal(%{{.+}}) outs({{.+}}) causal
//   WHOLE-NOT: attn.online_attention
func.func @whole_ops(%q: tensor<1x1x?x64xf32>, %k: tensor<1x1x?x64xf32>, %v: tensor<1x1x?x64xf32>,
                         %mask: tensor<1x1x?x?xi1>,
                         %qb: tensor<1x1x?x64xbf16>, %kb: tensor<1x1x?x64xbf16>, %vb: tensor<1x1x?x64xbf16>,
                         %acc: tensor<1x1x?x64xf32>, %m: tensor<1x1x?xf32>, %s: tensor<1x1x?xf32>, %d: index)
    -> (tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>) {
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>)
      diagonal(%d) outs(%acc, %m, %s : tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>) causal
      -> tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>
  %r2:3 = attn.online_attention ins(%q, %k, %v : tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>)
      mask(%mask : tensor<1x1x?x?xi1>)
      diagonal(%d) outs(%r#0, %r#1, %r#2 : tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>) causal
      -> tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>
  %r3:3 = attn.online_attention ins(%qb, %kb, %vb : tensor<1x1x?x64xbf16>, tensor<1x1x?x64xbf16>, tensor<1x1x?x64xbf16>)
      diagonal(%d) outs(%r2#0, %r2#1, %r2#2 : tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>) causal
      -> tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>
  return %r3#0, %r3#1, %r3#2 : tensor<1x1x?x64xf32>, tensor<1x1x?xf32>, tensor<1x1x?xf32>
}
