//===- OutlineWorkItems.cpp - A kernel's parallel tiles as work items -----===//
//
// A kernel function marked `attn.kernel` holds one top-level scf.forall over
// its independent tiles (batch, query head, query tile). A host thread pool
// drives such a kernel through two functions made from it:
//
//   index @<name>_work_items(args...)        the forall's iteration count
//   @<name>_run(args..., %begin, %end)       iterations [begin, end)
//
// The iteration space is linearized; each iteration delinearizes its index
// back to the forall's induction variables. Functions that are not kernels
// get their foralls as serial loops the same way. Fixed-size stack buffers
// move to the function's entry, so they do not accumulate across iterations.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir {
namespace attn {
#define GEN_PASS_DEF_ATTNOUTLINEWORKITEMSPASS
#include "lib/Transforms/Passes.h.inc"
} // namespace attn
} // namespace mlir

using namespace mlir;
using namespace mlir::attn;

namespace {

/// Per-dimension trip counts of `forall`, as index values built by `b`
/// (operands looked up through `mapping`).
SmallVector<Value> tripCounts(ImplicitLocOpBuilder &b, scf::ForallOp forall,
                              IRMapping &mapping) {
  SmallVector<Value> counts;
  auto value = [&](OpFoldResult ofr) -> Value {
    if (auto attr = dyn_cast<Attribute>(ofr))
      return arith::ConstantIndexOp::create(b,
                                            cast<IntegerAttr>(attr).getInt());
    return mapping.lookupOrDefault(cast<Value>(ofr));
  };
  for (auto [lb, ub, step] :
       llvm::zip(forall.getMixedLowerBound(), forall.getMixedUpperBound(),
                 forall.getMixedStep())) {
    Value extent = arith::SubIOp::create(b, value(ub), value(lb));
    counts.push_back(arith::CeilDivSIOp::create(b, extent, value(step)));
  }
  return counts;
}

Value product(ImplicitLocOpBuilder &b, ArrayRef<Value> values) {
  Value total = arith::ConstantIndexOp::create(b, 1);
  for (Value v : values)
    total = arith::MulIOp::create(b, total, v);
  // Negative extents (empty ranges) count as no work.
  return arith::MaxSIOp::create(b, total, arith::ConstantIndexOp::create(b, 0));
}

/// Emits `scf.for %it = begin to end` running the forall's body for the
/// linear iteration total - 1 - %it: the last query tiles of a causal
/// kernel cost the most (they see the most keys), so they come first and
/// the thread pool's last, single-item chunks are the cheapest tiles.
void emitLinearizedLoop(ImplicitLocOpBuilder &b, scf::ForallOp forall,
                        IRMapping &mapping, Value begin, Value end) {
  SmallVector<Value> counts = tripCounts(b, forall, mapping);
  Value total = arith::ConstantIndexOp::create(b, 1);
  for (Value count : counts)
    total = arith::MulIOp::create(b, total, count);
  auto loop =
      scf::ForOp::create(b, begin, end, arith::ConstantIndexOp::create(b, 1));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(loop.getBody()->getTerminator());

  // Delinearize, innermost dimension fastest.
  Value rest = arith::SubIOp::create(
      b, arith::SubIOp::create(b, total, loop.getInductionVar()),
      arith::ConstantIndexOp::create(b, 1));
  SmallVector<Value> indices(counts.size());
  for (int64_t d = counts.size() - 1; d >= 0; --d) {
    indices[d] = d == 0 ? rest : arith::RemUIOp::create(b, rest, counts[d]);
    if (d > 0)
      rest = arith::DivUIOp::create(b, rest, counts[d]);
  }
  for (auto [iv, index, lb, step] :
       llvm::zip(forall.getInductionVars(), indices,
                 forall.getMixedLowerBound(), forall.getMixedStep())) {
    auto value = [&](OpFoldResult ofr) -> Value {
      if (auto attr = dyn_cast<Attribute>(ofr))
        return arith::ConstantIndexOp::create(b,
                                              cast<IntegerAttr>(attr).getInt());
      return mapping.lookupOrDefault(cast<Value>(ofr));
    };
    Value scaled = arith::MulIOp::create(b, index, value(step));
    mapping.map(iv, arith::AddIOp::create(b, scaled, value(lb)));
  }
  for (Operation &op : forall.getBody()->without_terminator())
    b.clone(op, mapping);
}

/// Clones the ops of `func`'s entry block that precede `forall` into the
/// builder's position (they compute sizes and scratch buffers).
void clonePrefix(ImplicitLocOpBuilder &b, scf::ForallOp forall,
                 IRMapping &mapping) {
  for (Operation &op : *forall->getBlock()) {
    if (&op == forall.getOperation())
      break;
    b.clone(op, mapping);
  }
}

/// Wraps the body of `func` (all but its return) in a one-iteration
/// scf.forall: a kernel whose static sizes make a single tile has had its
/// forall folded away by canonicalization, and is one work item (as is any
/// kernel without a forall: its body runs whole, on one thread).
scf::ForallOp wrapInOneWorkItem(func::FuncOp func) {
  Block &entry = func.getBody().front();
  Operation *terminator = entry.getTerminator();
  ImplicitLocOpBuilder b(func.getLoc(), func.getContext());
  b.setInsertionPoint(terminator);
  auto forall = scf::ForallOp::create(
      b, ArrayRef<OpFoldResult>{b.getIndexAttr(0)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1)}, ValueRange{}, std::nullopt);
  Operation *inParallel = forall.getBody()->getTerminator();
  for (Operation &op : llvm::make_early_inc_range(
           llvm::make_range(entry.begin(), forall->getIterator())))
    op.moveBefore(inParallel);
  return forall;
}

