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

struct AttnApproximateMathPass
    : public attn::impl::AttnApproximateMathPassBase<AttnApproximateMathPass> {
  using Base::Base;

  void runOnOperation() override {
    if (nvvm)
      rewriteForNVVM(getOperation());
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
