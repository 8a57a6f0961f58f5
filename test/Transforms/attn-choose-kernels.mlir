// RUN: attn-opt %s --attn-choose-kernels="target=znver4" | FileCheck %s --check-prefix=ZEN4
// RUN: attn-opt %s --attn-choose-kernels="target=znver5" | FileCheck %s --check-prefix=ZEN5
// RUN: attn-opt %s --attn-choose-kernels="target=sapphirerapids" | FileCheck %s --check-prefix=SPR
// RUN: attn-opt %s --attn-choose-kernels="target=emeraldrapids" | FileCheck %s --check-prefix=SPR
// RUN: attn-opt %s --attn-choose-kernels="target=sapphirerapids features=-amx-bf16" | FileCheck %s --check-prefix=NOAMX
// RUN: attn-opt %s --attn-choose-kernels="target=x86-64-v4 features=+avx512bf16" | FileCheck %s --check-prefix=V4BF16
// RUN: attn-opt %s --attn-choose-kernels="target=x86-64-v3" | FileCheck %s --check-prefix=AVX2
// RUN: attn-opt %s --attn-choose-kernels="target=znver3" | FileCheck %s --check-prefix=ZEN3
// RUN: attn-opt %s --attn-choose-kernels="target=sm_80" | FileCheck %s --check-prefix=SM80
// RUN: attn-opt %s --attn-choose-kernels="target=sm_90 warps=8" | FileCheck %s --check-prefix=SM90
// RUN: attn-opt %s --attn-choose-kernels="target=sm_80 rows-per-warp=32" | FileCheck %s --check-prefix=ROWS32
// RUN: attn-opt %s --attn-choose-kernels="target=znver4 key-block=32 lane-rows=0" | FileCheck %s --check-prefix=FIXED
// RUN: not attn-opt %s --attn-choose-kernels="target=pentium9" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// The choice attn-choose-kernels records on each attn.attention, per
// target: the micro-kernel (CPU: lane_rows for ops without the bf16 dot
// product, else packed; GPU: mma_sync for 16-bit inputs,
// else fma) and the blocking. Zen 4 and Sapphire Rapids (both AVX-512 with
// AVX-512 BF16) choose alike for f32; for bf16 only Zen 4 takes the dot
// product (vdpbf16ps), which Intel's cores issue once in about three
// cycles: Sapphire Rapids takes its AMX tiles (head dims permitting), and
// without them widens bf16 to f32 as a CPU without the dot product does.
// A generic CPU given AVX-512 BF16 takes it. AVX2 has 8 lanes: lane-rows
// tiles of 24 rows, 128-key blocks; on Zen 3 (AVX2) without the P·V
// prefetch of the next key block, which slows its lane-rows kernels.

// f32 causal prefill: rows in lanes, 64-key blocks by 4 rows, 128-row
// tiles for a banded op.
// ZEN4-LABEL: func @f32_causal
//       ZEN4: kernel <lane_rows, query_tile = 128, key_block = 64, row_block = 4, lane_rows = 64>
// ZEN5-LABEL: func @f32_causal
//       ZEN5: kernel <lane_rows, query_tile = 128, key_block = 64, row_block = 4, lane_rows = 64>
//  SPR-LABEL: func @f32_causal
//        SPR: kernel <lane_rows, query_tile = 128, key_block = 64, row_block = 4, lane_rows = 64>
// AVX2-LABEL: func @f32_causal
//       AVX2: kernel <lane_rows, query_tile = 128, key_block = 128, row_block = 2, lane_rows = 24>
// ZEN3-LABEL: func @f32_causal
//       ZEN3: kernel <lane_rows, query_tile = 128, key_block = 128, row_block = 2, lane_rows = 24, block_prefetch = false>
// SM80-LABEL: func @f32_causal
//       SM80: kernel <fma, query_tile = 64, key_block = 64>
// SM90-LABEL: func @f32_causal
//       SM90: kernel <fma, query_tile = 128, key_block = 64>
// 32 rows a warp are for tensor cores: f32 keeps 16.
// ROWS32-LABEL: func @f32_causal
//       ROWS32: kernel <fma, query_tile = 64, key_block = 64>
// FIXED-LABEL: func @f32_causal
//       FIXED: kernel <packed, query_tile = 128, key_block = 32, row_block = 4>
func.func @f32_causal(%q: tensor<?x8x?x64xf32>, %k: tensor<?x2x?x64xf32>, %v: tensor<?x2x?x64xf32>,
                      %o: tensor<?x8x?x64xf32>) -> tensor<?x8x?x64xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x8x?x64xf32>, tensor<?x2x?x64xf32>, tensor<?x2x?x64xf32>)
      outs(%o : tensor<?x8x?x64xf32>) causal align(bottom_right) -> tensor<?x8x?x64xf32>
  return %r : tensor<?x8x?x64xf32>
}

