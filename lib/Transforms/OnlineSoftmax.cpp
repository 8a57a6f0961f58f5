//===- OnlineSoftmax.cpp - attn.attention as the online-softmax recurrence ===//
//
// Rewrites each attn.attention into FlashAttention's form:
//
//   acc = 0, max = -inf, sum = 0                         (linalg.fill)
//   acc, max, sum = attn.online_attention(q, k, v, ...)  (the recurrence)
//   empty = max == -inf && sum == 0
//   O   = empty ? 0 : acc / sum                          (one division;
//                                                         NaN if max is)
//   LSE = empty ? -inf : max + log(sum)
//
// The running state is f32 whatever the input type; the output is rounded
// once. A row that saw no allowed key keeps max = -inf and sum = 0, and the
// selects give the spec's O = 0 and LSE = -inf without ever computing
// -inf - -inf. The sum is part of the test because a maximum that passes
// NaN over (x86's x > y ? x : y) leaves max = -inf on a row whose scores
// are all NaN (a NaN query): its sum is NaN, and the NaN must reach O and
// LSE rather than the row being reported as fully masked.
//
// With attention sinks (one logit σ per query head) the normalization
// takes the sink as one more column, in the stable form that never takes
// exp of a positive number: m' = max(max, σ), c = e^(max - m'),
// l' = sum·c + e^(σ - m'). The row's divisor becomes
//
//   sum = σ == -inf ? sum : (c == 0 ? +inf : l' / c)     (acc / sum = O)
//   LSE = σ == -inf ? as above : (σ == +inf ? +inf : m' + log(l'))
//
// computed per row before the output's epilogue, which is unchanged: a
// fully masked row (max = -inf) divides acc = 0 by +inf, and σ = NaN makes
// the divisor NaN. Key tiles and key splits never see the sink: it is
// applied once, to the final state.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Passes.h"

#include "dialect/AttnOps.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/ValueBoundsOpInterface.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

#include <limits>

namespace mlir {
namespace attn {
#define GEN_PASS_DEF_ATTNONLINESOFTMAXPASS
#include "lib/Transforms/Passes.h.inc"
} // namespace attn
} // namespace mlir

using namespace mlir;
using namespace mlir::attn;

namespace {

/// A state tensor of `shape`, filled with `value` where one is given. Where a
/// dynamic size has a constant upper bound (a query tile's rows: min(tile, Sq -
/// offset)), the tensor is a slice of a statically shaped one: it bufferizes to
/// a fixed-size stack buffer that can live at the function's entry instead of
/// growing the stack in every tile.
Value filledTensor(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> shape,
                   std::optional<float> value) {
  Type f32 = b.getF32Type();
  SmallVector<OpFoldResult> bounded;
  bool sliced = false;
  for (OpFoldResult size : shape) {
    FailureOr<int64_t> bound =
        isa<Value>(size) ? ValueBoundsConstraintSet::computeConstantBound(
                               presburger::BoundType::UB,
                               ValueBoundsConstraintSet::Variable(size),
                               /*stopCondition=*/nullptr, /*closedUB=*/true)
                         : FailureOr<int64_t>(failure());
    sliced |= succeeded(bound);
    bounded.push_back(succeeded(bound) ? OpFoldResult(b.getIndexAttr(*bound))
                                       : size);
  }
  // alloc_tensor, not tensor.empty: each state gets its own buffer (CSE
  // would merge identical empties, and bufferization would then copy).
  SmallVector<int64_t> staticShape;
  SmallVector<Value> dynamicSizes;
  dispatchIndexOpFoldResults(bounded, dynamicSizes, staticShape);
  Value tensor = bufferization::AllocTensorOp::create(
      b, loc, RankedTensorType::get(staticShape, f32), dynamicSizes);
  if (sliced) {
    SmallVector<OpFoldResult> zeros(shape.size(), b.getIndexAttr(0)),
        ones(shape.size(), b.getIndexAttr(1));
    tensor = tensor::ExtractSliceOp::create(b, loc, tensor, zeros, shape, ones);
  }
  if (!value)
    return tensor;
  Value fill = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(*value));
  return linalg::FillOp::create(b, loc, fill, tensor).getResult(0);
}

