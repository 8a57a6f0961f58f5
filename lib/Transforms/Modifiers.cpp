//===- Modifiers.cpp - Score and mask modifiers, emitted in a kernel ------===//
#include "lib/Transforms/Modifiers.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::attn;

namespace {
int64_t lanesOf(Value v) {
  auto vector = dyn_cast<VectorType>(v.getType());
  return vector ? vector.getNumElements() : 0;
}
} // namespace

Value ModifierEmitter::score(Value score, ArrayRef<Value> indices) {
  SmallVector<Value> arguments = {score};
  for (Value index : indices)
    arguments.push_back(asIndex(index));
  return emit(*scoreMod, arguments, lanesOf(score));
}

Value ModifierEmitter::keep(ArrayRef<Value> indices, int64_t lanes) {
  SmallVector<Value> arguments;
  for (Value index : indices)
    arguments.push_back(asIndex(index));
  return emit(*maskMod, arguments, lanes);
}

Value ModifierEmitter::asIndex(Value v) {
  Type index = b.getIndexType();
  if (auto vector = dyn_cast<VectorType>(v.getType()))
    index = VectorType::get(vector.getShape(), index);
  if (v.getType() == index)
    return v;
  return arith::IndexCastOp::create(b, loc, index, v);
}

Value ModifierEmitter::broadcast(Value v, int64_t lanes) {
  if (isa<VectorType>(v.getType()))
    return v;
  return vector::BroadcastOp::create(b, loc,
                                     VectorType::get({lanes}, v.getType()), v);
}

Value ModifierEmitter::emit(Region &region, ArrayRef<Value> arguments,
                            int64_t lanes) {
  Block &block = region.front();
  IRMapping mapping;
  for (auto [argument, value] : llvm::zip(block.getArguments(), arguments))
    mapping.map(argument, value);
  for (Operation &op : block.without_terminator()) {
    SmallVector<Value> operands;
    bool varies = false;
    for (Value operand : op.getOperands()) {
      operands.push_back(mapping.lookup(operand));
      varies |= isa<VectorType>(operands.back().getType());
    }
    if (auto captured = dyn_cast<CapturedOp>(op)) {
      mapping.map(captured.getResult(),
                  read(captured.getCapture(), operands, captured.getType(),
                       varies ? lanes : 0));
      continue;
    }
    if (!varies) {
      b.clone(op, mapping);
      continue;
    }
    // The op on vectors: its scalar operands broadcast, its results
    // vectors of the same element types.
    IRMapping lanesMapping;
    for (auto [operand, value] : llvm::zip(op.getOperands(), operands))
      lanesMapping.map(operand, broadcast(value, lanes));
    Operation *vectorOp = b.clone(op, lanesMapping);
    for (auto [result, vectorResult] :
         llvm::zip(op.getResults(), vectorOp->getResults())) {
      vectorResult.setType(VectorType::get({lanes}, result.getType()));
      mapping.map(result, vectorResult);
    }
  }
  Value yielded = mapping.lookup(block.getTerminator()->getOperand(0));
  // A mask_mod that depends on no lane's index still gives every lane.
  if (lanes > 0 && !isa<VectorType>(yielded.getType()))
    yielded = broadcast(yielded, lanes);
  return yielded;
}

Value ModifierEmitter::read(unsigned number, ArrayRef<Value> indices,
                            Type element, int64_t lanes) {
  Value capture = captures[number];
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  // Each index clamped into [0, size − 1]: a modifier never reads outside
  // its capture (docs/spec.md).
  SmallVector<Value> clamped;
  for (auto [dim, index] : llvm::enumerate(indices)) {
    Value last = arith::SubIOp::create(
        b, loc, memref::DimOp::create(b, loc, capture, dim), one);
    Value lo = zero, hi = last;
    if (isa<VectorType>(index.getType())) {
      lo = broadcast(lo, lanes);
      hi = broadcast(hi, lanes);
    }
    clamped.push_back(arith::MinSIOp::create(
        b, loc, arith::MaxSIOp::create(b, loc, index, lo), hi));
  }
  if (lanes == 0)
    return memref::LoadOp::create(b, loc, capture, clamped);

  // A gather from the capture seen as one dimension from its first
  // element: offset Σ index_d · stride_d.
  auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, capture);
  Value offsets;
  Value span = one;
  for (auto [dim, index] : llvm::enumerate(clamped)) {
    Value stride = metadata.getStrides()[dim];
    Value term = arith::MulIOp::create(b, loc, broadcast(index, lanes),
                                       broadcast(stride, lanes));
    offsets = offsets ? arith::AddIOp::create(b, loc, offsets, term).getResult()
                      : term.getDefiningOp()->getResult(0);
    Value extent = arith::SubIOp::create(b, loc, metadata.getSizes()[dim], one);
    span = arith::AddIOp::create(b, loc, span,
                                 arith::MulIOp::create(b, loc, extent, stride));
  }
  auto flatType = MemRefType::get(
      {ShapedType::kDynamic}, element,
      StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, {1}));
  Value flat = memref::ReinterpretCastOp::create(
      b, loc, flatType, metadata.getBaseBuffer(),
      OpFoldResult(metadata.getOffset()), ArrayRef<OpFoldResult>{span},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
  auto resultType = VectorType::get({lanes}, element);
  Value allLanes = vector::ConstantMaskOp::create(
      b, loc, VectorType::get({lanes}, b.getI1Type()),
      ArrayRef<int64_t>{lanes});
  Value passThrough =
      arith::ConstantOp::create(b, loc, resultType, b.getZeroAttr(resultType));
  return vector::GatherOp::create(b, loc, resultType, flat, ValueRange{zero},
                                  offsets, allLanes, passThrough);
}
