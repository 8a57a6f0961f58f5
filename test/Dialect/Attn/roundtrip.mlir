// RUN: attn-opt %s -split-input-file | attn-opt -split-input-file | FileCheck %s

// Every form of attn.attention, attn.online_attention and
// attn.attention_backward survives printing and
// parsing again: the custom assembly format is its own inverse.

// CHECK-LABEL: func @minimal_f32
// CHECK: %[[O:.+]] = attn.attention
// CHECK-SAME: ins({{[^:]+}} : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>)
// CHECK-SAME: outs(%{{[a-z0-9]+}} : tensor<1x1x4x8xf32>)
// CHECK-SAME: -> tensor<1x1x4x8xf32>
// CHECK-NOT: causal
// CHECK: return %[[O]]
func.func @minimal_f32(%q: tensor<1x1x4x8xf32>, %k: tensor<1x1x4x8xf32>,
                       %v: tensor<1x1x4x8xf32>, %o: tensor<1x1x4x8xf32>)
    -> tensor<1x1x4x8xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>)
      outs(%o : tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return %r : tensor<1x1x4x8xf32>
}

// -----

// Sinks print between the inputs and outs, with their type.
// CHECK-LABEL: func @sinks
// CHECK: attn.attention ins({{.+}}) mask(%{{.+}} : tensor<1x1x16x64xi1>) sinks(%{{.+}} : tensor<?xf32>) outs(
func.func @sinks(%q: tensor<2x?x16x32xf32>, %k: tensor<2x2x64x32xf32>,
                 %v: tensor<2x2x64x32xf32>, %m: tensor<1x1x16x64xi1>,
                 %s: tensor<?xf32>, %o: tensor<2x?x16x32xf32>)
    -> tensor<2x?x16x32xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<2x?x16x32xf32>, tensor<2x2x64x32xf32>, tensor<2x2x64x32xf32>)
      mask(%m : tensor<1x1x16x64xi1>) sinks(%s : tensor<?xf32>)
      outs(%o : tensor<2x?x16x32xf32>) -> tensor<2x?x16x32xf32>
  return %r : tensor<2x?x16x32xf32>
}

// -----

// CHECK-LABEL: func @f16
// CHECK: attn.attention
// CHECK-SAME: tensor<2x4x16x32xf16>, tensor<2x4x64x32xf16>, tensor<2x4x64x32xf16>
// CHECK-SAME: outs(%{{[a-z0-9]+}} : tensor<2x4x16x32xf16>) -> tensor<2x4x16x32xf16>
func.func @f16(%q: tensor<2x4x16x32xf16>, %k: tensor<2x4x64x32xf16>,
               %v: tensor<2x4x64x32xf16>, %o: tensor<2x4x16x32xf16>)
    -> tensor<2x4x16x32xf16> {
  %r = attn.attention ins(%q, %k, %v : tensor<2x4x16x32xf16>, tensor<2x4x64x32xf16>, tensor<2x4x64x32xf16>)
      outs(%o : tensor<2x4x16x32xf16>) -> tensor<2x4x16x32xf16>
  return %r : tensor<2x4x16x32xf16>
}

// -----

// CHECK-LABEL: func @bf16
// CHECK: attn.attention
// CHECK-SAME: tensor<1x2x8x64xbf16>, tensor<1x2x8x64xbf16>, tensor<1x2x8x64xbf16>
// CHECK-SAME: outs(%{{[a-z0-9]+}} : tensor<1x2x8x64xbf16>) -> tensor<1x2x8x64xbf16>
func.func @bf16(%q: tensor<1x2x8x64xbf16>, %k: tensor<1x2x8x64xbf16>,
                %v: tensor<1x2x8x64xbf16>, %o: tensor<1x2x8x64xbf16>)
    -> tensor<1x2x8x64xbf16> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x2x8x64xbf16>, tensor<1x2x8x64xbf16>, tensor<1x2x8x64xbf16>)
      outs(%o : tensor<1x2x8x64xbf16>) -> tensor<1x2x8x64xbf16>
  return %r : tensor<1x2x8x64xbf16>
}

// -----

// Grouped-query attention: 8 query heads share 2 key/value heads (G = 4).
// CHECK-LABEL: func @gqa
// CHECK: attn.attention
// CHECK-SAME: ins({{[^:]+}} : tensor<1x8x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>)
// CHECK-SAME: outs(%{{[a-z0-9]+}} : tensor<1x8x16x32xf32>)
func.func @gqa(%q: tensor<1x8x16x32xf32>, %k: tensor<1x2x16x32xf32>,
               %v: tensor<1x2x16x32xf32>, %o: tensor<1x8x16x32xf32>)
    -> tensor<1x8x16x32xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x8x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>)
      outs(%o : tensor<1x8x16x32xf32>) -> tensor<1x8x16x32xf32>
  return %r : tensor<1x8x16x32xf32>
}

// -----

// Multi-query attention: one key/value head for all query heads.
// CHECK-LABEL: func @mqa
// CHECK: attn.attention
// CHECK-SAME: ins({{[^:]+}} : tensor<2x8x16x32xf32>, tensor<2x1x16x32xf32>, tensor<2x1x16x32xf32>)
func.func @mqa(%q: tensor<2x8x16x32xf32>, %k: tensor<2x1x16x32xf32>,
               %v: tensor<2x1x16x32xf32>, %o: tensor<2x8x16x32xf32>)
    -> tensor<2x8x16x32xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<2x8x16x32xf32>, tensor<2x1x16x32xf32>, tensor<2x1x16x32xf32>)
      outs(%o : tensor<2x8x16x32xf32>) -> tensor<2x8x16x32xf32>
  return %r : tensor<2x8x16x32xf32>
}

// -----

// B, H, Sq and Sk are dynamic; only the head dims D and Dv must be static.
// CHECK-LABEL: func @dynamic_dims
// CHECK: attn.attention
// CHECK-SAME: ins({{[^:]+}} : tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x32xf16>)
// CHECK-SAME: outs(%{{[a-z0-9]+}} : tensor<?x?x?x32xf16>) -> tensor<?x?x?x32xf16>
func.func @dynamic_dims(%q: tensor<?x?x?x64xf16>, %k: tensor<?x?x?x64xf16>,
                        %v: tensor<?x?x?x32xf16>, %o: tensor<?x?x?x32xf16>)
    -> tensor<?x?x?x32xf16> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x32xf16>)
      outs(%o : tensor<?x?x?x32xf16>) -> tensor<?x?x?x32xf16>
  return %r : tensor<?x?x?x32xf16>
}

