//===- BlockTable.cpp - A kernel's block table, made from its mask_mod ----===//
//
// A kernel whose op names a block table (`attn.block_mask = [capture, QB,
// KB]`, docs/spec.md "Score and mask modifiers" 7) reads the table as a
// promise about its mask_mod. For kernel users who hold the mask_mod only in
// the compiled kernel, this pass gives each such kernel `<f>` a function
// that computes the table from the mask_mod itself:
//
//   @<f>_block_table(%q, %k, %captures...)                 attn.kernel
//     forall (tb, th, qb) over the table's [TB, TH, TQ]:
//       for each key block kb < TK:
//         T[tb, th, qb, kb] = 0  if the mask_mod keeps no position of the
//                                block (query rows qb·QB.., keys kb·KB..,
//                                within Sq and Sk),
//                             2  if it keeps every one of QB × KB,
//                             1  otherwise,
//
// evaluated 16 keys at a time (the keys in vector lanes, as the packed
// micro-kernel evaluates it). A table dim of 1 where the call's B (or Hq)
// is larger covers every batch (head): the mask_mod is evaluated for each,
// unless it does not read that index. Blocks cut by the end of the
// sequence are never full, as in FlexAttention's create_block_mask. The
// op's causal band and window count as part of the mask (attn-compile's
// attn-band-from-mask-mod may have moved them out of the mask_mod, or
// taken the mask_mod whole): a tighter promise, still exact for the kernel.
//
// It runs first, on the user's attn.attention (before attn-band-from-
// mask-mod moves a band out of the mask_mod into attributes): the function
// is made on memrefs from the start (Q, K and the captures, any strides),
// so that nothing after touches it but attn-outline-work-items, which makes
// its work items (one per table row); attn-compile calls it with the
// kernel's Q, K and captures.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Modifiers.h"
#include "lib/Transforms/Passes.h"

namespace mlir {
namespace attn {
#define GEN_PASS_DEF_ATTNBLOCKTABLEPASS
#include "lib/Transforms/Passes.h.inc"
} // namespace attn
} // namespace mlir

using namespace mlir;
using namespace mlir::attn;

namespace {

/// Keys per evaluation of the mask_mod.
constexpr int64_t kLanes = 16;

/// The op of `func` whose block table the function computes: its
/// attn.attention with a table; null when there is none. (Its mask_mod may
/// be gone: attn-band-from-mask-mod takes out a mask_mod that is all band.)
AttentionOp tableOp(func::FuncOp func) {
  AttentionOp found;
  func.walk([&](AttentionOp op) {
    if (!op->hasAttr(kBlockMaskAttrName))
      return WalkResult::advance();
    found = op;
    return WalkResult::interrupt();
  });
  return found;
}

/// The memref a kernel's tensor argument becomes: any strides and offset.
MemRefType stridedMemRef(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  SmallVector<int64_t> strides(tensor.getRank(), ShapedType::kDynamic);
  return MemRefType::get(
      tensor.getShape(), tensor.getElementType(),
      StridedLayoutAttr::get(type.getContext(), ShapedType::kDynamic, strides));
}

struct BlockTableBuilder {
  OpBuilder &b;
  Location loc;