// bf16 on AVX-512 BF16 where the dot product pays: the packed path, 3 rows
// where their P·V accumulators fit (Dv <= 80); Zen 5 takes 64 keys by 4
// rows at every head dim (3 rows x 8 score vectors spilled there);
// Sapphire Rapids takes AMX
// tiles (blocks of 16 rows, 64 keys), and without AMX widens bf16 on the
// lane-rows path as an AVX2 CPU does; a GPU takes tensor cores.
// ZEN4-LABEL: func @bf16_d64
//       ZEN4: kernel <packed, query_tile = 256, key_block = 128, row_block = 3, lane_rows = 64, bf16_dot = true>
// ZEN5-LABEL: func @bf16_d64
//       ZEN5: kernel <packed, query_tile = 256, key_block = 64, row_block = 4, lane_rows = 64, bf16_dot = true>
//  SPR-LABEL: func @bf16_d64
//        SPR: kernel <amx, query_tile = 256, key_block = 64, row_block = 16, bf16_dot = true>
// NOAMX-LABEL: func @bf16_d64
//       NOAMX: kernel <lane_rows, query_tile = 256, key_block = 128, row_block = 2, lane_rows = 64>
// V4BF16-LABEL: func @bf16_d64
//       V4BF16: kernel <packed, query_tile = 256, key_block = 128, row_block = 3, lane_rows = 64, bf16_dot = true>
// AVX2-LABEL: func @bf16_d64
//       AVX2: kernel <lane_rows, query_tile = 256, key_block = 128, row_block = 2, lane_rows = 24>
// ZEN3-LABEL: func @bf16_d64
//       ZEN3: kernel <lane_rows, query_tile = 256, key_block = 128, row_block = 2, lane_rows = 24, block_prefetch = false>
// SM80-LABEL: func @bf16_d64
//       SM80: kernel <mma_sync, query_tile = 64, key_block = 64>
// SM90-LABEL: func @bf16_d64
//       SM90: kernel <mma_sync, query_tile = 128, key_block = 64>
// Two m16 blocks a warp: 4 warps own 128 rows.
// ROWS32-LABEL: func @bf16_d64
//       ROWS32: kernel <mma_sync, query_tile = 128, key_block = 64, row_block = 32>
func.func @bf16_d64(%q: tensor<?x?x?x64xbf16>, %k: tensor<?x?x?x64xbf16>, %v: tensor<?x?x?x64xbf16>,
                    %o: tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>)
      outs(%o : tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16>
  return %r : tensor<?x?x?x64xbf16>
}

// bf16 with D = Dv = 128: 128 keys' K and V panels would pass a 48 KiB L1d,
// so 64-key blocks by 4 rows.
// ZEN4-LABEL: func @bf16_d128
//       ZEN4: kernel <packed, query_tile = 256, key_block = 64, row_block = 4, lane_rows = 64, bf16_dot = true>
// ZEN5-LABEL: func @bf16_d128
//       ZEN5: kernel <packed, query_tile = 256, key_block = 64, row_block = 4, lane_rows = 64, bf16_dot = true>
//  SPR-LABEL: func @bf16_d128
//        SPR: kernel <amx, query_tile = 256, key_block = 64, row_block = 16, bf16_dot = true>
// NOAMX-LABEL: func @bf16_d128
//       NOAMX: kernel <lane_rows, query_tile = 256, key_block = 128, row_block = 2, lane_rows = 64>
// ROWS32-LABEL: func @bf16_d128
//       ROWS32: kernel <mma_sync, query_tile = 128, key_block = 64, row_block = 32>
func.func @bf16_d128(%q: tensor<?x?x?x128xbf16>, %k: tensor<?x?x?x128xbf16>, %v: tensor<?x?x?x128xbf16>,
                     %o: tensor<?x?x?x128xbf16>) -> tensor<?x?x?x128xbf16> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>)
      outs(%o : tensor<?x?x?x128xbf16>) -> tensor<?x?x?x128xbf16>
  return %r : tensor<?x?x?x128xbf16>
}

