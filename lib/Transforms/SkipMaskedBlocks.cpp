//===- SkipMaskedBlocks.cpp - Visit only the keys a mask allows -----------===//
//
// For a causal or windowed attn.online_attention over tq query rows with
// diagonal offset d (row i may see key j iff i + d - left <= j <= i + d +
// right, right = 0 under causal masking), the keys split into:
//
//   [0, lo)       no row may see them: dropped
//   [lo, midLo)   some rows may: masked op
//   [midLo, midHi) every row may: op without causal/window (no mask math)
//   [midHi, hi)   some rows may: masked op
//   [hi, Sk)      no row may: dropped
//
// with lo = d - left, hi = tq + d + right, midLo = tq - 1 + d - left,
// midHi = d + right + 1, all clamped to [0, Sk] and ordered; with a key
// alignment a, midLo is then rounded up and midHi down to multiples of a
// (still ordered), so that the unmasked range holds whole key tiles. After
// attn-tile-keys, each range is its own key loop, so a query tile visits
// only the key tiles it needs, and only the boundary tiles pay for masking.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/AttentionMath.h"
#include "lib/Transforms/Passes.h"

#include "dialect/AttnOps.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir {
namespace attn {
#define GEN_PASS_DEF_ATTNSKIPMASKEDBLOCKSPASS
#include "lib/Transforms/Passes.h.inc"
} // namespace attn
} // namespace mlir

using namespace mlir;
using namespace mlir::attn;

namespace {

/// `x` rounded down (or up) to a multiple of `align` (x >= 0).
Value roundDown(OpBuilder &b, Location loc, Value x, int64_t align) {
  Value a = arith::ConstantIndexOp::create(b, loc, align);
  Value blocks = arith::DivUIOp::create(b, loc, x, a);
  return arith::MulIOp::create(b, loc, blocks, a);
}
Value roundUp(OpBuilder &b, Location loc, Value x, int64_t align) {
  Value padding = arith::ConstantIndexOp::create(b, loc, align - 1);
  return roundDown(b, loc, arith::AddIOp::create(b, loc, x, padding), align);
}

/// Slices the key dimension of K, V and the mask to [begin, end) and
/// creates an online op on it, reading and writing `state`.
OnlineAttentionOp createKeyRange(OpBuilder &b, OnlineAttentionOp op,
                                 Value diagonal, Value begin, Value end,
                                 ValueRange state, bool masked) {
  Location loc = op.getLoc();
  Value length = arith::SubIOp::create(b, loc, end, begin);
  // Keys are dim 2 of K and V, dim 3 of the mask.
  auto sliceKeys = [&](Value tensor, int64_t keyDim) -> Value {
    if (!tensor)
      return tensor;
    SmallVector<OpFoldResult> offsets, sizes, strides;
    for (int64_t dim = 0; dim < 4; ++dim) {
      bool keys = dim == keyDim;
      offsets.push_back(keys ? OpFoldResult(begin) : b.getIndexAttr(0));
      sizes.push_back(keys ? OpFoldResult(length)
                           : tensor::getMixedSize(b, loc, tensor, dim));
      strides.push_back(b.getIndexAttr(1));
    }
    return tensor::ExtractSliceOp::create(b, loc, tensor, offsets, sizes,
                                          strides);
  };
  Value rangeDiagonal;
  if (masked)
    rangeDiagonal = arith::SubIOp::create(b, loc, diagonal, begin);
  // Sequenced: the IR's order must not depend on which argument a compiler
  // evaluates first.
  Value keys = sliceKeys(op.getKey(), 2);
  Value values = sliceKeys(op.getValue(), 2);
  Value mask = sliceKeys(op.getMask(), 3);
  AttentionAttributes attributes =
      masked ? AttentionAttributes::of(op).withoutAlignment()
             : AttentionAttributes::of(op).withoutBand();
  if (needsGlobalIndices(op)) {
    // The global key index (dropout's, the modifiers'): the range starts at
    // key `begin`.
    SmallVector<Value, 4> origin(op.getOrigin().begin(), op.getOrigin().end());
    if (origin.empty())
      origin.assign(3, arith::ConstantIndexOp::create(b, loc, 0).getResult());
    else
      origin.pop_back();
    origin.push_back(op.getOrigin().empty()
                         ? begin
                         : arith::AddIOp::create(b, loc, op.getOrigin()[3],
                                                 begin)
                               .getResult());
    attributes = attributes.withOrigin(origin);
  }
  return OnlineAttentionOp::create(b, loc, state.getTypes(), op.getQuery(),
                                   keys, values, mask, rangeDiagonal, state[0],
                                   state[1], state[2], attributes);
}

LogicalResult splitByKeyRanges(OnlineAttentionOp op, RewriterBase &rewriter,
                               int64_t keyAlignment) {
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  auto size = [&](Value shaped, int64_t index) {
    return getValueOrCreateConstantIndexOp(
        rewriter, loc, tensor::getMixedSize(rewriter, loc, shaped, index));
  };
  Value rows = size(op.getQuery(), 2);
  Value keys = size(op.getKey(), 2);
  Value diagonal = resolveDiagonal(
      rewriter, loc, op, op.getDiagonal(), [&](Value shaped, int64_t index) {
        return index == 2 && shaped == op.getKey() ? keys : rows;
      });

  // [lo, hi): the keys some row sees; [midLo, midHi): those every row sees.
  BandArithmetic band(rewriter, loc, op, diagonal);
  std::optional<int64_t> left = band.left, right = band.right;
  auto [lo, hi] = band.keysSomeRowSees(Value(), rows, keys);
  auto [midLo, midHi] = band.keysEveryRowSees(Value(), rows, lo, hi);

  if (keyAlignment > 1) {
    if (left)
      midLo = arith::MinSIOp::create(
          rewriter, loc, roundUp(rewriter, loc, midLo, keyAlignment), midHi);
    if (right)
      midHi = arith::MaxSIOp::create(
          rewriter, loc, roundDown(rewriter, loc, midHi, keyAlignment), midLo);
  }

  // An unbounded side has no masked range on that side: no op for it.
  SmallVector<Value> state(op.getDpsInits());
  if (left)
    state = createKeyRange(rewriter, op, diagonal, lo, midLo, state,
                           /*masked=*/true)
                .getResults();
  state = createKeyRange(rewriter, op, diagonal, midLo, midHi, state,
                         /*masked=*/false)
              .getResults();
  if (right)
    state = createKeyRange(rewriter, op, diagonal, midHi, hi, state,
                           /*masked=*/true)
                .getResults();
  rewriter.replaceOp(op, state);
  return success();
}

struct AttnSkipMaskedBlocksPass
    : public mlir::attn::impl::AttnSkipMaskedBlocksPassBase<
          AttnSkipMaskedBlocksPass> {
  using AttnSkipMaskedBlocksPassBase::AttnSkipMaskedBlocksPassBase;

  void runOnOperation() override {
    SmallVector<OnlineAttentionOp> ops;
    getOperation().walk([&](OnlineAttentionOp op) {
      if (op.hasPureTensorSemantics() && (op.getCausal() || op.getWindow()) &&
          !wholeOps)
        ops.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (OnlineAttentionOp op : ops) {
      // An op's chosen key block (#attn.kernel) is the one to align to,
      // when aligning.
      int64_t alignment =
          keyAlignment > 0 ? chosenKeyBlock(op, keyAlignment) : 0;
      if (failed(splitByKeyRanges(op, rewriter, alignment)))
        return signalPassFailure();
    }
  }
};

} // namespace