// -----

// The seed tutorials' d_k = 2, d_v = 4: the output takes the value's head dim.
// CHECK-LABEL: func @d_differs_from_dv
// CHECK: attn.attention
// CHECK-SAME: ins({{[^:]+}} : tensor<1x1x3x2xf32>, tensor<1x1x5x2xf32>, tensor<1x1x5x4xf32>)
// CHECK-SAME: outs(%{{[a-z0-9]+}} : tensor<1x1x3x4xf32>) -> tensor<1x1x3x4xf32>
func.func @d_differs_from_dv(%q: tensor<1x1x3x2xf32>, %k: tensor<1x1x5x2xf32>,
                             %v: tensor<1x1x5x4xf32>, %o: tensor<1x1x3x4xf32>)
    -> tensor<1x1x3x4xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x1x3x2xf32>, tensor<1x1x5x2xf32>, tensor<1x1x5x4xf32>)
      outs(%o : tensor<1x1x3x4xf32>) -> tensor<1x1x3x4xf32>
  return %r : tensor<1x1x3x4xf32>
}

// -----

// The log-sum-exp: a second outs tensor and a second result.
// CHECK-LABEL: func @with_lse
// CHECK: %[[R:.+]]:2 = attn.attention
// CHECK-SAME: outs(%{{[a-z0-9]+}}, %{{[a-z0-9]+}} : tensor<2x4x16x32xf16>, tensor<2x4x16xf32>)
// CHECK-SAME: -> tensor<2x4x16x32xf16>, tensor<2x4x16xf32>
// CHECK: return %[[R]]#0, %[[R]]#1
func.func @with_lse(%q: tensor<2x4x16x32xf16>, %k: tensor<2x4x16x32xf16>,
                    %v: tensor<2x4x16x32xf16>, %o: tensor<2x4x16x32xf16>,
                    %l: tensor<2x4x16xf32>)
    -> (tensor<2x4x16x32xf16>, tensor<2x4x16xf32>) {
  %r:2 = attn.attention ins(%q, %k, %v : tensor<2x4x16x32xf16>, tensor<2x4x16x32xf16>, tensor<2x4x16x32xf16>)
      outs(%o, %l : tensor<2x4x16x32xf16>, tensor<2x4x16xf32>)
      -> tensor<2x4x16x32xf16>, tensor<2x4x16xf32>
  return %r#0, %r#1 : tensor<2x4x16x32xf16>, tensor<2x4x16xf32>
}

// -----

// A boolean keep-mask in every broadcast form, and an additive float bias.
// CHECK-LABEL: func @masks
// CHECK: attn.attention
// CHECK-SAME: mask(%{{[a-z0-9]+}} : tensor<1x1x1x32xi1>)
// CHECK: attn.attention
// CHECK-SAME: mask(%{{[a-z0-9]+}} : tensor<2x1x16x32xi1>)
// CHECK: attn.attention
// CHECK-SAME: mask(%{{[a-z0-9]+}} : tensor<1x4x1x32xi1>)
// CHECK: attn.attention
// CHECK-SAME: mask(%{{[a-z0-9]+}} : tensor<2x4x16x32xi1>)
// CHECK: attn.attention
// CHECK-SAME: mask(%{{[a-z0-9]+}} : tensor<2x4x16x32xf32>)
func.func @masks(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x32x8xf32>,
                 %v: tensor<2x4x32x8xf32>, %o: tensor<2x4x16x8xf32>,
                 %m0: tensor<1x1x1x32xi1>, %m1: tensor<2x1x16x32xi1>,
                 %m2: tensor<1x4x1x32xi1>, %m3: tensor<2x4x16x32xi1>,
                 %bias: tensor<2x4x16x32xf32>)
    -> (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>,
        tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) {
  %r0 = attn.attention ins(%q, %k, %v : tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x8xf32>)
      mask(%m0 : tensor<1x1x1x32xi1>)
      outs(%o : tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  %r1 = attn.attention ins(%q, %k, %v : tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x8xf32>)
      mask(%m1 : tensor<2x1x16x32xi1>)
      outs(%o : tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  %r2 = attn.attention ins(%q, %k, %v : tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x8xf32>)
      mask(%m2 : tensor<1x4x1x32xi1>)
      outs(%o : tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  %r3 = attn.attention ins(%q, %k, %v : tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x8xf32>)
      mask(%m3 : tensor<2x4x16x32xi1>)
      outs(%o : tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  %r4 = attn.attention ins(%q, %k, %v : tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x8xf32>)
      mask(%bias : tensor<2x4x16x32xf32>)
      outs(%o : tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  return %r0, %r1, %r2, %r3, %r4 : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>,
      tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>
}

// -----

// CHECK-LABEL: func @causal_top_left
// CHECK: attn.attention
// CHECK-SAME: causal align(top_left)
// CHECK-SAME: -> tensor<1x2x16x8xf32>
func.func @causal_top_left(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>,
                           %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>)
    -> tensor<1x2x16x8xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
      outs(%o : tensor<1x2x16x8xf32>) causal align(top_left) -> tensor<1x2x16x8xf32>
  return %r : tensor<1x2x16x8xf32>
}

// -----

// Decoding against a KV cache: one query row, the diagonal at Sk - Sq.
// CHECK-LABEL: func @causal_bottom_right
// CHECK: attn.attention
// CHECK-SAME: causal align(bottom_right)
func.func @causal_bottom_right(%q: tensor<1x2x1x8xf32>, %k: tensor<1x2x?x8xf32>,
                               %v: tensor<1x2x?x8xf32>, %o: tensor<1x2x1x8xf32>)
    -> tensor<1x2x1x8xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x2x1x8xf32>, tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32>)
      outs(%o : tensor<1x2x1x8xf32>) causal align(bottom_right) -> tensor<1x2x1x8xf32>
  return %r : tensor<1x2x1x8xf32>
}

// -----

// Sliding windows bounded on the left only, the right only, and both sides.
// CHECK-LABEL: func @windows
// CHECK: attn.attention
// CHECK-SAME: align(top_left) window <left = 4>
// CHECK-NOT: right
// CHECK-SAME: -> tensor<1x1x16x8xf32>
// CHECK: attn.attention
// CHECK-SAME: align(bottom_right) window <right = 2>
// CHECK-SAME: -> tensor<1x1x16x8xf32>
// CHECK: attn.attention
// CHECK-SAME: align(top_left) window <left = 4, right = 0>
// CHECK-SAME: -> tensor<1x1x16x8xf32>
func.func @windows(%q: tensor<1x1x16x8xf32>, %k: tensor<1x1x16x8xf32>,
                   %v: tensor<1x1x16x8xf32>, %o: tensor<1x1x16x8xf32>)
    -> (tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>) {
  %r0 = attn.attention ins(%q, %k, %v : tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>)
      outs(%o : tensor<1x1x16x8xf32>) align(top_left) window <left = 4> -> tensor<1x1x16x8xf32>
  %r1 = attn.attention ins(%q, %k, %v : tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>)
      outs(%o : tensor<1x1x16x8xf32>) align(bottom_right) window <right = 2> -> tensor<1x1x16x8xf32>
  %r2 = attn.attention ins(%q, %k, %v : tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>)
      outs(%o : tensor<1x1x16x8xf32>) align(top_left) window <left = 4, right = 0> -> tensor<1x1x16x8xf32>
  return %r0, %r1, %r2 : tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>
}

// -----

// CHECK-LABEL: func @scale
// CHECK: attn.attention
// CHECK-SAME: scale(1.250000e-01)
// CHECK-NOT: softcap
func.func @scale(%q: tensor<1x1x4x64xf32>, %k: tensor<1x1x4x64xf32>,
                 %v: tensor<1x1x4x64xf32>, %o: tensor<1x1x4x64xf32>)
    -> tensor<1x1x4x64xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x1x4x64xf32>, tensor<1x1x4x64xf32>, tensor<1x1x4x64xf32>)
      outs(%o : tensor<1x1x4x64xf32>) scale(0.125) -> tensor<1x1x4x64xf32>
  return %r : tensor<1x1x4x64xf32>
}

