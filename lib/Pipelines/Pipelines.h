//===- Pipelines.h - Named pass pipelines of attn ---------------*- C++ -*-===//
#ifndef ATTN_PIPELINES_PIPELINES_H
#define ATTN_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir {
namespace attn {

struct CpuPipelineOptions
    : public PassPipelineOptions<CpuPipelineOptions> {
  PassOptions::Option<int64_t> queryTileSize{
      *this, "query-tile-size",
      llvm::cl::desc("Query rows per tile (one work item)"),
      llvm::cl::init(64)};
  PassOptions::Option<int64_t> keyTileSize{
      *this, "key-tile-size", llvm::cl::desc("Keys per tile of the key loop"),
      llvm::cl::init(128)};
  PassOptions::Option<int64_t> vectorWidth{
      *this, "vector-width",
      llvm::cl::desc("f32 lanes per vector (16: AVX-512, 8: AVX2)"),
      llvm::cl::init(16)};
};

/// attn.attention -> tiles -> online softmax -> masked-block skipping ->
/// key loop (all on tensors).
void buildAttnTilingPipeline(OpPassManager &pm,
                             const CpuPipelineOptions &options);

/// The whole CPU chain: the tiling pipeline, bufferization, the vector
/// micro-kernel, work items, and the LLVM dialect.
void buildAttnToLLVMCpuPipeline(OpPassManager &pm,
                                const CpuPipelineOptions &options);

/// Registers `attn-tiling` and `attn-to-llvm-cpu` with the pass registry.
void registerAttnPipelines();

} // namespace attn
} // namespace mlir

#endif // ATTN_PIPELINES_PIPELINES_H
