//===- BandFromMaskMod.cpp - The causal band or window a mask_mod states --===//
//
// A mask_mod that keeps (i, j) only where j − i lies in [−left, right] says
// what the causal and window attributes say: `q_idx >= kv_idx` is causal,
// `(q_idx - kv_idx).abs() <= 256` a window of 256 each side, and so on,
// alone or as conjuncts (arith.andi) of a larger mask_mod such as document
// masking AND causal. The region's indices are global, so such a band is the
// attributes' top-left diagonal. Written as attributes, the band is skipped
// by attn-skip-masked-blocks and the micro-kernels (keys no row of a query
// tile sees are never visited) instead of evaluated score by score; the
// conjuncts leave the region, and a mask_mod with nothing left leaves the
// op. Ops that already have a causal or window attribute are left alone.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Passes.h"

#include "dialect/AttnOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

namespace mlir {
namespace attn {
#define GEN_PASS_DEF_ATTNBANDFROMMASKMODPASS
#include "lib/Transforms/Passes.h.inc"
} // namespace attn
} // namespace mlir

using namespace mlir;
using namespace mlir::attn;

namespace {

/// constant + i·coefI + j·coefJ over the mask_mod's query and key indices.
struct Linear {
  int64_t constant = 0, coefI = 0, coefJ = 0;
};

std::optional<Linear> combine(const Linear &a, const Linear &b, int64_t sign) {
  Linear r;
  if (llvm::MulOverflow(b.constant, sign, r.constant) ||
      llvm::AddOverflow(a.constant, r.constant, r.constant))
    return std::nullopt;
  r.coefI = a.coefI + sign * b.coefI;
  r.coefJ = a.coefJ + sign * b.coefJ;
  return r;
}

/// `value` as a Linear in i and j (constants, additions, subtractions), if
/// it is one.
std::optional<Linear> linear(Value value, Value i, Value j, int depth = 0) {
  if (value == i)
    return Linear{0, 1, 0};
  if (value == j)
    return Linear{0, 0, 1};
  if (std::optional<int64_t> constant = getConstantIntValue(value))
    return Linear{*constant, 0, 0};
  Operation *op = value.getDefiningOp();
  if (!op || depth > 16 || !isa<arith::AddIOp, arith::SubIOp>(op))
    return std::nullopt;
  std::optional<Linear> lhs = linear(op->getOperand(0), i, j, depth + 1);
  std::optional<Linear> rhs = linear(op->getOperand(1), i, j, depth + 1);
  if (!lhs || !rhs)
    return std::nullopt;
  return combine(*lhs, *rhs, isa<arith::AddIOp>(op) ? 1 : -1);
}

/// Keys j of row i with −left <= j − i <= right; an absent side is
/// unbounded.
struct Band {
  std::optional<int64_t> left, right;

