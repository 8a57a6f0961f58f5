//===- LowerToGpu.cpp - Tiled attention as a FlashAttention-2 GPU kernel
//---===//
//
// Input: a function tiled by `attn-tiling`. Its body is one scf.forall over
// (batch, query head, query tile) that slices the function's tensors, sets
// up the online-softmax state (acc, max, sum), runs one or more key loops of
// attn.online_attention (their bounds already skip masked blocks) and
// normalizes the state with linalg.generic ops into the output slices.
//
// Output: a gpu.func that executes that body for one forall iteration per
// thread block. The converter walks the body once, in order:
//
//   - index arithmetic is cloned, with the forall's indices replaced by
//     block ids and `tensor.dim` of an argument by its size parameter;
//   - `tensor.extract_slice` of an argument (or of a slice) becomes a View:
//     offsets into the global tensor, read through its element strides;
//   - the state tensors become Fragments: per thread, the scalars of its
//     part of the tile (see the layout below), carried through the key
//     loops as scf.for iter_args, i.e. in registers;
//   - attn.online_attention becomes the warp-level step: stage K and V in
//     shared memory (cp.async where the layout allows), scores by MMA or
//     FMA, mask, online update, P·V;
//   - the normalization's linalg.generic bodies are cloned per fragment
//     element and their results stored.
//
// Fragment layout: that of mma.sync m16n8k16's accumulator, for each of a
// warp's 1 or 2 blocks of 16 rows (Gpu/WarpTile.h).
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/AttentionMath.h"
#include "lib/Transforms/Gpu/AdditiveKernel.h"
#include "lib/Transforms/Gpu/BackwardKernel.h"
#include "lib/Transforms/Gpu/LinearKernel.h"
#include "lib/Transforms/Gpu/TilePlan.h"
#include "lib/Transforms/Passes.h"

#include "dialect/AttnOps.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <limits>

namespace mlir {
namespace attn {
#define GEN_PASS_DEF_ATTNLOWERTOGPUPASS
#include "lib/Transforms/Passes.h.inc"
} // namespace attn
} // namespace mlir

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::gpu_kernel;

namespace {

// NVGPUDialect.h declares a global kWarpSize too: ours is meant.
using gpu_kernel::kWarpSize;

constexpr float kInf = std::numeric_limits<float>::infinity();

class KernelConverter : public TilePlan {
public:
  KernelConverter(func::FuncOp func, scf::ForallOp forall, bool useMma,
                  bool useAsyncCopy, int64_t rowsPerWarp)
      : TilePlan(forall, useMma, useAsyncCopy, rowsPerWarp), func(func) {}

  LogicalResult convert(gpu::GPUModuleOp gpuModule);

private:
  func::FuncOp func;
  /// The micro-kernel, once built (TilePlan::kind says which).
  std::unique_ptr<GpuMicroKernel> microKernel;

  // Conversion state.
  std::unique_ptr<ImplicitLocOpBuilder> ownedBuilder;
  IRMapping mapping;
  DenseMap<Value, Fragments> states;
  Value stagedQuery; // the original query tile value now in shared memory

  //===--- the conversion ---------------------------------------------===//
  void buildPrologue(gpu::GPUFuncOp kernel);
  LogicalResult convertBlock(Block &block);
  LogicalResult convertOp(Operation *op);
  LogicalResult convertSlice(tensor::ExtractSliceOp op);
  LogicalResult convertFor(scf::ForOp op);
  LogicalResult convertOnline(OnlineAttentionOp op);
  /// A captured tensor (a whole kernel argument) as a memref of its rank
  /// over the argument's pointer, its sizes and strides: what the
  /// modifiers' reads take.
  Value capturedMemref(const View &view);
  LogicalResult convertEpilogue(linalg::GenericOp op);
};

//===----------------------------------------------------------------------===//
// Kernel signature and prologue
//===----------------------------------------------------------------------===//

void KernelConverter::buildPrologue(gpu::GPUFuncOp kernel) {
  Block &entry = kernel.getBody().front();
  unsigned next = 0;
  for (BlockArgument arg : func.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type) { // a scalar (dropout's probability and seed): itself
      mapping.map(arg, entry.getArgument(next++));
      continue;
    }
    GlobalTensor g;
    g.elementType = type.getElementType();
    g.data = entry.getArgument(next++);
    for (int64_t d = 0; d < type.getRank(); ++d)
      g.sizes.push_back(arith::IndexCastOp::create(b(), b().getIndexType(),
                                                   entry.getArgument(next++)));
    for (int64_t d = 0; d < type.getRank(); ++d)
      g.strides.push_back(arith::IndexCastOp::create(
          b(), b().getIndexType(), entry.getArgument(next++)));
    if (asyncCopy && g.elementType == elementType)
      g.asyncCopyable = asyncCopyable(g);
    View whole{static_cast<unsigned>(globals.size()), {}, g.sizes};
    for (int64_t d = 0; d < type.getRank(); ++d)
      whole.offsets.push_back(cst(0));
    globals.push_back(std::move(g));
    views[arg] = whole;
  }