/// linalg.generic over the shape of `init` with the given inputs, whose
/// indexing maps are identities truncated to their ranks.
Value elementwise(OpBuilder &b, Location loc, ValueRange inputs, Value init,
                  function_ref<Value(OpBuilder &, Location, ValueRange)> body) {
  unsigned rank = cast<ShapedType>(init.getType()).getRank();
  // Inputs of lower rank (max, sum: [B, Hq, Sq]) index the leading dims.
  AffineMap identity = AffineMap::getMultiDimIdentityMap(rank, b.getContext());
  SmallVector<AffineMap> maps;
  for (Value input : inputs)
    maps.push_back(
        identity.getMajorSubMap(cast<ShapedType>(input.getType()).getRank()));
  maps.push_back(identity);
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, init.getType(), inputs, init, maps, iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        linalg::YieldOp::create(nb, nloc, body(nb, nloc, args));
      });
  return generic.getResult(0);
}

/// Whether a row's final state (max, sum) is that of a row with no allowed
/// key: max = -inf and sum = 0. A NaN sum (NaN scores) is not.
Value noAllowedKey(OpBuilder &b, Location loc, Value max, Value sum) {
  Value negInf = arith::ConstantOp::create(
      b, loc, b.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
  Value noMax =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, max, negInf);
  Value noSum =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, sum, zero);
  return arith::AndIOp::create(b, loc, noMax, noSum);
}

/// A linalg.generic over the rows [B, Hq, Sq] of `rows` (max, sum: the
/// identity) and the sinks `[Hq]` (read at the row's head), into `init`.
Value perRowWithSinks(
    OpBuilder &b, Location loc, ValueRange rows, Value sinks, Value init,
    function_ref<Value(OpBuilder &, Location, ValueRange)> body) {
  MLIRContext *ctx = b.getContext();
  AffineMap identity = AffineMap::getMultiDimIdentityMap(3, ctx);
  SmallVector<AffineMap> maps(rows.size(), identity);
  maps.push_back(AffineMap::get(3, 0, {b.getAffineDimExpr(1)}, ctx));
  maps.push_back(identity);
  SmallVector<Value> inputs(rows);
  inputs.push_back(sinks);
  SmallVector<utils::IteratorType> iterators(3, utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, init.getType(), inputs, init, maps, iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        linalg::YieldOp::create(nb, nloc, body(nb, nloc, args));
      });
  generic->setAttr(kSinksAttrName, b.getUnitAttr());
  return generic.getResult(0);
}

/// The sink's terms of a row (max, sum) and sink σ (not -inf): m' =
/// max(max, σ), c = e^(max - m') and l' = sum·c + e^(σ - m').
struct SinkTerms {
  Value newMax, scale, newSum;
};
SinkTerms sinkTerms(OpBuilder &b, Location loc, Value max, Value sum,
                    Value sink) {
  Value newMax = arith::MaximumFOp::create(b, loc, max, sink);
  Value scale = math::ExpOp::create(
      b, loc, arith::SubFOp::create(b, loc, max, newMax).getResult());
  Value sinkTerm = math::ExpOp::create(
      b, loc, arith::SubFOp::create(b, loc, sink, newMax).getResult());
  Value newSum = arith::AddFOp::create(
      b, loc, arith::MulFOp::create(b, loc, sum, scale).getResult(), sinkTerm);
  return {newMax, scale, newSum};
}

Value isNegInf(OpBuilder &b, Location loc, Value x) {
  Value negInf = arith::ConstantOp::create(
      b, loc, b.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
  return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, x, negInf);
}

