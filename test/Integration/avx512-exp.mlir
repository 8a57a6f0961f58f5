// REQUIRES: avx512f
// RUN: attn-opt %s -attn-approximate-math=avx512=1 -convert-vector-to-scf -convert-scf-to-cf \
// RUN:   -convert-vector-to-llvm -convert-math-to-llvm -convert-arith-to-llvm \
// RUN:   -convert-func-to-llvm -convert-cf-to-llvm -reconcile-unrealized-casts \
// RUN: | mlir-runner -e main -entry-point-result=void \
// RUN:   -shared-libs=%mlir_c_runner_utils | FileCheck %s

// attn-approximate-math's AVX-512 exp, run: against libm's double exp on
// every 1/64 step of [-87, 88] (all normal f32 results) its relative error
// stays below 1.5e-7 (measured 7.9e-8), and the ends are exact: exp(-inf) = 0 and
// exp(-110) underflows to 0, +inf and exp(100) give +inf, NaN stays NaN. Below
// -87 the result is 0, not subnormal (exp(-103.2) = 1.4e-45 in libm): subnormals
// cost Intel cores a microcode assist per operation.

// CHECK: max relative error below 1.5e-7: 1
// CHECK: ( 0, 0, 1, inf, inf, {{-?}}nan, {{-?}}nan, 0, 2.71828, 0.367879, 1.65164e+38, 1.64581e-38,
func.func @main() {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16.0 : f32
  %start = arith.constant dense<-87.0> : vector<16xf32>
  %c1 = arith.constant 1 : index
  %steps = arith.constant 700 : index // 700 vectors x 16 lanes / 64 = 175
  %lane = arith.constant dense<[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0,
      9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0]> : vector<16xf32>
  %step = arith.constant dense<0.015625> : vector<16xf32>
  %zero = arith.constant dense<0.0> : vector<16xf64>
  %worst = scf.for %i = %c0 to %steps step %c1 iter_args(%w = %zero) -> vector<16xf64> {
    %ii = arith.index_cast %i : index to i32
    %fi = arith.sitofp %ii : i32 to f32
    %base = arith.mulf %fi, %c16 : f32
    %bv = vector.broadcast %base : f32 to vector<16xf32>
    %idx = arith.addf %bv, %lane : vector<16xf32>
    %off = arith.mulf %idx, %step : vector<16xf32>
    %x = arith.addf %off, %start : vector<16xf32>
    %e = math.exp %x : vector<16xf32>
    %x64 = arith.extf %x : vector<16xf32> to vector<16xf64>
    %ref = math.exp %x64 : vector<16xf64>
    %e64 = arith.extf %e : vector<16xf32> to vector<16xf64>
    %d = arith.subf %e64, %ref : vector<16xf64>
    %ad = math.absf %d : vector<16xf64>
    %rel = arith.divf %ad, %ref : vector<16xf64>
    %nw = arith.maximumf %w, %rel : vector<16xf64>
    scf.yield %nw : vector<16xf64>
  }
  %max = vector.reduction <maximumf>, %worst : vector<16xf64> into f64
  %bound = arith.constant 1.5e-7 : f64
  %ok = arith.cmpf olt, %max, %bound : f64
  vector.print str "max relative error below 1.5e-7: "
  vector.print %ok : i1
  vector.print str "max relative error "
  vector.print %max : f64

  %special = arith.constant dense<[0xFF800000, -110.0, 0.0, 0x7F800000, 100.0,
      0x7FC00000, 0xFFC00000, -103.2, 1.0, -1.0, 88.0, -87.0, 0.5, -0.5,
      10.0, -10.0]> : vector<16xf32>
  %s = math.exp %special : vector<16xf32>
  vector.print %s : vector<16xf32>
  return
}
