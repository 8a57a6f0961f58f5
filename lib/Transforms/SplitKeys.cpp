//===- SplitKeys.cpp - Split a kernel's keys across work items ------------===//
//
// A decoding kernel has one work item per GQA group: with fewer groups than
// threads (B = 1 with multi-query attention has one), cores idle. For a
// kernel marked `attn.split_keys`, this pass splits each group's keys into
// `%splits` ranges (FlashDecoding) in two phases:
//
//   @<f>(args..., %acc_ws, %max_ws, %sum_ws, %splits)        the partial phase
//       forall (tile..., s): the online recurrence over the keys of range
//       s; its epilogue writes O and LSE as before and also copies the
//       unnormalized state to the workspace at [..., s, ...]
//   @<f>_merge(args..., %acc_ws, %max_ws, %sum_ws, %splits)
//       forall (tile...): the ranges' states combined,
//         m = max_s m_s,  w_s = e^(m_s - m) (0 where m_s = -inf),
//         sum = Σ_s w_s · sum_s,  acc = Σ_s w_s · acc_s,
//       then the kernel's own normalization (O, LSE) of that state.
//
// With one range the partial phase is the kernel as it was: its caller
// points the workspace at a scratch row (strides 0), as a split call
// points O and LSE at one, so the micro-kernel is compiled once.
//
// Both are made from the tiled kernel (after attn-online-softmax), so every
// mask, window and GQA form is split the same way: a range's ops read
// slices of K, V and the mask, and their diagonal moves by the range's
// first key. Ranges are whole multiples of the key tile, so that masked
// block skipping aligns them as it would the whole sequence. The workspace
// is [B, Hq, Sq, splits, Dv] (acc) and [B, Hq, Sq, splits] (max, sum), f32.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Passes.h"

#include "dialect/AttnOps.h"
#include "mlir/IR/AffineMap.h"

#include <limits>

namespace mlir {
namespace attn {
#define GEN_PASS_DEF_ATTNSPLITKEYSPASS
#include "lib/Transforms/Passes.h.inc"
} // namespace attn
} // namespace mlir

using namespace mlir;
using namespace mlir::attn;

