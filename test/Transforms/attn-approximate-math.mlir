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
