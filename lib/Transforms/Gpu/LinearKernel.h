//===- LinearKernel.h - attn.linear as a GPU kernel -------------*- C++ -*-===//
//
// attn-lower-to-gpu's kernel for linear attention (Gpu/LinearKernel.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TRANSFORMS_GPU_LINEARKERNEL_H
#define ATTN_TRANSFORMS_GPU_LINEARKERNEL_H

#include "dialect/AttnOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace mlir {
namespace attn {
namespace gpu_kernel {

/// Threads of a linear attention kernel's block.
constexpr int64_t kLinearThreads = 256;
/// Value columns a linear attention kernel's block takes (its state's
/// columns): the grid's x dimension is ceil(Dv / kLinearColumns).
constexpr int64_t kLinearColumns = 32;

/// Builds in `gpuModule` the kernel of `func`, whose body is `op` (tiled
/// or not) over the function's arguments Q, K, V, [S₀, z₀], O, [S₁, z₁].
LogicalResult buildLinearGpuKernel(func::FuncOp func, LinearOp op,
                                   gpu::GPUModuleOp gpuModule);

/// The same kernel as a host function of the same parameters, appended to
/// `module`: the grid's blocks one after the other, each on one thread
/// (barriers dropped, shared memory on the stack). Tests run it on the CPU
/// to check the kernel's arithmetic where no GPU is.
LogicalResult buildLinearHostEmulation(func::FuncOp func, LinearOp op,
                                       ModuleOp module);

} // namespace gpu_kernel
} // namespace attn
} // namespace mlir

#endif // ATTN_TRANSFORMS_GPU_LINEARKERNEL_H
