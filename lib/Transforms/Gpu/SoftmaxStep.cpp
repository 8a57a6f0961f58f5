//===- SoftmaxStep.cpp - The online-softmax step on the fragments ---------===//
//
// Per thread, the scores of its fragment (two rows of each row block, two
// columns in each group of 8 keys) go through the score function and the online
// update of AttentionMath; a row's max and sum combine over the 4 lanes that
// hold it by warp shuffles.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Gpu/TileMemory.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <limits>

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::gpu_kernel;

namespace {
constexpr float kInf = std::numeric_limits<float>::infinity();
} // namespace

/// Scale, soft-cap, bias or keep-mask, score_mod, causal/window band,
/// mask_mod and the tile's key count, per score, as the online op defines
/// them (docs/spec.md: the score_mod sees the score after the bias, at the
/// position's global indices; exclusion comes after it).
void SoftmaxStep::maskScores(OnlineAttentionOp op, SmallVector<Value> &scores,
                             Value keys, Value diagonalOperand,
                             ValueRange origin, ModifierEmitter *modifiers,
                             Value fullBlock) {
  AttentionMath scoreMath = maths(op);
  Value scale = f32(scoreMath.scoreScale());
  for (Value &s : scores)
    s = arith::MulFOp::create(b(), s, scale);
  for (Value &s : scores)
    s = scoreMath.softcap(s);

  // The band: key j allowed iff row + diag - left <= j <= row + diag + right.
  Value diagonal = resolveDiagonal(
      b(), b().getLoc(), op, diagonalOperand,
      [&](Value operand, int64_t dim) { return views[operand].sizes[dim]; });
  BandArithmetic band(b(), b().getLoc(), op, diagonal);

  const View *mask = op.getMask() ? &views[op.getMask()] : nullptr;
  Value negInf = f32(-kInf), zero = f32(0);
  // The modifiers' batch and query head: the tile's origin (one of each).
  Value batch, head;
  if (modifiers) {
    batch = mlir::attn::globalIndex(b(), b().getLoc(), origin, 0, cst(0));
    head = mlir::attn::globalIndex(b(), b().getLoc(), origin, 1, cst(0));
  }
  // Group g of the fragment: group g % groups of row block g / groups.
  int64_t groups = keyTile / kGroup;
  for (int64_t g = 0; g < rowBlocks * groups; ++g)
    for (int64_t i = 0; i < 4; ++i) {
      Value &s = scores[g * 4 + i];
      Value row = fragmentRow(g / groups, i);
      Value key = add(colPair, cst(g % groups * kGroup + (i & 1)));
      Value allowed = lt(key, keys);
      if (diagonal && band.banded()) {
        Value center = band.relative(row, Value());
        if (band.right)
          allowed = andI(allowed,
                         arith::CmpIOp::create(b(), arith::CmpIPredicate::sle,
                                               key, band.upper(center)));
        if (band.left)
          allowed = andI(allowed,
                         arith::CmpIOp::create(b(), arith::CmpIPredicate::sge,
                                               key, band.lower(center)));
      }
      if (mask) {
        // Rows past the tile's end and keys past the tile are not read; a
        // mask whose Sq dim is a static 1 broadcasts its row 0.
        bool rowBroadcast =
            cast<ShapedType>(op.getMask().getType()).getDimSize(2) == 1;
        Value maskRow = rowBroadcast ? cst(0) : row;
        Value readable = lt(key, keys);
        if (!rowBroadcast)
          readable = andI(readable, lt(row, mask->sizes[2]));
        Value bias = ifElse(
            readable, b().getF32Type(),
            [&]() -> Value {
              Value m = loadGlobal(*mask, {cst(0), cst(0), maskRow, key});
              return m.getType().isInteger(1) ? select(m, zero, negInf) : m;
            },
            [&]() -> Value { return zero; });
        s = arith::AddFOp::create(b(), s, bias);
        // A -inf bias (or false keep bit) excludes the key by the select:
        // NaN + -inf is NaN, and an excluded key's NaN must not leak.
        allowed =
            andI(allowed, arith::CmpFOp::create(b(), arith::CmpFPredicate::UNE,
                                                bias, negInf));
      }
      if (modifiers) {
        SmallVector<Value, 4> indices = {
            batch, head, mlir::attn::globalIndex(b(), b().getLoc(), origin, 2, row),
            mlir::attn::globalIndex(b(), b().getLoc(), origin, 3, key)};
        if (modifiers->hasScoreMod())
          s = modifiers->score(s, indices);
        if (modifiers->hasMaskMod())
          allowed =
              andI(allowed, modifiers->keep(indices, /*lanes=*/0, fullBlock));
      }
      s = select(allowed, s, negInf);
    }
}