// -----

// CHECK-LABEL: func @softcap
// CHECK: attn.attention
// CHECK-SAME: scale(5.000000e-01) softcap(3.000000e+01)
func.func @softcap(%q: tensor<1x1x4x4xf16>, %k: tensor<1x1x4x4xf16>,
                   %v: tensor<1x1x4x4xf16>, %o: tensor<1x1x4x4xf16>)
    -> tensor<1x1x4x4xf16> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x1x4x4xf16>, tensor<1x1x4x4xf16>, tensor<1x1x4x4xf16>)
      outs(%o : tensor<1x1x4x4xf16>) scale(0.5) softcap(30.0) -> tensor<1x1x4x4xf16>
  return %r : tensor<1x1x4x4xf16>
}

// -----

// A tile carries its diagonal as an operand, in its own coordinates.
// CHECK-LABEL: func @tiled_diagonal
// CHECK-SAME: %[[D:[a-z0-9]+]]: index
// CHECK: attn.attention
// CHECK-SAME: diagonal(%[[D]])
// CHECK-SAME: outs(%{{[a-z0-9]+}} : tensor<1x1x16x8xf32>) causal
// CHECK-NOT: align
// CHECK-SAME: -> tensor<1x1x16x8xf32>
func.func @tiled_diagonal(%q: tensor<1x1x16x8xf32>, %k: tensor<1x1x64x8xf32>,
                          %v: tensor<1x1x64x8xf32>, %o: tensor<1x1x16x8xf32>,
                          %d: index) -> tensor<1x1x16x8xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x1x16x8xf32>, tensor<1x1x64x8xf32>, tensor<1x1x64x8xf32>)
      diagonal(%d) outs(%o : tensor<1x1x16x8xf32>) causal -> tensor<1x1x16x8xf32>
  return %r : tensor<1x1x16x8xf32>
}

// -----

// The online-softmax step on tensors: three f32 states in, three out.
// CHECK-LABEL: func @online_tensor
// CHECK: %[[S:.+]]:3 = attn.online_attention
// CHECK-SAME: ins({{[^:]+}} : tensor<1x1x64x64xf16>, tensor<1x1x?x64xf16>, tensor<1x1x?x32xf16>)
// CHECK-SAME: mask(%{{[a-z0-9]+}} : tensor<1x1x64x?xi1>)
// CHECK-SAME: diagonal(%{{[a-z0-9]+}})
// CHECK-SAME: outs({{[^:]+}} : tensor<1x1x64x32xf32>, tensor<1x1x64xf32>, tensor<1x1x64xf32>)
// CHECK-SAME: causal scale(1.250000e-01)
// CHECK-SAME: -> tensor<1x1x64x32xf32>, tensor<1x1x64xf32>, tensor<1x1x64xf32>
// CHECK: return %[[S]]#0, %[[S]]#1, %[[S]]#2
func.func @online_tensor(%q: tensor<1x1x64x64xf16>, %k: tensor<1x1x?x64xf16>,
                         %v: tensor<1x1x?x32xf16>, %m: tensor<1x1x64x?xi1>,
                         %d: index, %acc: tensor<1x1x64x32xf32>,
                         %max: tensor<1x1x64xf32>, %sum: tensor<1x1x64xf32>)
    -> (tensor<1x1x64x32xf32>, tensor<1x1x64xf32>, tensor<1x1x64xf32>) {
  %r:3 = attn.online_attention
      ins(%q, %k, %v : tensor<1x1x64x64xf16>, tensor<1x1x?x64xf16>, tensor<1x1x?x32xf16>)
      mask(%m : tensor<1x1x64x?xi1>) diagonal(%d)
      outs(%acc, %max, %sum : tensor<1x1x64x32xf32>, tensor<1x1x64xf32>, tensor<1x1x64xf32>)
      causal scale(0.125)
      -> tensor<1x1x64x32xf32>, tensor<1x1x64xf32>, tensor<1x1x64xf32>
  return %r#0, %r#1, %r#2 : tensor<1x1x64x32xf32>, tensor<1x1x64xf32>, tensor<1x1x64xf32>
}

// -----

