//===- TilePlan.cpp - What a GPU kernel's tile is, read from the IR -------===//
#include "lib/Transforms/Gpu/TilePlan.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::gpu_kernel;

namespace {
/// The most static keys an op may take as one tile, without a key loop (as
/// many as the largest key tile the GPU pipeline takes).
constexpr int64_t kMaxWholeKeys = 128;
} // namespace

LogicalResult TilePlan::analyze() {
  if (forall.getRank() > 3)
    return forall.emitOpError("attn-lower-to-gpu expects the forall of "
                              "attn-tile (at most batch, head, query tile)");
  SmallVector<OnlineAttentionOp> online;
  forall.walk([&](OnlineAttentionOp op) { online.push_back(op); });
  if (online.empty())
    return forall.emitOpError(
        "has no attn.online_attention: run attn-tiling first");
  if (failed(analyzeGrid()))
    return failure();
  auto lbs = forall.getStaticLowerBound(), steps = forall.getStaticStep();
  if (llvm::any_of(lbs, [](int64_t v) { return v != 0; }) ||
      llvm::any_of(steps, ShapedType::isDynamic))
    return forall.emitOpError("needs lower bounds 0 and constant steps");
  // The query tile's height is that of the accumulator the tile allocates.
  forall.walk([&](bufferization::AllocTensorOp alloc) {
    if (alloc.getType().getRank() == 4 && alloc.getType().hasStaticShape())
      blockRows = alloc.getType().getDimSize(2);
  });
  auto accType = cast<ShapedType>(online.front().getAcc().getType());
  auto qType = cast<ShapedType>(online.front().getQuery().getType());
  elementType = qType.getElementType();
  headDim = qType.getDimSize(3);
  valueDim = accType.getDimSize(3);
  for (OnlineAttentionOp op : online) {
    auto loop = op->getParentOfType<scf::ForOp>();
    std::optional<int64_t> step = loop && forall->isProperAncestor(loop)
                                      ? getConstantIntValue(loop.getStep())
                                      : std::nullopt;
    // Static keys that fit one key tile have had their loop folded away
    // by canonicalization: the op takes them all as one tile, padded to
    // whole MMA steps (keys past Sk are masked like a tail tile's).
    int64_t staticKeys = cast<ShapedType>(op.getKey().getType()).getDimSize(2);
    if (!loop || !forall->isProperAncestor(loop)) {
      if (ShapedType::isDynamic(staticKeys) || staticKeys > kMaxWholeKeys)
        return op.emitOpError("attn-lower-to-gpu needs the keys in a loop "
                              "of key tiles (attn-tile-keys) or at most ")
               << kMaxWholeKeys << " static keys, found "
               << (ShapedType::isDynamic(staticKeys)
                       ? std::string("?")
                       : std::to_string(staticKeys));
      step = llvm::alignTo(std::max<int64_t>(staticKeys, 1), kMmaK);
    }
    if (!step || *step % kMmaK != 0)
      return op.emitOpError("attn-lower-to-gpu needs key loops with a "
                            "constant step that is a multiple of ")
             << kMmaK << " (attn-tile-keys)";
    if (keyTile && keyTile != *step)
      return op.emitOpError("key loops of different tile sizes");
    keyTile = *step;
  }
  paddedHeadDim = llvm::alignTo(headDim, kMmaK);
  paddedValueDim = llvm::alignTo(valueDim, kMmaK);
  // The ops' #attn.kernel (attn-choose-kernels), else the pass's option:
  // tensor cores take 16-bit inputs.
  bool sixteenBit = elementType.isF16() || elementType.isBF16();
  kind = requestMma && sixteenBit ? GpuMicroKernelKind::MmaSync
                                  : GpuMicroKernelKind::Fma;
  // Rows a warp: the kernel's row_block (0: 16), else the pass's option.
  int64_t rowsPerWarp = requestRowsPerWarp;
  for (OnlineAttentionOp op : online) {
    KernelAttr kernel = op.getKernelAttr();
    if (!kernel)
      continue;
    rowsPerWarp = kernel.getRowBlock() ? kernel.getRowBlock() : kMmaRows;
    switch (kernel.getMicroKernel()) {
    case MicroKernel::mma_sync:
      if (!sixteenBit)
        return op.emitOpError("attn-lower-to-gpu: #attn.kernel<mma_sync> "
                              "takes f16 or bf16 inputs, found ")
               << elementType;
      kind = GpuMicroKernelKind::MmaSync;
      break;
    case MicroKernel::fma:
      kind = GpuMicroKernelKind::Fma;
      break;
    default:
      return op.emitOpError("attn-lower-to-gpu: #attn.kernel<")
             << stringifyMicroKernel(kernel.getMicroKernel())
             << "> is a CPU micro-kernel; a GPU takes mma_sync or fma";
    }
  }
  if (rowsPerWarp < kMmaRows || rowsPerWarp % kMmaRows != 0 ||
      rowsPerWarp > kMmaRows * kMaxRowBlocks)
    return forall.emitOpError("attn-lower-to-gpu: ")
           << rowsPerWarp << " query rows a warp: a warp takes 16 or 32";
  if (blockRows == 0 || blockRows % rowsPerWarp != 0 ||
      blockRows > 16 * rowsPerWarp)
    return forall.emitOpError("query tile of ")
           << blockRows << " rows: the GPU kernel needs a multiple of "
           << rowsPerWarp << " (rows a warp) up to " << 16 * rowsPerWarp;
  rowBlocks = rowsPerWarp / kMmaRows;
  warps = blockRows / rowsPerWarp;
  // cp.async for the tensor-core path (16-bit inputs). The f32 FMA path
  // keeps element copies: with them its kernels stay below the register
  // limit (with cp.async ptxas spilled a few f32 kernels).
  asyncCopy = asyncCopy && kind == GpuMicroKernelKind::MmaSync;
  // Row pitches that spread a warp's accesses over the banks: 16 bytes of
  // padding for the paired 16-bit loads (which keeps cp.async's 16-byte
  // chunks aligned), one word for f32 rows.
  int64_t pad = elementType.isF32() ? 1 : 8;
  qPitch = paddedHeadDim + pad;
  vPitch = paddedValueDim + pad;
  pPitch = keyTile + 1;
  return success();
}

