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
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/Transforms/Approximation.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

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
  Value log2e = arith::ConstantOp::create(b, b.getF32FloatAttr(1.44269504f));
  return nvvmApprox(b, "ex2", arith::MulFOp::create(b, x, log2e));
}

/// Rewrites scalar f32 exp, log and tanh with NVVM's approximations.
void rewriteForNVVM(Operation *root) {
  root->walk([](Operation *op) {
    if (!isa<math::ExpOp, math::LogOp, math::TanhOp>(op) ||
        !op->getResult(0).getType().isF32())
      return;
    ImplicitLocOpBuilder b(op->getLoc(), op);
    Value x = op->getOperand(0), result;
    if (isa<math::ExpOp>(op)) {
      result = nvvmExp(b, x);
    } else if (isa<math::LogOp>(op)) {
      Value ln2 = arith::ConstantOp::create(b, b.getF32FloatAttr(0.69314718f));
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

/// exp(x) for vector<16xf32> by AVX-512: x = n ln2 + r with n = round(x /
/// ln2) and |r| <= ln2 / 2 (Cody-Waite, two FMAs), e^r by a degree-6
/// polynomial (relative error 7e-8 in f32 Horner, fitted on [-ln2/2, ln2/2]),
/// and vscalefps for the 2^n, which also makes the overflow (+inf) and the
/// underflow (0, through the subnormals) exact. Twelve instructions against
/// about twenty for the generic approximation, which builds 2^n from the
/// exponent bits and mends the ends with compares and blends.
///
/// x is first clamped to [-110, 110], beyond which the result is 0 or +inf
/// anyway: that keeps r finite for x = -inf (exp = 0 exactly, which masked
/// scores rely on) and x = +inf. vmaxps and vminps return their second
/// operand when either is NaN, so with x second a NaN stays NaN.
Value avx512Exp(ImplicitLocOpBuilder &b, Value x) {
  auto type = cast<VectorType>(x.getType());
  auto splat = [&](float v) -> Value {
    return arith::ConstantOp::create(
        b, DenseElementsAttr::get(type, b.getF32FloatAttr(v)));
  };
  Value rounding =
      arith::ConstantOp::create(b, b.getI32IntegerAttr(4)); // current mode
  Value clamped = x86Intrinsic(b, "max.ps.512", type,
                               ValueRange{splat(-110.0f), x, rounding});
  clamped = x86Intrinsic(b, "min.ps.512", type,
                         ValueRange{splat(110.0f), clamped, rounding});
  Value n = math::RoundEvenOp::create(
      b, arith::MulFOp::create(b, clamped, splat(1.44269504088896341f)));
  // ln2 = ln2Hi + ln2Lo, ln2Hi = ln2 rounded to f32; with FMAs n ln2Hi is
  // not rounded before the subtraction.
  Value negN = arith::NegFOp::create(b, n);
  Value r =
      math::FmaOp::create(b, negN, splat(0.693147182464599609375f), clamped);
  r = math::FmaOp::create(b, negN, splat(-1.904654323148236e-09f), r);
  const float coefficients[] = {0.001385929062962532f,
                                0.008374763652682304f,
                                0.04166772589087486f,
                                0.1666642129421234f,
                                0.4999999403953552f,
                                1.0f,
                                1.0f};
  Value poly = splat(coefficients[0]);
  for (float c : ArrayRef<float>(coefficients).drop_front())
    poly = math::FmaOp::create(b, poly, r, splat(c));
  Value allLanes = arith::ConstantOp::create(b, b.getI16IntegerAttr(-1));
  return x86Intrinsic(b, "mask.scalef.ps.512", type,
                      ValueRange{poly, n, poly, allLanes, rounding});
}

void rewriteForAvx512(Operation *root) {
  root->walk([](math::ExpOp op) {
    auto type = dyn_cast<VectorType>(op.getType());
    if (!type || type.getShape() != ArrayRef<int64_t>{16} ||
        !type.getElementType().isF32())
      return;
    ImplicitLocOpBuilder b(op.getLoc(), op);
    op.replaceAllUsesWith(avx512Exp(b, op.getOperand()));
    op.erase();
  });
}

struct AttnApproximateMathPass
    : public attn::impl::AttnApproximateMathPassBase<AttnApproximateMathPass> {
  using Base::Base;

  void runOnOperation() override {
    if (nvvm)
      rewriteForNVVM(getOperation());
    if (avx512)
      rewriteForAvx512(getOperation());
    RewritePatternSet patterns(&getContext());
    auto wanted = [](StringRef name) {
      return name == "math.exp" || name == "math.tanh" || name == "math.log";
    };
    populateMathF32ExpansionPatterns(patterns, wanted);
    populateMathPolynomialApproximationPatterns(patterns, wanted);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace
