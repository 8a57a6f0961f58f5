//===- TileMemory.cpp - Staging tiles in shared memory --------------------===//
#include "lib/Transforms/Gpu/TileMemory.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::gpu_kernel;

/// Copies `rows` x `cols` elements of `view` (rows along dim 2, columns
/// along dim 3) into `tile`, all threads of the block cooperating; rows up
/// to the tile's height and columns up to `paddedCols` are zero-filled. With
/// cp.async (sm_80) where the tensor's layout allows 16-byte chunks (checked
/// once per launch), as one group of copies still in flight on return
/// (waitForCopies); element by element otherwise.
void TileMemory::stageTile(Value tile, const View &view, Value rows,
                           int64_t cols, int64_t paddedCols) {
  if (Value copyable = globals[view.tensor].asyncCopyable) {
    auto choice = scf::IfOp::create(b(), copyable, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b());
    b().setInsertionPoint(choice.thenBlock()->getTerminator());
    copyTileAsync(tile, view, rows, cols, paddedCols);
    b().setInsertionPoint(choice.elseBlock()->getTerminator());
    copyTileByElements(tile, view, rows, cols, paddedCols);
  } else {
    copyTileByElements(tile, view, rows, cols, paddedCols);
  }
  // One cp.async group per tile, empty when the tile took element copies,
  // so that waitForCopies(n) counts tiles whichever way each was copied.
  if (asyncCopy)
    nvgpu::DeviceAsyncCreateGroupOp::create(
        b(), nvgpu::DeviceAsyncTokenType::get(b().getContext()), ValueRange{});
}

Value TileMemory::asyncCopyable(const GlobalTensor &g) {
  int64_t chunk = 16 / elementBytes(elementType);
  auto multiple = [&](Value v, int64_t n) {
    return arith::CmpIOp::create(b(), arith::CmpIPredicate::eq,
                                 arith::RemUIOp::create(b(), v, cst(n)), cst(0))
        .getResult();
  };
  Value ok = arith::CmpIOp::create(b(), arith::CmpIPredicate::eq,
                                   g.strides.back(), cst(1));
  for (Value stride : ArrayRef(g.strides).drop_back())
    ok = andI(ok, multiple(stride, chunk));
  Value address = memref::ExtractAlignedPointerAsIndexOp::create(b(), g.data);
  return andI(ok, multiple(address, 16));
}

void TileMemory::copyTileAsync(Value tile, const View &view, Value rows,
                               int64_t cols, int64_t paddedCols) {
  int64_t tileRows = cast<MemRefType>(tile.getType()).getDimSize(0);
  int64_t chunk = 16 / elementBytes(elementType);
  int64_t chunksPerRow = paddedCols / chunk;
  const GlobalTensor &g = globals[view.tensor];
  forLoop(
      tid, cst(tileRows * chunksPerRow), cst(warps * kWarpSize), [&](Value i) {
        Value r = arith::DivUIOp::create(b(), i, cst(chunksPerRow));
        Value c =
            mul(arith::RemUIOp::create(b(), i, cst(chunksPerRow)), cst(chunk));
        // Elements read: the chunk's part of a real row; the rest of the
        // 16 bytes is zero-filled (a row past the end reads nothing,
        // from a valid address).
        Value inside = lt(r, rows);
        Value count = arith::MaxSIOp::create(
            b(), arith::MinSIOp::create(b(), sub(cst(cols), c), cst(chunk)),
            cst(0));
        count = select(inside, count, cst(0));
        Value reads = arith::CmpIOp::create(b(), arith::CmpIPredicate::sgt,
                                            count, cst(0));
        Value row = select(reads, r, cst(0));
        Value col = select(reads, c, cst(0));
        nvgpu::DeviceAsyncCopyOp::create(
            b(), nvgpu::DeviceAsyncTokenType::get(b().getContext()), tile,
            ValueRange{r, c}, g.data,
            ValueRange{globalIndex(view, {cst(0), cst(0), row, col})},
            b().getIndexAttr(chunk), count, b().getUnitAttr());
      });
}

/// Waits until at most `pending` of this thread's latest cp.async groups
/// (tiles) are still in flight; a barrier then makes every thread's copies
/// visible. Nothing to wait for without cp.async (element copies are
/// synchronous, and so is a tile whose layout took that path).
void TileMemory::waitForCopies(unsigned pending) {
  if (asyncCopy)
    NVVM::CpAsyncWaitGroupOp::create(b(), pending);
}

void TileMemory::copyTileByElements(Value tile, const View &view, Value rows,
                                    int64_t cols, int64_t paddedCols) {
  int64_t tileRows = cast<MemRefType>(tile.getType()).getDimSize(0);
  Value zero = arith::ConstantOp::create(b(), b().getZeroAttr(elementType));
  const GlobalTensor &g = globals[view.tensor];
  forLoop(tid, cst(tileRows * paddedCols), cst(warps * kWarpSize),
          [&](Value i) {
            Value r = arith::DivUIOp::create(b(), i, cst(paddedCols));
            Value c = arith::RemUIOp::create(b(), i, cst(paddedCols));
            Value inside = andI(lt(r, rows), lt(c, cst(cols)));
            Value v = ifElse(
                inside, elementType,
                [&]() -> Value {
                  return memref::LoadOp::create(
                      b(), g.data,
                      ValueRange{globalIndex(view, {cst(0), cst(0), r, c})});
                },
                [&]() -> Value { return zero; });
            memref::StoreOp::create(b(), v, tile, ValueRange{r, c});
          });
}

void TileMemory::stageQuery(const View &view) {
  gpu::BarrierOp::create(b()); // earlier readers of the tile are done
  stageTile(shared.query, view, view.sizes[2], headDim, paddedHeadDim);
  waitForCopies(0);
  gpu::BarrierOp::create(b());
}