namespace {

/// What the pass rewrites: a kernel's one top-level forall, whose body
/// holds one online op as a direct child and whose first shared output is
/// O (the forall's results are the function's results).
struct TiledKernel {
  scf::ForallOp forall;
  OnlineAttentionOp online;
  tensor::ParallelInsertSliceOp outputInsert;
};

FailureOr<TiledKernel> analyze(func::FuncOp func) {
  auto fail = [&](const Twine &why) {
    return func.emitError("attn-split-keys: ") << why;
  };
  if (func.isExternal())
    return fail("a kernel to split needs a body");
  SmallVector<scf::ForallOp> foralls(
      func.getBody().front().getOps<scf::ForallOp>());
  if (foralls.size() != 1)
    return fail("a kernel to split must hold one top-level scf.forall (run "
                "attn-tile and attn-online-softmax first)");
  scf::ForallOp forall = foralls.front();
  SmallVector<OnlineAttentionOp> onlines(
      forall.getBody()->getOps<OnlineAttentionOp>());
  if (onlines.size() != 1)
    return fail("the forall must hold one attn.online_attention (before "
                "attn-skip-masked-blocks and attn-tile-keys)");
  OnlineAttentionOp online = onlines.front();
  if ((online.getCausal() || online.getWindow()) && !online.getDiagonal())
    return fail("a causal or windowed online op needs its diagonal operand");
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  if (forall.getNumResults() == 0 ||
      ret.getOperands() != ValueRange(forall.getResults()))
    return fail("the function must return the forall's results (O, LSE)");
  tensor::ParallelInsertSliceOp outputInsert;
  for (Operation &op : forall.getTerminator().getYieldingOps())
    if (auto insert = dyn_cast<tensor::ParallelInsertSliceOp>(op))
      if (insert.getDest() == forall.getRegionIterArgs().front())
        outputInsert = insert;
  if (!outputInsert || outputInsert.getSourceType().getRank() != 4)
    return fail("the forall must insert its output tile into O");
  // The output tile's position (batch, heads, rows) must be known where
  // the online op runs: the workspace tile is addressed with it.
  for (Value v : outputInsert.getOperands().drop_front(2))
    if (Operation *def = v.getDefiningOp();
        def && def->getBlock() == forall.getBody() &&
        !def->isBeforeInBlock(online))
      return fail("the output tile's position is computed after the online "
                  "op");
  return TiledKernel{forall, online, outputInsert};
}

/// The workspace types for a kernel whose output is `output`: the state of
/// each query row (acc: Dv floats, max, sum) per key range.
SmallVector<Type> workspaceTypes(RankedTensorType output) {
  ArrayRef<int64_t> shape = output.getShape(); // [B, Hq, Sq, Dv]
  Type f32 = Float32Type::get(output.getContext());
  int64_t dyn = ShapedType::kDynamic;
  auto acc =
      RankedTensorType::get({shape[0], shape[1], shape[2], dyn, shape[3]}, f32);
  auto row = RankedTensorType::get({shape[0], shape[1], shape[2], dyn}, f32);
  return {acc, row, row};
}

/// Appends the workspace tensors and the split count to `func`'s
/// arguments.
void appendWorkspaceArguments(func::FuncOp func, ArrayRef<Type> workspace) {
  SmallVector<Type> types(workspace);
  types.push_back(IndexType::get(func.getContext()));
  unsigned n = func.getNumArguments();
  SmallVector<unsigned> at(types.size(), n);
  SmallVector<DictionaryAttr> attrs(types.size());
  SmallVector<Location> locs(types.size(), func.getLoc());
  (void)func.insertArguments(at, types, attrs, locs);
}

/// A phase function being built: its tiled kernel (analyzed), and the
/// workspace tensors and split count of its last arguments.
struct Phase {
  TiledKernel kernel;
  ValueRange ws;
  Value splits;
};
Phase phaseOf(func::FuncOp func) {
  unsigned n = func.getNumArguments();
  return {*analyze(func), func.getArguments().slice(n - 4, 3),
          func.getArgument(n - 1)};
}

/// Clones `func` as `<name><suffix>` after it, with the workspace tensors
/// and the split count appended to its arguments.
func::FuncOp cloneWithWorkspace(func::FuncOp func, StringRef suffix,
                                ArrayRef<Type> workspace) {
  func::FuncOp clone = func.clone();
  clone.setName((func.getName() + suffix).str());
  clone->removeAttr(kSplitKeysAttrName);
  OpBuilder(func).insert(clone);
  clone->moveAfter(func);
  appendWorkspaceArguments(clone, workspace);
  return clone;
}

/// The offsets and sizes of the workspace tile of `insert`'s output tile
/// for key range `split` ([b, h, i] then the range, then Dv for acc).
struct WorkspaceTile {
  SmallVector<OpFoldResult> offsets, sizes;
};

WorkspaceTile workspaceTile(OpBuilder &b, tensor::ParallelInsertSliceOp insert,
                            OpFoldResult split, OpFoldResult splitSize,
                            bool acc) {
  SmallVector<OpFoldResult> offsets = insert.getMixedOffsets();
  SmallVector<OpFoldResult> sizes = insert.getMixedSizes();
  WorkspaceTile tile;
  tile.offsets.assign(offsets.begin(), offsets.begin() + 3);
  tile.sizes.assign(sizes.begin(), sizes.begin() + 3);
  tile.offsets.push_back(split);
  tile.sizes.push_back(splitSize);
  if (acc) {
    tile.offsets.push_back(b.getIndexAttr(0));
    tile.sizes.push_back(sizes[3]);
  }
  return tile;
}

SmallVector<OpFoldResult> unitStrides(OpBuilder &b, size_t rank) {
  return SmallVector<OpFoldResult>(rank, b.getIndexAttr(1));
}

/// `value` sliced to `[start, start + count)` along dim `dim`.
Value sliceAlong(OpBuilder &b, Location loc, Value value, int64_t dim,
                 Value start, Value count) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, value);
  offsets[dim] = start;
  sizes[dim] = count;
  return tensor::ExtractSliceOp::create(b, loc, value, offsets, sizes,
                                        unitStrides(b, type.getRank()));
}

