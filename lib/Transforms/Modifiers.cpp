//===- Modifiers.cpp - Score and mask modifiers, emitted in a kernel ------===//
#include "lib/Transforms/Modifiers.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::attn;

namespace {
int64_t lanesOf(Value v) {
  auto vector = dyn_cast<VectorType>(v.getType());
  return vector ? vector.getNumElements() : 0;
}
} // namespace

Value ModifierEmitter::score(Value score, ArrayRef<Value> indices,
                             Value *derivative, const ReadsAhead *reads) {
  SmallVector<Value> arguments = {score};
  for (Value index : indices)
    arguments.push_back(asIndex(index));
  return emit(*scoreMod, arguments, lanesOf(score), derivative,
              /*seed=*/nullptr, /*seedIndices=*/nullptr, reads);
}

Value ModifierEmitter::keep(ArrayRef<Value> indices, int64_t lanes,
                            Value promised, const ReadsAhead *reads) {
  SmallVector<Value> arguments;
  for (Value index : indices)
    arguments.push_back(asIndex(index));
  Value kept = emit(*maskMod, arguments, lanes, /*derivative=*/nullptr,
                    /*seed=*/nullptr, /*seedIndices=*/nullptr, reads);
  if (!promised)
    return kept;
  if (auto vector = dyn_cast<VectorType>(kept.getType()))
    promised = vector::BroadcastOp::create(b, loc, vector, promised);
  return arith::OrIOp::create(b, loc, kept, promised);
}

const ModifierEmitter::PrefetchSlice &
ModifierEmitter::prefetchSliceOf(Region &region) {
  std::unique_ptr<PrefetchSlice> &slot = prefetchSlices[&region];
  if (slot)
    return *slot;
  slot = std::make_unique<PrefetchSlice>();
  // The reads to prefetch: those that vary with q_idx (the others are the
  // same at every row, and cached) and whose indices do not depend on the
  // score (a score_mod's first argument, not known here).
  Block &block = region.front();
  unsigned first = block.getNumArguments() - 4; // (b, h, q_idx, kv_idx)
  DenseSet<Value> byRow = {block.getArgument(first + 2)}, byScore;
  if (first == 1)
    byScore.insert(block.getArgument(0));
  for (Operation &op : block.without_terminator()) {
    auto any = [&](const DenseSet<Value> &set) {
      return llvm::any_of(op.getOperands(),
                          [&](Value v) { return set.contains(v); });
    };
    bool row = any(byRow), score = any(byScore);
    if (row)
      byRow.insert(op.result_begin(), op.result_end());
    if (score)
      byScore.insert(op.result_begin(), op.result_end());
    if (isa<CapturedOp>(op) && row && !score)
      slot->targets.insert(&op);
  }
  // What their indices need, emitted as the region emits it (reads
  // included: real loads at clamped indices, never a placeholder that an
  // integer division could take); nothing else.
  SmallVector<Value> worklist;
  for (Operation *target : slot->targets)
    llvm::append_range(worklist, target->getOperands());
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val().getDefiningOp();
    if (def && def->getBlock() == &block && slot->needed.insert(def).second)
      llvm::append_range(worklist, def->getOperands());
  }
  return *slot;
}

void ModifierEmitter::prefetchReads(ArrayRef<Value> indices, int64_t lanes,
                                    int64_t span) {
  for (Region *region : {scoreMod, maskMod}) {
    if (!region)
      continue;
    const PrefetchSlice &slice = prefetchSliceOf(*region);
    if (slice.targets.empty())
      continue;
    Block &block = region->front();
    unsigned first = block.getNumArguments() - 4; // (b, h, q_idx, kv_idx)
    IRMapping mapping;
    for (auto [n, index] : llvm::enumerate(indices))
      mapping.map(block.getArgument(first + n), asIndex(index));
    Narrowing narrowing{rangesOf(*region), DenseMap<Value, Value>()};
    for (Operation &op : block.without_terminator()) {
      bool isTarget = slice.targets.contains(&op),
           isNeeded = slice.needed.contains(&op);
      if (!isTarget && !isNeeded)
        continue;
      SmallVector<Value> operands;
      bool varies = false;
      for (Value operand : op.getOperands()) {
        operands.push_back(mapping.lookup(operand));
        varies |= isa<VectorType>(operands.back().getType());
      }
      auto captured = dyn_cast<CapturedOp>(op);
      if (isTarget && varies)
        prefetchRun(captured.getCapture(), operands, span);
      if (!isNeeded)
        continue;
      if (captured)
        mapping.map(captured.getResult(),
                    read(captured.getCapture(), operands, captured.getType(),
                         varies ? lanes : 0));
      else
        emitOp(op, operands, lanes, mapping, &narrowing);
    }
  }
}

void ModifierEmitter::prefetchRun(unsigned number, ArrayRef<Value> indices,
                                  int64_t span) {
  // Only a read whose last index alone varies across the lanes (a run of a
  // row, readRun's): the lines of `span` elements from the first lane's
  // element, each index clamped as the read clamps it.
  Value capture = captures[number];
  unsigned last = indices.size() - 1;
  if (!isa<VectorType>(indices[last].getType()) ||
      llvm::any_of(indices.drop_back(),
                   [](Value v) { return isa<VectorType>(v.getType()); }))
    return;
  SmallVector<Value> row;
  for (auto [dim, index] : llvm::enumerate(indices.drop_back()))
    row.push_back(clampInto(capture, dim, index, 0));
  Value first =
      vector::ExtractOp::create(b, loc, indices[last], ArrayRef<int64_t>{0});
  prefetchRunLines(b, loc, capture, row, first, span,
                   [&](Value key) { return clampInto(capture, last, key, 0); });
}

