// RUN: attn-opt %s -attn-approximate-math | FileCheck %s

// exp, tanh and log become inline polynomials: no libm call, and the
// vector forms stay vectors.

// CHECK-LABEL: func @softmax_math
//   CHECK-NOT: math.exp
//   CHECK-NOT: math.tanh
//   CHECK-NOT: math.log
//       CHECK: math.fma {{.+}} : vector<16xf32>
//       CHECK: return
func.func @softmax_math(%s: vector<16xf32>, %l: f32) -> (vector<16xf32>, vector<16xf32>, f32) {
  %e = math.exp %s : vector<16xf32>
  %t = math.tanh %s : vector<16xf32>
  %g = math.log %l : f32
  return %e, %t, %g : vector<16xf32>, vector<16xf32>, f32
}

// RUN: attn-opt %s -attn-approximate-math=nvvm=1 | FileCheck %s --check-prefix=NVVM

// For NVIDIA GPUs, scalar f32 exp and log become the approximate ex2/lg2
// instructions (no libdevice) and tanh goes through that exp; vectors keep
// the polynomials.

// NVVM-LABEL: func @gpu_math
//   NVVM-NOT: math.exp
//   NVVM-NOT: math.log
//   NVVM-NOT: math.tanh
//       NVVM: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
//       NVVM: llvm.call_intrinsic "llvm.nvvm.lg2.approx.ftz.f"
//       NVVM: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
//       NVVM: arith.divf
//       NVVM: return
func.func @gpu_math(%x: f32) -> (f32, f32, f32) {
  %e = math.exp %x : f32
  %l = math.log %x : f32
  %t = math.tanh %x : f32
  return %e, %l, %t : f32, f32, f32
}
