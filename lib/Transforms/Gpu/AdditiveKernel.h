//===- AdditiveKernel.h - attn.additive as a GPU kernel ---------*- C++ -*-===//
//
// attn-lower-to-gpu's kernel for additive attention (Gpu/AdditiveKernel.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TRANSFORMS_GPU_ADDITIVEKERNEL_H
#define ATTN_TRANSFORMS_GPU_ADDITIVEKERNEL_H

#include "dialect/AttnOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace mlir {
namespace attn {
namespace gpu_kernel {

/// Threads of an additive attention kernel's block.
constexpr int64_t kAdditiveThreads = 256;
/// Query rows a block takes (the grid is (ceil(Sq / rows), B, 1)), and the
/// keys of its key tiles.
constexpr int64_t kAdditiveRows = 32, kAdditiveKeys = 32;

/// Builds in `gpuModule` the kernel of `func`, whose body is `op` (tiled
/// or not) over the function's arguments query, keys, values, W_q, W_k, v,
/// [mask], O, [weights].
LogicalResult buildAdditiveGpuKernel(func::FuncOp func, AdditiveOp op,
                                     gpu::GPUModuleOp gpuModule);

/// The same kernel as its host emulation (see buildLinearHostEmulation).
LogicalResult buildAdditiveHostEmulation(func::FuncOp func, AdditiveOp op,
                                         ModuleOp module);

} // namespace gpu_kernel
} // namespace attn
} // namespace mlir

#endif // ATTN_TRANSFORMS_GPU_ADDITIVEKERNEL_H