ModifierEmitter::ReadsAhead ModifierEmitter::readsBy(unsigned fromEnd,
                                                     Value indices) {
  ReadsAhead reads;
  int64_t lanes = lanesOf(indices);
  for (Region *region : {scoreMod, maskMod}) {
    if (!region)
      continue;
    // The values that depend on that index argument (kv_idx, the last, or
    // q_idx) and on nothing else of the position (constants included):
    // computed once per vector of indices if a read of a captured tensor
    // varies among them.
    Block &block = region->front();
    BlockArgument index = block.getArgument(block.getNumArguments() - fromEnd);
    DenseSet<Value> indexOnly = {index}, byIndex = {index};
    SmallVector<Operation *> ops;
    bool anyRead = false;
    for (Operation &op : block.without_terminator()) {
      if (op.getNumRegions() != 0 ||
          !llvm::all_of(op.getOperands(),
                        [&](Value v) { return indexOnly.contains(v); }))
        continue;
      indexOnly.insert(op.result_begin(), op.result_end());
      ops.push_back(&op);
      if (llvm::none_of(op.getOperands(),
                        [&](Value v) { return byIndex.contains(v); }))
        continue;
      byIndex.insert(op.result_begin(), op.result_end());
      anyRead |= isa<CapturedOp>(op);
    }
    if (!anyRead)
      continue;
    IRMapping mapping;
    mapping.map(index, asIndex(indices));
    for (Operation *op : ops) {
      SmallVector<Value> operands;
      for (Value operand : op->getOperands())
        operands.push_back(mapping.lookup(operand));
      if (auto captured = dyn_cast<CapturedOp>(op)) {
        bool varies = llvm::any_of(
            operands, [](Value v) { return isa<VectorType>(v.getType()); });
        Value element = read(captured.getCapture(), operands,
                             captured.getType(), varies ? lanes : 0);
        mapping.map(captured.getResult(), element);
        reads[captured.getResult()] = element;
        continue;
      }
      emitOp(*op, operands, lanes, mapping);
    }
  }
  return reads;
}

void ModifierEmitter::captureReads(
    Value score, ArrayRef<Value> indices, function_ref<bool(unsigned)> wanted,
    function_ref<void(const CaptureRead &)> use) {
  SmallVector<Value> arguments = {score};
  for (Value index : indices)
    arguments.push_back(asIndex(index));
  SmallVector<CapturedOp> reads;
  for (Operation &op : scoreMod->front().without_terminator())
    if (auto captured = dyn_cast<CapturedOp>(op))
      if (isa<FloatType>(captured.getType()) && wanted(captured.getCapture()))
        reads.push_back(captured);
  for (CapturedOp captured : reads) {
    CaptureRead read;
    read.capture = captured.getCapture();
    emit(*scoreMod, arguments, lanesOf(score), &read.derivative, captured,
         &read.indices);
    use(read);
  }
}

Value ModifierEmitter::asIndex(Value v) {
  Type index = b.getIndexType();
  if (auto vector = dyn_cast<VectorType>(v.getType()))
    index = VectorType::get(vector.getShape(), index);
  if (v.getType() == index)
    return v;
  return arith::IndexCastOp::create(b, loc, index, v);
}

Value ModifierEmitter::floatConstant(Type type, double value) {
  TypedAttr attr = b.getFloatAttr(getElementTypeOrSelf(type), value);
  if (auto vector = dyn_cast<VectorType>(type))
    attr = SplatElementsAttr::get(vector, attr);
  return arith::ConstantOp::create(b, loc, type, attr);
}

Value ModifierEmitter::broadcast(Value v, int64_t lanes) {
  if (isa<VectorType>(v.getType()))
    return v;
  return vector::BroadcastOp::create(b, loc,
                                     VectorType::get({lanes}, v.getType()), v);
}

const ModifierEmitter::IndexRanges &ModifierEmitter::rangesOf(Region &region) {
  std::unique_ptr<IndexRanges> &known = ranges[&region];
  if (known)
    return *known;
  known = std::make_unique<IndexRanges>();
  IndexRanges &found = *known;
  Block &block = region.front();
  // The last four arguments are (b, h, q_idx, kv_idx): global indices, each
  // below 2³¹ (the runtime refuses larger sizes).
  ConstantIntRanges index = ConstantIntRanges::fromSigned(
      APInt::getZero(64), APInt(64, std::numeric_limits<int32_t>::max()));
  for (BlockArgument argument : block.getArguments().take_back(4))
    found.try_emplace(argument, index);
  for (Operation &op : block.without_terminator()) {
    auto infer = dyn_cast<InferIntRangeInterface>(op);
    if (!infer || !llvm::all_of(op.getOperandTypes(),
                                [](Type type) { return type.isIntOrIndex(); }))
      continue;
    SmallVector<ConstantIntRanges> operands;
    for (Value operand : op.getOperands()) {
      auto known = found.find(operand);
      operands.push_back(
          known != found.end()
              ? known->second
              : ConstantIntRanges::maxRange(
                    ConstantIntRanges::getStorageBitwidth(operand.getType())));
    }
    infer.inferResultRanges(operands,
                            [&](Value result, const ConstantIntRanges &range) {
                              found.insert_or_assign(result, range);
                            });
  }
  return found;
}