void serializeForalls(func::FuncOp func);

LogicalResult outlineKernel(func::FuncOp func) {
  Block &entry = func.getBody().front();
  SmallVector<scf::ForallOp> foralls(entry.getOps<scf::ForallOp>());
  if (foralls.empty() && isa<func::ReturnOp>(entry.back()))
    foralls.push_back(wrapInOneWorkItem(func));
  if (foralls.size() != 1)
    return func.emitError() << "attn-outline-work-items: a kernel must hold "
                               "exactly one top-level scf.forall, found "
                            << foralls.size();
  scf::ForallOp forall = foralls.front();
  for (Operation *op = forall->getNextNode(); op; op = op->getNextNode())
    if (!isa<func::ReturnOp>(op))
      return op->emitError("attn-outline-work-items: a kernel may do nothing "
                           "after its parallel loop (bufferize it with "
                           "outputs in place first)");
  if (func.getNumResults() != 0)
    return func.emitError("attn-outline-work-items: a kernel must return "
                          "nothing (its outputs are arguments)");

  MLIRContext *ctx = func.getContext();
  ImplicitLocOpBuilder b(func.getLoc(), ctx);
  b.setInsertionPointAfter(func);
  Type index = b.getIndexType();
  SmallVector<Type> argTypes(func.getArgumentTypes());

  // <name>_work_items
  auto countFunc =
      func::FuncOp::create(b, (func.getName() + "_work_items").str(),
                           FunctionType::get(ctx, argTypes, {index}));
  {
    OpBuilder::InsertionGuard guard(b);
    Block *body = countFunc.addEntryBlock();
    b.setInsertionPointToStart(body);
    IRMapping mapping;
    mapping.map(func.getArguments(), body->getArguments());
    clonePrefix(b, forall, mapping);
    Value total = product(b, tripCounts(b, forall, mapping));
    func::ReturnOp::create(b, total);
  }

  // <name>_run
  b.setInsertionPointAfter(countFunc);
  SmallVector<Type> runArgTypes = argTypes;
  runArgTypes.append({index, index});
  auto runFunc = func::FuncOp::create(b, (func.getName() + "_run").str(),
                                      FunctionType::get(ctx, runArgTypes, {}));
  {
    OpBuilder::InsertionGuard guard(b);
    Block *body = runFunc.addEntryBlock();
    b.setInsertionPointToStart(body);
    IRMapping mapping;
    mapping.map(func.getArguments(),
                body->getArguments().take_front(argTypes.size()));
    clonePrefix(b, forall, mapping);
    emitLinearizedLoop(b, forall, mapping, body->getArgument(argTypes.size()),
                       body->getArgument(argTypes.size() + 1));
    func::ReturnOp::create(b, ValueRange{});
  }
  // Foralls nested in a work item (a multi-head layer's attention, inside
  // its batch) run as loops of that work item.
  serializeForalls(runFunc);
  func.erase();
  return success();
}

void serializeForalls(func::FuncOp func) {
  SmallVector<scf::ForallOp> foralls;
  func.walk([&](scf::ForallOp forall) { foralls.push_back(forall); });
  // Innermost first, so that an outer forall's body is already serial.
  for (scf::ForallOp forall : foralls) {
    ImplicitLocOpBuilder b(forall.getLoc(), forall);
    IRMapping mapping;
    SmallVector<Value> counts = tripCounts(b, forall, mapping);
    emitLinearizedLoop(b, forall, mapping, arith::ConstantIndexOp::create(b, 0),
                       product(b, counts));
    if (forall.getNumResults() != 0) {
      forall.emitError("attn-outline-work-items: scf.forall still has "
                       "results; bufferize first");
      return;
    }
    forall.erase();
  }
}

/// Moves every statically sized memref.alloca of `func` to its entry
/// block: LLVM gives an alloca outside the entry block a fresh slot each
/// time it runs, so one inside a loop would grow the stack per iteration.
/// Each user re-initializes the buffer (a tile's state is filled first), so
/// one buffer per call serves every iteration.
LogicalResult hoistStaticAllocas(func::FuncOp func) {
  Block &entry = func.getBody().front();
  SmallVector<memref::AllocaOp> allocas;
  bool dynamicInLoop = false;
  func.walk([&](memref::AllocaOp alloca) {
    if (alloca->getBlock() == &entry)
      return;
    if (alloca.getType().hasStaticShape())
      allocas.push_back(alloca);
    else
      dynamicInLoop = true;
  });
  for (memref::AllocaOp alloca : allocas)
    alloca->moveBefore(&entry, entry.begin());
  if (dynamicInLoop)
    return func.emitError(
        "attn-outline-work-items: a dynamically sized stack buffer inside a "
        "loop would grow the stack per iteration; tile so that its size has "
        "a constant bound");
  return success();
}

struct AttnOutlineWorkItemsPass
    : public mlir::attn::impl::AttnOutlineWorkItemsPassBase<
          AttnOutlineWorkItemsPass> {
  void runOnOperation() override {
    SmallVector<func::FuncOp> kernels, others;
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      (func->hasAttr(kKernelAttrName) ? kernels : others).push_back(func);
    }
    for (func::FuncOp func : kernels)
      if (failed(outlineKernel(func)))
        return signalPassFailure();
    for (func::FuncOp func : others)
      serializeForalls(func);
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal() && failed(hoistStaticAllocas(func)))
        return signalPassFailure();
  }
};

} // namespace
