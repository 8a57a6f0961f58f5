// RUN: attn-opt %s -attn-tile=query-tile-size=64 -attn-online-softmax -attn-skip-masked-blocks -attn-tile-keys=key-tile-size=32 -canonicalize | FileCheck %s
// RUN: attn-opt %s --pass-pipeline='builtin.module(func.func(attn-tile{group-rows=4},attn-online-softmax),attn-split-keys{key-multiple=128},canonicalize,cse)' | FileCheck %s --check-prefix=SPLIT

// Score and mask modifiers see global indices (docs/spec.md), so every tile
// of an op with one carries its origin, as dropout's do: attn-tile gives
// each tile (b, h, i0, 0) (h the query head: GQA tiles slice K and V, not
// the indices), attn-skip-masked-blocks adds a key range's first key and
// attn-tile-keys each key tile's. The captures pass whole, and the region
// is cloned unchanged onto every tile.

// CHECK-LABEL: func @causal_alibi
//       CHECK: scf.forall (%[[H:.+]], %[[I:.+]]) = (0, 0) to (4, %{{.+}}) step (1, 64)
// The keys every row of the tile sees, [0, n) by tiles of 32...
//       CHECK:   scf.for %[[J:.+]] = %c0 to %[[N:.+]] step %c32
//       CHECK:     attn.online_attention {{.*}} origin(%c0, %[[H]], %[[I]], %[[J]]) captures(%arg3 : tensor<4xf32>)
//  CHECK-SAME:       score_mod {
//       CHECK:       attn.captured 0[%{{.+}}] : f32
// ... then the diagonal's, from n.
//       CHECK:   scf.for %[[J2:.+]] = %c0 to %{{.+}} step %c32
//       CHECK:     %[[KEY:.+]] = arith.addi %[[N]], %[[J2]]
//       CHECK:     attn.online_attention {{.*}} diagonal(%{{.+}}) origin(%c0, %[[H]], %[[I]], %[[KEY]]) captures(%arg3 : tensor<4xf32>)
func.func @causal_alibi(%q: tensor<1x4x?x16xf32>, %k: tensor<1x2x?x16xf32>, %v: tensor<1x2x?x16xf32>,
                        %slopes: tensor<4xf32>, %o: tensor<1x4x?x16xf32>) -> tensor<1x4x?x16xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      captures(%slopes : tensor<4xf32>)
      outs(%o : tensor<1x4x?x16xf32>) causal align(bottom_right)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %slope = attn.captured 0 [%h] : f32
        %d = arith.subi %j, %i : index
        %di = arith.index_cast %d : index to i64
        %df = arith.sitofp %di : i64 to f32
        %bias = arith.mulf %slope, %df : f32
        %t = arith.addf %s, %bias : f32
        attn.yield %t : f32
      }
      -> tensor<1x4x?x16xf32>
  return %r : tensor<1x4x?x16xf32>
}

// A decoding op: tiles of whole GQA groups (heads %h to %h + 2), each key
// range of the split from its first key %first.
// SPLIT-LABEL: func @decode_documents
//       SPLIT: scf.forall (%[[B:[a-z0-9]+]], %[[H:[a-z0-9]+]], %[[S:[a-z0-9]+]]) = (0, 0, 0)
//       SPLIT:   %[[FIRST:.+]] = arith.minui
//       SPLIT:   attn.online_attention {{.*}} origin(%[[B]], %[[H]], %c0, %[[FIRST]]) captures(%arg3 : tensor<?xi32>)
//  SPLIT-SAME:     mask_mod {
func.func @decode_documents(%q: tensor<?x4x1x16xf32>, %k: tensor<?x2x?x16xf32>, %v: tensor<?x2x?x16xf32>,
                            %docs: tensor<?xi32>, %o: tensor<?x4x1x16xf32>) -> tensor<?x4x1x16xf32>
    attributes {attn.kernel, attn.split_keys} {
  %r = attn.attention ins(%q, %k, %v : tensor<?x4x1x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
      captures(%docs : tensor<?xi32>)
      outs(%o : tensor<?x4x1x16xf32>)
      mask_mod {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %dj = attn.captured 0 [%j] : i32
        %c0 = arith.constant 0 : i32
        %keep = arith.cmpi sge, %dj, %c0 : i32
        attn.yield %keep : i1
      }
      -> tensor<?x4x1x16xf32>
  return %r : tensor<?x4x1x16xf32>
}

// A block table alone (its mask_mod taken whole into the causal attribute
// by attn-band-from-mask-mod) reads global indices too: its tiles carry
// the origin and the attribute.
// CHECK-LABEL: func @block_table_only
//       CHECK: scf.forall (%[[H:.+]], %[[I:.+]]) = (0, 0) to (4, %{{.+}}) step (1, 64)
//       CHECK:   attn.online_attention {{.*}} origin(%c0, %[[H]], %[[I]], %{{.+}}) captures(%arg3 : tensor<?x?x?x?xi32>)
//  CHECK-SAME:     {attn.block_mask = array<i64: 0, 128, 128>}
func.func @block_table_only(%q: tensor<1x4x?x16xf32>, %k: tensor<1x4x?x16xf32>, %v: tensor<1x4x?x16xf32>,
                            %table: tensor<?x?x?x?xi32>, %o: tensor<1x4x?x16xf32>) -> tensor<1x4x?x16xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x4x?x16xf32>, tensor<1x4x?x16xf32>, tensor<1x4x?x16xf32>)
      captures(%table : tensor<?x?x?x?xi32>)
      outs(%o : tensor<1x4x?x16xf32>) causal align(top_left) {attn.block_mask = array<i64: 0, 128, 128>}
      -> tensor<1x4x?x16xf32>
  return %r : tensor<1x4x?x16xf32>
}