Operation *ModifierEmitter::tryNarrow(Operation &op, ArrayRef<Value> operands,
                                      int64_t lanes, IRMapping &mapping,
                                      Narrowing &narrowing) {
  // Index and i64 values (a traced modifier's integers) whose range lies in
  // i32's.
  auto isWide = [](Value v) {
    return v.getType().isIndex() || v.getType().isInteger(64);
  };
  auto fits = [&](Value v) {
    auto range = narrowing.ranges.find(v);
    return range != narrowing.ranges.end() &&
           range->second.smin().getSExtValue() >=
               std::numeric_limits<int32_t>::min() &&
           range->second.smax().getSExtValue() <=
               std::numeric_limits<int32_t>::max();
  };
  auto i32Lanes = VectorType::get({lanes}, b.getI32Type());
  // A wide operand's lanes as i32: made so already, or an extension of i32
  // lanes (a kernel's indices), else truncated (it fits).
  auto narrowOf = [&](Value regionValue, Value emitted) -> Value {
    if (Value known = narrowing.narrow.lookup(regionValue))
      return known;
    Operation *def = emitted.getDefiningOp();
    if (isa_and_nonnull<arith::IndexCastOp, arith::ExtSIOp>(def) &&
        getElementTypeOrSelf(def->getOperand(0).getType()).isInteger(32))
      return broadcast(def->getOperand(0), lanes);
    bool onLanes = isa<VectorType>(emitted.getType());
    Type i32 = onLanes ? Type(i32Lanes) : b.getI32Type();
    Value narrow =
        getElementTypeOrSelf(emitted.getType()).isIndex()
            ? arith::IndexCastOp::create(b, loc, i32, emitted).getResult()
            : arith::TruncIOp::create(b, loc, i32, emitted).getResult();
    return broadcast(narrow, lanes);
  };
  // i32 lanes `narrow` standing for the wide region value `result`: the
  // wide lanes for what takes them (a read's indices; unused, they fold
  // away).
  auto widened = [&](Value result, Value narrow) -> Value {
    narrowing.narrow[result] = narrow;
    auto wideLanes = VectorType::get({lanes}, result.getType());
    Value wide =
        result.getType().isIndex()
            ? arith::IndexCastOp::create(b, loc, wideLanes, narrow).getResult()
            : arith::ExtSIOp::create(b, loc, wideLanes, narrow).getResult();
    mapping.map(result, wide);
    return wide;
  };
  // A cast between index and i64 or i32 of a value that fits: the same
  // lanes; an integer that fits converted to float: from i32 lanes.
  if (auto cast = dyn_cast<arith::IndexCastOp>(op)) {
    if (!fits(cast.getIn()))
      return nullptr;
    Value narrow = narrowOf(cast.getIn(), operands[0]);
    if (cast.getType().isInteger(32)) {
      mapping.map(cast.getResult(), narrow);
      return narrow.getDefiningOp() ? narrow.getDefiningOp() : nullptr;
    }
    return widened(cast.getResult(), narrow).getDefiningOp();
  }
  if (auto convert = dyn_cast<arith::SIToFPOp>(op)) {
    if (!isWide(convert.getIn()) || !fits(convert.getIn()))
      return nullptr;
    auto converted = arith::SIToFPOp::create(
        b, loc, VectorType::get({lanes}, convert.getType()),
        narrowOf(convert.getIn(), operands[0]));
    mapping.map(convert.getResult(), converted.getResult());
    return converted;
  }
  if (!isa<arith::AddIOp, arith::SubIOp, arith::MulIOp, arith::DivSIOp,
           arith::FloorDivSIOp, arith::CeilDivSIOp, arith::RemSIOp,
           arith::MinSIOp, arith::MaxSIOp, arith::SelectOp, arith::CmpIOp>(op))
    return nullptr;
  if (llvm::none_of(op.getOperands(), isWide) ||
      !llvm::all_of(op.getOperands(),
                    [&](Value v) { return !isWide(v) || fits(v); }) ||
      !llvm::all_of(op.getResults(),
                    [&](Value v) { return !isWide(v) || fits(v); }))
    return nullptr;
  IRMapping lanesMapping;
  for (auto [operand, value] : llvm::zip(op.getOperands(), operands))
    lanesMapping.map(operand, isWide(operand) ? narrowOf(operand, value)
                                              : broadcast(value, lanes));
  Operation *narrowOp = b.clone(op, lanesMapping);
  for (auto [result, narrowResult] :
       llvm::zip(op.getResults(), narrowOp->getResults())) {
    if (!isWide(result)) {
      narrowResult.setType(VectorType::get({lanes}, result.getType()));
      mapping.map(result, narrowResult);
      continue;
    }
    narrowResult.setType(i32Lanes);
    widened(result, narrowResult);
  }
  return narrowOp;
}

Operation *ModifierEmitter::emitOp(Operation &op, ArrayRef<Value> operands,
                                   int64_t lanes, IRMapping &mapping,
                                   Narrowing *narrowing) {
  if (!llvm::any_of(operands,
                    [](Value v) { return isa<VectorType>(v.getType()); }))
    return b.clone(op, mapping);
  if (narrowing)
    if (Operation *narrow = tryNarrow(op, operands, lanes, mapping, *narrowing))
      return narrow;
  // The op on vectors: its scalar operands broadcast, its results vectors
  // of the same element types.
  IRMapping lanesMapping;
  for (auto [operand, value] : llvm::zip(op.getOperands(), operands))
    lanesMapping.map(operand, broadcast(value, lanes));
  Operation *vectorOp = b.clone(op, lanesMapping);
  for (auto [result, vectorResult] :
       llvm::zip(op.getResults(), vectorOp->getResults())) {
    vectorResult.setType(VectorType::get({lanes}, result.getType()));
    mapping.map(result, vectorResult);
  }
  return vectorOp;
}