  // Threads: warp w owns rows 16M·w.., lane l rows l/4 and l/4 + 8 of
  // each of its M blocks of 16.
  tid = gpu::ThreadIdOp::create(b(), gpu::Dimension::x);
  warp = arith::DivUIOp::create(b(), tid, cst(kWarpSize));
  lane = arith::RemUIOp::create(b(), tid, cst(kWarpSize));
  rowInWarp = arith::DivUIOp::create(b(), lane, cst(4));
  colPair = mul(arith::RemUIOp::create(b(), lane, cst(4)), cst(2));
  Value firstRow = add(mul(warp, cst(kMmaRows * rowBlocks)), rowInWarp);
  for (int64_t m = 0; m < rowBlocks; ++m) {
    Value r0 = m == 0 ? firstRow : add(firstRow, cst(m * kMmaRows));
    rows.push_back(r0);
    rows.push_back(add(r0, cst(kGroup)));
  }
  microKernel = createGpuMicroKernel(kind, *this, shared);
  microKernel->buildPrologue();

  // Block ids replace the forall's indices (gridDims, from analyze()).
  for (int64_t i = 0, rank = forall.getRank(); i < rank; ++i) {
    Value id = gpu::BlockIdOp::create(b(), gridDims[i]);
    int64_t step = forall.getStaticStep()[i];
    mapping.map(forall.getInductionVar(i), step == 1 ? id : mul(id, cst(step)));
  }

  // Shared memory: Q tile, K tile, V tile (and P for the FMA path).
  auto workgroup = gpu::AddressSpaceAttr::get(
      b().getContext(), gpu::GPUDialect::getWorkgroupAddressSpace());
  auto raw = gpu::DynamicSharedMemoryOp::create(
      b(), MemRefType::get({ShapedType::kDynamic}, b().getI8Type(),
                           MemRefLayoutAttrInterface(), workgroup));
  int64_t offset = 0;
  auto carve = [&](int64_t rows, int64_t pitch, Type type) {
    auto tileType = MemRefType::get({rows, pitch}, type,
                                    MemRefLayoutAttrInterface(), workgroup);
    Value view =
        memref::ViewOp::create(b(), tileType, raw, cst(offset), ValueRange{});
    offset += llvm::alignTo(rows * pitch * elementBytes(type), 16);
    return view;
  };
  shared.query = carve(blockRows, qPitch, elementType);
  shared.keys = carve(keyTile, qPitch, elementType);
  shared.values = carve(keyTile, vPitch, elementType);
  if (needsProbsTile(kind))
    shared.probs = carve(blockRows, pPitch, b().getF32Type());
  kernel->setAttr("attn.shared_memory_bytes", b().getI64IntegerAttr(offset));
}

//===----------------------------------------------------------------------===//
// Walking the tile body
//===----------------------------------------------------------------------===//

LogicalResult KernelConverter::convertBlock(Block &block) {
  for (Operation &op : block.without_terminator())
    if (failed(convertOp(&op)))
      return failure();
  return success();
}