  void intersect(const Band &other) {
    auto tighter = [](std::optional<int64_t> a, std::optional<int64_t> b) {
      if (!a || !b)
        return a ? a : b;
      return std::optional<int64_t>(std::min(*a, *b));
    };
    left = tighter(left, other.left);
    right = tighter(right, other.right);
  }
};

/// |x| for x = maxsi(y, 0 − y) or maxsi(0 − y, y): y, else null.
Value absoluteOf(Value value) {
  auto max = value.getDefiningOp<arith::MaxSIOp>();
  if (!max)
    return {};
  for (int side = 0; side < 2; ++side) {
    Value y = max->getOperand(side), negated = max->getOperand(1 - side);
    auto sub = negated.getDefiningOp<arith::SubIOp>();
    if (sub && sub.getRhs() == y && isZeroInteger(sub.getLhs()))
      return y;
  }
  return {};
}

/// `pred` with its operands swapped: a < b is b > a.
arith::CmpIPredicate swapped(arith::CmpIPredicate pred) {
  using P = arith::CmpIPredicate;
  switch (pred) {
  case P::slt:
    return P::sgt;
  case P::sgt:
    return P::slt;
  case P::sle:
    return P::sge;
  case P::sge:
    return P::sle;
  case P::ult:
    return P::ugt;
  case P::ugt:
    return P::ult;
  case P::ule:
    return P::uge;
  case P::uge:
    return P::ule;
  default:
    return pred; // eq, ne
  }
}

/// The band that `cmp` states on j − i, if it states one: d = lhs − rhs =
/// ±(j − i) + c compared with 0, or |j − i| compared with a constant.
std::optional<Band> bandOf(arith::CmpIOp cmp, Value i, Value j) {
  using P = arith::CmpIPredicate;
  P predicate = cmp.getPredicate();
  Value lhs = cmp.getLhs(), rhs = cmp.getRhs();
  // Constant-on-the-left forms as constant-on-the-right ones.
  if (getConstantIntValue(lhs) && !getConstantIntValue(rhs)) {
    std::swap(lhs, rhs);
    predicate = swapped(predicate);
  }
  // |±(j − i)| <= k or < k: a window of k (k − 1) each side.
  if (Value inner = absoluteOf(lhs)) {
    std::optional<Linear> d = linear(inner, i, j);
    std::optional<int64_t> k = getConstantIntValue(rhs);
    if (!d || !k || d->constant != 0 || d->coefJ != -d->coefI ||
        (d->coefJ != 1 && d->coefJ != -1) ||
        (predicate != P::sle && predicate != P::slt))
      return std::nullopt;
    int64_t width = predicate == P::sle ? *k : *k - 1;
    return Band{width, width};
  }
  std::optional<Linear> a = linear(lhs, i, j), b = linear(rhs, i, j);
  if (!a || !b)
    return std::nullopt;
  std::optional<Linear> d = combine(*a, *b, -1);
  if (!d || d->coefJ != -d->coefI || (d->coefJ != 1 && d->coefJ != -1))
    return std::nullopt;
  // Make it (j − i) + c against 0: multiply by −1 if needed (and swap the
  // comparison's direction).
  int64_t c = d->constant;
  if (d->coefJ == -1) {
    if (c == std::numeric_limits<int64_t>::min())
      return std::nullopt;
    c = -c;
    predicate = swapped(predicate);
  }
  // (j − i) + c  pred  0, as bounds on j − i.
  int64_t bound;
  Band band;
  switch (predicate) {
  case P::sle: // j − i <= −c
  case P::slt: // j − i <= −c − 1
    if (llvm::SubOverflow<int64_t>(predicate == P::sle ? 0 : -1, c, bound))
      return std::nullopt;
    band.right = bound;
    return band;
  case P::sge: // j − i >= −c: left = c
  case P::sgt: // j − i >= 1 − c: left = c − 1
    if (llvm::SubOverflow<int64_t>(c, predicate == P::sge ? 0 : 1, bound))
      return std::nullopt;
    band.left = bound;
    return band;
  case P::eq: // j − i = −c
    if (c == std::numeric_limits<int64_t>::min())
      return std::nullopt;
    band.right = -c;
    band.left = c;
    return band;
  default:
    return std::nullopt;
  }
}

/// The conjuncts of `value` (through arith.andi; constant true dropped).
void conjuncts(Value value, SmallVectorImpl<Value> &leaves) {
  if (auto andOp = value.getDefiningOp<arith::AndIOp>()) {
    conjuncts(andOp.getLhs(), leaves);
    conjuncts(andOp.getRhs(), leaves);
    return;
  }
  if (std::optional<int64_t> constant = getConstantIntValue(value))
    if (*constant != 0)
      return;
  leaves.push_back(value);
}

/// `op` rebuilt without its mask_mod region (its other regions moved).
Operation *withoutMaskMod(RewriterBase &rewriter, Operation *op,
                          Region *maskMod) {
  rewriter.setInsertionPoint(op);
  OperationState state(op->getLoc(), op->getName());
  state.addOperands(op->getOperands());
  state.addTypes(op->getResultTypes());
  state.addAttributes(llvm::to_vector(op->getDiscardableAttrs()));
  state.propertiesAttr = op->getPropertiesAsAttribute();
  for (Region &region : op->getRegions())
    if (&region != maskMod)
      state.addRegion()->takeBody(region);
  Operation *rebuilt = rewriter.create(state);
  rewriter.replaceOp(op, rebuilt->getResults());
  return rebuilt;
}

template <typename OpTy>
void deriveBand(OpTy op, RewriterBase &rewriter) {
  Region *maskMod = maskModOf(op);
  if (!maskMod || op.getCausal() || op.getWindow())
    return;
  Block &body = maskMod->front();
  Value i = body.getArgument(2), j = body.getArgument(3);
  auto yield = cast<YieldOp>(body.getTerminator());
  SmallVector<Value> leaves, kept;
  conjuncts(yield->getOperand(0), leaves);
  Band band;
  bool found = false;
  for (Value leaf : leaves) {
    auto cmp = leaf.getDefiningOp<arith::CmpIOp>();
    std::optional<Band> part = cmp ? bandOf(cmp, i, j) : std::nullopt;
    if (!part) {
      kept.push_back(leaf);
      continue;
    }
    band.intersect(*part);
    found = true;
  }
  // The attributes hold sides >= 0 (the diagonal's own key included).
  if (!found || (band.left && *band.left < 0) ||
      (band.right && *band.right < 0))
    return;

  MLIRContext *ctx = op.getContext();
  if (band.right == 0 && !band.left) {
    op.setCausal(true);
  } else {
    op.setWindowAttr(WindowAttr::get(ctx, band.left, band.right));
  }
  op.setAlignmentAttr(
      DiagonalAlignmentAttr::get(ctx, DiagonalAlignment::top_left));

  // The region keeps the other conjuncts.
  rewriter.setInsertionPoint(yield);
  Value keep;
  for (Value leaf : kept)
    keep = keep ? arith::AndIOp::create(rewriter, yield.getLoc(), keep, leaf)
                : leaf;
  if (!keep)
    keep = arith::ConstantIntOp::create(rewriter, yield.getLoc(), 1, 1);
  rewriter.modifyOpInPlace(yield, [&] { yield->setOperand(0, keep); });
  // What fed only the band's comparisons is dead now (a capture's read
  // stays: the verifier wants every capture read).
  for (Operation &dead : llvm::make_early_inc_range(llvm::reverse(body)))
    if (!isa<CapturedOp>(dead) && isOpTriviallyDead(&dead))
      rewriter.eraseOp(&dead);
  if (kept.empty() && body.getOperations().size() <= 2)
    withoutMaskMod(rewriter, op, maskMod);
}

struct AttnBandFromMaskModPass
    : public mlir::attn::impl::AttnBandFromMaskModPassBase<
          AttnBandFromMaskModPass> {
  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation()->walk([&](Operation *op) {
      if (isa<AttentionOp, AttentionBackwardOp, AttentionWeightsOp>(op))
        ops.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (Operation *op : ops)
      TypeSwitch<Operation *>(op)
          .Case<AttentionOp, AttentionBackwardOp, AttentionWeightsOp>(
              [&](auto typed) { deriveBand(typed, rewriter); });
  }
};

} // namespace
