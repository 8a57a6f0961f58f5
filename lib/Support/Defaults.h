//===- Defaults.h - The one default of each lowering option -----*- C++ -*-===//
//
// Each option of the lowering has its default here, once: the passes'
// options (lib/Transforms/Passes.td), the named pipelines'
// (lib/Pipelines/Pipelines.h), the kernel choices' (KernelChoice.h),
// attn-compile's CompileOptions and its flags all take it from here. The
// measurements behind them are in KernelChoice.h (ChooseKernels.cpp) and
// docs/benchmarks-history.md. No MLIR here: the compiler's public header
// includes it (the namespace is mlir::attn, with no MLIR header).
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_SUPPORT_DEFAULTS_H
#define ATTN_SUPPORT_DEFAULTS_H

#include <cstdint>

namespace mlir {
namespace attn {
namespace defaults {

/// Query rows per CPU work item (one tile of attn-tile).
inline constexpr int64_t kQueryTileRows = 256;
/// Keys per block of the key loop, and query rows per packed block, where
/// a kernel's choice does not say otherwise.
inline constexpr int64_t kKeyBlock = 128;
inline constexpr int64_t kRowBlock = 2;
/// Query rows up to which a CPU kernel is a decoding kernel: tiled by GQA
/// groups, its few rows read K and V in place (the direct path).
inline constexpr int64_t kDecodeRows = 4;
/// Bytes of K ahead whose K and V rows decoding kernels prefetch into L2.
inline constexpr int64_t kPrefetchBytes = 4096;
/// f32 lanes per vector where no target says (AVX-512).
inline constexpr int64_t kVectorWidth = 16;
/// Warps per GPU thread block, query rows per warp (one m16 block; 32 is
/// two), and keys per GPU key tile where a kernel's choice does not say
/// otherwise.
inline constexpr int64_t kGpuWarps = 4;
inline constexpr int64_t kGpuRowsPerWarp = 16;
inline constexpr int64_t kGpuKeyBlock = 64;

} // namespace defaults
} // namespace attn
} // namespace mlir

#endif // ATTN_SUPPORT_DEFAULTS_H