LogicalResult KernelConverter::convertOp(Operation *op) {
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op))
    return convertSlice(slice);
  if (auto loop = dyn_cast<scf::ForOp>(op))
    return convertFor(loop);
  if (auto online = dyn_cast<OnlineAttentionOp>(op))
    return convertOnline(online);
  if (auto generic = dyn_cast<linalg::GenericOp>(op))
    return convertEpilogue(generic);
  if (auto dim = dyn_cast<tensor::DimOp>(op)) {
    std::optional<int64_t> index = dim.getConstantIndex();
    auto it = views.find(dim.getSource());
    if (!index || it == views.end())
      return op->emitOpError("attn-lower-to-gpu: dim of an unknown tensor");
    mapping.map(dim.getResult(), it->second.sizes[*index]);
    return success();
  }
  if (isa<bufferization::AllocTensorOp, tensor::EmptyOp>(op)) {
    states[op->getResult(0)] = Fragments();
    return success();
  }
  if (auto fill = dyn_cast<linalg::FillOp>(op)) {
    // A state initialized to a constant: every fragment value.
    auto type = cast<ShapedType>(fill.getResult(0).getType());
    int64_t count =
        type.getRank() == 4 ? fragmentSize(paddedValueDim) : 2 * rowBlocks;
    Value init = mapping.lookupOrDefault(fill.getInputs()[0]);
    states[fill.getResult(0)] = Fragments{SmallVector<Value>(count, init)};
    return success();
  }
  if (auto cast = dyn_cast<tensor::CastOp>(op)) {
    // Static and dynamic types of the same tile (canonicalization of
    // kernels with static sizes): the same state or view.
    if (auto it = states.find(cast.getSource()); it != states.end()) {
      Fragments fragments = it->second;
      states[cast.getResult()] = std::move(fragments);
      return success();
    }
    if (auto it = views.find(cast.getSource()); it != views.end()) {
      auto view = it->second;
      views[cast.getResult()] = std::move(view);
      return success();
    }
    return op->emitOpError("attn-lower-to-gpu: cast of an unknown tensor");
  }
  if (auto insert = dyn_cast<tensor::InsertSliceOp>(op)) {
    // The key loop's state written back whole: the source is the state.
    auto it = states.find(insert.getSource());
    if (it == states.end())
      return op->emitOpError("attn-lower-to-gpu: insert of a non-state");
    states[insert.getResult()] = it->second;
    return success();
  }
  bool scalar = llvm::all_of(op->getResultTypes(),
                             [](Type t) { return t.isIntOrIndexOrFloat(); });
  if (scalar && op->getNumRegions() == 0 &&
      isa<arith::ArithDialect, affine::AffineDialect, math::MathDialect>(
          op->getDialect())) {
    b().clone(*op, mapping);
    return success();
  }
  return op->emitOpError("attn-lower-to-gpu cannot map this op of a tile "
                         "body to the GPU kernel");
}

LogicalResult KernelConverter::convertSlice(tensor::ExtractSliceOp op) {
  if (auto state = states.find(op.getSource()); state != states.end()) {
    // A slice of the state (the tile's valid rows): the same fragments.
    states[op.getResult()] = state->second;
    return success();
  }
  auto source = views.find(op.getSource());
  if (source == views.end())
    return op.emitOpError("attn-lower-to-gpu: slice of an unknown tensor");
  if (op.getSourceType().getRank() != op.getResultType().getRank() ||
      !op.hasUnitStride())
    return op.emitOpError("attn-lower-to-gpu: only unit-stride, "
                          "rank-preserving slices");
  View view{source->second.tensor, {}, {}};
  for (auto [offset, size, base] : llvm::zip(
           op.getMixedOffsets(), op.getMixedSizes(), source->second.offsets)) {
    view.offsets.push_back(
        add(base, getValueOrCreateConstantIndexOp(
                      b(), b().getLoc(),
                      isa<Value>(offset) ? OpFoldResult(mapping.lookupOrDefault(
                                               cast<Value>(offset)))
                                         : offset)));
    view.sizes.push_back(getValueOrCreateConstantIndexOp(
        b(), b().getLoc(),
        isa<Value>(size)
            ? OpFoldResult(mapping.lookupOrDefault(cast<Value>(size)))
            : size));
  }
  views[op.getResult()] = std::move(view);
  return success();
}

