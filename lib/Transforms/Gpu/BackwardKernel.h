//===- BackwardKernel.h - attn.attention_backward as a GPU kernel -*- C++
//-*-===//
//
// attn-lower-to-gpu's kernel for the gradients of attention
// (Gpu/BackwardKernel.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TRANSFORMS_GPU_BACKWARDKERNEL_H
#define ATTN_TRANSFORMS_GPU_BACKWARDKERNEL_H

#include "dialect/AttnOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace mlir {
namespace attn {
namespace gpu_kernel {

/// Threads of a backward kernel's block.
constexpr int64_t kBackwardThreads = 256;

/// The tile of a backward kernel with head dims D and Dv: its blocks take
/// this many keys (dK, dV) or query rows (dQ), and it is the kernel's
/// attn.block_rows. The grid is (ceil(Sk / tile) + G · ceil(Sq / tile),
/// Hkv, B), G = Hq / Hkv.
int64_t backwardTile(int64_t headDim, int64_t valueDim);

/// Builds in `gpuModule` the kernel of `func`, whose body is `op` (tiled
/// or not): every tensor the op reads or writes is a function argument (or
/// the tiling's slice of one), the kernel's parameters in the function's
/// order.
LogicalResult buildBackwardGpuKernel(func::FuncOp func, AttentionBackwardOp op,
                                     gpu::GPUModuleOp gpuModule);

/// The same kernel as its host emulation (see buildLinearHostEmulation).
LogicalResult buildBackwardHostEmulation(func::FuncOp func,
                                         AttentionBackwardOp op,
                                         ModuleOp module);

} // namespace gpu_kernel
} // namespace attn
} // namespace mlir

#endif // ATTN_TRANSFORMS_GPU_BACKWARDKERNEL_H