// After bufferization the step updates its state buffers in place: no results.
// CHECK-LABEL: func @online_memref
// CHECK: attn.online_attention
// CHECK-SAME: ins({{[^:]+}} : memref<1x2x16x8xf32>, memref<1x2x?x8xf32>, memref<1x2x?x8xf32>)
// CHECK-SAME: outs({{[^:]+}} : memref<1x2x16x8xf32>, memref<1x2x16xf32>, memref<1x2x16xf32>)
// CHECK-SAME: align(top_left) window <left = 8>
// CHECK-NOT: ->
// CHECK: return
func.func @online_memref(%q: memref<1x2x16x8xf32>, %k: memref<1x2x?x8xf32>,
                         %v: memref<1x2x?x8xf32>, %acc: memref<1x2x16x8xf32>,
                         %max: memref<1x2x16xf32>, %sum: memref<1x2x16xf32>) {
  attn.online_attention
      ins(%q, %k, %v : memref<1x2x16x8xf32>, memref<1x2x?x8xf32>, memref<1x2x?x8xf32>)
      outs(%acc, %max, %sum : memref<1x2x16x8xf32>, memref<1x2x16xf32>, memref<1x2x16xf32>)
      align(top_left) window <left = 8>
  return
}

// -----

// The micro-kernel and blocking chosen for an op (attn-choose-kernels), with
// the defaults (row_block = 0, lane_rows = 0, bf16_dot = false,
// block_prefetch = true) elided.
// CHECK-LABEL: func @kernel_choice
// CHECK: attn.attention
// CHECK-SAME: causal align(top_left) kernel <lane_rows, query_tile = 128, key_block = 64, row_block = 4, lane_rows = 64>
// CHECK: attn.attention
// CHECK-SAME: kernel <lane_rows, query_tile = 256, key_block = 128, row_block = 2, lane_rows = 24, block_prefetch = false>
// CHECK: attn.attention
// CHECK-SAME: kernel <mma_sync, query_tile = 64, key_block = 64>
// CHECK: attn.attention
// CHECK-SAME: kernel <packed, query_tile = 256, key_block = 128, row_block = 3, bf16_dot = true>
func.func @kernel_choice(%q: tensor<1x4x8x16xbf16>, %k: tensor<1x2x32x16xbf16>,
                         %v: tensor<1x2x32x8xbf16>, %o: tensor<1x4x8x8xbf16>)
    -> (tensor<1x4x8x8xbf16>, tensor<1x4x8x8xbf16>, tensor<1x4x8x8xbf16>) {
  %0 = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xbf16>, tensor<1x2x32x16xbf16>, tensor<1x2x32x8xbf16>)
      outs(%o : tensor<1x4x8x8xbf16>) causal align(top_left)
      kernel <lane_rows, query_tile = 128, key_block = 64, row_block = 4, lane_rows = 64, block_prefetch = true>
      -> tensor<1x4x8x8xbf16>
  %3 = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xbf16>, tensor<1x2x32x16xbf16>, tensor<1x2x32x8xbf16>)
      outs(%o : tensor<1x4x8x8xbf16>)
      kernel <lane_rows, query_tile = 256, key_block = 128, row_block = 2, lane_rows = 24, block_prefetch = false>
      -> tensor<1x4x8x8xbf16>
  %1 = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xbf16>, tensor<1x2x32x16xbf16>, tensor<1x2x32x8xbf16>)
      outs(%o : tensor<1x4x8x8xbf16>) kernel #attn.kernel<mma_sync, query_tile = 64, key_block = 64>
      -> tensor<1x4x8x8xbf16>
  %2 = attn.attention ins(%q, %k, %v : tensor<1x4x8x16xbf16>, tensor<1x2x32x16xbf16>, tensor<1x2x32x8xbf16>)
      outs(%o : tensor<1x4x8x8xbf16>)
      kernel <packed, query_tile = 256, key_block = 128, row_block = 3, lane_rows = 0, bf16_dot = true>
      -> tensor<1x4x8x8xbf16>
  return %0, %1, %2 : tensor<1x4x8x8xbf16>, tensor<1x4x8x8xbf16>, tensor<1x4x8x8xbf16>
}

// -----

// CHECK-LABEL: func @backward
//       CHECK: attn.attention_backward ins(%arg0, %arg1, %arg2 : tensor<2x8x?x64xbf16>, tensor<2x2x?x64xbf16>, tensor<2x2x?x32xbf16>)
//  CHECK-SAME:   mask(%arg3 : tensor<1x1x?x?xbf16>)
//  CHECK-SAME:   forward(%arg4, %arg5 : tensor<2x8x?x32xbf16>, tensor<2x8x?xf32>) grads(%arg6 : tensor<2x8x?x32xbf16>)
//  CHECK-SAME:   grad_lse(%arg7 : tensor<2x8x?xf32>)
//  CHECK-SAME:   outs(%arg8, %arg9, %arg10 : tensor<2x8x?x64xbf16>, tensor<2x2x?x64xbf16>, tensor<2x2x?x32xbf16>)
//  CHECK-SAME:   causal align(bottom_right) window <left = 128> scale(1.250000e-01) softcap(3.000000e+01)
func.func @backward(%q: tensor<2x8x?x64xbf16>, %k: tensor<2x2x?x64xbf16>, %v: tensor<2x2x?x32xbf16>,
                    %m: tensor<1x1x?x?xbf16>, %o: tensor<2x8x?x32xbf16>, %lse: tensor<2x8x?xf32>,
                    %do: tensor<2x8x?x32xbf16>, %dlse: tensor<2x8x?xf32>, %dq: tensor<2x8x?x64xbf16>,
                    %dk: tensor<2x2x?x64xbf16>, %dv: tensor<2x2x?x32xbf16>) {
  %r:3 = attn.attention_backward
      ins(%q, %k, %v : tensor<2x8x?x64xbf16>, tensor<2x2x?x64xbf16>, tensor<2x2x?x32xbf16>)
      mask(%m : tensor<1x1x?x?xbf16>)
      forward(%o, %lse : tensor<2x8x?x32xbf16>, tensor<2x8x?xf32>)
      grads(%do : tensor<2x8x?x32xbf16>) grad_lse(%dlse : tensor<2x8x?xf32>)
      outs(%dq, %dk, %dv : tensor<2x8x?x64xbf16>, tensor<2x2x?x64xbf16>, tensor<2x2x?x32xbf16>)
      causal align(bottom_right) window <left = 128> scale(0.125) softcap(30.0)
      -> tensor<2x8x?x64xbf16>, tensor<2x2x?x64xbf16>, tensor<2x2x?x32xbf16>
  return
}

