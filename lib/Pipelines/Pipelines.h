//===- Pipelines.h - Named pass pipelines of attn ---------------*- C++ -*-===//
#ifndef ATTN_PIPELINES_PIPELINES_H
#define ATTN_PIPELINES_PIPELINES_H

#include "lib/Support/Defaults.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir {
namespace attn {

/// An option of a pipeline (spelled out once: inside the TilingOptions
/// template the base's name is not found by unqualified lookup).
template <typename T>
using PipelineOption = ::mlir::detail::PassOptions::Option<T>;

/// The options of the tiling stages (attn-tile, attn-online-softmax,
/// attn-split-keys, attn-skip-masked-blocks, attn-tile-keys), declared once
/// for every pipeline that runs them on the CPU.
template <typename Derived>
struct TilingOptions : public PassPipelineOptions<Derived> {
  PipelineOption<int64_t> queryTileSize{
      *this, "query-tile-size",
      llvm::cl::desc("Query rows per tile (one work item)"),
      llvm::cl::init(::mlir::attn::defaults::kQueryTileRows)};
  PipelineOption<int64_t> bandedQueryTileSize{
      *this, "banded-query-tile-size",
      llvm::cl::desc("Query rows per tile of causal or windowed ops (0: "
                     "query-tile-size)"),
      llvm::cl::init(0)};
  PipelineOption<int64_t> keyTileSize{
      *this, "key-tile-size", llvm::cl::desc("Keys per tile of the key loop"),
      llvm::cl::init(::mlir::attn::defaults::kKeyBlock)};
  PipelineOption<bool> alignKeyRanges{
      *this, "align-key-ranges",
      llvm::cl::desc("Give causal and windowed ops' unmasked key ranges "
                     "whole key tiles (attn-skip-masked-blocks)"),
      llvm::cl::init(true)};
  PipelineOption<int64_t> decodeRows{
      *this, "decode-rows",
      llvm::cl::desc("Ops of at most this many query rows (decoding) take a "
                     "GQA group of heads per work item and read K and V in "
                     "place (0: never)"),
      llvm::cl::init(::mlir::attn::defaults::kDecodeRows)};
  PipelineOption<int64_t> laneRows{
      *this, "lane-rows",
      llvm::cl::desc("Query rows per tile of the lane-rows micro-kernel "
                     "(rows in vector lanes; 0: off); such ops stay whole "
                     "and their key loop is not tiled"),
      llvm::cl::init(0)};
};

/// attn-tiling: the tiling stages alone (on tensors), for the CPU or, with
/// block-mapping, as the GPU pipeline runs them.
struct TilingPipelineOptions : public TilingOptions<TilingPipelineOptions> {
  PipelineOption<bool> blockMapping{
      *this, "block-mapping",
      llvm::cl::desc("Map the tiles' forall to GPU blocks (attn-tile "
                     "block-mapping; attn-to-nvvm sets it)"),
      llvm::cl::init(false)};
};

/// attn-to-llvm-cpu: the tiling stages, then the CPU micro-kernels.
struct CpuPipelineOptions : public TilingOptions<CpuPipelineOptions> {
  PipelineOption<int64_t> vectorWidth{
      *this, "vector-width",
      llvm::cl::desc("f32 lanes per vector (16: AVX-512, 8: AVX2)"),
      llvm::cl::init(::mlir::attn::defaults::kVectorWidth)};
  PipelineOption<int64_t> rowBlock{
      *this, "row-block",
      llvm::cl::desc("Query rows sharing each packed K/V vector load"),
      llvm::cl::init(::mlir::attn::defaults::kRowBlock)};
  PipelineOption<int64_t> bandKeyStep{
      *this, "band-key-step",
      llvm::cl::desc("Keys per step in the packed blocks a causal or window "
                     "band cuts (0: the largest divisor of key-tile-size up "
                     "to 64)"),
      llvm::cl::init(0)};
  PipelineOption<bool> bf16Dot{
      *this, "bf16-dot",
      llvm::cl::desc("bf16 Q·Kᵀ by vdpbf16ps (CPUs with AVX-512 BF16)"),
      llvm::cl::init(false)};
  PipelineOption<bool> recomputeBf16Dot{
      *this, "recompute-bf16-dot",
      llvm::cl::desc("The products of bf16 operands in the kernels that "
                     "recompute the scores (backward, weights) by vdpbf16ps "
                     "(with bf16-dot; where the dot product pays)"),
      llvm::cl::init(false)};
  PipelineOption<bool> amx{
      *this, "amx",
      llvm::cl::desc("Lower AMX tile operations (the amx micro-kernel's) to "
                     "LLVM's AMX intrinsics (CPUs with amx-tile, amx-bf16)"),
      llvm::cl::init(false)};
  PipelineOption<bool> emulateAmx{
      *this, "emulate-amx",
      llvm::cl::desc("Run the amx micro-kernel's tile operations as scalar "
                     "loops (attn-emulate-amx: for tests on CPUs without "
                     "AMX)"),
      llvm::cl::init(false)};
  PipelineOption<bool> avx512Exp{
      *this, "avx512-exp",
      llvm::cl::desc("Softmax exponentials by AVX-512's vscalefps and a "
                     "polynomial (CPUs with AVX-512F)"),
      llvm::cl::init(false)};
  PipelineOption<bool> bf16ByIntegers{
      *this, "bf16-by-integers",
      llvm::cl::desc("f32 <-> bf16 conversions by integer operations (CPUs "
                     "without AVX-512 BF16 or AVX-NE-CONVERT, where LLVM "
                     "calls a library function per element)"),
      llvm::cl::init(false)};
  PipelineOption<int64_t> prefetchDistance{
      *this, "prefetch-bytes",
      llvm::cl::desc("Bytes of K ahead of the scored row whose K and V rows "
                     "decoding kernels prefetch into L2; unless 0, lane-rows "
                     "kernels prefetch the next key block (0: none)"),
      llvm::cl::init(::mlir::attn::defaults::kPrefetchBytes)};
};

struct GpuPipelineOptions : public PassPipelineOptions<GpuPipelineOptions> {
  PipelineOption<std::string> chip{
      *this, "chip",
      llvm::cl::desc("NVIDIA GPU architecture (sm_80, sm_90...)"),
      llvm::cl::init("sm_80")};
  PipelineOption<std::string> features{
      *this, "features", llvm::cl::desc("PTX features (e.g. +ptx80)"),
      llvm::cl::init("+ptx80")};
  PipelineOption<int64_t> warps{
      *this, "warps", llvm::cl::desc("Warps per thread block"),
      llvm::cl::init(::mlir::attn::defaults::kGpuWarps)};
  PipelineOption<int64_t> rowsPerWarp{
      *this, "rows-per-warp",
      llvm::cl::desc("Query rows per warp, 16 or 32, for ops without an "
                     "#attn.kernel (their row_block otherwise)"),
      llvm::cl::init(::mlir::attn::defaults::kGpuRowsPerWarp)};
  PipelineOption<int64_t> keyTileSize{
      *this, "key-tile-size",
      llvm::cl::desc("Keys per shared-memory tile (a multiple of 16)"),
      llvm::cl::init(::mlir::attn::defaults::kGpuKeyBlock)};
  PipelineOption<bool> mma{
      *this, "mma",
      llvm::cl::desc("Tensor-core mma.sync for f16/bf16 (FMA when off)"),
      llvm::cl::init(true)};
};

/// What the tiling stages take, from whichever pipeline's options.
struct TilingConfig {
  int64_t queryTileSize = ::mlir::attn::defaults::kQueryTileRows,
          bandedQueryTileSize = 0,
          keyTileSize = ::mlir::attn::defaults::kKeyBlock;
  int64_t decodeRows = ::mlir::attn::defaults::kDecodeRows, laneRows = 0;
  bool alignKeyRanges = true, blockMapping = false;