// A mask operand takes the lane-rows path too (its blocks transposed);
// f32 with D > 128 on a GPU takes 32-key tiles (Q, K, V and P in an sm_80
// block's shared memory).
// ZEN4-LABEL: func @f16_masked
//       ZEN4: kernel <lane_rows, query_tile = 256, key_block = 128, row_block = 2, lane_rows = 64>
// SM80-LABEL: func @f16_masked
//       SM80: kernel <mma_sync, query_tile = 64, key_block = 64>
// ROWS32-LABEL: func @f16_masked
//       ROWS32: kernel <mma_sync, query_tile = 128, key_block = 64, row_block = 32>
func.func @f16_masked(%q: tensor<?x?x?x64xf16>, %k: tensor<?x?x?x64xf16>, %v: tensor<?x?x?x64xf16>,
                      %m: tensor<1x1x?x?xi1>, %o: tensor<?x?x?x64xf16>) -> tensor<?x?x?x64xf16> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>)
      mask(%m : tensor<1x1x?x?xi1>) outs(%o : tensor<?x?x?x64xf16>) -> tensor<?x?x?x64xf16>
  return %r : tensor<?x?x?x64xf16>
}

// A keep mask, as a float mask, keeps bf16 prefill on the dot product:
// the packed path loads a block's mask row 16 keys at a time, and P·V
// takes the dot product where the block's V is finite.
// ZEN4-LABEL: func @bf16_keep_mask
//       ZEN4: kernel <packed, query_tile = 256, key_block = 128, row_block = 3, lane_rows = 64, bf16_dot = true>
//       ZEN4: kernel <packed, query_tile = 256, key_block = 128, row_block = 3, lane_rows = 64, bf16_dot = true>
func.func @bf16_keep_mask(%q: tensor<?x?x?x64xbf16>, %k: tensor<?x?x?x64xbf16>, %v: tensor<?x?x?x64xbf16>,
                          %m: tensor<1x1x?x?xi1>, %bias: tensor<1x1x?x?xbf16>,
                          %o: tensor<?x?x?x64xbf16>) -> (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>) {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>)
      mask(%m : tensor<1x1x?x?xi1>) outs(%o : tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16>
  %f = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>)
      mask(%bias : tensor<1x1x?x?xbf16>) outs(%o : tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16>
  return %r, %f : tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>
}
// SM80-LABEL: func @f32_wide
//       SM80: kernel <fma, query_tile = 64, key_block = 32>
// ROWS32-LABEL: func @f32_wide
//       ROWS32: kernel <fma, query_tile = 64, key_block = 32>
func.func @f32_wide(%q: tensor<?x?x?x256xf32>, %k: tensor<?x?x?x256xf32>, %v: tensor<?x?x?x256xf32>,
                    %o: tensor<?x?x?x256xf32>) -> tensor<?x?x?x256xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x256xf32>, tensor<?x?x?x256xf32>, tensor<?x?x?x256xf32>)
      outs(%o : tensor<?x?x?x256xf32>) -> tensor<?x?x?x256xf32>
  return %r : tensor<?x?x?x256xf32>
}

// Dv > 128 keeps 16 rows a warp: two blocks' accumulators (Dv floats a
// thread) would not fit 255 registers.
// ROWS32-LABEL: func @bf16_d256
//       ROWS32: kernel <mma_sync, query_tile = 64, key_block = 64>
func.func @bf16_d256(%q: tensor<?x?x?x256xbf16>, %k: tensor<?x?x?x256xbf16>, %v: tensor<?x?x?x256xbf16>,
                     %o: tensor<?x?x?x256xbf16>) -> tensor<?x?x?x256xbf16> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x256xbf16>, tensor<?x?x?x256xbf16>, tensor<?x?x?x256xbf16>)
      outs(%o : tensor<?x?x?x256xbf16>) -> tensor<?x?x?x256xbf16>
  return %r : tensor<?x?x?x256xbf16>
}

