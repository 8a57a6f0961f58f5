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

// What a score_mod may use on the GPU: the functions NVPTX has instructions
// for become their LLVM intrinsics (convert-gpu-to-nvvm would otherwise
// call libdevice, which the kernels do not link), rsqrt 1 / sqrt, log2 the
// lg2 approximation.
// NVVM-LABEL: func @gpu_modifier_math
//   NVVM-NOT: math.
//       NVVM: llvm.call_intrinsic "llvm.fabs.f32"(%arg0)
//       NVVM: llvm.call_intrinsic "llvm.floor.f32"(%arg0)
//       NVVM: llvm.call_intrinsic "llvm.ceil.f32"(%arg0)
//       NVVM: llvm.call_intrinsic "llvm.trunc.f32"(%arg0)
//       NVVM: llvm.call_intrinsic "llvm.roundeven.f32"(%arg0)
//       NVVM: llvm.call_intrinsic "llvm.sqrt.f32"(%arg0)
//       NVVM: llvm.call_intrinsic "llvm.copysign.f32"(%arg0, %arg1)
//       NVVM: %[[ROOT:.+]] = llvm.call_intrinsic "llvm.sqrt.f32"(%arg1)
//       NVVM: arith.divf %{{.+}}, %[[ROOT]]
//       NVVM: llvm.call_intrinsic "llvm.nvvm.lg2.approx.ftz.f"(%arg1)
//       NVVM: return
func.func @gpu_modifier_math(%x: f32, %y: f32) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32) {
  %a = math.absf %x : f32
  %f = math.floor %x : f32
  %c = math.ceil %x : f32
  %t = math.trunc %x : f32
  %r = math.roundeven %x : f32
  %s = math.sqrt %x : f32
  %p = math.copysign %x, %y : f32
  %q = math.rsqrt %y : f32
  %l = math.log2 %y : f32
  return %a, %f, %c, %t, %r, %s, %p, %q, %l : f32, f32, f32, f32, f32, f32, f32, f32, f32
}

// RUN: attn-opt %s -attn-approximate-math=avx512=1 | FileCheck %s --check-prefix=AVX512

// With avx512, a 16-lane f32 exp is clamped (vmaxps/vminps keep a NaN
// operand given second), split as n ln2 + r by two FMAs, r's polynomial is
// six FMAs and vscalefps applies 2^n; other exps (scalar here) keep the
// generic polynomial.

// AVX512-LABEL: func @softmax_math
//       AVX512: %[[LO:.+]] = llvm.call_intrinsic "llvm.x86.avx512.max.ps.512"(%{{.+}}, %arg0, %{{.+}})
//       AVX512: %[[X:.+]] = llvm.call_intrinsic "llvm.x86.avx512.min.ps.512"(%{{.+}}, %[[LO]], %{{.+}})
//       AVX512: %[[T:.+]] = arith.mulf %[[X]], %{{.+}} : vector<16xf32>
//       AVX512: %[[N:.+]] = math.roundeven %[[T]] : vector<16xf32>
//       AVX512: %[[NEGN:.+]] = arith.negf %[[N]]
//       AVX512: %[[R0:.+]] = math.fma %[[NEGN]], %{{.+}}, %[[X]]
//       AVX512: %[[R:.+]] = math.fma %[[NEGN]], %{{.+}}, %[[R0]]
// AVX512-COUNT-6: math.fma %{{.+}}, %[[R]], %{{.+}} : vector<16xf32>
//       AVX512: llvm.call_intrinsic "llvm.x86.avx512.mask.scalef.ps.512"(%{{.+}}, %[[N]], %{{.+}}, %{{.+}}, %{{.+}})
//   AVX512-NOT: math.exp
//       AVX512: return

// AVX512-LABEL: func @scalar_exp
//   AVX512-NOT: llvm.x86.avx512
//       AVX512: return
func.func @scalar_exp(%x: f32) -> f32 {
  %e = math.exp %x : f32
  return %e : f32
}

// exp2, which the CPU softmax takes (base 2, log2 e folded into its score
// scale): with avx512 a 16-lane exp2 needs no range-reduction multiply or
// FMAs, only n = round(x) and r = x - n (exact), then the same six-FMA
// polynomial (coefficients times ln2^k) and vscalefps. attn.nonpositive
// (the softmax's s - m', never above 0) leaves out the upper clamp. Other
// exp2s become exp(x ln2) and take exp's polynomial.

// CHECK-LABEL: func @softmax_exp2
//   CHECK-NOT: math.exp2
//       CHECK: arith.mulf %{{.+}}, %{{.+}} : vector<16xf32>
//       CHECK: math.fma {{.+}} : vector<16xf32>
//   CHECK-NOT: math.exp
//       CHECK: return