/// The block id of each forall index: x = query tile, y = head, z = batch
/// (x is the grid's largest dimension), as the forall's #gpu.block mapping
/// says (attn-tile block-mapping), or innermost first for an unmapped forall
/// of all three dims. Without the mapping, canonicalization drops dims of
/// one iteration (B = 1, a static Sq of one tile) and the positions shift,
/// while the runtime still launches the three-dimensional grid.
LogicalResult TilePlan::analyzeGrid() {
  int64_t rank = forall.getRank();
  for (int64_t i = 0; i < rank; ++i)
    gridDims.push_back(static_cast<gpu::Dimension>(rank - 1 - i));
  std::optional<ArrayAttr> grid = forall.getMapping();
  if (!grid || grid->empty()) {
    if (rank == 3)
      return success();
    return forall.emitOpError(
        "attn-lower-to-gpu: a forall of fewer than three dims needs a "
        "#gpu.block mapping (attn-tile block-mapping) to say which of "
        "batch, head and query tile it kept");
  }
  for (auto [i, attr] : llvm::enumerate(*grid)) {
    auto block = dyn_cast<gpu::GPUBlockMappingAttr>(attr);
    if (!block || block.getMappingId() > 2)
      return forall.emitOpError("attn-lower-to-gpu maps the forall to "
                                "#gpu.block<x|y|z> only, found ")
             << attr;
    gridDims[i] = static_cast<gpu::Dimension>(block.getMappingId());
  }
  return success();
}