void SoftmaxStep::dropWeights(SmallVector<Value> &weights, Value dropoutP,
                              Value seed, ValueRange origin) {
  Location loc = b().getLoc();
  Value threshold = dropoutThreshold(b(), loc, dropoutP);
  Value kept = dropoutKeptScale(b(), loc, dropoutP), zero = f32(0);
  Value batch = mlir::attn::globalIndex(b(), loc, origin, 0, cst(0));
  Value head = mlir::attn::globalIndex(b(), loc, origin, 1, cst(0));
  int64_t groups = keyTile / kGroup;
  auto row = [&](int64_t g, int64_t i) {
    return mlir::attn::globalIndex(b(), loc, origin, 2,
                                   fragmentRow(g / groups, i));
  };
  auto drop = [&](Value w, Value keep) -> Value {
    return arith::MulFOp::create(b(), w, select(keep, kept, zero));
  };
  // Where the tile starts at a multiple of 8 keys (every tile but those a
  // window's band starts mid-group), a lane's two keys of a group,
  // 2(l % 4) and the next, share a Philox counter and its word l % 4: one
  // Philox a row and group.
  auto byPairs = [&]() -> SmallVector<Value> {
    SmallVector<Value> dropped(weights);
    Value pair = arith::IndexCastOp::create(
        b(), b().getI32Type(), arith::DivUIOp::create(b(), colPair, cst(2)));
    for (int64_t g = 0; g < rowBlocks * groups; ++g)
      for (int64_t r = 0; r < 2; ++r) {
        Value groupKey = mlir::attn::globalIndex(b(), loc, origin, 3,
                                                 cst(g % groups * kGroup));
        auto [keepEven, keepOdd] =
            dropoutKeepPair(b(), loc, seed, threshold, batch, head,
                            row(g, 2 * r), groupKey, pair);
        dropped[g * 4 + 2 * r] = drop(dropped[g * 4 + 2 * r], keepEven);
        dropped[g * 4 + 2 * r + 1] = drop(dropped[g * 4 + 2 * r + 1], keepOdd);
      }
    return dropped;
  };
  // Else one Philox a weight.
  auto byKeys = [&]() -> SmallVector<Value> {
    SmallVector<Value> dropped(weights);
    for (int64_t g = 0; g < rowBlocks * groups; ++g)
      for (int64_t i = 0; i < 4; ++i) {
        Value key = mlir::attn::globalIndex(
            b(), loc, origin, 3,
            add(colPair, cst(g % groups * kGroup + (i & 1))));
        dropped[g * 4 + i] =
            drop(dropped[g * 4 + i], dropoutKeep(b(), loc, seed, threshold,
                                                 batch, head, row(g, i), key));
      }
    return dropped;
  };
  if (origin.empty()) {
    weights = byPairs();
    return;
  }
  Value aligned = arith::CmpIOp::create(
      b(), arith::CmpIPredicate::eq,
      arith::RemUIOp::create(b(), origin[3], cst(kGroup)), cst(0));
  auto choice = scf::IfOp::create(b(), ValueRange(weights).getTypes(), aligned,
                                  /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b());
  b().setInsertionPointToStart(choice.thenBlock());
  scf::YieldOp::create(b(), byPairs());
  b().setInsertionPointToStart(choice.elseBlock());
  scf::YieldOp::create(b(), byKeys());
  weights = SmallVector<Value>(choice.getResults());
}

/// The 4 lanes of a row combine their partial max or sum.
Value SoftmaxStep::rowReduce(AttentionMath &maths, Value v, bool isMax) {
  for (int32_t offset : {1, 2}) {
    Value other = gpu::ShuffleOp::create(b(), b().getLoc(), v, offset,
                                         kWarpSize, gpu::ShuffleMode::XOR)
                      .getShuffleResult();
    v = isMax ? maths.max(v, other)
              : Value(arith::AddFOp::create(b(), v, other));
  }
  return v;
}

/// Online update of the rows' max and sum; scores become the weights p.
/// Returns the rescale factor alpha of each of the thread's rows (r0 and
/// r1 of each row block).
SmallVector<Value> SoftmaxStep::updateStatistics(OnlineAttentionOp op,
                                                 SmallVector<Value> &scores,
                                                 Fragments &max,
                                                 Fragments &sum) {
  AttentionMath softmax = maths(op);
  int64_t groups = keyTile / kGroup;
  SmallVector<Value> alphas;
  for (int64_t row = 0; row < 2 * rowBlocks; ++row) {
    // Row r of block m: values 2r and 2r + 1 of each of the block's groups.
    int64_t first = (row / 2) * groups * 4 + (row % 2) * 2;
    Value blockMax = f32(-kInf);
    for (int64_t j = 0; j < groups; ++j)
      for (int64_t c = 0; c < 2; ++c)
        blockMax = softmax.max(blockMax, scores[first + j * 4 + c]);
    blockMax = rowReduce(softmax, blockMax, /*isMax=*/true);
    Value oldMax = max.values[row];
    AttentionMath::MaxUpdate update = softmax.updateMax(oldMax, blockMax);
    Value safe = update.reference, alpha = update.alpha;
    Value rowSum = f32(0);
    for (int64_t j = 0; j < groups; ++j)
      for (int64_t c = 0; c < 2; ++c) {
        Value &s = scores[first + j * 4 + c];
        s = softmax.exp(arith::SubFOp::create(b(), s, safe));
        rowSum = arith::AddFOp::create(b(), rowSum, s);
      }
    rowSum = rowReduce(softmax, rowSum, /*isMax=*/false);
    max.values[row] = update.max;
    sum.values[row] = softmax.updateSum(sum.values[row], alpha, rowSum);
    alphas.push_back(alpha);
  }
  return alphas;
}