struct DecomposeAttention : public OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    SmallVector<OpFoldResult> rows =
        tensor::getMixedSizes(rewriter, loc, op.getQuery());
    rows.pop_back(); // [B, Hq, Sq]
    SmallVector<OpFoldResult> accShape = rows;
    accShape.push_back(rewriter.getIndexAttr(
        cast<ShapedType>(op.getValue().getType()).getDimSize(3)));

    float inf = std::numeric_limits<float>::infinity();
    Value acc = filledTensor(rewriter, loc, accShape, 0.0f);
    Value max = filledTensor(rewriter, loc, rows, -inf);
    Value sum = filledTensor(rewriter, loc, rows, 0.0f);
    auto online = OnlineAttentionOp::create(
        rewriter, loc, TypeRange{acc.getType(), max.getType(), sum.getType()},
        op.getQuery(), op.getKey(), op.getValue(), op.getMask(),
        op.getDiagonal(), acc, max, sum, AttentionAttributes::of(op));
    Value finalAcc = online.getResult(0), finalMax = online.getResult(1),
          finalSum = online.getResult(2);
    // The sum the output divides by: the keys' own, or with the sink's
    // column (acc / (l' / c) = acc · c / l').
    Value divisor = finalSum;
    Value sinks = op.getSinks();
    if (sinks)
      divisor = perRowWithSinks(
          rewriter, loc, {finalMax, finalSum}, sinks,
          filledTensor(rewriter, loc, rows, std::nullopt),
          [&](OpBuilder &b, Location l, ValueRange args) -> Value {
            Value max = args[0], sum = args[1], sink = args[2];
            SinkTerms terms = sinkTerms(b, l, max, sum, sink);
            Value zero = arith::ConstantOp::create(b, l, b.getF32FloatAttr(0));
            Value posInf =
                arith::ConstantOp::create(b, l, b.getF32FloatAttr(inf));
            Value vanished = arith::CmpFOp::create(
                b, l, arith::CmpFPredicate::OEQ, terms.scale, zero);
            Value withSink = arith::SelectOp::create(
                b, l, vanished, posInf,
                arith::DivFOp::create(b, l, terms.newSum, terms.scale)
                    .getResult());
            return arith::SelectOp::create(b, l, isNegInf(b, l, sink), sum,
                                           withSink);
          });

    Type outElement =
        cast<ShapedType>(op.getOutput().getType()).getElementType();
    Value output = elementwise(
        rewriter, loc, {finalAcc, finalMax, divisor}, op.getOutput(),
        [&](OpBuilder &b, Location l, ValueRange args) -> Value {
          Value zero = arith::ConstantOp::create(b, l, b.getF32FloatAttr(0));
          Value empty = noAllowedKey(b, l, args[1], args[2]);
          Value normalized = arith::DivFOp::create(b, l, args[0], args[2]);
          Value result = arith::SelectOp::create(b, l, empty, zero, normalized);
          // A NaN score at an allowed position leaves the running max NaN
          // (maximumf propagates it); the row's output is NaN whatever the
          // exponentials made of it.
          Value nanScore = arith::CmpFOp::create(
              b, l, arith::CmpFPredicate::UNO, args[1], args[1]);
          result = arith::SelectOp::create(b, l, nanScore, args[1], result);
          if (outElement != b.getF32Type())
            result = arith::TruncFOp::create(b, l, outElement, result);
          return result;
        });
    SmallVector<Value> replacements = {output};

    if (Value lseInit = op.getLse()) {
      auto keysLse = [&](OpBuilder &b, Location l, Value max,
                         Value sum) -> Value {
        Value negInf = arith::ConstantOp::create(b, l, b.getF32FloatAttr(-inf));
        Value empty = noAllowedKey(b, l, max, sum);
        Value logSum = math::LogOp::create(b, l, sum);
        Value value = arith::AddFOp::create(b, l, max, logSum);
        return arith::SelectOp::create(b, l, empty, negInf, value);
      };
      Value lse;
      if (sinks) {
        lse = perRowWithSinks(
            rewriter, loc, {finalMax, finalSum}, sinks, lseInit,
            [&](OpBuilder &b, Location l, ValueRange args) -> Value {
              Value max = args[0], sum = args[1], sink = args[2];
              SinkTerms terms = sinkTerms(b, l, max, sum, sink);
              Value withSink = arith::AddFOp::create(
                  b, l, terms.newMax,
                  math::LogOp::create(b, l, terms.newSum).getResult());
              // σ = +inf takes all the weight (its l' is NaN: inf - inf).
              Value posInf =
                  arith::ConstantOp::create(b, l, b.getF32FloatAttr(inf));
              Value sinkInf = arith::CmpFOp::create(
                  b, l, arith::CmpFPredicate::OEQ, sink, posInf);
              withSink =
                  arith::SelectOp::create(b, l, sinkInf, posInf, withSink);
              return arith::SelectOp::create(b, l, isNegInf(b, l, sink),
                                             keysLse(b, l, max, sum), withSink);
            });
      } else {
        lse = elementwise(rewriter, loc, {finalMax, finalSum}, lseInit,
                          [&](OpBuilder &b, Location l, ValueRange args) {
                            return keysLse(b, l, args[0], args[1]);
                          });
      }
      replacements.push_back(lse);
    }
    rewriter.replaceOp(op, replacements);
    return success();
  }
};

struct AttnOnlineSoftmaxPass
    : public mlir::attn::impl::AttnOnlineSoftmaxPassBase<
          AttnOnlineSoftmaxPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<DecomposeAttention>(&getContext());
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

} // namespace