// Decoding (a static Sq of at most 4): 128-key blocks by 2 rows, which
// measured faster than prefill's 64 by 4 there.
// ZEN4-LABEL: func @f32_decoding
//       ZEN4: kernel <lane_rows, query_tile = 128, key_block = 128, row_block = 2, lane_rows = 64>
func.func @f32_decoding(%q: tensor<?x8x1x128xf32>, %k: tensor<?x2x?x128xf32>, %v: tensor<?x2x?x128xf32>,
                        %o: tensor<?x8x1x128xf32>) -> tensor<?x8x1x128xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x8x1x128xf32>, tensor<?x2x?x128xf32>, tensor<?x2x?x128xf32>)
      outs(%o : tensor<?x8x1x128xf32>) causal align(bottom_right) -> tensor<?x8x1x128xf32>
  return %r : tensor<?x8x1x128xf32>
}

// Dropout runs in the lane-rows micro-kernel too (one Philox per row vector
// and 4 keys: 1.07-1.10x over the packed path on Emerald Rapids, f32 D = 64).
// ZEN4-LABEL: func @f32_dropout
//       ZEN4: kernel <lane_rows, query_tile = 256, key_block = 64, row_block = 4, lane_rows = 64>
//  SPR-LABEL: func @f32_dropout
//        SPR: kernel <lane_rows, query_tile = 256, key_block = 64, row_block = 4, lane_rows = 64>
func.func @f32_dropout(%q: tensor<?x?x?x64xf32>, %k: tensor<?x?x?x64xf32>, %v: tensor<?x?x?x64xf32>,
                       %o: tensor<?x?x?x64xf32>, %p: f32, %seed: i64) -> tensor<?x?x?x64xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>)
      dropout(%p, %seed) outs(%o : tensor<?x?x?x64xf32>) -> tensor<?x?x?x64xf32>
  return %r : tensor<?x?x?x64xf32>
}

// Score and mask modifiers run in the lane-rows micro-kernel.
// ZEN4-LABEL: func @score_mod_only
//       ZEN4: kernel <lane_rows, query_tile = 256, key_block = 64, row_block = 4, lane_rows = 64>
// ZEN4-LABEL: func @mask_mod
//       ZEN4: kernel <lane_rows, query_tile = 256, key_block = 64, row_block = 4, lane_rows = 64>
func.func @score_mod_only(%q: tensor<?x?x?x64xf32>, %k: tensor<?x?x?x64xf32>, %v: tensor<?x?x?x64xf32>,
                          %o: tensor<?x?x?x64xf32>) -> tensor<?x?x?x64xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>)
      outs(%o : tensor<?x?x?x64xf32>)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %c = arith.constant 0.5 : f32
        %t = arith.addf %s, %c : f32
        attn.yield %t : f32
      } -> tensor<?x?x?x64xf32>
  return %r : tensor<?x?x?x64xf32>
}
func.func @mask_mod(%q: tensor<?x?x?x64xf32>, %k: tensor<?x?x?x64xf32>, %v: tensor<?x?x?x64xf32>,
                    %o: tensor<?x?x?x64xf32>) -> tensor<?x?x?x64xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>)
      outs(%o : tensor<?x?x?x64xf32>)
      mask_mod {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %keep = arith.cmpi sge, %i, %j : index
        attn.yield %keep : i1
      } -> tensor<?x?x?x64xf32>
  return %r : tensor<?x?x?x64xf32>
}

