//===- VectorizeRows.cpp - Elementwise epilogues as vectors along rows ----===//
//
// After attn-lower-to-vector, what is left of a kernel's linalg is the
// epilogue: O = max == -inf ? 0 : acc / sum, converted to the output type,
// one `linalg.generic` per tile over [1, 1, rows, Dv] with the row's max and
// sum broadcast along Dv. convert-linalg-to-loops makes it scalar loops and
// LLVM's vectorizer then picks a width: 16 lanes for an f32 output, but 4
// for bf16 (vdivps on xmm), which cost 10 % of a bf16 kernel whose tiles
// see one key block.
//
// This pass vectorizes such ops itself. For an elementwise generic on
// buffers (all loops parallel, the output indexed by the identity, each
// input by the identity or by the identity without the innermost dim) whose
// innermost dim is static: loops over the outer dims, and per row
// ceil(N / lanes) chunks of `vector-width` lanes (the last one masked) that
// load the full operands, broadcast the row operands and captured scalars,
// and apply the body's ops to vectors. Full operands whose innermost
// stride is not statically 1 (a caller's output) are checked at run time:
// where one is not 1, the original op runs as before.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Passes.h"
#include "lib/Transforms/Views.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir {
namespace attn {
#define GEN_PASS_DEF_ATTNVECTORIZEROWSPASS
#include "lib/Transforms/Passes.h.inc"
} // namespace attn
} // namespace mlir

using namespace mlir;

namespace {

/// How an operand of a row-vectorizable generic is indexed.
enum class Access { Full, Row };

/// The operands' accesses if `op` is an elementwise generic on buffers that
/// this pass vectorizes, else nothing.
std::optional<SmallVector<Access>> rowAccesses(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInits() != 1 ||
      op.getNumParallelLoops() != op.getNumLoops() || op.getNumLoops() == 0)
    return std::nullopt;
  int64_t rank = op.getNumLoops();
  auto outType = cast<MemRefType>(op.getDpsInitOperand(0)->get().getType());
  // A row of one element (a split's max or sum) is no vector.
  if (outType.isDynamicDim(rank - 1) || outType.getDimSize(rank - 1) < 2)
    return std::nullopt;
  AffineMap identity = AffineMap::getMultiDimIdentityMap(rank, op.getContext());
  AffineMap row = identity.getMajorSubMap(rank - 1);
  SmallVector<Access> accesses;
  for (OpOperand &operand : op->getOpOperands()) {
    if (!isa<MemRefType>(operand.get().getType()))
      return std::nullopt;
    AffineMap map = op.getMatchingIndexingMap(&operand);
    if (map == identity)
      accesses.push_back(Access::Full);
    else if (map == row && !op.isDpsInit(&operand))
      accesses.push_back(Access::Row);
    else
      return std::nullopt;
  }
  // The body's ops must apply lane by lane to vectors; the output's value
  // (the init) must not be read, and the value stored is the body's (not a
  // scalar from above, as in a fill).
  if (!op.getRegionOutputArgs().front().use_empty() ||
      op.getBody()->getTerminator()->getOperand(0).getParentBlock() !=
          op.getBody())
    return std::nullopt;
  for (Operation &inner : op.getBody()->without_terminator()) {
    if (inner.getNumRegions() != 0 || inner.getNumResults() != 1 ||
        !OpTrait::hasElementwiseMappableTraits(&inner) ||
        !isa<arith::ArithDialect, math::MathDialect>(inner.getDialect()))
      return std::nullopt;
    for (Type type : inner.getOperandTypes())
      if (!type.isIntOrIndexOrFloat() || type.isIndex())
        return std::nullopt;
  }
  return accesses;
}

class RowVectorizer {
public:
  RowVectorizer(linalg::GenericOp op, ArrayRef<Access> accesses, int64_t lanes)
      : b(op.getLoc(), op), op(op), accesses(accesses), lanes(lanes),
        rank(op.getNumLoops()) {}

  void run() {
    // Operands whose innermost stride is 1 only at run time take a view
    // with a static unit stride on the fast path.
    SmallVector<Value> operands(op->getOperands());
    SmallVector<bool> checked;
    Value unit;
    for (auto [operand, access] : llvm::zip(operands, accesses)) {
      checked.push_back(access == Access::Full && !hasUnitInnerStride(operand));
      if (!checked.back())
        continue;
      Value stride = memref::ExtractStridedMetadataOp::create(b, operand)
                         .getStrides()[rank - 1];
      Value isUnit =
          arith::CmpIOp::create(b, arith::CmpIPredicate::eq, stride, index(1));
      unit = unit ? arith::AndIOp::create(b, unit, isUnit) : isUnit;
    }
    if (!unit) {
      emitLoops(operands);
      op.erase();
      return;
    }
    auto choice = scf::IfOp::create(b, unit, /*withElseRegion=*/true);
    b.setInsertionPoint(choice.thenBlock()->getTerminator());
    for (auto [operand, check] : llvm::zip(operands, checked))
      if (check)
        operand = mlir::attn::unitInnerStrideView(b, b.getLoc(), operand);
    emitLoops(operands);
    op->moveBefore(choice.elseBlock()->getTerminator());
  }

private:
  static bool hasUnitInnerStride(Value memref) {
    auto type = cast<MemRefType>(memref.getType());
    SmallVector<int64_t> strides;
    int64_t offset;
    return succeeded(type.getStridesAndOffset(strides, offset)) &&
           strides.back() == 1;
  }