// -----

// CHECK-LABEL: func @dropout
//       CHECK: attn.online_attention ins(%arg0, %arg1, %arg2 : {{.*}}) dropout(%arg6, %arg7) origin(%arg8, %arg8, %arg8, %arg8) outs(
func.func @dropout(%q: tensor<1x1x16x8xf32>, %k: tensor<1x1x?x8xf32>, %v: tensor<1x1x?x8xf32>,
                   %acc: tensor<1x1x16x8xf32>, %max: tensor<1x1x16xf32>, %sum: tensor<1x1x16xf32>,
                   %p: f32, %seed: i64, %i: index) {
  %r:3 = attn.online_attention ins(%q, %k, %v : tensor<1x1x16x8xf32>, tensor<1x1x?x8xf32>, tensor<1x1x?x8xf32>)
      dropout(%p, %seed) origin(%i, %i, %i, %i)
      outs(%acc, %max, %sum : tensor<1x1x16x8xf32>, tensor<1x1x16xf32>, tensor<1x1x16xf32>)
      -> tensor<1x1x16x8xf32>, tensor<1x1x16xf32>, tensor<1x1x16xf32>
  return
}

// -----

// CHECK-LABEL: func @weights
//       CHECK: attn.attention_weights ins(%{{.+}}, %{{.+}} : tensor<2x8x?x64xbf16>, tensor<2x2x?x64xbf16>) mask(%{{.+}} : tensor<1x1x?x?xi1>) dropout(%{{.+}}, %{{.+}}) lse(%{{.+}} : tensor<2x8x?xf32>) outs(%{{.+}} : tensor<2x8x?x?xf32>) causal align(bottom_right) window <left = 128> softcap(3.000000e+01) -> tensor<2x8x?x?xf32>
//       CHECK: attn.attention_weights ins(%{{.+}}, %{{.+}} : memref<2x8x?x64xbf16>, memref<2x2x?x64xbf16>) outs(%{{.+}} : memref<2x8x?x?xf32>)
func.func @weights(%q: tensor<2x8x?x64xbf16>, %k: tensor<2x2x?x64xbf16>,
                   %m: tensor<1x1x?x?xi1>, %lse: tensor<2x8x?xf32>,
                   %w: tensor<2x8x?x?xf32>, %p: f32, %s: i64,
                   %qm: memref<2x8x?x64xbf16>, %km: memref<2x2x?x64xbf16>,
                   %wm: memref<2x8x?x?xf32>) -> tensor<2x8x?x?xf32> {
  %r = attn.attention_weights ins(%q, %k : tensor<2x8x?x64xbf16>, tensor<2x2x?x64xbf16>)
      mask(%m : tensor<1x1x?x?xi1>) dropout(%p, %s) lse(%lse : tensor<2x8x?xf32>)
      outs(%w : tensor<2x8x?x?xf32>) causal align(bottom_right) window <left = 128>
      softcap(30.0) -> tensor<2x8x?x?xf32>
  attn.attention_weights ins(%qm, %km : memref<2x8x?x64xbf16>, memref<2x2x?x64xbf16>)
      outs(%wm : memref<2x8x?x?xf32>)
  return %r : tensor<2x8x?x?xf32>
}

// -----

// Modifiers print after the attributes: the score_mod, then the mask_mod,
// each with its block's arguments; the captures between the inputs and
// outs.
// CHECK-LABEL: func @modifiers
// CHECK: attn.attention ins({{.+}}) captures(%{{.+}}, %{{.+}} : tensor<8xf32>, tensor<?x?xi64>) outs(
// CHECK-SAME: causal align(bottom_right) score_mod {
// CHECK-NEXT: ^bb0(%[[S:.+]]: f32, %{{.+}}: index, %[[H:.+]]: index, %{{.+}}: index, %{{.+}}: index):
// CHECK-NEXT: %[[SLOPE:.+]] = attn.captured 0[%[[H]]] : f32
// CHECK-NEXT: %[[R:.+]] = arith.addf %[[S]], %[[SLOPE]] : f32
// CHECK-NEXT: attn.yield %[[R]] : f32
// CHECK-NEXT: } mask_mod {
// CHECK-NEXT: ^bb0(%[[B:.+]]: index, %{{.+}}: index, %[[I:.+]]: index, %[[J:.+]]: index):
// CHECK-NEXT: %[[DI:.+]] = attn.captured 1[%[[B]], %[[I]]] : i64
// CHECK-NEXT: %[[DJ:.+]] = attn.captured 1[%[[B]], %[[J]]] : i64
// CHECK-NEXT: %[[EQ:.+]] = arith.cmpi eq, %[[DI]], %[[DJ]] : i64
// CHECK-NEXT: attn.yield %[[EQ]] : i1
// CHECK-NEXT: } -> tensor<1x8x?x16xf32>
func.func @modifiers(%q: tensor<1x8x?x16xf32>, %k: tensor<1x2x?x16xf32>,
                     %v: tensor<1x2x?x16xf32>, %slopes: tensor<8xf32>,
                     %docs: tensor<?x?xi64>, %o: tensor<1x8x?x16xf32>)
    -> tensor<1x8x?x16xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x8x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      captures(%slopes, %docs : tensor<8xf32>, tensor<?x?xi64>)
      outs(%o : tensor<1x8x?x16xf32>) causal align(bottom_right)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %slope = attn.captured 0 [%h] : f32
        %t = arith.addf %s, %slope : f32
        attn.yield %t : f32
      }
      mask_mod {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %di = attn.captured 1 [%b, %i] : i64
        %dj = attn.captured 1 [%b, %j] : i64
        %same = arith.cmpi eq, %di, %dj : i64
        attn.yield %same : i1
      }
      -> tensor<1x8x?x16xf32>
  return %r : tensor<1x8x?x16xf32>
}

// -----