Value ModifierEmitter::emit(Region &region, ArrayRef<Value> arguments,
                            int64_t lanes, Value *derivative, Operation *seed,
                            SmallVectorImpl<Value> *seedIndices,
                            const ReadsAhead *reads) {
  Block &block = region.front();
  IRMapping mapping;
  for (auto [argument, value] : llvm::zip(block.getArguments(), arguments))
    mapping.map(argument, value);
  Narrowing narrowing{rangesOf(region), DenseMap<Value, Value>()};
  // With `derivative`: each float value's derivative in the score (the
  // first argument, whose own is 1) or in the element `seed` reads; a value
  // absent from it has 0.
  DenseMap<Value, Value> derivatives;
  if (derivative && !seed)
    derivatives[block.getArgument(0)] =
        floatConstant(arguments[0].getType(), 1.0);
  auto differentiate = [&](Operation &op, Operation *emitted) {
    SmallVector<Value> operandDerivatives;
    bool any = false;
    bool onLanes = isa<VectorType>(emitted->getResult(0).getType());
    for (Value operand : op.getOperands()) {
      Value d = derivatives.lookup(operand);
      // A seed read by one scalar load has a scalar derivative, which an op
      // on lanes takes on every lane.
      if (d && onLanes)
        d = broadcast(d, lanes);
      operandDerivatives.push_back(d);
      any |= static_cast<bool>(d);
    }
    if (!any || scoreDerivativeOf(&op) != ScoreDerivative::Generated)
      return;
    derivatives[op.getResult(0)] = derivativeOf(
        op, emitted->getOperands(), emitted->getResult(0), operandDerivatives);
  };
  for (Operation &op : block.without_terminator()) {
    SmallVector<Value> operands;
    bool varies = false;
    for (Value operand : op.getOperands()) {
      operands.push_back(mapping.lookup(operand));
      varies |= isa<VectorType>(operands.back().getType());
    }
    if (auto captured = dyn_cast<CapturedOp>(op)) {
      bool seeded = &op == seed;
      // Read ahead (keyReads, queryReads), unless the derivative in
      // this read's element needs its clamped indices.
      if (Value ahead = reads && !seeded ? reads->lookup(captured.getResult())
                                         : Value()) {
        mapping.map(captured.getResult(), ahead);
        continue;
      }
      Value element = read(captured.getCapture(), operands, captured.getType(),
                           varies ? lanes : 0, seeded ? seedIndices : nullptr);
      mapping.map(captured.getResult(), element);
      if (seeded)
        derivatives[captured.getResult()] =
            floatConstant(element.getType(), 1.0);
      continue;
    }
    Operation *emitted = emitOp(op, operands, lanes, mapping, &narrowing);
    if (derivative)
      differentiate(op, emitted);
  }
  Value yielded = mapping.lookup(block.getTerminator()->getOperand(0));
  if (derivative) {
    // A score_mod that ignores the score still gives one derivative per
    // lane of the score.
    *derivative = derivatives.lookup(block.getTerminator()->getOperand(0));
    if (!*derivative)
      *derivative = floatConstant(arguments[0].getType(), 0.0);
    else if (lanes > 0)
      *derivative = broadcast(*derivative, lanes);
  }
  // A mask_mod that depends on no lane's index still gives every lane.
  if (lanes > 0 && !isa<VectorType>(yielded.getType()))
    yielded = broadcast(yielded, lanes);
  return yielded;
}

Value ModifierEmitter::clampInto(Value capture, unsigned dim, Value index,
                                 int64_t lanes) {
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value lo = arith::ConstantIndexOp::create(b, loc, 0);
  Value hi = arith::SubIOp::create(
      b, loc, memref::DimOp::create(b, loc, capture, dim), one);
  if (isa<VectorType>(index.getType())) {
    lo = broadcast(lo, lanes);
    hi = broadcast(hi, lanes);
  }
  return arith::MinSIOp::create(b, loc,
                                arith::MaxSIOp::create(b, loc, index, lo), hi);
}

Value ModifierEmitter::read(unsigned number, ArrayRef<Value> indices,
                            Type element, int64_t lanes,
                            SmallVectorImpl<Value> *clampedOut) {
  Value capture = captures[number];
  // Each index clamped into [0, size − 1]: a modifier never reads outside
  // its capture (docs/spec.md). Where the last index alone varies across
  // the lanes (a row of the capture read by the keys), readAlongRow clamps
  // it where it gathers.
  unsigned last = indices.size() - 1;
  bool alongRow =
      lanes > 0 && !clampedOut && isa<VectorType>(indices[last].getType()) &&
      llvm::all_of(indices.drop_back(),
                   [](Value v) { return !isa<VectorType>(v.getType()); });
  SmallVector<Value> clamped;
  for (auto [dim, index] : llvm::enumerate(indices))
    clamped.push_back(alongRow && dim == last
                          ? Value()
                          : clampInto(capture, dim, index, lanes));
  if (clampedOut)
    clampedOut->assign(clamped.begin(), clamped.end());
  if (lanes == 0)
    return memref::LoadOp::create(b, loc, capture, clamped);
  auto resultType = VectorType::get({lanes}, element);
  if (!alongRow)
    return gather(capture, clamped, resultType);
  return readAlongRow(capture, clamped, indices[last], resultType);
}

