// RUN: attn-opt %s -split-input-file -attn-tile-keys=key-tile-size=64 -canonicalize | FileCheck %s

// FlashAttention's key loop: attn.online_attention accumulates into its
// state, so tiling its keys is a plain reduction loop whose iteration
// arguments are the accumulator, the running max and the running sum. Each
// iteration sees one key tile (at most 64 keys here); the diagonal moves
// with the tile's first key so that causal masking stays exact.

// CHECK-LABEL: func @key_loop
//  CHECK-SAME: (%[[Q:[a-z0-9]+]]: {{.+}}, %[[K:[a-z0-9]+]]: {{.+}}, %[[V:[a-z0-9]+]]: {{.+}}, %[[ACC:[a-z0-9]+]]: {{.+}}, %[[M:[a-z0-9]+]]: {{.+}}, %[[S:[a-z0-9]+]]: {{.+}}, %[[D:[a-z0-9]+]]: index)
//       CHECK: %[[SK:.+]] = tensor.dim %[[K]], %c2
//       CHECK: %[[R:.+]]:3 = scf.for %[[KT:.+]] = %c0 to %[[SK]] step %c64 iter_args(%[[A:.+]] = %[[ACC]], %[[MX:.+]] = %[[M]], %[[SM:.+]] = %[[S]])
//       CHECK:   %[[N:.+]] = affine.min #{{.+}}(%[[KT]])[%[[SK]]]
//       CHECK:   %[[KTILE:.+]] = tensor.extract_slice %[[K]][0, 0, %[[KT]], 0] [1, 1, %[[N]], 64]
//       CHECK:   %[[VTILE:.+]] = tensor.extract_slice %[[V]][0, 0, %[[KT]], 0] [1, 1, %[[N]], 32]
//       CHECK:   %[[DT:.+]] = arith.subi %[[D]], %[[KT]]
//       CHECK:   %[[NEXT:.+]]:3 = attn.online_attention ins(%[[Q]], %[[KTILE]], %[[VTILE]] : {{.+}}) diagonal(%[[DT]]) outs(%[[A]], %[[MX]], %[[SM]] : {{.+}}) causal
//       CHECK:   scf.yield %[[NEXT]]#0, %[[NEXT]]#1, %[[NEXT]]#2
//       CHECK: return %[[R]]#0, %[[R]]#1, %[[R]]#2
func.func @key_loop(%q: tensor<1x1x32x64xf32>, %k: tensor<1x1x?x64xf32>, %v: tensor<1x1x?x32xf32>,
                    %acc: tensor<1x1x32x32xf32>, %m: tensor<1x1x32xf32>, %s: tensor<1x1x32xf32>, %d: index)
    -> (tensor<1x1x32x32xf32>, tensor<1x1x32xf32>, tensor<1x1x32xf32>) {
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x1x32x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x32xf32>)
      diagonal(%d) outs(%acc, %m, %s : tensor<1x1x32x32xf32>, tensor<1x1x32xf32>, tensor<1x1x32xf32>) causal
      -> tensor<1x1x32x32xf32>, tensor<1x1x32xf32>, tensor<1x1x32xf32>
  return %r#0, %r#1, %r#2 : tensor<1x1x32x32xf32>, tensor<1x1x32xf32>, tensor<1x1x32xf32>
}

// -----

// The mask is sliced along its key dimension with the keys.

// CHECK-LABEL: func @masked_key_loop
//  CHECK-SAME: %[[MASK:[a-z0-9]+]]: tensor<1x1x32x?xi1>
//       CHECK: scf.for %[[KT:.+]] = %c0 to %{{.+}} step %c64
//       CHECK:   %[[MT:.+]] = tensor.extract_slice %[[MASK]][0, 0, 0, %[[KT]]] [1, 1, 32, %{{.+}}]
//       CHECK:   attn.online_attention {{.+}} mask(%[[MT]] : tensor<1x1x32x?xi1>)
func.func @masked_key_loop(%q: tensor<1x1x32x64xf32>, %k: tensor<1x1x?x64xf32>, %v: tensor<1x1x?x64xf32>,
                           %mask: tensor<1x1x32x?xi1>,
                           %acc: tensor<1x1x32x64xf32>, %m: tensor<1x1x32xf32>, %s: tensor<1x1x32xf32>)
    -> (tensor<1x1x32x64xf32>, tensor<1x1x32xf32>, tensor<1x1x32xf32>) {
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x1x32x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32>)
      mask(%mask : tensor<1x1x32x?xi1>)
      outs(%acc, %m, %s : tensor<1x1x32x64xf32>, tensor<1x1x32xf32>, tensor<1x1x32xf32>)
      -> tensor<1x1x32x64xf32>, tensor<1x1x32xf32>, tensor<1x1x32xf32>
  return %r#0, %r#1, %r#2 : tensor<1x1x32x64xf32>, tensor<1x1x32xf32>, tensor<1x1x32xf32>
}

// -----

// An op's chosen key block (#attn.kernel) overrides the pass option.

// CHECK-LABEL: func @own_tile_size
//       CHECK: scf.for %{{.+}} = %c0 to %{{.+}} step %c32
func.func @own_tile_size(%q: tensor<1x1x32x64xf32>, %k: tensor<1x1x?x64xf32>, %v: tensor<1x1x?x32xf32>,
                         %acc: tensor<1x1x32x32xf32>, %m: tensor<1x1x32xf32>, %s: tensor<1x1x32xf32>)
    -> (tensor<1x1x32x32xf32>, tensor<1x1x32xf32>, tensor<1x1x32xf32>) {
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x1x32x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x32xf32>)
      outs(%acc, %m, %s : tensor<1x1x32x32xf32>, tensor<1x1x32xf32>, tensor<1x1x32xf32>)
      kernel <lane_rows, query_tile = 32, key_block = 32, lane_rows = 64>
      -> tensor<1x1x32x32xf32>, tensor<1x1x32xf32>, tensor<1x1x32xf32>
  return %r#0, %r#1, %r#2 : tensor<1x1x32x32xf32>, tensor<1x1x32xf32>, tensor<1x1x32xf32>
}
