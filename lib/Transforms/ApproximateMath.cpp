//===- ApproximateMath.cpp - Polynomial exp, tanh and log -----------------===//
//
// The softmax needs one exp per score; a libm call per lane would dominate
// the kernel. Upstream's polynomial approximations are exact enough for the
// spec's f32 tolerance (a few ulp) and lower to plain vector arithmetic.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Passes.h"

#include "mlir/Dialect/Math/Transforms/Approximation.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir {
namespace attn {
#define GEN_PASS_DEF_ATTNAPPROXIMATEMATHPASS
#include "lib/Transforms/Passes.h.inc"
} // namespace attn
} // namespace mlir

using namespace mlir;

namespace {
struct AttnApproximateMathPass
    : public attn::impl::AttnApproximateMathPassBase<AttnApproximateMathPass> {
  void runOnOperation() override {
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