Value ModifierEmitter::gather(Value capture, ArrayRef<Value> clamped,
                              VectorType resultType) {
  // From the capture seen as one dimension.
  int64_t lanes = resultType.getNumElements();
  FlatElements elements = flatElements(b, loc, capture, clamped, lanes);
  Value allLanes = vector::ConstantMaskOp::create(
      b, loc, VectorType::get({lanes}, b.getI1Type()),
      ArrayRef<int64_t>{lanes});
  Value passThrough =
      arith::ConstantOp::create(b, loc, resultType, b.getZeroAttr(resultType));
  return vector::GatherOp::create(
      b, loc, resultType, elements.memref,
      ValueRange{arith::ConstantIndexOp::create(b, loc, 0)}, elements.offsets,
      allLanes, passThrough);
}

Value ModifierEmitter::readAlongRow(Value capture, ArrayRef<Value> clamped,
                                    Value index, VectorType resultType) {
  // A run of consecutive elements inside a contiguous row (`ids[kv_idx]`,
  // `bias[h, q_idx, kv_idx]`, a relative bias's interior) is one vector
  // load instead of a gather (readRun). 16 lanes of 32 bits are AVX-512's
  // (CpuTarget::vectorWidth): there a short contiguous row (a
  // relative-position bias table's, read by a bucket of kv_idx − q_idx)
  // is two loads and a permute of two registers (vpermi2ps) instead,
  // where the row holds at most 32 (readShortRow).
  int64_t lanes = resultType.getNumElements();
  unsigned last = clamped.size() - 1;
  auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, capture);
  Value rowSize = metadata.getSizes()[last];
  Value contiguous = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::eq, metadata.getStrides()[last],
      arith::ConstantIndexOp::create(b, loc, 1));
  SmallVector<Value> rowStart(clamped);
  rowStart[last] = arith::ConstantIndexOp::create(b, loc, 0);
  auto readRun = [&]() {
    return this->readRun(capture, clamped, rowStart, index, rowSize, contiguous,
                         resultType);
  };
  if (lanes != 16 || resultType.getElementTypeBitWidth() != 32)
    return readRun();
  Value shortRow = arith::AndIOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ule, rowSize,
                            arith::ConstantIndexOp::create(b, loc, 2 * lanes)),
      contiguous);
  auto ifShort = scf::IfOp::create(b, loc, TypeRange{resultType}, shortRow,
                                   /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifShort.elseBlock());
  scf::YieldOp::create(b, loc, readRun());
  b.setInsertionPointToStart(ifShort.thenBlock());
  scf::YieldOp::create(
      b, loc, readShortRow(capture, rowStart, index, rowSize, resultType));
  return ifShort.getResult(0);
}

Value ModifierEmitter::readRun(Value capture, ArrayRef<Value> clamped,
                               ArrayRef<Value> rowStart, Value index,
                               Value rowSize, Value contiguous,
                               VectorType resultType) {
  // Lane l reads element first + l of a contiguous row, all inside it:
  // checked at run time (one compare of the lanes with their first plus
  // 0, 1, ...), else a gather.
  int64_t lanes = resultType.getNumElements();
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value first = vector::ExtractOp::create(b, loc, index, ArrayRef<int64_t>{0});
  auto indexLanes = VectorType::get({lanes}, b.getIndexType());
  Value iota = arith::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(indexLanes, llvm::to_vector(llvm::map_range(
                                             llvm::seq<int64_t>(0, lanes),
                                             [&](int64_t l) -> Attribute {
                                               return b.getIndexAttr(l);
                                             }))));
  Value consecutive = vector::ReductionOp::create(
      b, loc, vector::CombiningKind::AND,
      arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::eq, index,
          arith::AddIOp::create(b, loc, broadcast(first, lanes), iota)));
  Value inside = arith::AndIOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, first, zero),
      arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::sle,
          arith::AddIOp::create(b, loc, first,
                                arith::ConstantIndexOp::create(b, loc, lanes)),
          rowSize));
  auto ifRun = scf::IfOp::create(
      b, loc, TypeRange{resultType},
      arith::AndIOp::create(b, loc, consecutive,
                            arith::AndIOp::create(b, loc, inside, contiguous)),
      /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifRun.thenBlock());
  FlatElements row = flatElements(b, loc, capture, rowStart, /*lanes=*/0);
  Value at = arith::AddIOp::create(b, loc, row.offsets, first);
  if (runPrefetch > 0)
    memref::PrefetchOp::create(
        b, loc, row.memref,
        ValueRange{arith::AddIOp::create(
            b, loc, at, arith::ConstantIndexOp::create(b, loc, runPrefetch))},
        /*isWrite=*/false, /*localityHint=*/3, /*isDataCache=*/true);
  scf::YieldOp::create(
      b, loc,
      vector::LoadOp::create(b, loc, resultType, row.memref, ValueRange{at})
          .getResult());
  b.setInsertionPointToStart(ifRun.elseBlock());
  SmallVector<Value> gathered(clamped);
  gathered.back() = clampInto(capture, clamped.size() - 1, index, lanes);
  scf::YieldOp::create(b, loc, gather(capture, gathered, resultType));
  return ifRun.getResult(0);
}