  template <typename Derived>
  static TilingConfig from(const TilingOptions<Derived> &options) {
    TilingConfig config;
    config.queryTileSize = options.queryTileSize;
    config.bandedQueryTileSize = options.bandedQueryTileSize;
    config.keyTileSize = options.keyTileSize;
    config.decodeRows = options.decodeRows;
    config.laneRows = options.laneRows;
    config.alignKeyRanges = options.alignKeyRanges;
    return config;
  }
};

/// attn.attention -> tiles -> online softmax -> masked-block skipping ->
/// key loop (all on tensors).
void buildAttnTilingPipeline(OpPassManager &pm, const TilingConfig &config);

/// The whole CPU chain: the tiling pipeline, bufferization, the vector
/// micro-kernel, work items, and the LLVM dialect.
void buildAttnToLLVMCpuPipeline(OpPassManager &pm,
                                const CpuPipelineOptions &options);

/// The GPU chain: the same tiling pipeline, then one thread block per query
/// tile (attn-lower-to-gpu) and the NVVM dialect in a gpu.module with an
/// NVVM target attached, ready for gpu-module-to-binary.
void buildAttnToNVVMPipeline(OpPassManager &pm,
                             const GpuPipelineOptions &options);

/// Registers `attn-tiling`, `attn-to-llvm-cpu` and `attn-to-nvvm` with the
/// pass registry.
void registerAttnPipelines();

} // namespace attn
} // namespace mlir

#endif // ATTN_PIPELINES_PIPELINES_H
