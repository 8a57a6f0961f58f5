// RUN: attn-opt %s -split-input-file -attn-band-from-mask-mod | FileCheck %s

// A causal mask_mod (what attn.flex_attention traces from q_idx >= kv_idx)
// is the causal attribute; nothing is left of the region, so it goes.
// CHECK-LABEL: func.func @causal
//       CHECK:   attn.attention {{.*}} causal align(top_left) -> tensor
//   CHECK-NOT:   mask_mod
func.func @causal(%q: tensor<1x2x?x16xf32>) -> tensor<1x2x?x16xf32> {
  %r = attn.attention ins(%q, %q, %q : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      outs(%q : tensor<1x2x?x16xf32>)
  mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %keep = arith.cmpi sge, %i, %j : index
    attn.yield %keep : i1
  } -> tensor<1x2x?x16xf32>
  return %r : tensor<1x2x?x16xf32>
}

// -----

// Document masking AND causal (and_masks, with its constant true): the
// band becomes the attribute, the documents stay in the region.
// CHECK-LABEL: func.func @documents_causal
//       CHECK:   attn.attention {{.*}} causal align(top_left) mask_mod {
//       CHECK:     %[[DI:.+]] = attn.captured 0[%{{.+}}] : i32
//       CHECK:     %[[DJ:.+]] = attn.captured 0[%{{.+}}] : i32
//       CHECK:     %[[SAME:.+]] = arith.cmpi eq, %[[DI]], %[[DJ]] : i32
//  CHECK-NEXT:     attn.yield %[[SAME]] : i1
func.func @documents_causal(%q: tensor<1x2x?x16xf32>, %docs: tensor<?xi32>) -> tensor<1x2x?x16xf32> {
  %r = attn.attention ins(%q, %q, %q : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      captures(%docs : tensor<?xi32>) outs(%q : tensor<1x2x?x16xf32>)
  mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %di = attn.captured 0 [%i] : i32
    %dj = attn.captured 0 [%j] : i32
    %same = arith.cmpi eq, %di, %dj : i32
    %t = arith.constant true
    %a = arith.andi %same, %t : i1
    %causal = arith.cmpi sge, %i, %j : index
    %keep = arith.andi %a, %causal : i1
    attn.yield %keep : i1
  } -> tensor<1x2x?x16xf32>
  return %r : tensor<1x2x?x16xf32>
}

// -----

// |i - j| <= 256 (abs as the tracer writes it: max(d, 0 - d)) is a window
// of 256 each side; a score_mod stays.
// CHECK-LABEL: func.func @window
//       CHECK:   attn.attention {{.*}} align(top_left) window <left = 256, right = 256> score_mod {
//   CHECK-NOT:   mask_mod
func.func @window(%q: tensor<1x2x?x16xf32>) -> tensor<1x2x?x16xf32> {
  %r = attn.attention ins(%q, %q, %q : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      outs(%q : tensor<1x2x?x16xf32>)
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %half = arith.constant 0.5 : f32
    %r = arith.mulf %s, %half : f32
    attn.yield %r : f32
  } mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %c0 = arith.constant 0 : index
    %w = arith.constant 256 : index
    %d = arith.subi %i, %j : index
    %nd = arith.subi %c0, %d : index
    %ad = arith.maxsi %d, %nd : index
    %keep = arith.cmpi sle, %ad, %w : index
    attn.yield %keep : i1
  } -> tensor<1x2x?x16xf32>
  return %r : tensor<1x2x?x16xf32>
}

// -----

// Bounds on j - i written every way round: 0 <= i - j (constant on the
// left), j < i + 101 (strict, an offset on the right): a window looking
// back 100 keys, with the diagonal.
// CHECK-LABEL: func.func @lookback
//       CHECK:   attn.attention {{.*}} align(top_left) window <left = 100, right = 0> -> tensor
func.func @lookback(%q: tensor<1x2x?x16xf32>) -> tensor<1x2x?x16xf32> {
  %r = attn.attention ins(%q, %q, %q : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      outs(%q : tensor<1x2x?x16xf32>)
  mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %c0 = arith.constant 0 : index
    %c101 = arith.constant 101 : index
    %d = arith.subi %i, %j : index
    %behind = arith.cmpi sle, %c0, %d : index
    %far = arith.addi %j, %c101 : index
    %near = arith.cmpi slt, %i, %far : index
    %keep = arith.andi %behind, %near : i1
    attn.yield %keep : i1
  } -> tensor<1x2x?x16xf32>
  return %r : tensor<1x2x?x16xf32>
}

// -----

// Left alone: a strictly causal mask (j < i: the band's right side would be
// -1), a band on other indices (b, h), an op that already has a causal
// attribute, and a comparison of i and j with other coefficients.
// CHECK-LABEL: func.func @left_alone
//   CHECK-NOT:   causal align(top_left)
//   CHECK-NOT:   window
//       CHECK:   arith.cmpi sgt, %{{.+}}, %{{.+}} : index
//       CHECK:   attn.attention {{.*}} causal align(bottom_right) mask_mod {
//       CHECK:   arith.cmpi sge
//       CHECK:   attn.attention {{.*}} mask_mod {
//       CHECK:   arith.addi
func.func @left_alone(%q: tensor<1x2x?x16xf32>) -> (tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>) {
  %r0 = attn.attention ins(%q, %q, %q : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      outs(%q : tensor<1x2x?x16xf32>)
  mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %keep = arith.cmpi sgt, %i, %j : index
    attn.yield %keep : i1
  } -> tensor<1x2x?x16xf32>
  %r1 = attn.attention ins(%q, %q, %q : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      outs(%q : tensor<1x2x?x16xf32>) causal align(bottom_right)
  mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %keep = arith.cmpi sge, %i, %j : index
    attn.yield %keep : i1
  } -> tensor<1x2x?x16xf32>
  %r2 = attn.attention ins(%q, %q, %q : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      outs(%q : tensor<1x2x?x16xf32>)
  mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %twice = arith.addi %i, %i : index
    %keep = arith.cmpi sge, %twice, %j : index
    %head = arith.cmpi sge, %b, %h : index
    %both = arith.andi %keep, %head : i1
    attn.yield %both : i1
  } -> tensor<1x2x?x16xf32>
  return %r0, %r1, %r2 : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>
}

// -----

// The backward and weights ops too (their mask_mod is the forward's).
// CHECK-LABEL: func.func @backward
//       CHECK:   attn.attention_backward {{.*}} causal align(top_left)
//   CHECK-NOT:   mask_mod
func.func @backward(%q: tensor<1x2x?x16xf32>, %lse: tensor<1x2x?xf32>) -> (tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>) {
  %r:3 = attn.attention_backward
      ins(%q, %q, %q : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      forward(%q, %lse : tensor<1x2x?x16xf32>, tensor<1x2x?xf32>)
      grads(%q : tensor<1x2x?x16xf32>)
      outs(%q, %q, %q : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
  mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %keep = arith.cmpi sle, %j, %i : index
    attn.yield %keep : i1
  } -> tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>
  return %r#0, %r#1, %r#2 : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>
}