Value ModifierEmitter::readShortRow(Value capture, ArrayRef<Value> rowStart,
                                    Value index, Value rowSize,
                                    VectorType resultType) {
  // The row's elements 0..15 and 16..31 (where it has them) by masked
  // loads, and lane l's element picked from the two registers by its index
  // clamped into the row.
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  auto cst = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  FlatElements row = flatElements(b, loc, capture, rowStart, /*lanes=*/0);
  auto maskType = VectorType::get({16}, b.getI1Type());
  Value passThrough =
      arith::ConstantOp::create(b, loc, resultType, b.getZeroAttr(resultType));
  Value low = vector::MaskedLoadOp::create(
      b, loc, resultType, row.memref, ValueRange{row.offsets},
      vector::CreateMaskOp::create(b, loc, maskType, ValueRange{rowSize}),
      passThrough);
  // Elements 16..31 where the row has them (else none, from the row's start).
  Value hasHigh = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt,
                                        rowSize, cst(16));
  Value highStart = arith::SelectOp::create(
      b, loc, hasHigh, arith::AddIOp::create(b, loc, row.offsets, cst(16)),
      row.offsets);
  Value high = vector::MaskedLoadOp::create(
      b, loc, resultType, row.memref, ValueRange{highStart},
      vector::CreateMaskOp::create(
          b, loc, maskType,
          ValueRange{arith::SubIOp::create(
              b, loc, arith::MaxSIOp::create(b, loc, rowSize, cst(16)),
              cst(16))}),
      passThrough);
  // The index clamped into [0, size − 1] on i32 lanes (the row is short):
  // from the modifier's i32 lanes where it has them (tryNarrow), else from
  // the index clamped on index lanes.
  auto i32Lanes = VectorType::get({16}, b.getI32Type());
  Value which;
  if (auto cast = index.getDefiningOp<arith::IndexCastOp>();
      cast && cast.getIn().getType() == i32Lanes) {
    Value hi = vector::BroadcastOp::create(
        b, loc, i32Lanes,
        arith::IndexCastOp::create(
            b, loc, b.getI32Type(),
            arith::SubIOp::create(b, loc, rowSize, one)));
    Value lo =
        arith::ConstantOp::create(b, loc, i32Lanes, b.getZeroAttr(i32Lanes));
    which = arith::MinSIOp::create(
        b, loc, arith::MaxSIOp::create(b, loc, cast.getIn(), lo), hi);
  } else {
    which = arith::IndexCastOp::create(
        b, loc, i32Lanes,
        clampInto(capture, rowStart.size() - 1, index, /*lanes=*/16));
  }
  StringRef permute = isa<FloatType>(resultType.getElementType())
                          ? "llvm.x86.avx512.vpermi2var.ps.512"
                          : "llvm.x86.avx512.vpermi2var.d.512";
  return LLVM::CallIntrinsicOp::create(b, loc, resultType,
                                       b.getStringAttr(permute),
                                       ValueRange{low, which, high})
      .getResult(0);
}

FlatElements mlir::attn::flatElements(OpBuilder &b, Location loc, Value memref,
                                      ArrayRef<Value> indices, int64_t lanes) {
  auto indexVector = VectorType::get({lanes}, b.getIndexType());
  auto lanesOf = [&](Value v) -> Value {
    if (lanes == 0 || isa<VectorType>(v.getType()))
      return v;
    return vector::BroadcastOp::create(b, loc, indexVector, v);
  };
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, memref);
  Value offsets;
  Value span = one;
  for (auto [dim, index] : llvm::enumerate(indices)) {
    Value stride = metadata.getStrides()[dim];
    Value term = arith::MulIOp::create(b, loc, lanesOf(index), lanesOf(stride));
    offsets = offsets ? arith::AddIOp::create(b, loc, offsets, term).getResult()
                      : term;
    Value extent = arith::SubIOp::create(b, loc, metadata.getSizes()[dim], one);
    span = arith::AddIOp::create(b, loc, span,
                                 arith::MulIOp::create(b, loc, extent, stride));
  }
  auto flatType = MemRefType::get(
      {ShapedType::kDynamic},
      cast<MemRefType>(memref.getType()).getElementType(),
      StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, {1}));
  Value flat = memref::ReinterpretCastOp::create(
      b, loc, flatType, metadata.getBaseBuffer(),
      OpFoldResult(metadata.getOffset()), ArrayRef<OpFoldResult>{span},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
  return {flat, offsets};
}