// A bool tensor captured as its bytes (i8, 0 = false).
// CHECK-LABEL: func @bool_capture
// CHECK: captures(%{{.+}} : tensor<?x?xi8>)
// CHECK: %[[KEPT:.+]] = attn.captured 0[%{{.+}}, %{{.+}}] : i8
// CHECK-NEXT: arith.cmpi ne, %[[KEPT]], %{{.+}} : i8
func.func @bool_capture(%q: tensor<1x8x?x16xf32>, %k: tensor<1x2x?x16xf32>,
                        %v: tensor<1x2x?x16xf32>, %keep: tensor<?x?xi8>,
                        %o: tensor<1x8x?x16xf32>) -> tensor<1x8x?x16xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x8x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      captures(%keep : tensor<?x?xi8>) outs(%o : tensor<1x8x?x16xf32>)
      mask_mod {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %zero = arith.constant 0 : i8
        %kept = attn.captured 0 [%i, %j] : i8
        %keep_it = arith.cmpi ne, %kept, %zero : i8
        attn.yield %keep_it : i1
      }
      -> tensor<1x8x?x16xf32>
  return %r : tensor<1x8x?x16xf32>
}

// -----

// A mask_mod alone on the weights op (on memrefs).
// CHECK-LABEL: func @weights_mask_mod
// CHECK: attn.attention_weights ins({{.+}}) outs({{.+}}) mask_mod {
func.func @weights_mask_mod(%q: memref<1x1x8x16xf32>, %k: memref<1x1x8x16xf32>,
                            %w: memref<1x1x8x8xf32>) {
  attn.attention_weights ins(%q, %k : memref<1x1x8x16xf32>, memref<1x1x8x16xf32>)
      outs(%w : memref<1x1x8x8xf32>)
      mask_mod {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %keep = arith.cmpi sle, %j, %i : index
        attn.yield %keep : i1
      }
  return
}

