//===- ApproximateMath.cpp - Polynomial exp, tanh and log -----------------===//
//
// The softmax needs one exp per score; a libm call per lane would dominate
// the kernel. Upstream's polynomial approximations are exact enough for the
// spec's f32 tolerance (a few ulp) and lower to plain vector arithmetic.
//
// On NVIDIA GPUs (option `nvvm`) the hardware's approximate base-2
// instructions do it in one instruction and need no libdevice:
// exp(x) = ex2(x·log2 e), log(x) = lg2(x)·ln 2 (both within 2 ulp), and
// tanh(x) = sign(x)·(1 − e)/(1 + e) with e = exp(−2|x|), which never
// overflows.
//
// On CPUs without a bf16 conversion instruction (option `bf16-by-integers`)
// LLVM rounds f32 to bf16 by a library call per element (`__truncsfbf2`:
// 6 % of a bf16 forward's time on Zen 3); upstream's expansion does it in a
// few vector integer operations, rounding to nearest even as that call does.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Passes.h"

#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/Transforms/Approximation.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>

namespace mlir {
namespace attn {
#define GEN_PASS_DEF_ATTNAPPROXIMATEMATHPASS
#include "lib/Transforms/Passes.h.inc"
} // namespace attn
} // namespace mlir

using namespace mlir;

namespace {

/// `llvm.nvvm.<name>.approx.ftz.f` of an f32.
Value nvvmApprox(ImplicitLocOpBuilder &b, StringRef name, Value x) {
  return LLVM::CallIntrinsicOp::create(
             b, b.getF32Type(),
             b.getStringAttr(("llvm.nvvm." + name + ".approx.ftz.f").str()),
             ValueRange{x})
      .getResult(0);
}

Value nvvmExp(ImplicitLocOpBuilder &b, Value x) {
  Value log2e =
      arith::ConstantOp::create(b, b.getF32FloatAttr(llvm::numbers::log2ef));
  return nvvmApprox(b, "ex2", arith::MulFOp::create(b, x, log2e));
}

/// The LLVM intrinsic that NVPTX selects natively for a math op on f32
/// (convert-gpu-to-nvvm marks the llvm.intr ops illegal, to call libdevice,
/// which these kernels do not link), or "".
StringRef nativeIntrinsic(Operation *op) {
  return llvm::TypeSwitch<Operation *, StringRef>(op)
      .Case([](math::AbsFOp) { return "llvm.fabs.f32"; })
      .Case([](math::FloorOp) { return "llvm.floor.f32"; })
      .Case([](math::CeilOp) { return "llvm.ceil.f32"; })
      .Case([](math::TruncOp) { return "llvm.trunc.f32"; })
      .Case([](math::RoundEvenOp) { return "llvm.roundeven.f32"; })
      .Case([](math::SqrtOp) { return "llvm.sqrt.f32"; })
      .Case([](math::CopySignOp) { return "llvm.copysign.f32"; })
      .Default([](Operation *) { return ""; });
}

/// Rewrites scalar f32 exp, log, log2 and tanh with NVVM's approximations,
/// rsqrt as 1 / sqrt, and the math ops NVPTX has instructions for as their
/// LLVM intrinsics.
void rewriteForNVVM(Operation *root) {
  root->walk([](Operation *op) {
    if (op->getNumResults() != 1 || !op->getResult(0).getType().isF32())
      return;
    if (StringRef name = nativeIntrinsic(op); !name.empty()) {
      ImplicitLocOpBuilder b(op->getLoc(), op);
      Value result = LLVM::CallIntrinsicOp::create(b, b.getF32Type(),
                                                   b.getStringAttr(name),
                                                   op->getOperands())
                         .getResult(0);
      op->getResult(0).replaceAllUsesWith(result);
      op->erase();
      return;
    }
    if (isa<math::RsqrtOp, math::Log2Op>(op)) {
      ImplicitLocOpBuilder b(op->getLoc(), op);
      Value x = op->getOperand(0);
      Value result =
          isa<math::Log2Op>(op)
              ? nvvmApprox(b, "lg2", x)
              : Value(arith::DivFOp::create(
                    b, arith::ConstantOp::create(b, b.getF32FloatAttr(1.0f)),
                    LLVM::CallIntrinsicOp::create(
                        b, b.getF32Type(), b.getStringAttr("llvm.sqrt.f32"),
                        ValueRange{x})
                        .getResult(0)));
      op->getResult(0).replaceAllUsesWith(result);
      op->erase();
      return;
    }
    if (!isa<math::ExpOp, math::LogOp, math::TanhOp>(op))
      return;
    ImplicitLocOpBuilder b(op->getLoc(), op);
    Value x = op->getOperand(0), result;
    if (isa<math::ExpOp>(op)) {
      result = nvvmExp(b, x);
    } else if (isa<math::LogOp>(op)) {
      Value ln2 =
          arith::ConstantOp::create(b, b.getF32FloatAttr(llvm::numbers::ln2f));
      result = arith::MulFOp::create(b, nvvmApprox(b, "lg2", x), ln2);
    } else {
      Value one = arith::ConstantOp::create(b, b.getF32FloatAttr(1.0f));
      Value minusTwo = arith::ConstantOp::create(b, b.getF32FloatAttr(-2.0f));
      // |x| as max(x, -x): math.absf would become a libdevice call.
      Value abs = arith::MaximumFOp::create(b, x, arith::NegFOp::create(b, x));
      Value e = nvvmExp(b, arith::MulFOp::create(b, abs, minusTwo));
      Value r = arith::DivFOp::create(b, arith::SubFOp::create(b, one, e),
                                      arith::AddFOp::create(b, one, e));
      Value negative = arith::CmpFOp::create(
          b, arith::CmpFPredicate::OLT, x,
          arith::ConstantOp::create(b, b.getF32FloatAttr(0.0f)));
      result =
          arith::SelectOp::create(b, negative, arith::NegFOp::create(b, r), r);
    }
    op->getResult(0).replaceAllUsesWith(result);
    op->erase();
  });
}

/// A 16-lane x86 intrinsic on f32 vectors (and trailing integer operands).
Value x86Intrinsic(ImplicitLocOpBuilder &b, StringRef name, Type type,
                   ValueRange args) {
  return LLVM::CallIntrinsicOp::create(
             b, type, b.getStringAttr(("llvm.x86.avx512." + name).str()), args)
      .getResult(0);
}

/// The 16-lane AVX-512 pieces that avx512Exp and avx512Exp2 share.
struct Avx512Builder {
  ImplicitLocOpBuilder &b;
  VectorType type;