Value ModifierEmitter::derivativeOf(Operation &op, ValueRange operands,
                                    Value result,
                                    ArrayRef<Value> operandDerivatives) {
  Type type = result.getType();
  auto constant = [&](double value) { return floatConstant(type, value); };
  // Operand i (the emitted op's: vectors where the op is on vectors) and
  // its derivative (null: 0; a vector wherever the score is one).
  auto operand = [&](unsigned i) { return operands[i]; };
  auto d = [&](unsigned i) { return operandDerivatives[i]; };
  // Arithmetic on derivatives, where null is 0 (so that the terms of
  // operands that do not depend on the score are not emitted at all).
  auto add = [&](Value x, Value y) -> Value {
    if (!x || !y)
      return x ? x : y;
    return arith::AddFOp::create(b, loc, x, y);
  };
  auto mul = [&](Value x, Value y) -> Value {
    if (!x || !y)
      return Value();
    return arith::MulFOp::create(b, loc, x, y);
  };
  auto div = [&](Value x, Value y) -> Value {
    if (!x)
      return Value();
    return arith::DivFOp::create(b, loc, x, y);
  };
  auto neg = [&](Value x) -> Value {
    return x ? arith::NegFOp::create(b, loc, x).getResult() : Value();
  };
  auto orZero = [&](Value x) { return x ? x : constant(0.0); };
  // max/min and select: the derivative of the operand that is taken.
  auto choose = [&](Value condition, Value x, Value y) -> Value {
    if (!x && !y)
      return Value();
    return arith::SelectOp::create(b, loc, condition, orZero(x), orZero(y));
  };
  auto pick = [&](arith::CmpFPredicate predicate) -> Value {
    Value first =
        arith::CmpFOp::create(b, loc, predicate, operand(0), operand(1));
    return choose(first, d(0), d(1));
  };
  Value x = operands.empty() ? Value() : operand(0);
  Value derivative =
      llvm::TypeSwitch<Operation *, Value>(&op)
          .Case([&](arith::AddFOp) { return add(d(0), d(1)); })
          .Case([&](arith::SubFOp) { return add(d(0), neg(d(1))); })
          .Case([&](arith::MulFOp) {
            return add(mul(d(0), operand(1)), mul(x, d(1)));
          })
          .Case([&](arith::DivFOp) {
            // (x/y)' = (x' − (x/y)·y') / y.
            return div(add(d(0), neg(mul(result, d(1)))), operand(1));
          })
          .Case([&](arith::NegFOp) { return neg(d(0)); })
          .Case([&](arith::SelectOp) { return choose(x, d(1), d(2)); })
          .Case<arith::MaximumFOp, arith::MaxNumFOp>(
              [&](auto) { return pick(arith::CmpFPredicate::OGE); })
          .Case<arith::MinimumFOp, arith::MinNumFOp>(
              [&](auto) { return pick(arith::CmpFPredicate::OLE); })
          .Case([&](arith::ExtFOp) {
            return arith::ExtFOp::create(b, loc, type, d(0)).getResult();
          })
          .Case([&](arith::TruncFOp) {
            return arith::TruncFOp::create(b, loc, type, d(0)).getResult();
          })
          .Case([&](math::TanhOp) {
            return mul(arith::SubFOp::create(b, loc, constant(1.0),
                                             mul(result, result)),
                       d(0));
          })
          .Case([&](math::ExpOp) { return mul(result, d(0)); })
          .Case([&](math::Exp2Op) {
            return mul(mul(result, constant(M_LN2)), d(0));
          })
          .Case([&](math::ExpM1Op) {
            return mul(add(result, constant(1.0)), d(0));
          })
          .Case([&](math::LogOp) { return div(d(0), x); })
          .Case(
              [&](math::Log2Op) { return div(d(0), mul(x, constant(M_LN2))); })
          .Case([&](math::Log1pOp) { return div(d(0), add(x, constant(1.0))); })
          .Case([&](math::SqrtOp) {
            return div(d(0), mul(constant(2.0), result));
          })
          .Case([&](math::RsqrtOp) {
            // (x^-1/2)' = −x^-1/2 / (2x).
            return neg(div(mul(result, d(0)), mul(constant(2.0), x)));
          })
          .Case([&](math::AbsFOp) {
            Value negative = arith::CmpFOp::create(
                b, loc, arith::CmpFPredicate::OLT, x, constant(0.0));
            return choose(negative, neg(d(0)), d(0));
          })
          .Case([&](math::PowFOp) {
            // (x^y)' = y·x^(y−1)·x' + x^y·ln(x)·y'.
            Value y = operand(1);
            Value base =
                d(0) ? mul(y,
                           math::PowFOp::create(
                               b, loc, x,
                               arith::SubFOp::create(b, loc, y, constant(1.0))))
                     : Value();
            Value exponent =
                d(1) ? mul(result, math::LogOp::create(b, loc, x)) : Value();
            return add(mul(base, d(0)), mul(exponent, d(1)));
          })
          .Case([&](math::FmaOp) {
            return add(add(mul(d(0), operand(1)), mul(x, d(1))), d(2));
          })
          .Case([&](math::SinOp) {
            return mul(math::CosOp::create(b, loc, x), d(0));
          })
          .Case([&](math::CosOp) {
            return neg(mul(math::SinOp::create(b, loc, x), d(0)));
          })
          .Case([&](math::AtanOp) {
            return div(d(0), add(constant(1.0), mul(x, x)));
          })
          .Case([&](math::ErfOp) {
            // 2/√π · exp(−x²).
            Value gauss = math::ExpOp::create(b, loc, neg(mul(x, x)));
            return mul(mul(constant(M_2_SQRTPI), gauss), d(0));
          })
          .Default([&](Operation *) -> Value {
            llvm_unreachable("the backward's verifier admits only the ops "
                             "of scoreDerivativeOf's Generated list");
          });
  return orZero(derivative);
}

bool mlir::attn::readsRowsAlongKeys(Operation *op) {
  for (Region *region : {scoreModOf(op), maskModOf(op)}) {
    if (!region)
      continue;
    Block &block = region->front();
    unsigned count = block.getNumArguments();
    BlockArgument row = block.getArgument(count - 2),
                  key = block.getArgument(count - 1);
    // Values that vary with q_idx; values that are kv_idx plus a term that
    // does not vary with it (through index casts, + and −); values that
    // vary with kv_idx. Results of ops with regions vary with both.
    DenseSet<Value> byRow = {row}, alongKeys = {key}, byKey = {key};
    bool found = false;
    for (Operation &inner : block.without_terminator()) {
      auto any = [&](const DenseSet<Value> &set) {
        return inner.getNumRegions() != 0 ||
               llvm::any_of(inner.getOperands(),
                            [&](Value v) { return set.contains(v); });
      };
      bool rowVaries = any(byRow), keyVaries = any(byKey);
      if (auto captured = dyn_cast<CapturedOp>(inner)) {
        ValueRange indices = captured.getIndices();
        found |= rowVaries && !indices.empty() &&
                 alongKeys.contains(indices.back()) &&
                 llvm::none_of(indices.drop_back(),
                               [&](Value v) { return byKey.contains(v); });
      }
      // kv_idx plus what does not vary with it: first + (1 per key).
      auto alongPlusFixed = [&](Value along, Value fixed) {
        return alongKeys.contains(along) && !byKey.contains(fixed);
      };
      bool along = false;
      if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp>(inner))
        along = alongKeys.contains(inner.getOperand(0));
      else if (isa<arith::AddIOp>(inner))
        along = alongPlusFixed(inner.getOperand(0), inner.getOperand(1)) ||
                alongPlusFixed(inner.getOperand(1), inner.getOperand(0));
      else if (isa<arith::SubIOp>(inner))
        along = alongPlusFixed(inner.getOperand(0), inner.getOperand(1));
      for (Value result : inner.getResults()) {
        if (rowVaries)
          byRow.insert(result);
        if (keyVaries)
          byKey.insert(result);
        if (along)
          alongKeys.insert(result);
      }
    }
    if (found)
      return true;
  }
  return false;
}