// A modifier that reads a captured tensor along the keys at each row takes
// the packed micro-kernel (keys in lanes: one load of 16 consecutive
// elements, where rows in lanes gather them); reads by the key alone, by
// the row along the last index, or at a clamped distance stay in lane rows.
// ZEN4-LABEL: func @keep_tensor
//       ZEN4: kernel <packed, query_tile = 256, key_block = 64, row_block = 4, lane_rows = 64>
// ZEN4-LABEL: func @relative_positions
//       ZEN4: kernel <packed,
// ZEN4-LABEL: func @key_table
//       ZEN4: kernel <lane_rows,
// ZEN4-LABEL: func @transposed_tensor
//       ZEN4: kernel <lane_rows,
// ZEN4-LABEL: func @clamped_distance
//       ZEN4: kernel <lane_rows,
func.func @keep_tensor(%q: tensor<?x?x?x64xf32>, %k: tensor<?x?x?x64xf32>, %v: tensor<?x?x?x64xf32>,
                       %t: tensor<?x?x?x?xi32>, %o: tensor<?x?x?x64xf32>) -> tensor<?x?x?x64xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>)
      captures(%t : tensor<?x?x?x?xi32>) outs(%o : tensor<?x?x?x64xf32>)
      mask_mod {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %e = attn.captured 0 [%b, %h, %i, %j] : i32
        %zero = arith.constant 0 : i32
        %keep = arith.cmpi ne, %e, %zero : i32
        attn.yield %keep : i1
      } -> tensor<?x?x?x64xf32>
  return %r : tensor<?x?x?x64xf32>
}
func.func @relative_positions(%q: tensor<?x?x?x64xf32>, %k: tensor<?x?x?x64xf32>, %v: tensor<?x?x?x64xf32>,
                              %t: tensor<?x?xf32>, %o: tensor<?x?x?x64xf32>) -> tensor<?x?x?x64xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>)
      captures(%t : tensor<?x?xf32>) outs(%o : tensor<?x?x?x64xf32>)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %c = arith.constant 4096 : index
        %d = arith.subi %j, %i : index
        %at = arith.addi %d, %c : index
        %e = attn.captured 0 [%h, %at] : f32
        %t2 = arith.addf %s, %e : f32
        attn.yield %t2 : f32
      } -> tensor<?x?x?x64xf32>
  return %r : tensor<?x?x?x64xf32>
}
func.func @key_table(%q: tensor<?x?x?x64xf32>, %k: tensor<?x?x?x64xf32>, %v: tensor<?x?x?x64xf32>,
                     %t: tensor<?xf32>, %o: tensor<?x?x?x64xf32>) -> tensor<?x?x?x64xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>)
      captures(%t : tensor<?xf32>) outs(%o : tensor<?x?x?x64xf32>)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %e = attn.captured 0 [%j] : f32
        %t2 = arith.addf %s, %e : f32
        attn.yield %t2 : f32
      } -> tensor<?x?x?x64xf32>
  return %r : tensor<?x?x?x64xf32>
}
func.func @transposed_tensor(%q: tensor<?x?x?x64xf32>, %k: tensor<?x?x?x64xf32>, %v: tensor<?x?x?x64xf32>,
                             %t: tensor<?x?xi32>, %o: tensor<?x?x?x64xf32>) -> tensor<?x?x?x64xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>)
      captures(%t : tensor<?x?xi32>) outs(%o : tensor<?x?x?x64xf32>)
      mask_mod {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %e = attn.captured 0 [%j, %i] : i32
        %zero = arith.constant 0 : i32
        %keep = arith.cmpi ne, %e, %zero : i32
        attn.yield %keep : i1
      } -> tensor<?x?x?x64xf32>
  return %r : tensor<?x?x?x64xf32>
}
func.func @clamped_distance(%q: tensor<?x?x?x64xf32>, %k: tensor<?x?x?x64xf32>, %v: tensor<?x?x?x64xf32>,
                            %t: tensor<?x?xf32>, %o: tensor<?x?x?x64xf32>) -> tensor<?x?x?x64xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>)
      captures(%t : tensor<?x?xf32>) outs(%o : tensor<?x?x?x64xf32>)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %c = arith.constant 16 : index
        %d = arith.subi %j, %i : index
        %at = arith.minsi %d, %c : index
        %e = attn.captured 0 [%h, %at] : f32
        %t2 = arith.addf %s, %e : f32
        attn.yield %t2 : f32
      } -> tensor<?x?x?x64xf32>
  return %r : tensor<?x?x?x64xf32>
}

// A choice written by hand stays.
// ZEN4-LABEL: func @given
//       ZEN4: kernel <packed, query_tile = 32, key_block = 16, row_block = 1>
// SM80-LABEL: func @given
//       SM80: kernel <packed, query_tile = 32, key_block = 16, row_block = 1>
func.func @given(%q: tensor<?x?x?x64xf32>, %k: tensor<?x?x?x64xf32>, %v: tensor<?x?x?x64xf32>,
                 %o: tensor<?x?x?x64xf32>) -> tensor<?x?x?x64xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>)
      outs(%o : tensor<?x?x?x64xf32>) kernel <packed, query_tile = 32, key_block = 16, row_block = 1>
      -> tensor<?x?x?x64xf32>
  return %r : tensor<?x?x?x64xf32>
}

// UNKNOWN: error: attn-choose-kernels: unknown CPU 'pentium9'