// AVX512-LABEL: func @softmax_exp2
//       AVX512: %[[X:.+]] = llvm.call_intrinsic "llvm.x86.avx512.max.ps.512"(%{{.+}}, %arg0, %{{.+}})
//   AVX512-NOT: llvm.x86.avx512.min.ps.512
//       AVX512: %[[N:.+]] = math.roundeven %[[X]] : vector<16xf32>
//       AVX512: %[[R:.+]] = arith.subf %[[X]], %[[N]] : vector<16xf32>
// AVX512-COUNT-6: math.fma %{{.+}}, %[[R]], %{{.+}} : vector<16xf32>
//       AVX512: %[[E:.+]] = llvm.call_intrinsic "llvm.x86.avx512.mask.scalef.ps.512"(%{{.+}}, %[[N]], %{{.+}}, %{{.+}}, %{{.+}})
//       AVX512: %[[LO:.+]] = llvm.call_intrinsic "llvm.x86.avx512.max.ps.512"(%{{.+}}, %arg0, %{{.+}})
//       AVX512: %[[Y:.+]] = llvm.call_intrinsic "llvm.x86.avx512.min.ps.512"(%{{.+}}, %[[LO]], %{{.+}})
//       AVX512: math.roundeven %[[Y]] : vector<16xf32>
//       AVX512: llvm.call_intrinsic "llvm.x86.avx512.mask.scalef.ps.512"
//   AVX512-NOT: llvm.x86.avx512
//   AVX512-NOT: math.exp
//       AVX512: return
func.func @softmax_exp2(%x: vector<16xf32>, %a: f32) -> (vector<16xf32>, vector<16xf32>, f32) {
  %p = math.exp2 %x {attn.nonpositive} : vector<16xf32>
  %q = math.exp2 %x : vector<16xf32>
  %alpha = math.exp2 %a {attn.nonpositive} : f32
  return %p, %q, %alpha : vector<16xf32>, vector<16xf32>, f32
}

// RUN: attn-opt %s -attn-approximate-math=bf16-by-integers=1 | FileCheck %s --check-prefix=BF16

// bf16-by-integers: f32 -> bf16 rounds to nearest even in integers (add
// 0x7FFF plus the kept part's lowest bit, keep the high half; NaN becomes
// the quiet NaN 0x7FC0), bf16 -> f32 is a shift; vectors stay vectors.
// Without the option (CHECK), conversions are left to LLVM.
// BF16-LABEL: func @round_to_bf16
//   BF16-NOT: arith.truncf
//   BF16-NOT: arith.extf
//       BF16: %[[NAN:.+]] = arith.cmpf une, %[[O:.+]], %[[O]] : vector<8xf32>
//       BF16: %[[BITS:.+]] = arith.bitcast %[[O]] : vector<8xf32> to vector<8xi32>
//       BF16: %[[LSB:.+]] = arith.andi
//       BF16: %[[BIAS:.+]] = arith.addi %[[LSB]], %{{.+}} : vector<8xi32>
//       BF16: %[[SUM:.+]] = arith.addi %[[BITS]], %[[BIAS]] : vector<8xi32>
//       BF16: %[[HIGH:.+]] = arith.shrui %[[SUM]], %{{.+}} : vector<8xi32>
//       BF16: %[[HALF:.+]] = arith.trunci %[[HIGH]] : vector<8xi32> to vector<8xi16>
//       BF16: %[[SEL:.+]] = arith.select %[[NAN]], %{{.+}}, %[[HALF]] : vector<8xi1>, vector<8xi16>
//       BF16: arith.bitcast %[[SEL]] : vector<8xi16> to vector<8xbf16>
//       BF16: arith.extui %{{.+}} : vector<8xi16> to vector<8xi32>
//       BF16: arith.shli
//       BF16: arith.trunci %{{.+}} : i32 to i16
//       BF16: return
// CHECK-LABEL: func @round_to_bf16
//       CHECK: arith.truncf %{{.+}} : vector<8xf32> to vector<8xbf16>
//       CHECK: arith.extf %{{.+}} : vector<8xbf16> to vector<8xf32>
//       CHECK: arith.truncf %{{.+}} : f32 to bf16
func.func @round_to_bf16(%o: vector<8xf32>, %k: vector<8xbf16>, %x: f32) -> (vector<8xbf16>, vector<8xf32>, bf16) {
  %r = arith.truncf %o : vector<8xf32> to vector<8xbf16>
  %w = arith.extf %k : vector<8xbf16> to vector<8xf32>
  %s = arith.truncf %x : f32 to bf16
  return %r, %w, %s : vector<8xbf16>, vector<8xf32>, bf16
}