SmallVector<int64_t> mlir::attn::runLineOffsets(int64_t elements,
                                                int64_t bytes) {
  constexpr int64_t kLineBytes = 64;
  SmallVector<int64_t> offsets;
  for (int64_t e = 0; e < elements;
       e += std::max<int64_t>(1, kLineBytes / bytes))
    offsets.push_back(e);
  if (elements > 1)
    offsets.push_back(elements - 1);
  return offsets;
}

void mlir::attn::prefetchRunLines(OpBuilder &b, Location loc, Value memref,
                                  ArrayRef<Value> rowIndex, Value first,
                                  int64_t elements,
                                  function_ref<Value(Value)> clampKey) {
  // (a keep mask's i1 elements are bytes)
  int64_t bytes = std::max<int64_t>(
      1, cast<MemRefType>(memref.getType()).getElementTypeBitWidth() / 8);
  SmallVector<Value> at(rowIndex);
  at.push_back(Value());
  for (int64_t offset : runLineOffsets(elements, bytes)) {
    at.back() = clampKey(arith::AddIOp::create(
        b, loc, first, arith::ConstantIndexOp::create(b, loc, offset)));
    memref::PrefetchOp::create(b, loc, memref, at, /*isWrite=*/false,
                               /*localityHint=*/2, /*isDataCache=*/true);
  }
}

std::pair<Value, Value>
mlir::attn::blockTableEntries(OpBuilder &b, Location loc, Operation *op,
                              ValueRange captures, ValueRange origin,
                              Value batch, Value head, Value firstRow,
                              Value count, Value blockStart, Value blockKeys) {
  auto cst = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  auto table = op->getAttrOfType<DenseI64ArrayAttr>(kBlockMaskAttrName);
  Value entries = captures[table[0]];
  auto global = [&](unsigned dim, Value local) -> Value {
    return origin.empty() ? local
                          : arith::AddIOp::create(b, loc, origin[dim], local);
  };
  // An index clamped into dim `dim` of the table (a dim of 1 broadcasts).
  auto clamp = [&](Value index, int64_t dim) -> Value {
    Value size = memref::DimOp::create(b, loc, entries, dim);
    Value last = arith::SubIOp::create(b, loc, size, cst(1));
    return arith::MaxSIOp::create(
        b, loc, arith::MinSIOp::create(b, loc, index, last), cst(0));
  };
  auto blocks = [&](Value first, Value n, int64_t blockSize, int64_t dim) {
    Value lastIndex = arith::SubIOp::create(
        b, loc, arith::AddIOp::create(b, loc, first, n), cst(1));
    Value from = arith::DivUIOp::create(b, loc, first, cst(blockSize));
    Value to = arith::DivUIOp::create(b, loc, lastIndex, cst(blockSize));
    return std::make_pair(
        clamp(from, dim),
        arith::AddIOp::create(b, loc, clamp(to, dim), cst(1)));
  };
  Value tb = clamp(global(0, batch), 0), th = clamp(global(1, head), 1);
  auto [rowFrom, rowTo] = blocks(global(2, firstRow), count, table[1], 2);
  std::pair<Value, Value> keyBlocks =
      blocks(global(3, blockStart), blockKeys, table[2], 3);
  Value zero = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0));
  Value two = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(2));
  Value no = arith::ConstantOp::create(b, loc, b.getBoolAttr(false));
  Value yes = arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
  // (some entry kept, every entry full) over the covered entries.
  auto rows = scf::ForOp::create(
      b, loc, rowFrom, rowTo, cst(1), ValueRange{no, yes},
      [&](OpBuilder &rb, Location loc, Value qb, ValueRange rowState) {
        auto keysLoop = scf::ForOp::create(
            rb, loc, keyBlocks.first, keyBlocks.second, cst(1), rowState,
            [&](OpBuilder &kb, Location loc, Value kblock, ValueRange state) {
              Value entry = memref::LoadOp::create(
                  kb, loc, entries, ValueRange{tb, th, qb, kblock});
              Value kept = arith::CmpIOp::create(
                  kb, loc, arith::CmpIPredicate::ne, entry, zero);
              Value full = arith::CmpIOp::create(
                  kb, loc, arith::CmpIPredicate::eq, entry, two);
              scf::YieldOp::create(
                  kb, loc,
                  ValueRange{arith::OrIOp::create(kb, loc, state[0], kept),
                             arith::AndIOp::create(kb, loc, state[1], full)});
            });
        scf::YieldOp::create(rb, loc, keysLoop.getResults());
      });
  return {rows.getResult(0), rows.getResult(1)};
}