  Value index(int64_t v) { return arith::ConstantIndexOp::create(b, v); }

  /// Loops over the outer dims of `operands` (the op's, or views of them),
  /// the innermost dim in vector chunks.
  void emitLoops(ArrayRef<Value> operands) {
    Value out = operands.back();
    SmallVector<Value> ivs;
    OpBuilder::InsertionGuard guard(b);
    for (int64_t d = 0; d + 1 < rank; ++d) {
      Value size = memref::DimOp::create(b, out, d);
      auto loop = scf::ForOp::create(b, index(0), size, index(1));
      ivs.push_back(loop.getInductionVar());
      b.setInsertionPoint(loop.getBody()->getTerminator());
    }
    int64_t columns = cast<MemRefType>(out.getType()).getDimSize(rank - 1);
    // A row's operands and the scalars from above the body are broadcast
    // once per row, for all its chunks.
    IRMapping rowVectors;
    Block *body = op.getBody();
    for (auto [i, operand] : llvm::enumerate(operands.drop_back()))
      if (accesses[i] == Access::Row)
        rowVectors.map(body->getArgument(i),
                       broadcast(memref::LoadOp::create(b, operand, ivs)));
    for (Operation &inner : body->without_terminator())
      for (Value operand : inner.getOperands())
        if (operand.getParentBlock() != body && !rowVectors.contains(operand))
          rowVectors.map(operand, broadcast(operand));
    for (int64_t col = 0; col < columns; col += lanes)
      emitChunk(operands, rowVectors, ivs, col, std::min(lanes, columns - col));
  }

  Value broadcast(Value scalar) {
    return vector::BroadcastOp::create(
        b, VectorType::get({lanes}, scalar.getType()), scalar);
  }

  /// One chunk of `width` columns from `col`: loads, the body on vectors, a
  /// store (masked where `width` < lanes).
  void emitChunk(ArrayRef<Value> operands, const IRMapping &rowVectors,
                 ArrayRef<Value> ivs, int64_t col, int64_t width) {
    SmallVector<Value> indices(ivs);
    indices.push_back(index(col));
    Value mask;
    if (width < lanes)
      mask = vector::ConstantMaskOp::create(
          b, VectorType::get({lanes}, b.getI1Type()), ArrayRef<int64_t>{width});
    IRMapping map = rowVectors;
    Block *body = op.getBody();
    for (auto [i, operand] : llvm::enumerate(operands.drop_back())) {
      if (accesses[i] == Access::Row)
        continue;
      Type elem = body->getArgument(i).getType();
      auto type = VectorType::get({lanes}, elem);
      Value v =
          mask ? vector::MaskedLoadOp::create(
                     b, type, operand, indices, mask,
                     broadcast(
                         arith::ConstantOp::create(b, b.getZeroAttr(elem))))
                     .getResult()
               : vector::LoadOp::create(b, type, operand, indices).getResult();
      map.map(body->getArgument(i), v);
    }
    for (Operation &inner : body->without_terminator()) {
      Operation *clone = b.clone(inner, map);
      clone->getResult(0).setType(
          VectorType::get({lanes}, inner.getResult(0).getType()));
    }
    Value result = map.lookup(body->getTerminator()->getOperand(0));
    if (mask)
      vector::MaskedStoreOp::create(b, operands.back(), indices, mask, result);
    else
      vector::StoreOp::create(b, result, operands.back(), indices);
  }

  ImplicitLocOpBuilder b;
  linalg::GenericOp op;
  ArrayRef<Access> accesses;
  int64_t lanes;
  int64_t rank;
};

struct AttnVectorizeRowsPass
    : public mlir::attn::impl::AttnVectorizeRowsPassBase<
          AttnVectorizeRowsPass> {
  using AttnVectorizeRowsPassBase::AttnVectorizeRowsPassBase;

  void runOnOperation() override {
    if (vectorWidth < 1) {
      getOperation().emitError()
          << "attn-vectorize-rows: vector-width must be positive, found "
          << static_cast<int64_t>(vectorWidth);
      return signalPassFailure();
    }
    SmallVector<linalg::GenericOp> ops;
    getOperation().walk([&](linalg::GenericOp op) { ops.push_back(op); });
    for (linalg::GenericOp op : ops)
      if (std::optional<SmallVector<Access>> accesses = rowAccesses(op))
        RowVectorizer(op, *accesses, vectorWidth).run();
  }
};

} // namespace