/// Makes `func` the partial phase: its forall gets one more dimension, the
/// key range, whose online op reads that range; after its own epilogue
/// (O, LSE) it also copies the range's state to the workspace. With one
/// range it is the kernel as it was (the caller then points the
/// workspace at a scratch row; with several, O and LSE).
void buildPartial(func::FuncOp func, int64_t keyMultiple) {
  Phase phase = phaseOf(func);
  scf::ForallOp old = phase.kernel.forall;
  OnlineAttentionOp online = phase.kernel.online;
  Location loc = old.getLoc();

  OpBuilder b(old);
  SmallVector<OpFoldResult> lbs = old.getMixedLowerBound(),
                            ubs = old.getMixedUpperBound(),
                            steps = old.getMixedStep();
  lbs.push_back(b.getIndexAttr(0));
  ubs.push_back(phase.splits);
  steps.push_back(b.getIndexAttr(1));
  SmallVector<Value> outs(old.getOutputs());
  unsigned numOutputs = outs.size();
  outs.append(phase.ws.begin(), phase.ws.end());
  auto forall = scf::ForallOp::create(b, loc, lbs, ubs, steps, outs,
                                      /*mapping=*/std::nullopt);
  Block *body = forall.getBody();
  for (auto [from, to] :
       llvm::zip(old.getInductionVars(), forall.getInductionVars()))
    from.replaceAllUsesWith(to);
  for (auto [from, to] :
       llvm::zip(old.getRegionIterArgs(), forall.getRegionIterArgs()))
    from.replaceAllUsesWith(to);
  body->getOperations().splice(
      body->getTerminator()->getIterator(), old.getBody()->getOperations(),
      old.getBody()->begin(), old.getTerminator()->getIterator());
  Block &inserts = forall.getTerminator().getRegion().front();
  inserts.getOperations().splice(
      inserts.end(), old.getTerminator().getRegion().front().getOperations());

  // Keys per range: ceil(Sk / splits), rounded up to the key tile. The
  // range: keys [first, first + count), first clamped to Sk so that an
  // empty range still slices within bounds.
  b.setInsertionPoint(online);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value keys = tensor::DimOp::create(b, loc, online.getKey(), 2);
  Value chunk = arith::CeilDivUIOp::create(
      b, loc, keys, arith::MaxUIOp::create(b, loc, phase.splits, one));
  if (keyMultiple > 1) {
    Value multiple = arith::ConstantIndexOp::create(b, loc, keyMultiple);
    chunk = arith::MulIOp::create(
        b, loc, arith::CeilDivUIOp::create(b, loc, chunk, multiple), multiple);
  }
  Value split = forall.getInductionVars().back();
  Value first = arith::MinUIOp::create(
      b, loc, arith::MulIOp::create(b, loc, split, chunk), keys);
  Value count = arith::MinUIOp::create(
      b, loc, chunk, arith::SubIOp::create(b, loc, keys, first));
  online.getKeyMutable().assign(
      sliceAlong(b, loc, online.getKey(), 2, first, count));
  online.getValueMutable().assign(
      sliceAlong(b, loc, online.getValue(), 2, first, count));
  if (Value mask = online.getMask())
    online.getMaskMutable().assign(sliceAlong(b, loc, mask, 3, first, count));
  if (Value diagonal = online.getDiagonal())
    online.getDiagonalMutable().assign(
        arith::SubIOp::create(b, loc, diagonal, first).getResult());
  if (!online.getOrigin().empty())
    online.getOriginMutable().slice(3, 1).assign(
        arith::AddIOp::create(b, loc, online.getOrigin()[3], first)
            .getResult());

  // Copy the state into the range's workspace tile, which has the range's
  // unit dim (a generic over it rather than a rank-reducing slice, whose
  // unit dims canonicalization may drop in another order).
  b.setInsertionPointAfter(online);
  for (unsigned i = 0; i < 3; ++i) {
    Value dest = forall.getRegionIterArgs()[numOutputs + i];
    WorkspaceTile tile = workspaceTile(b, phase.kernel.outputInsert, split,
                                       b.getIndexAttr(1), /*acc=*/i == 0);
    unsigned rank = tile.offsets.size();
    Value slice = tensor::ExtractSliceOp::create(
        b, loc, dest, tile.offsets, tile.sizes, unitStrides(b, rank));
    AffineMap identity =
        AffineMap::getMultiDimIdentityMap(rank, b.getContext());
    SmallVector<unsigned> stateDims = {0, 1, 2};
    if (i == 0)
      stateDims.push_back(4);
    Value copied =
        linalg::GenericOp::create(
            b, loc, TypeRange{slice.getType()}, ValueRange{online.getResult(i)},
            ValueRange{slice},
            ArrayRef<AffineMap>{identity.getSubMap(stateDims), identity},
            SmallVector<utils::IteratorType>(rank,
                                             utils::IteratorType::parallel),
            [](OpBuilder &nb, Location nl, ValueRange args) {
              linalg::YieldOp::create(nb, nl, args[0]);
            })
            .getResult(0);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(&inserts);
    tensor::ParallelInsertSliceOp::create(b, loc, copied, dest, tile.offsets,
                                          tile.sizes, unitStrides(b, rank));
  }

  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  ret->setOperands(forall.getResults());
  old.erase();
  func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(),
                                 forall.getResultTypes()));
}