  Value splat(double v) {
    return arith::ConstantOp::create(
        b,
        DenseElementsAttr::get(type, b.getF32FloatAttr(static_cast<float>(v))));
  }
  Value rounding() { // the current rounding mode
    return arith::ConstantOp::create(b, b.getI32IntegerAttr(4));
  }
  /// x clamped to [-limit, limit] (to [-limit, +inf) with `lowerOnly`).
  /// vmaxps and vminps return their second operand when either is NaN, so
  /// with x second a NaN stays NaN.
  Value clamp(Value x, double limit, bool lowerOnly = false) {
    Value clamped = x86Intrinsic(b, "max.ps.512", type,
                                 ValueRange{splat(-limit), x, rounding()});
    if (lowerOnly)
      return clamped;
    return x86Intrinsic(b, "min.ps.512", type,
                        ValueRange{splat(limit), clamped, rounding()});
  }
  /// e^(r·unit) · 2^n for |r·unit| <= ln2 / 2: a degree-6 polynomial in r
  /// (relative error 7e-8 in f32 Horner, fitted for e^t on [-ln2/2, ln2/2];
  /// its coefficients c_k times unit^k), then vscalefps for the 2^n, which
  /// also makes the overflow (+inf) exact. Lanes where x (the argument,
  /// clamped) is below `smallest` (the argument of FLT_MIN, or a little
  /// above) are 0 (vscalefps's zero-masking): a subnormal result instead
  /// would cost Intel cores a microcode assist in this and in every later
  /// operation that reads it (ALiBi's far keys measured 2.5x the plain
  /// forward on Cascade Lake), for a value below 2^-126. NaN stays NaN.
  Value polynomialTimesPowerOfTwo(Value r, Value n, double unit, Value x,
                                  double smallest) {
    // c_6 ... c_0.
    const double coefficients[] = {0.001385929062962532,
                                   0.008374763652682304,
                                   0.04166772589087486,
                                   0.1666642129421234,
                                   0.4999999403953552,
                                   1.0,
                                   1.0};
    auto term = [&](int degree) {
      return coefficients[6 - degree] * std::pow(unit, degree);
    };
    Value poly = splat(term(6));
    for (int degree = 5; degree >= 0; --degree)
      poly = math::FmaOp::create(b, poly, r, splat(term(degree)));
    // Unordered or >=: a NaN lane is kept (and stays NaN).
    Value normal = arith::CmpFOp::create(b, arith::CmpFPredicate::UGE, x,
                                         splat(smallest));
    Value lanes = vector::ExtractOp::create(
        b,
        vector::BitCastOp::create(b, VectorType::get({1}, b.getI16Type()),
                                  normal),
        ArrayRef<int64_t>{0});
    return x86Intrinsic(b, "mask.scalef.ps.512", type,
                        ValueRange{poly, n, splat(0.0), lanes, rounding()});
  }
};

/// exp(x) for vector<16xf32> by AVX-512: x = n ln2 + r with n = round(x /
/// ln2) and |r| <= ln2 / 2 (Cody-Waite, two FMAs), e^r by the polynomial
/// and vscalefps for the 2^n. Twelve instructions against about twenty for
/// the generic approximation, which builds 2^n from the exponent bits and
/// mends the ends with compares and blends.
///
/// x is first clamped to [-110, 110], beyond which the result is 0 or +inf
/// anyway: that keeps r finite for x = -inf (exp = 0 exactly, which masked
/// scores rely on) and x = +inf. Below -87 the result is 0 (not subnormal).
Value avx512Exp(ImplicitLocOpBuilder &b, Value x) {
  Avx512Builder avx{b, cast<VectorType>(x.getType())};
  Value clamped = avx.clamp(x, 110.0);
  Value n = math::RoundEvenOp::create(
      b, arith::MulFOp::create(b, clamped, avx.splat(llvm::numbers::log2e)));
  // ln2 = ln2Hi + ln2Lo, ln2Hi = ln2 rounded to f32; with FMAs n ln2Hi is
  // not rounded before the subtraction.
  Value negN = arith::NegFOp::create(b, n);
  Value r =
      math::FmaOp::create(b, negN, avx.splat(0.693147182464599609375), clamped);
  r = math::FmaOp::create(b, negN, avx.splat(-1.904654323148236e-09), r);
  // e^-87 = 1.6e-38 is normal; ln(FLT_MIN) = -87.34.
  return avx.polynomialTimesPowerOfTwo(r, n, /*unit=*/1.0, clamped,
                                       /*smallest=*/-87.0);
}

/// 2^x for vector<16xf32> by AVX-512: n = round(x), r = x - n (exact,
/// |r| <= 1/2), 2^r = e^(r ln2) by the same polynomial (its coefficients
/// times ln2^k) and vscalefps for the 2^n. Ten instructions where exp
/// takes twelve: the CPU softmax runs in base 2 with log2(e) folded into
/// its score scale, which saves exp's multiply by log2(e) and one of its
/// range-reduction FMAs. Relative error 7.9e-8 on [-126, 0].
///
/// x is clamped to [-160, 160] (-inf would make r NaN; 2^-160 is 0 and
/// 2^160 +inf in f32 already); `nonPositive` (x <= 0 or NaN, as
/// kNonPositiveAttr promises) leaves out the upper clamp.
Value avx512Exp2(ImplicitLocOpBuilder &b, Value x, bool nonPositive) {
  Avx512Builder avx{b, cast<VectorType>(x.getType())};
  Value clamped = avx.clamp(x, 160.0, /*lowerOnly=*/nonPositive);
  Value n = math::RoundEvenOp::create(b, clamped);
  Value r = arith::SubFOp::create(b, clamped, n);
  return avx.polynomialTimesPowerOfTwo(r, n, /*unit=*/llvm::numbers::ln2,
                                       clamped, /*smallest=*/-126.0);
}

bool isF32x16(Type type) {
  auto vector = dyn_cast<VectorType>(type);
  return vector && vector.getShape() == ArrayRef<int64_t>{16} &&
         vector.getElementType().isF32();
}

void rewriteForAvx512(Operation *root) {
  root->walk([](Operation *op) {
    if (!isa<math::ExpOp, math::Exp2Op>(op) ||
        !isF32x16(op->getResultTypes()[0]))
      return;
    ImplicitLocOpBuilder b(op->getLoc(), op);
    Value x = op->getOperand(0);
    op->getResult(0).replaceAllUsesWith(
        isa<math::ExpOp>(op)
            ? avx512Exp(b, x)
            : avx512Exp2(b, x, op->hasAttr(attn::kNonPositiveAttr)));
    op->erase();
  });
}

/// exp2(x) = exp(x ln2) for the f32 exp2 that no target rewrite took, so
/// that the polynomial exp below (or NVVM's ex2) takes them.
void expandExp2(Operation *root) {
  root->walk([](math::Exp2Op op) {
    if (!getElementTypeOrSelf(op.getType()).isF32())
      return;
    ImplicitLocOpBuilder b(op.getLoc(), op);
    FloatAttr ln2Attr = b.getF32FloatAttr(llvm::numbers::ln2f);
    auto shaped = dyn_cast<ShapedType>(op.getType());
    Value ln2 = shaped ? arith::ConstantOp::create(
                             b, DenseElementsAttr::get(shaped, ln2Attr))
                       : arith::ConstantOp::create(b, ln2Attr);
    op.replaceAllUsesWith(Value(math::ExpOp::create(
        b, arith::MulFOp::create(b, op.getOperand(), ln2))));
    op.erase();
  });
}

struct AttnApproximateMathPass
    : public attn::impl::AttnApproximateMathPassBase<AttnApproximateMathPass> {
  using Base::Base;

  void runOnOperation() override {
    if (avx512)
      rewriteForAvx512(getOperation());
    expandExp2(getOperation());
    if (nvvm)
      rewriteForNVVM(getOperation());
    RewritePatternSet patterns(&getContext());
    auto wanted = [](StringRef name) {
      return name == "math.exp" || name == "math.tanh" || name == "math.log";
    };
    populateMathF32ExpansionPatterns(patterns, wanted);
    populateMathPolynomialApproximationPatterns(patterns, wanted);
    if (bf16ByIntegers)
      arith::populateExpandBFloat16Patterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace
