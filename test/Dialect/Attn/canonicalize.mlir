// RUN: attn-opt %s -split-input-file -canonicalize | FileCheck %s

// The canonicalization patterns of attn.attention (dialect/AttnOps.cpp):
// DropUnusedLse stops computing a log-sum-exp nobody reads, and
// DropRightWindowUnderCausal removes the side of a window that causal masking
// already bounds.

// An unused log-sum-exp result is dropped from outs and from the results.
// CHECK-LABEL: func @drop_unused_lse
// CHECK-SAME: %[[OUT:[a-z0-9]+]]: tensor<1x2x8x16xf32>, %[[LSE:[a-z0-9]+]]: tensor<1x2x8xf32>
// CHECK: %[[R:.+]] = attn.attention
// CHECK-SAME: outs(%[[OUT]] : tensor<1x2x8x16xf32>)
// CHECK-SAME: causal align(top_left) scale(5.000000e-01)
// CHECK-SAME: -> tensor<1x2x8x16xf32>
// CHECK-NOT: tensor<1x2x8xf32>
// CHECK: return %[[R]]
func.func @drop_unused_lse(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>,
                           %v: tensor<1x2x8x16xf32>, %o: tensor<1x2x8x16xf32>,
                           %l: tensor<1x2x8xf32>) -> tensor<1x2x8x16xf32> {
  %r:2 = attn.attention ins(%q, %k, %v : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>)
      outs(%o, %l : tensor<1x2x8x16xf32>, tensor<1x2x8xf32>)
      causal align(top_left) scale(0.5)
      -> tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
  return %r#0 : tensor<1x2x8x16xf32>
}

// -----

// A used log-sum-exp stays.
// CHECK-LABEL: func @keep_used_lse
// CHECK: %[[R:.+]]:2 = attn.attention
// CHECK-SAME: outs(%{{[a-z0-9]+}}, %{{[a-z0-9]+}} : tensor<1x2x8x16xf32>, tensor<1x2x8xf32>)
// CHECK-SAME: -> tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
// CHECK: return %[[R]]#0, %[[R]]#1
func.func @keep_used_lse(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>,
                         %v: tensor<1x2x8x16xf32>, %o: tensor<1x2x8x16xf32>,
                         %l: tensor<1x2x8xf32>)
    -> (tensor<1x2x8x16xf32>, tensor<1x2x8xf32>) {
  %r:2 = attn.attention ins(%q, %k, %v : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>)
      outs(%o, %l : tensor<1x2x8x16xf32>, tensor<1x2x8xf32>)
      -> tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
  return %r#0, %r#1 : tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
}

// -----

// Causal masking already forbids j > i + off, so a window's right side
// (>= 0) bounds nothing more: a window with only a right side disappears.
// CHECK-LABEL: func @drop_right_only_window_under_causal
// CHECK: attn.attention
// CHECK-SAME: causal align(bottom_right)
// CHECK-NOT: window
// CHECK-SAME: -> tensor<1x1x4x8xf32>
func.func @drop_right_only_window_under_causal(
    %q: tensor<1x1x4x8xf32>, %k: tensor<1x1x16x8xf32>,
    %v: tensor<1x1x16x8xf32>, %o: tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x1x4x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>)
      outs(%o : tensor<1x1x4x8xf32>) causal align(bottom_right) window <right = 3>
      -> tensor<1x1x4x8xf32>
  return %r : tensor<1x1x4x8xf32>
}

// -----

// A window with both sides keeps its left side under causal masking.
// CHECK-LABEL: func @keep_left_window_under_causal
// CHECK: attn.attention
// CHECK-SAME: causal align(top_left) window <left = 4>
// CHECK-NOT: right
// CHECK-SAME: -> tensor<1x1x16x8xf32>
func.func @keep_left_window_under_causal(
    %q: tensor<1x1x16x8xf32>, %k: tensor<1x1x16x8xf32>,
    %v: tensor<1x1x16x8xf32>, %o: tensor<1x1x16x8xf32>) -> tensor<1x1x16x8xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>)
      outs(%o : tensor<1x1x16x8xf32>) causal align(top_left) window <left = 4, right = 0>
      -> tensor<1x1x16x8xf32>
  return %r : tensor<1x1x16x8xf32>
}

// -----

// A tile (diagonal operand instead of align) is canonicalized the same way.
// CHECK-LABEL: func @drop_right_window_on_tile
// CHECK-SAME: %[[D:[a-z0-9]+]]: index
// CHECK: attn.attention
// CHECK-SAME: diagonal(%[[D]])
// CHECK-SAME: causal window <left = 2>
// CHECK-NOT: right
// CHECK-SAME: -> tensor<1x1x4x8xf32>
func.func @drop_right_window_on_tile(
    %q: tensor<1x1x4x8xf32>, %k: tensor<1x1x16x8xf32>,
    %v: tensor<1x1x16x8xf32>, %o: tensor<1x1x4x8xf32>, %d: index)
    -> tensor<1x1x4x8xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x1x4x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>)
      diagonal(%d) outs(%o : tensor<1x1x4x8xf32>) causal window <left = 2, right = 1>
      -> tensor<1x1x4x8xf32>
  return %r : tensor<1x1x4x8xf32>
}

// -----

// Without causal masking the right side of a window is the only bound there:
// it stays.
// CHECK-LABEL: func @keep_right_window_without_causal
// CHECK: attn.attention
// CHECK-NOT: causal
// CHECK-SAME: align(top_left) window <left = 4, right = 2>
func.func @keep_right_window_without_causal(
    %q: tensor<1x1x16x8xf32>, %k: tensor<1x1x16x8xf32>,
    %v: tensor<1x1x16x8xf32>, %o: tensor<1x1x16x8xf32>) -> tensor<1x1x16x8xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>)
      outs(%o : tensor<1x1x16x8xf32>) align(top_left) window <left = 4, right = 2>
      -> tensor<1x1x16x8xf32>
  return %r : tensor<1x1x16x8xf32>
}

// -----

// Both patterns on one op: the unused log-sum-exp and the redundant right
// side both go.
// CHECK-LABEL: func @both_patterns
// CHECK: attn.attention
// CHECK-SAME: outs(%{{[a-z0-9]+}} : tensor<1x2x8x16xf16>)
// CHECK-SAME: causal align(bottom_right)
// CHECK-NOT: window
// CHECK-SAME: -> tensor<1x2x8x16xf16>
// CHECK-NOT: tensor<1x2x8xf32>
func.func @both_patterns(%q: tensor<1x2x8x16xf16>, %k: tensor<1x2x8x16xf16>,
                         %v: tensor<1x2x8x16xf16>, %o: tensor<1x2x8x16xf16>,
                         %l: tensor<1x2x8xf32>) -> tensor<1x2x8x16xf16> {
  %r:2 = attn.attention ins(%q, %k, %v : tensor<1x2x8x16xf16>, tensor<1x2x8x16xf16>, tensor<1x2x8x16xf16>)
      outs(%o, %l : tensor<1x2x8x16xf16>, tensor<1x2x8xf32>)
      causal align(bottom_right) window <right = 0>
      -> tensor<1x2x8x16xf16>, tensor<1x2x8xf32>
  return %r#0 : tensor<1x2x8x16xf16>
}

// -----

// attn.attention is Pure: with no result used at all it is erased.
// CHECK-LABEL: func @dead_attention
// CHECK-NOT: attn.attention
// CHECK: return
func.func @dead_attention(%q: tensor<1x1x4x8xf32>, %o: tensor<1x1x4x8xf32>) {
  %r = attn.attention ins(%q, %q, %q : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>)
      outs(%o : tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return
}
