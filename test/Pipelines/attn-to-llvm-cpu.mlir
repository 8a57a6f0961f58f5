// RUN: attn-opt %s --attn-to-llvm-cpu | FileCheck %s
// RUN: attn-opt %s --attn-to-llvm-cpu="vector-width=8 key-tile-size=64" | FileCheck %s --check-prefix=AVX2
// RUN: attn-opt %s --attn-to-llvm-cpu="avx512-exp=1" | FileCheck %s --check-prefix=EXP
// RUN: attn-opt %s --attn-to-llvm-cpu="lane-rows=64" | FileCheck %s --check-prefix=LANES
// RUN: attn-opt %s --attn-to-llvm-cpu="lane-rows=64" --mlir-print-ir-after=attn-online-softmax,attn-tile-keys,attn-lower-to-vector 2>&1 >/dev/null | FileCheck %s --check-prefix=PASSES

// The whole chain ends in the LLVM dialect: no attn, scf, memref or vector
// op is left, the key loop runs 16-lane FMAs (8 with vector-width=8).

// CHECK-LABEL: llvm.func @attention
//   CHECK-NOT: attn.
//       CHECK: llvm.intr.fma({{.+}}) : (vector<16xf32>, vector<16xf32>, vector<16xf32>) -> vector<16xf32>
//       CHECK: llvm.fcmp "ogt" {{.+}} : vector<8xf32>
//   CHECK-NOT: llvm.intr.vector.reduce.fmaximum
//   CHECK-NOT: scf.
//   CHECK-NOT: memref.

// AVX2-LABEL: llvm.func @attention
//       AVX2: llvm.intr.fma({{.+}}) : (vector<8xf32>, vector<8xf32>, vector<8xf32>) -> vector<8xf32>
//   AVX2-NOT: llvm.x86.avx512

// avx512-exp: the softmax's 16-lane exponentials take vscalefps (by
// default they are the generic polynomial, as above).
// EXP-LABEL: llvm.func @attention
//       EXP: llvm.call_intrinsic "llvm.x86.avx512.mask.scalef.ps.512"
// lane-rows: the lane-rows micro-kernel, and no attn-tile-keys in the
// pipeline (the micro-kernel walks the key blocks of the whole range
// itself and transposes its rows once per op).
// LANES-LABEL: llvm.func @attention
//       LANES: llvm.intr.fma({{.+}}) : (vector<16xf32>, vector<16xf32>, vector<16xf32>) -> vector<16xf32>
// PASSES: IR Dump After AttnOnlineSoftmaxPass
// PASSES-NOT: IR Dump After AttnTileKeysPass
// PASSES: IR Dump After AttnLowerToVectorPass
func.func @attention(%q: tensor<1x2x?x32xf32>, %k: tensor<1x2x?x32xf32>,
                     %v: tensor<1x2x?x32xf32>, %o: tensor<1x2x?x32xf32>) -> tensor<1x2x?x32xf32> {
  %r = attn.attention ins(%q, %k, %v : tensor<1x2x?x32xf32>, tensor<1x2x?x32xf32>, tensor<1x2x?x32xf32>)
      outs(%o : tensor<1x2x?x32xf32>) causal align(top_left) -> tensor<1x2x?x32xf32>
  return %r : tensor<1x2x?x32xf32>
}