/// Builds `<f>_merge`: the kernel's forall with its online op replaced by
/// the combination of the ranges' states from the workspace.
void buildMerge(func::FuncOp func, ArrayRef<Type> workspace) {
  func::FuncOp merge = cloneWithWorkspace(func, "_merge", workspace);
  Phase phase = phaseOf(merge);
  OnlineAttentionOp online = phase.kernel.online;
  Location loc = online.getLoc();

  OpBuilder b(online);
  auto tileOf = [&](unsigned i) {
    WorkspaceTile tile = workspaceTile(b, phase.kernel.outputInsert,
                                       b.getIndexAttr(0), phase.splits, i == 0);
    return tensor::ExtractSliceOp::create(b, loc, phase.ws[i], tile.offsets,
                                          tile.sizes,
                                          unitStrides(b, tile.offsets.size()))
        .getResult();
  };
  Value accs = tileOf(0), maxes = tileOf(1), sums = tileOf(2);

  MLIRContext *ctx = b.getContext();
  auto map = [&](unsigned rank, ArrayRef<unsigned> dims) {
    return AffineMap::getMultiDimIdentityMap(rank, ctx).getSubMap(dims);
  };
  using utils::IteratorType;
  auto par = IteratorType::parallel, red = IteratorType::reduction;
  Type f32 = b.getF32Type();
  Value negInf = arith::ConstantOp::create(
      b, loc, b.getFloatAttr(f32, -std::numeric_limits<float>::infinity()));
  Value zero = arith::ConstantOp::create(b, loc, b.getFloatAttr(f32, 0.0));

  // m = max_s m_s (NaN-propagating, as the recurrence's maximum).
  Value max = linalg::GenericOp::create(
                  b, loc, TypeRange{online.getMax().getType()},
                  ValueRange{maxes}, ValueRange{online.getMax()},
                  ArrayRef<AffineMap>{map(4, {0, 1, 2, 3}), map(4, {0, 1, 2})},
                  ArrayRef<IteratorType>{par, par, par, red},
                  [&](OpBuilder &nb, Location nl, ValueRange args) {
                    linalg::YieldOp::create(
                        nb, nl,
                        arith::MaximumFOp::create(nb, nl, args[0], args[1])
                            .getResult());
                  })
                  .getResult(0);
  // out += w_s · x_s with w_s = e^(m_s - m), 0 for an empty range (never
  // -inf - -inf).
  auto weighted = [&](Value parts, Value init, ArrayRef<AffineMap> maps,
                      ArrayRef<IteratorType> iterators) {
    return linalg::GenericOp::create(
               b, loc, TypeRange{init.getType()}, ValueRange{parts, maxes, max},
               ValueRange{init}, maps, iterators,
               [&](OpBuilder &nb, Location nl, ValueRange args) {
                 Value part = args[0], partMax = args[1], rowMax = args[2];
                 Value empty = arith::CmpFOp::create(
                     nb, nl, arith::CmpFPredicate::OEQ, partMax, negInf);
                 Value weight = arith::SelectOp::create(
                     nb, nl, empty, zero,
                     math::ExpOp::create(
                         nb, nl,
                         arith::SubFOp::create(nb, nl, partMax, rowMax)));
                 Value sum = arith::AddFOp::create(
                     nb, nl, args[3],
                     arith::MulFOp::create(nb, nl, weight, part));
                 linalg::YieldOp::create(nb, nl, sum);
               })
        .getResult(0);
  };
  Value sum = weighted(sums, online.getSum(),
                       {map(4, {0, 1, 2, 3}), map(4, {0, 1, 2, 3}),
                        map(4, {0, 1, 2}), map(4, {0, 1, 2})},
                       {par, par, par, red});
  Value acc = weighted(accs, online.getAcc(),
                       {map(5, {0, 1, 2, 3, 4}), map(5, {0, 1, 2, 3}),
                        map(5, {0, 1, 2}), map(5, {0, 1, 2, 4})},
                       {par, par, par, red, par});
  online.getResult(0).replaceAllUsesWith(acc);
  online.getResult(1).replaceAllUsesWith(max);
  online.getResult(2).replaceAllUsesWith(sum);
  online.erase();
}

struct AttnSplitKeysPass
    : public mlir::attn::impl::AttnSplitKeysPassBase<AttnSplitKeysPass> {
  using AttnSplitKeysPassBase::AttnSplitKeysPassBase;

  void runOnOperation() override {
    SmallVector<func::FuncOp> kernels;
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (func->hasAttr(kSplitKeysAttrName))
        kernels.push_back(func);
    for (func::FuncOp func : kernels) {
      if (failed(analyze(func)))
        return signalPassFailure();
      auto output = cast<RankedTensorType>(func.getResultTypes().front());
      SmallVector<Type> workspace = workspaceTypes(output);
      // Ranges of whole key tiles (the kernel's own, where it has one).
      int64_t multiple = keyMultiple;
      func.walk([&](OnlineAttentionOp op) {
        multiple = chosenKeyBlock(op, keyMultiple);
        return WalkResult::interrupt();
      });
      buildMerge(func, workspace);
      appendWorkspaceArguments(func, workspace);
      buildPartial(func, multiple);
      func->removeAttr(kSplitKeysAttrName);
    }
  }
};

} // namespace