// A block mask's table: a captured i32 [B, Hq, query blocks, key blocks]
// named by attn.block_mask (with the block sizes), which no region reads;
// with the mask_mod it accompanies, or alone (attn-band-from-mask-mod may
// have taken the whole mask_mod into the causal attribute).
// CHECK-LABEL: func.func @block_mask
// CHECK: mask_mod {
// CHECK: } {attn.block_mask = array<i64: 1, 128, 64>} -> tensor<1x2x?x16xf32>
// CHECK: causal align(top_left) {attn.block_mask = array<i64: 0, 128, 128>} -> tensor<1x2x?x16xf32>
func.func @block_mask(%q: tensor<1x2x?x16xf32>, %docs: tensor<?xi32>, %t: tensor<?x?x?x?xi32>)
    -> (tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>) {
  %r = attn.attention ins(%q, %q, %q : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      captures(%docs, %t : tensor<?xi32>, tensor<?x?x?x?xi32>) outs(%q : tensor<1x2x?x16xf32>)
      mask_mod {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %di = attn.captured 0 [%i] : i32
        %dj = attn.captured 0 [%j] : i32
        %same = arith.cmpi eq, %di, %dj : i32
        attn.yield %same : i1
      } {attn.block_mask = array<i64: 1, 128, 64>} -> tensor<1x2x?x16xf32>
  %s = attn.attention ins(%q, %q, %q : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
      captures(%t : tensor<?x?x?x?xi32>) outs(%q : tensor<1x2x?x16xf32>)
      causal align(top_left) {attn.block_mask = array<i64: 0, 128, 128>} -> tensor<1x2x?x16xf32>
  return %r, %s : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>
}

// -----

// attn.linear: the minimal form, and every clause with the state in and out.

// CHECK-LABEL: func @linear_minimal
// CHECK: attn.linear ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x8xf32>) outs(%{{.+}} : tensor<1x2x?x8xf32>) -> tensor<1x2x?x8xf32>
func.func @linear_minimal(%q: tensor<1x2x?x16xf32>, %k: tensor<1x2x?x16xf32>,
                          %v: tensor<1x2x?x8xf32>, %o: tensor<1x2x?x8xf32>)
    -> tensor<1x2x?x8xf32> {
  %r = attn.linear ins(%q, %k, %v : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x8xf32>)
      outs(%o : tensor<1x2x?x8xf32>) -> tensor<1x2x?x8xf32>
  return %r : tensor<1x2x?x8xf32>
}

// -----

// CHECK-LABEL: func @linear_state
// CHECK: attn.linear ins({{.*}}) state(%{{.+}}, %{{.+}} : tensor<1x2x16x8xf32>, tensor<1x2x16xf32>) outs({{.*}}) causal chunk(32) eps(1.000000e-03) feature_map(relu) -> tensor<1x4x?x8xbf16>, tensor<1x2x16x8xf32>, tensor<1x2x16xf32>
func.func @linear_state(%q: tensor<1x4x?x16xbf16>, %k: tensor<1x2x?x16xbf16>,
                        %v: tensor<1x2x?x8xbf16>, %s0: tensor<1x2x16x8xf32>,
                        %z0: tensor<1x2x16xf32>, %o: tensor<1x4x?x8xbf16>,
                        %s1: tensor<1x2x16x8xf32>, %z1: tensor<1x2x16xf32>)
    -> (tensor<1x4x?x8xbf16>, tensor<1x2x16x8xf32>, tensor<1x2x16xf32>) {
  %r:3 = attn.linear ins(%q, %k, %v : tensor<1x4x?x16xbf16>, tensor<1x2x?x16xbf16>, tensor<1x2x?x8xbf16>)
      state(%s0, %z0 : tensor<1x2x16x8xf32>, tensor<1x2x16xf32>)
      outs(%o, %s1, %z1 : tensor<1x4x?x8xbf16>, tensor<1x2x16x8xf32>, tensor<1x2x16xf32>)
      causal chunk(32) eps(1.0e-3) feature_map(relu)
      -> tensor<1x4x?x8xbf16>, tensor<1x2x16x8xf32>, tensor<1x2x16xf32>
  return %r#0, %r#1, %r#2 : tensor<1x4x?x8xbf16>, tensor<1x2x16x8xf32>, tensor<1x2x16xf32>
}

// -----

// The unnormalized sum of products (identity feature map): no eps.

// CHECK-LABEL: func @linear_unnormalized
// CHECK: attn.linear ins({{.*}}) outs(%{{.+}} : tensor<1x2x?x8xf32>) causal feature_map(identity) unnormalized -> tensor<1x2x?x8xf32>
func.func @linear_unnormalized(%q: tensor<1x2x?x16xf32>, %k: tensor<1x2x?x16xf32>,
                               %v: tensor<1x2x?x8xf32>, %o: tensor<1x2x?x8xf32>)
    -> tensor<1x2x?x8xf32> {
  %r = attn.linear ins(%q, %k, %v : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x8xf32>)
      outs(%o : tensor<1x2x?x8xf32>) causal feature_map(identity) unnormalized
      -> tensor<1x2x?x8xf32>
  return %r : tensor<1x2x?x8xf32>
}

// -----

// On memrefs: no results.

// CHECK-LABEL: func @linear_memrefs
// CHECK: attn.linear ins({{.*}}) outs(%{{.+}} : memref<1x1x4x8xf16>){{ *$}}
func.func @linear_memrefs(%q: memref<1x1x4x8xf16>, %o: memref<1x1x4x8xf16>) {
  attn.linear ins(%q, %q, %q : memref<1x1x4x8xf16>, memref<1x1x4x8xf16>, memref<1x1x4x8xf16>)
      outs(%o : memref<1x1x4x8xf16>)
  return
}

// -----

// attn.additive: with and without the mask and the weights out.

// CHECK-LABEL: func @additive_minimal
// CHECK: attn.additive ins(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : tensor<2x?x24xf32>, tensor<2x?x20xf32>, tensor<2x?x40xf32>, tensor<36x24xf32>, tensor<36x20xf32>, tensor<36xf32>) outs(%{{.+}} : tensor<2x?x40xf32>) -> tensor<2x?x40xf32>
func.func @additive_minimal(%q: tensor<2x?x24xf32>, %k: tensor<2x?x20xf32>, %v: tensor<2x?x40xf32>,
                            %wq: tensor<36x24xf32>, %wk: tensor<36x20xf32>, %va: tensor<36xf32>,
                            %o: tensor<2x?x40xf32>) -> tensor<2x?x40xf32> {
  %r = attn.additive ins(%q, %k, %v, %wq, %wk, %va : tensor<2x?x24xf32>, tensor<2x?x20xf32>, tensor<2x?x40xf32>, tensor<36x24xf32>, tensor<36x20xf32>, tensor<36xf32>)
      outs(%o : tensor<2x?x40xf32>) -> tensor<2x?x40xf32>
  return %r : tensor<2x?x40xf32>
}

// -----

// CHECK-LABEL: func @additive_mask_weights
// CHECK: attn.additive ins({{.*}}) mask(%{{.+}} : tensor<1x?x?xi1>) outs(%{{.+}}, %{{.+}} : tensor<2x?x8xbf16>, tensor<2x?x?xf32>) -> tensor<2x?x8xbf16>, tensor<2x?x?xf32>
func.func @additive_mask_weights(%q: tensor<2x?x8xbf16>, %k: tensor<2x?x8xbf16>, %w: tensor<4x8xbf16>,
                                 %va: tensor<4xbf16>, %m: tensor<1x?x?xi1>, %o: tensor<2x?x8xbf16>,
                                 %p: tensor<2x?x?xf32>) -> (tensor<2x?x8xbf16>, tensor<2x?x?xf32>) {
  %r:2 = attn.additive ins(%q, %k, %k, %w, %w, %va : tensor<2x?x8xbf16>, tensor<2x?x8xbf16>, tensor<2x?x8xbf16>, tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4xbf16>)
      mask(%m : tensor<1x?x?xi1>)
      outs(%o, %p : tensor<2x?x8xbf16>, tensor<2x?x?xf32>) -> tensor<2x?x8xbf16>, tensor<2x?x?xf32>
  return %r#0, %r#1 : tensor<2x?x8xbf16>, tensor<2x?x?xf32>
}

// -----

// attn.mha: packed input projections with biases, a mask and causal; and
// three separate projections (Ek, Ev other than E) without biases.

// CHECK-LABEL: func @mha_packed
// CHECK: attn.mha ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>) in_proj(%{{.+}} : tensor<96x32xf32>) in_bias(%{{.+}} : tensor<96xf32>) out_proj(%{{.+}} : tensor<32x32xf32>) out_bias(%{{.+}} : tensor<32xf32>) mask(%{{.+}} : tensor<1x1x?x?xi1>) outs(%{{.+}} : tensor<?x?x32xf32>) heads(4) causal align(bottom_right) scale(2.500000e-01) -> tensor<?x?x32xf32>
func.func @mha_packed(%x: tensor<?x?x32xf32>, %w: tensor<96x32xf32>, %b: tensor<96xf32>,
                      %wo: tensor<32x32xf32>, %bo: tensor<32xf32>, %m: tensor<1x1x?x?xi1>,
                      %y: tensor<?x?x32xf32>) -> tensor<?x?x32xf32> {
  %r = attn.mha ins(%x, %x, %x : tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>)
      in_proj(%w : tensor<96x32xf32>) in_bias(%b : tensor<96xf32>)
      out_proj(%wo : tensor<32x32xf32>) out_bias(%bo : tensor<32xf32>)
      mask(%m : tensor<1x1x?x?xi1>)
      outs(%y : tensor<?x?x32xf32>) heads(4) causal align(bottom_right) scale(0.25)
      -> tensor<?x?x32xf32>
  return %r : tensor<?x?x32xf32>
}

// CHECK-LABEL: func @mha_separate
// CHECK: attn.mha ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<2x?x32xbf16>, tensor<2x?x12xbf16>, tensor<2x?x20xbf16>) in_proj(%{{.+}}, %{{.+}}, %{{.+}} : tensor<32x32xbf16>, tensor<32x12xbf16>, tensor<32x20xbf16>) out_proj(%{{.+}} : tensor<32x32xbf16>) outs(%{{.+}} : tensor<2x?x32xbf16>) heads(2) align(top_left) window <left = 8> softcap(3.000000e+01) -> tensor<2x?x32xbf16>
func.func @mha_separate(%q: tensor<2x?x32xbf16>, %k: tensor<2x?x12xbf16>, %v: tensor<2x?x20xbf16>,
                        %wq: tensor<32x32xbf16>, %wk: tensor<32x12xbf16>, %wv: tensor<32x20xbf16>,
                        %wo: tensor<32x32xbf16>, %y: tensor<2x?x32xbf16>) -> tensor<2x?x32xbf16> {
  %r = attn.mha ins(%q, %k, %v : tensor<2x?x32xbf16>, tensor<2x?x12xbf16>, tensor<2x?x20xbf16>)
      in_proj(%wq, %wk, %wv : tensor<32x32xbf16>, tensor<32x12xbf16>, tensor<32x20xbf16>)
      out_proj(%wo : tensor<32x32xbf16>)
      outs(%y : tensor<2x?x32xbf16>) heads(2) align(top_left) window <left = 8> softcap(30.0)
      -> tensor<2x?x32xbf16>
  return %r : tensor<2x?x32xbf16>
}

// -----

// attn.additive_backward: the gradients' outs (f32; the parts' partial sums
// in dim 1), with a mask broadcast over the rows.

// CHECK-LABEL: func @additive_backward
// CHECK: attn.additive_backward ins({{.*}} : tensor<2x?x24xbf16>, tensor<2x?x20xbf16>, tensor<2x?x40xbf16>, tensor<36x24xbf16>, tensor<36x20xbf16>, tensor<36xbf16>, tensor<2x?x40xbf16>) mask(%{{.+}} : tensor<2x1x?xi1>) outs({{.*}} : tensor<2x?x36xf32>, tensor<2x3x?x36xf32>, tensor<2x3x?x40xf32>, tensor<2x3x36xf32>) -> tensor<2x?x36xf32>, tensor<2x3x?x36xf32>, tensor<2x3x?x40xf32>, tensor<2x3x36xf32>
func.func @additive_backward(%q: tensor<2x?x24xbf16>, %k: tensor<2x?x20xbf16>, %v: tensor<2x?x40xbf16>,
                             %wq: tensor<36x24xbf16>, %wk: tensor<36x20xbf16>, %va: tensor<36xbf16>,
                             %do: tensor<2x?x40xbf16>, %m: tensor<2x1x?xi1>,
                             %dqp: tensor<2x?x36xf32>, %dkp: tensor<2x3x?x36xf32>,
                             %dv: tensor<2x3x?x40xf32>, %dva: tensor<2x3x36xf32>) {
  %r:4 = attn.additive_backward ins(%q, %k, %v, %wq, %wk, %va, %do : tensor<2x?x24xbf16>, tensor<2x?x20xbf16>, tensor<2x?x40xbf16>, tensor<36x24xbf16>, tensor<36x20xbf16>, tensor<36xbf16>, tensor<2x?x40xbf16>)
      mask(%m : tensor<2x1x?xi1>)
      outs(%dqp, %dkp, %dv, %dva : tensor<2x?x36xf32>, tensor<2x3x?x36xf32>, tensor<2x3x?x40xf32>, tensor<2x3x36xf32>)
      -> tensor<2x?x36xf32>, tensor<2x3x?x36xf32>, tensor<2x3x?x40xf32>, tensor<2x3x36xf32>
  return
}

// -----

// attn.linear_backward: the minimal form, and the state's gradients in and
// out with the attributes.

// CHECK-LABEL: func @linear_backward_minimal
// CHECK: attn.linear_backward ins({{.*}}) state(%{{.+}}, %{{.+}} : tensor<1x2x16x8xf32>, tensor<1x2x16xf32>) outs({{.*}}) -> tensor<1x4x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x8xf32>
func.func @linear_backward_minimal(%q: tensor<1x4x?x16xf32>, %k: tensor<1x2x?x16xf32>,
                                   %v: tensor<1x2x?x8xf32>, %o: tensor<1x4x?x8xf32>,
                                   %s: tensor<1x2x16x8xf32>, %z: tensor<1x2x16xf32>,
                                   %dk: tensor<1x2x?x16xf32>, %dv: tensor<1x2x?x8xf32>)
    -> (tensor<1x4x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x8xf32>) {
  %r:3 = attn.linear_backward ins(%q, %k, %v, %o, %o : tensor<1x4x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x8xf32>, tensor<1x4x?x8xf32>, tensor<1x4x?x8xf32>)
      state(%s, %z : tensor<1x2x16x8xf32>, tensor<1x2x16xf32>)
      outs(%q, %dk, %dv : tensor<1x4x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x8xf32>)
      -> tensor<1x4x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x8xf32>
  return %r#0, %r#1, %r#2 : tensor<1x4x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x8xf32>
}

// CHECK-LABEL: func @linear_backward_state
// CHECK: attn.linear_backward ins({{.*}}) state({{.*}}) state_grads(%{{.+}}, %{{.+}} : tensor<1x1x16x8xf32>, tensor<1x1x16xf32>) outs({{.*}}) causal feature_map(relu) unnormalized -> tensor<1x1x?x16xbf16>, tensor<1x1x?x16xbf16>, tensor<1x1x?x8xbf16>, tensor<1x1x16x8xf32>, tensor<1x1x16xf32>
func.func @linear_backward_state(%q: tensor<1x1x?x16xbf16>, %v: tensor<1x1x?x8xbf16>,
                                 %s: tensor<1x1x16x8xf32>, %z: tensor<1x1x16xf32>)
    -> (tensor<1x1x?x16xbf16>, tensor<1x1x?x16xbf16>, tensor<1x1x?x8xbf16>,
        tensor<1x1x16x8xf32>, tensor<1x1x16xf32>) {
  %r:5 = attn.linear_backward ins(%q, %q, %v, %v, %v : tensor<1x1x?x16xbf16>, tensor<1x1x?x16xbf16>, tensor<1x1x?x8xbf16>, tensor<1x1x?x8xbf16>, tensor<1x1x?x8xbf16>)
      state(%s, %z : tensor<1x1x16x8xf32>, tensor<1x1x16xf32>)
      state_grads(%s, %z : tensor<1x1x16x8xf32>, tensor<1x1x16xf32>)
      outs(%q, %q, %v, %s, %z : tensor<1x1x?x16xbf16>, tensor<1x1x?x16xbf16>, tensor<1x1x?x8xbf16>, tensor<1x1x16x8xf32>, tensor<1x1x16xf32>)
      causal feature_map(relu) unnormalized
      -> tensor<1x1x?x16xbf16>, tensor<1x1x?x16xbf16>, tensor<1x1x?x8xbf16>, tensor<1x1x16x8xf32>, tensor<1x1x16xf32>
  return %r#0, %r#1, %r#2, %r#3, %r#4 : tensor<1x1x?x16xbf16>, tensor<1x1x?x16xbf16>, tensor<1x1x?x8xbf16>, tensor<1x1x16x8xf32>, tensor<1x1x16xf32>
}
