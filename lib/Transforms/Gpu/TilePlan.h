//===- TilePlan.h - What a GPU kernel's tile is, read from the IR -*- C++
//-*-===//
//
// attn-lower-to-gpu reads the tiled tensor IR as a plan: the forall's grid
// mapping, the query tile's height (warps of 16 or 32 rows), the head dims, the
// key tile of the key loops, the micro-kernel (the ops' #attn.kernel, else the
// pass's option) and the shared tiles' row pitches. The converter
// (LowerToGpu.cpp) then builds the kernel from it.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TRANSFORMS_GPU_TILEPLAN_H
#define ATTN_TRANSFORMS_GPU_TILEPLAN_H

#include "lib/Transforms/Gpu/TileMemory.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mlir {
namespace attn {
namespace gpu_kernel {

class TilePlan : public SoftmaxStep {
protected:
  TilePlan(scf::ForallOp forall, bool requestMma, bool useAsyncCopy,
           int64_t requestRowsPerWarp)
      : forall(forall), requestMma(requestMma),
        requestRowsPerWarp(requestRowsPerWarp) {
    asyncCopy = useAsyncCopy;
  }

  /// Reads the tile's geometry and micro-kernel from the forall's body.
  LogicalResult analyze();
  /// The block id of each forall index (gridDims).
  LogicalResult analyzeGrid();

  scf::ForallOp forall;
  bool requestMma;
  /// Query rows per warp where the ops carry no #attn.kernel (16 or 32).
  int64_t requestRowsPerWarp;
  /// The micro-kernel the tile takes.
  GpuMicroKernelKind kind = GpuMicroKernelKind::Fma;
  /// The grid dimension of each forall index.
  SmallVector<gpu::Dimension> gridDims;
};

} // namespace gpu_kernel
} // namespace attn
} // namespace mlir

#endif // ATTN_TRANSFORMS_GPU_TILEPLAN_H