LogicalResult KernelConverter::convertFor(scf::ForOp op) {
  // The query tile every step of this loop reads: stage it in shared
  // memory once, before the loop, when it does not depend on the loop.
  OnlineAttentionOp online;
  op.getBody()->walk([&](OnlineAttentionOp o) { online = o; });
  if (online) {
    SmallVector<tensor::ExtractSliceOp> chain;
    Value q = online.getQuery();
    while (auto slice = q.getDefiningOp<tensor::ExtractSliceOp>()) {
      if (slice->getParentOp() != op)
        break;
      chain.push_back(slice);
      q = slice.getSource();
    }
    bool invariant = llvm::all_of(chain, [&](tensor::ExtractSliceOp s) {
      return llvm::all_of(s->getOperands().drop_front(), [&](Value v) {
        return !op->isAncestor(v.getParentBlock()->getParentOp());
      });
    });
    if (invariant && views.count(q)) {
      for (tensor::ExtractSliceOp slice : llvm::reverse(chain))
        if (failed(convertSlice(slice)))
          return failure();
      stageQuery(views[online.getQuery()]);
      stagedQuery = online.getQuery();
    }
  }

  SmallVector<Value> inits;
  SmallVector<size_t> counts;
  for (Value init : op.getInitArgs()) {
    auto it = states.find(init);
    if (it == states.end())
      return op.emitOpError("attn-lower-to-gpu: a key loop carries a value "
                            "that is not online-softmax state");
    inits.append(it->second.values);
    counts.push_back(it->second.values.size());
  }
  LogicalResult result = success();
  SmallVector<Value> results = forLoopWith(
      mapping.lookupOrDefault(op.getLowerBound()),
      mapping.lookupOrDefault(op.getUpperBound()),
      mapping.lookupOrDefault(op.getStep()), inits,
      [&](Value iv, ValueRange args) -> SmallVector<Value> {
        mapping.map(op.getInductionVar(), iv);
        size_t at = 0;
        for (auto [arg, count] : llvm::zip(op.getRegionIterArgs(), counts)) {
          states[arg] = Fragments{SmallVector<Value>(args.slice(at, count))};
          at += count;
        }
        result = convertBlock(*op.getBody());
        SmallVector<Value> next;
        if (succeeded(result))
          for (Value v : op.getBody()->getTerminator()->getOperands())
            next.append(states[v].values);
        if (next.size() != inits.size()) {
          result = failure();
          return SmallVector<Value>(args);
        }
        return next;
      });
  if (failed(result))
    return failure();
  size_t at = 0;
  for (auto [res, count] : llvm::zip(op.getResults(), counts)) {
    states[res] =
        Fragments{SmallVector<Value>(ArrayRef(results).slice(at, count))};
    at += count;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// The online-softmax step
//===----------------------------------------------------------------------===//

LogicalResult KernelConverter::convertOnline(OnlineAttentionOp op) {
  for (Value v : {op.getQuery(), op.getKey(), op.getValue()})
    if (!views.count(v))
      return op.emitOpError("attn-lower-to-gpu: operand is not a slice of "
                            "a kernel argument");
  if (op.getMask() && !views.count(op.getMask()))
    return op.emitOpError("attn-lower-to-gpu: mask is not a slice of a "
                          "kernel argument");
  auto accIt = states.find(op.getAcc()), maxIt = states.find(op.getMax()),
       sumIt = states.find(op.getSum());
  if (accIt == states.end() || maxIt == states.end() || sumIt == states.end())
    return op.emitOpError("attn-lower-to-gpu: state is not initialized");
  SmallVector<Value> acc = accIt->second.values;
  Fragments max = maxIt->second, sum = sumIt->second;

  if (op.getQuery() != stagedQuery) {
    stageQuery(views[op.getQuery()]);
    stagedQuery = op.getQuery();
  }
  const View &keyView = views[op.getKey()];
  Value keys = keyView.sizes[2];
  SmallVector<Value, 4> origin;
  for (Value v : op.getOrigin())
    origin.push_back(mapping.lookupOrDefault(v));
  // The captured tensors (the modifiers' and the block table), whole. The
  // emitter keeps a reference to them: they live as long.
  SmallVector<Value, 2> captures;
  for (Value capture : op.getCaptures()) {
    auto it = views.find(capture);
    if (it == views.end())
      return op.emitOpError("attn-lower-to-gpu: a captured tensor is not a "
                            "kernel argument");
    captures.push_back(capturedMemref(it->second));
  }
  // A block mask's table: whether it keeps any score of this tile (the
  // tile is skipped, uniformly over the block, where it keeps none), and
  // whether it declares every one kept (the mask_mod is then left out).
  Value blockKept, blockFull;
  if (op->hasAttr(kBlockMaskAttrName))
    std::tie(blockKept, blockFull) = blockTableEntries(
        b(), b().getLoc(), op, captures, origin, cst(0), cst(0), cst(0),
        views[op.getQuery()].sizes[2], cst(0), keys);

  // The tile's step: acc, max and sum in, the same out.
  auto step = [&](SmallVector<Value> acc, Fragments max,
                  Fragments sum) -> SmallVector<Value> {
    gpu::BarrierOp::create(b()); // the previous tile's readers are done
    stageTile(shared.keys, keyView, keys, headDim, paddedHeadDim);
    stageTile(shared.values, views[op.getValue()], keys, valueDim,
              paddedValueDim);
    // The V tile's copies go on while the scores and the softmax
    // statistics are computed; only K's must have landed first.
    waitForCopies(1);
    gpu::BarrierOp::create(b());

    SmallVector<Value> scores = microKernel->scores();
    std::optional<ModifierEmitter> modifiers;
    if (hasModifiers(op))
      modifiers.emplace(b(), b().getLoc(), scoreModOf(op), maskModOf(op),
                        captures);
    maskScores(op, scores, keys,
               op.getDiagonal() ? mapping.lookupOrDefault(op.getDiagonal())
                                : Value(),
               origin, modifiers ? &*modifiers : nullptr, blockFull);
    SmallVector<Value> alphas = updateStatistics(op, scores, max, sum);
    if (op.getDropoutP())
      dropWeights(scores, mapping.lookupOrDefault(op.getDropoutP()),
                  mapping.lookupOrDefault(op.getDropoutSeed()), origin);
    int64_t blockValues = fragmentSize(paddedValueDim) / rowBlocks;
    for (auto [i, a] : llvm::enumerate(acc))
      a = arith::MulFOp::create(b(), a,
                                alphas[2 * (i / blockValues) + (i % 4) / 2]);
    if (asyncCopy) {
      waitForCopies(0);
      gpu::BarrierOp::create(b());
    }
    // A key excluded for some rows (a -inf from the score_mod included)
    // has weight 0, and 0 · NaN would leak its V's NaN into them.
    bool masked =
        op.getMask() || op.getCausal() || op.getWindow() || hasModifiers(op);
    microKernel->accumulate(acc, scores, keys, masked);
    SmallVector<Value> state = acc;
    state.append(max.values);
    state.append(sum.values);
    return state;
  };
  SmallVector<Value> state;
  if (blockKept) {
    SmallVector<Value> before = acc;
    before.append(max.values);
    before.append(sum.values);
    auto skip = scf::IfOp::create(b(), ValueRange(before).getTypes(), blockKept,
                                  /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b());
    b().setInsertionPointToStart(skip.thenBlock());
    scf::YieldOp::create(b(), step(acc, max, sum));
    b().setInsertionPointToStart(skip.elseBlock());
    scf::YieldOp::create(b(), before);
    state.assign(skip.getResults().begin(), skip.getResults().end());
  } else {
    state = step(acc, max, sum);
  }
  ArrayRef<Value> all(state);
  acc.assign(all.begin(), all.begin() + acc.size());
  max.values.assign(all.begin() + acc.size(),
                    all.begin() + acc.size() + max.values.size());
  sum.values.assign(all.end() - sum.values.size(), all.end());
  states[op.getResult(0)] = Fragments{acc};
  states[op.getResult(1)] = max;
  states[op.getResult(2)] = sum;
  return success();
}

Value KernelConverter::capturedMemref(const View &view) {
  const GlobalTensor &g = globals[view.tensor];
  return argumentMemref(b(), b().getLoc(), g.data, g.sizes, g.strides);
}

//===----------------------------------------------------------------------===//
// The normalization: generic bodies per fragment element
//===----------------------------------------------------------------------===//

LogicalResult KernelConverter::convertEpilogue(linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1 ||
      !op.getRegion().front().getArgument(op.getNumDpsInputs()).use_empty())
    return op.emitOpError("attn-lower-to-gpu: the normalization must write "
                          "one output without reading it");
  // An output slice of a kernel argument is stored; a temporary (the row
  // statistics that attention sinks fold in, say) becomes state that later
  // generics read.
  Value init = op.getDpsInits()[0];
  auto outView = views.find(init);
  bool toState = outView == views.end();
  if (toState && !states.count(init))
    return op.emitOpError("attn-lower-to-gpu: the normalization must write "
                          "an output slice or a temporary tile");
  int64_t rank = op.getNumLoops();
  // Each input: online-softmax state (per fragment element or per row), or
  // a slice of a kernel argument read at the tile's batch and head (the
  // sinks' logit), whatever the row and column.
  SmallVector<Fragments *> inputs;
  SmallVector<const View *> viewInputs;
  for (auto [input, map] :
       llvm::zip(op.getDpsInputOperands(), op.getIndexingMapsArray())) {
    auto state = states.find(input->get());
    auto view = views.find(input->get());
    bool perTile = llvm::all_of(map.getResults(), [](AffineExpr e) {
      auto dim = dyn_cast<AffineDimExpr>(e);
      return dim && dim.getPosition() < 2;
    });
    if (state != states.end()) {
      inputs.push_back(&state->second);
      viewInputs.push_back(nullptr);
    } else if (view != views.end() && perTile) {
      inputs.push_back(nullptr);
      viewInputs.push_back(&view->second);
    } else {
      return op.emitOpError("attn-lower-to-gpu: a normalization input must "
                            "be online-softmax state or a slice read once "
                            "per batch and head");
    }
  }
  Block &body = op.getRegion().front();
  int64_t groups = paddedValueDim / kGroup;
  // Value i of group `group` of row block m (at row, col: col null per row).
  auto emitElement = [&](int64_t m, int64_t i, int64_t group) -> Value {
    IRMapping local = mapping;
    for (auto [arg, input, view, map] :
         llvm::zip(body.getArguments(), inputs, viewInputs,
                   op.getIndexingMapsArray())) {
      if (view) {
        // Its indices are the tile's batch and head, 0 in tile coordinates.
        SmallVector<Value, 4> indices(map.getNumResults(), cst(0));
        Value v =
            memref::LoadOp::create(b(), globals[view->tensor].data,
                                   ValueRange{globalIndex(*view, indices)});
        local.map(arg, toF32(v));
        continue;
      }
      bool perRow = map.getNumResults() == 3;
      local.map(arg, perRow ? input->values[2 * m + i / 2]
                            : input->values[(m * groups + group) * 4 + i]);
    }
    for (Operation &inner : body.without_terminator())
      b().clone(inner, local);
    return local.lookupOrDefault(body.getTerminator()->getOperand(0));
  };
  if (toState) {
    // Every lane computes its rows' (or fragment elements') values.
    SmallVector<Value> values;
    if (rank == 3) {
      for (int64_t at = 0; at < 2 * rowBlocks; ++at)
        values.push_back(emitElement(at / 2, (at % 2) * 2, 0));
    } else {
      for (int64_t m = 0; m < rowBlocks; ++m)
        for (int64_t group = 0; group < groups; ++group)
          for (int64_t i = 0; i < 4; ++i)
            values.push_back(emitElement(m, i, group));
    }
    states[op.getResult(0)] = Fragments{values};
    return success();
  }
  const View &out = outView->second;
  auto store = [&](Value result, Value row, Value col) {
    SmallVector<Value, 4> indices = {cst(0), cst(0), row};
    if (col)
      indices.push_back(col);
    memref::StoreOp::create(b(), result, globals[out.tensor].data,
                            ValueRange{globalIndex(out, indices)});
  };
  // Row r of block m: rows[2m + r].
  for (int64_t at = 0; at < 2 * rowBlocks; ++at) {
    int64_t m = at / 2, r = at % 2;
    Value row = rows[at];
    Value rowOk = lt(row, out.sizes[2]);
    if (rank == 3) {
      // One lane of the four that share a row stores it.
      Value first =
          arith::CmpIOp::create(b(), arith::CmpIPredicate::eq, colPair, cst(0));
      auto guard = scf::IfOp::create(b(), andI(rowOk, first));
      OpBuilder::InsertionGuard g(b());
      b().setInsertionPoint(guard.thenBlock()->getTerminator());
      store(emitElement(m, r * 2, 0), row, Value());
      continue;
    }
    for (int64_t group = 0; group < groups; ++group)
      for (int64_t c = 0; c < 2; ++c) {
        Value col = add(colPair, cst(group * kGroup + c));
        auto guard =
            scf::IfOp::create(b(), andI(rowOk, lt(col, cst(valueDim))));
        OpBuilder::InsertionGuard g(b());
        b().setInsertionPoint(guard.thenBlock()->getTerminator());
        store(emitElement(m, r * 2 + c, group), row, col);
      }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

LogicalResult KernelConverter::convert(gpu::GPUModuleOp gpuModule) {
  if (failed(analyze()))
    return failure();
  MLIRContext *ctx = func.getContext();
  // Parameters: per tensor argument a pointer, its sizes, its strides.
  SmallVector<Type> params;
  Type i64 = IntegerType::get(ctx, 64);
  for (Type t : func.getArgumentTypes()) {
    auto tensor = dyn_cast<RankedTensorType>(t);
    if (!tensor && (t.isF32() || t.isInteger(64))) {
      params.push_back(t); // dropout's probability or seed, as is
      continue;
    }
    if (!tensor)
      return func.emitOpError("attn-lower-to-gpu: arguments must be tensors, "
                              "f32 or i64 scalars");
    Type elem = tensor.getElementType();
    if (elem.isInteger(1))
      elem = IntegerType::get(ctx, 8);
    params.push_back(MemRefType::get({ShapedType::kDynamic}, elem));
    params.append(2 * tensor.getRank(), i64);
  }
  auto moduleBuilder = OpBuilder::atBlockEnd(gpuModule.getBody());
  auto kernel =
      gpu::GPUFuncOp::create(moduleBuilder, func.getLoc(), func.getName(),
                             FunctionType::get(ctx, params, {}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), UnitAttr::get(ctx));
  int32_t threads = warps * kWarpSize;
  kernel.setKnownBlockSizeAttr(DenseI32ArrayAttr::get(ctx, {threads, 1, 1}));
  // One resident block per SM suffices (as FlashAttention-2 launches its
  // 4-warp kernels): ptxas may then use the registers a thread's fragments
  // need. Left to itself it aimed some kernels at 4 blocks (128 registers)
  // and spilled, e.g. bf16 D=64 with a bottom-right window.
  kernel->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                  IntegerAttr::get(IntegerType::get(ctx, 32), 1));
  kernel->setAttr("attn.block_rows", IntegerAttr::get(i64, blockRows));

  Block &entry = kernel.getBody().front();
  ownedBuilder = std::make_unique<ImplicitLocOpBuilder>(forall.getLoc(), ctx);
  builder = ownedBuilder.get();
  b().setInsertionPointToStart(&entry);
  buildPrologue(kernel);
  // Values defined before the forall (constants, sizes) are needed too.
  for (Operation &op : func.getBody().front()) {
    if (&op == forall.getOperation())
      break;
    if (failed(convertOp(&op)))
      return failure();
  }
  // The forall's shared outputs are the output arguments themselves.
  for (auto [arg, init] :
       llvm::zip(forall.getRegionIterArgs(), forall.getOutputs())) {
    auto it = views.find(init);
    if (it == views.end())
      return forall.emitOpError("attn-lower-to-gpu: outputs must be "
                                "kernel arguments");
    views[arg] = it->second;
  }
  if (failed(convertBlock(*forall.getBody())))
    return failure();
  gpu::ReturnOp::create(b());
  return success();
}

struct AttnLowerToGpuPass
    : public attn::impl::AttnLowerToGpuPassBase<AttnLowerToGpuPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // What the CPU lowering has and this one not yet, refused on the op
    // before anything else is said of its function.
    WalkResult unsupported = module.walk([](Operation *op) {
      if (isa<AttentionWeightsOp, LinearBackwardOp, AdditiveBackwardOp, MhaOp>(
              op)) {
        op->emitOpError() << "attn-lower-to-gpu: " << op->getName()
                          << " has no GPU lowering yet (the CPU lowering "
                             "has it)";
        return WalkResult::interrupt();
      }
      auto online = dyn_cast<OnlineAttentionOp>(op);
      // The modifiers of an online step or of a backward.
      SmallVector<Region *, 2> modifierRegions;
      if (isa<OnlineAttentionOp, AttentionBackwardOp>(op))
        for (Region *region : {scoreModOf(op), maskModOf(op)})
          if (region)
            modifierRegions.push_back(region);
      {
        // The math functions with an NVVM lowering that needs no libdevice
        // (attn-approximate-math{nvvm}); the others are the CPU's only.
        Operation *unlowered = nullptr;
        for (Region *region : modifierRegions)
          region->walk([&](Operation *inner) {
            if (isa<math::MathDialect>(inner->getDialect()) &&
                !isa<math::ExpOp, math::Exp2Op, math::LogOp, math::Log2Op,
                     math::TanhOp, math::AbsFOp, math::FloorOp, math::CeilOp,
                     math::TruncOp, math::RoundEvenOp, math::SqrtOp,
                     math::RsqrtOp, math::CopySignOp, math::FmaOp>(inner))
              unlowered = inner;
          });
        if (unlowered) {
          op->emitOpError() << "attn-lower-to-gpu: the modifiers' '"
                            << unlowered->getName()
                            << "' has no GPU lowering yet (the CPU lowering "
                               "has it)";
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    if (unsupported.wasInterrupted())
      return signalPassFailure();
    SmallVector<std::pair<func::FuncOp, scf::ForallOp>> kernels;
    // A linear or additive attention kernel and a backward kernel are
    // built from their op alone (their grids are their own:
    // Gpu/LinearKernel.cpp, Gpu/AdditiveKernel.cpp, Gpu/BackwardKernel.cpp),
    // tiled or not.
    SmallVector<std::pair<func::FuncOp, Operation *>> blockKernels;
    for (auto func : module.getOps<func::FuncOp>()) {
      SmallVector<Operation *> ops;
      func.walk([&](Operation *op) {
        if (isa<LinearOp, AdditiveOp, AttentionBackwardOp>(op))
          ops.push_back(op);
      });
      if (!ops.empty()) {
        if (ops.size() != 1) {
          mlir::emitError(func.getLoc())
              << "@" << func.getName() << " holds " << ops.size()
              << " linear, additive or backward attention ops; a GPU kernel "
                 "computes one: put each in a function of its own";
          return signalPassFailure();
        }
        blockKernels.push_back({func, ops.front()});
        continue;
      }
      scf::ForallOp forall;
      unsigned count = 0;
      func.walk([&](scf::ForallOp f) {
        forall = f;
        ++count;
      });
      if (count == 0)
        continue;
      // A GPU kernel is one attention op: a function with several, or
      // one inside a loop or branch, is refused on the op, in those terms.
      if (count != 1) {
        mlir::emitError(func.getLoc())
            << "@" << func.getName() << " holds " << count
            << " attention ops; a GPU kernel computes one: put each in a "
               "function of its own";
        return signalPassFailure();
      }
      if (Operation *parent = forall->getParentOp();
          parent != func.getOperation()) {
        mlir::emitError(forall.getLoc())
            << "this attn.attention is inside '" << parent->getName()
            << "'; a GPU kernel computes one attention op at the top level "
               "of its function: run the loop or branch on the host, "
               "calling the kernel in each iteration";
        return signalPassFailure();
      }
      kernels.push_back({func, forall});
    }
    // One block kernel, on the GPU or as its host emulation.
    auto buildBlockKernel = [&](func::FuncOp func, Operation *op,
                                gpu::GPUModuleOp gpuModule) {
      if (auto linear = dyn_cast<LinearOp>(op))
        return hostEmulation ? buildLinearHostEmulation(func, linear, module)
                             : buildLinearGpuKernel(func, linear, gpuModule);
      if (auto backward = dyn_cast<AttentionBackwardOp>(op))
        return hostEmulation
                   ? buildBackwardHostEmulation(func, backward, module)
                   : buildBackwardGpuKernel(func, backward, gpuModule);
      auto additive = cast<AdditiveOp>(op);
      return hostEmulation ? buildAdditiveHostEmulation(func, additive, module)
                           : buildAdditiveGpuKernel(func, additive, gpuModule);
    };
    if (hostEmulation) {
      for (auto [func, op] : blockKernels) {
        if (failed(buildBlockKernel(func, op, {})))
          return signalPassFailure();
        func.erase();
      }
      blockKernels.clear();
    }
    if (kernels.empty() && blockKernels.empty())
      return;
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(module.getContext()));
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToEnd(module.getBody());
    auto gpuModule =
        gpu::GPUModuleOp::create(b, module.getLoc(), "attn_kernels");
    for (auto [func, forall] : kernels) {
      KernelConverter converter(func, forall, useMma, useAsyncCopy,
                                rowsPerWarp);
      if (failed(converter.convert(gpuModule)))
        return signalPassFailure();
      func.erase();
    }
    for (auto [func, op] : blockKernels) {
      if (failed(buildBlockKernel(func, op, gpuModule)))
        return signalPassFailure();
      func.erase();
    }
  }
};

} // namespace