  Value cst(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value dim(Value memref, int64_t d) {
    return memref::DimOp::create(b, loc, memref, d);
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value min(Value x, Value y) { return arith::MinSIOp::create(b, loc, x, y); }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }

  /// The range of batches (heads) an entry at `index` of a table dim of
  /// `tableSize` covers for a call of `size`: all of them where the table
  /// broadcasts and the mask_mod reads the index, else `index` alone.
  std::pair<Value, Value> coveredRange(Value index, Value tableSize, Value size,
                                       bool read) {
    Value next = add(index, cst(1));
    if (!read)
      return {index, next};
    Value broadcast = cmp(arith::CmpIPredicate::eq, tableSize, cst(1));
    return {select(broadcast, cst(0), index), select(broadcast, size, next)};
  }

  /// Loops `ranges` (nested, in order) with two i1 iteration values;
  /// `body` maps the induction variables and the values to the new ones.
  SmallVector<Value>
  nest(ArrayRef<std::pair<Value, Value>> ranges, ArrayRef<Value> steps,
       ValueRange inits,
       function_ref<SmallVector<Value>(ArrayRef<Value>, ValueRange)> body,
       SmallVector<Value> ivs = {}) {
    if (ranges.empty())
      return body(ivs, inits);
    auto loop = scf::ForOp::create(
        b, loc, ranges.front().first, ranges.front().second, steps.front(),
        inits, [&](OpBuilder &, Location, Value iv, ValueRange values) {
          SmallVector<Value> inner = ivs;
          inner.push_back(iv);
          scf::YieldOp::create(b, loc,
                               nest(ranges.drop_front(), steps.drop_front(),
                                    values, body, inner));
        });
    return loop.getResults();
  }
};

LogicalResult addBlockTableFunction(func::FuncOp kernel, AttentionOp op) {
  auto table = op->getAttrOfType<DenseI64ArrayAttr>(kBlockMaskAttrName);
  int64_t tableCapture = table[0], rowsPerEntry = table[1],
          keysPerEntry = table[2];
  Block &entry = kernel.getBody().front();
  // Q, K and the captures are the kernel's arguments.
  SmallVector<Value> operands = {op.getQuery(), op.getKey()};
  operands.append(op.getCaptures().begin(), op.getCaptures().end());
  SmallVector<Type> types;
  for (Value operand : operands) {
    auto arg = dyn_cast<BlockArgument>(operand);
    if (!arg || arg.getOwner() != &entry ||
        !isa<RankedTensorType>(arg.getType()))
      return op.emitError("attn-block-table: Q, K and the captures must be "
                          "tensor arguments of the kernel function (run "
                          "before tiling)");
    types.push_back(stridedMemRef(arg.getType()));
  }

  OpBuilder moduleBuilder(kernel);
  moduleBuilder.setInsertionPointAfter(kernel);
  Location loc = kernel.getLoc();
  auto type = FunctionType::get(kernel.getContext(), types, TypeRange{});
  auto func = func::FuncOp::create(
      moduleBuilder, loc, (kernel.getSymName() + "_block_table").str(), type);
  func->setAttr(kKernelAttrName, moduleBuilder.getUnitAttr());
  Block *body = func.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockBegin(body);
  BlockTableBuilder x{b, loc};

  Value q = body->getArgument(0), k = body->getArgument(1);
  Value tableArg = body->getArgument(2 + tableCapture);
  Value batch = x.dim(q, 0), heads = x.dim(q, 1), seqQ = x.dim(q, 2),
        seqK = x.dim(k, 2);
  Value tableB = x.dim(tableArg, 0), tableH = x.dim(tableArg, 1),
        tableQ = x.dim(tableArg, 2), tableK = x.dim(tableArg, 3);
  Region *maskMod = maskModOf(op);
  bool readsBatch = maskMod && !maskMod->front().getArgument(0).use_empty();
  bool readsHead = maskMod && !maskMod->front().getArgument(1).use_empty();
  ValueRange captures = body->getArguments().drop_front(2);
  // The op's causal band and window (attn-compile's attn-band-from-mask-mod
  // may have moved them out of the mask_mod): j - i - off within
  // [-left, right], off = Sk - Sq for bottom-right alignment, else 0.
  std::optional<int64_t> bandLeft, bandRight;
  bool banded = op.getCausal() || op.getWindow();
  if (op.getCausal())
    bandRight = 0;
  if (WindowAttr window = op.getWindowAttr()) {
    bandLeft = window.getLeft();
    if (std::optional<int64_t> right = window.getRight())
      bandRight = bandRight ? std::min(*bandRight, *right) : *right;
  }
  Value offset = x.cst(0);
  if (op.getAlignment() == DiagonalAlignment::bottom_right)
    offset = arith::SubIOp::create(b, loc, seqK, seqQ);

  SmallVector<OpFoldResult> zeros(3, b.getIndexAttr(0)),
      ones(3, b.getIndexAttr(1));
  SmallVector<OpFoldResult> ubs = {tableB, tableH, tableQ};
  auto forall = scf::ForallOp::create(b, loc, zeros, ubs, ones, ValueRange{},
                                      /*mapping=*/std::nullopt);
  b.setInsertionPoint(forall.getBody()->getTerminator());
  Value tb = forall.getInductionVar(0), th = forall.getInductionVar(1),
        qb = forall.getInductionVar(2);
  Value rowsBlock = x.cst(rowsPerEntry), keysBlock = x.cst(keysPerEntry);
  Value rowBegin = x.mul(qb, rowsBlock);
  Value rowEnd = x.min(x.add(rowBegin, rowsBlock), seqQ);
  Value wholeRows =
      x.cmp(arith::CmpIPredicate::eq, x.add(rowBegin, rowsBlock), rowEnd);
  auto batches = x.coveredRange(tb, tableB, batch, readsBatch);
  auto headRange = x.coveredRange(th, tableH, heads, readsHead);
  ModifierEmitter modifiers(b, loc, nullptr, maskMod, captures);
  auto lanesType = VectorType::get({kLanes}, b.getIndexType());
  Value laneOffsets = vector::StepOp::create(b, loc, lanesType);
  Value f = arith::ConstantIntOp::create(b, loc, 0, 1);
  Value t = arith::ConstantIntOp::create(b, loc, 1, 1);

  scf::ForOp::create(
      b, loc, x.cst(0), tableK, x.cst(1), ValueRange{},
      [&](OpBuilder &, Location, Value kb, ValueRange) {
        Value keyBegin = x.mul(kb, keysBlock);
        Value keyEnd = x.min(x.add(keyBegin, keysBlock), seqK);
        Value wholeKeys =
            x.cmp(arith::CmpIPredicate::eq, x.add(keyBegin, keysBlock), keyEnd);
        Value keyLimit = vector::BroadcastOp::create(b, loc, lanesType, keyEnd);
        // (any kept, every one kept) over the block's positions.
        SmallVector<Value> kept = x.nest(
            {batches, headRange, {rowBegin, rowEnd}, {keyBegin, keyEnd}},
            {x.cst(1), x.cst(1), x.cst(1), x.cst(kLanes)}, {f, t},
            [&](ArrayRef<Value> ivs, ValueRange values) -> SmallVector<Value> {
              Value keys =
                  x.add(vector::BroadcastOp::create(b, loc, lanesType, ivs[3]),
                        laneOffsets);
              Value inside = x.cmp(arith::CmpIPredicate::slt, keys, keyLimit);
              Value keep =
                  maskMod
                      ? modifiers.keep({ivs[0], ivs[1], ivs[2], keys}, kLanes)
                      : Value();
              if (banded) {
                // keys - (i + off) within [-left, right].
                Value diagonal = vector::BroadcastOp::create(
                    b, loc, lanesType, x.add(ivs[2], offset));
                auto within = [&](arith::CmpIPredicate p, int64_t side) {
                  Value bound =
                      x.add(diagonal, vector::BroadcastOp::create(
                                          b, loc, lanesType, x.cst(side)));
                  Value in = x.cmp(p, keys, bound);
                  keep = keep ? arith::AndIOp::create(b, loc, keep, in) : in;
                };
                if (bandRight)
                  within(arith::CmpIPredicate::sle, *bandRight);
                if (bandLeft)
                  within(arith::CmpIPredicate::sge, -*bandLeft);
              }
              if (!keep)
                keep = arith::ConstantOp::create(
                    b, loc,
                    DenseElementsAttr::get(
                        VectorType::get({kLanes}, b.getI1Type()), true));
              Value keptInside = arith::AndIOp::create(b, loc, keep, inside);
              Value outside = arith::XOrIOp::create(
                  b, loc, inside,
                  arith::ConstantOp::create(
                      b, loc,
                      DenseElementsAttr::get(cast<ShapedType>(inside.getType()),
                                             true)));
              Value keptOrOutside = arith::OrIOp::create(b, loc, keep, outside);
              Value any = vector::ReductionOp::create(
                  b, loc, vector::CombiningKind::OR, keptInside);
              Value every = vector::ReductionOp::create(
                  b, loc, vector::CombiningKind::AND, keptOrOutside);
              return {arith::OrIOp::create(b, loc, values[0], any),
                      arith::AndIOp::create(b, loc, values[1], every)};
            });
        Value full = arith::AndIOp::create(
            b, loc, kept[1],
            arith::AndIOp::create(b, loc, wholeRows, wholeKeys));
        auto i32 = [&](int64_t v) {
          return arith::ConstantIntOp::create(b, loc, v, 32);
        };
        Value value = x.select(kept[0], x.select(full, i32(2), i32(1)), i32(0));
        memref::StoreOp::create(b, loc, value, tableArg,
                                ValueRange{tb, th, qb, kb});
        scf::YieldOp::create(b, loc);
      });
  b.setInsertionPointToEnd(body);
  func::ReturnOp::create(b, loc);
  return success();
}

struct AttnBlockTablePass
    : public mlir::attn::impl::AttnBlockTablePassBase<AttnBlockTablePass> {
  void runOnOperation() override {
    SmallVector<std::pair<func::FuncOp, AttentionOp>> kernels;
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (!func->hasAttr(kKernelAttrName) || func.isExternal())
        continue;
      if (AttentionOp op = tableOp(func))
        kernels.emplace_back(func, op);
    }
    for (auto [func, op] : kernels)
      if (failed(addBlockTableFunction(func, op)))
        return signalPassFailure();
  }
};

} // namespace
