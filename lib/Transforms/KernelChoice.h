//===- KernelChoice.h - Which micro-kernel and blocking an op takes -*- C++
//-*-===//
//
// Every heuristic that picks how an attention op is lowered, in one place:
// the micro-kernel (CPU packed or lane-rows; GPU mma.sync or FMA) and the
// blocking (query tile, key block, row block, lane-rows tile, the bf16 dot
// product), from the target and the op's types. attn-choose-kernels
// records the result as the op's #attn.kernel, which the lowering reads;
// attn-compile runs the same functions with its flags as overrides.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TRANSFORMS_KERNELCHOICE_H
#define ATTN_TRANSFORMS_KERNELCHOICE_H

#include "dialect/AttnOps.h"
#include "lib/Support/Defaults.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <string>

namespace mlir {
namespace attn {

/// What the CPU choices depend on about the target.
struct CpuTarget {
  /// f32 lanes per vector: 16 with AVX-512F, 8 with AVX, else 4.
  int64_t vectorWidth = ::mlir::attn::defaults::kVectorWidth;
  /// AVX-512 BF16 (with 16 lanes) on a CPU where it pays (bf16DotPays):
  /// bf16 Q·Kᵀ and P·V by vdpbf16ps.
  bool bf16Dot = false;
  /// AMX tiles with bf16 (amx-tile and amx-bf16, with AVX-512 BF16): bf16
  /// Q·Kᵀ and P·V on the tile unit.
  bool amx = false;
  /// Lane-rows kernels prefetch the next key block during P·V
  /// (blockPrefetchPays).
  bool blockPrefetch = true;
  /// With the bf16 dot product, prefill takes 64-key blocks by 4 rows at
  /// every head dim, not only where 128 keys' panels overflow the L1d
  /// (smallBf16BlocksPay).
  bool smallBf16Blocks = false;
};

/// Whether vdpbf16ps outruns widening bf16 to f32 for FMAs on `cpu` (an
/// LLVM CPU name), given that the CPU has it: on AMD Zen 4 and 5 it does
/// (two products a lane, 115-140 % of the f32 FMA peak); on Intel's cores
/// it issues once in about three cycles against two FMAs a cycle (measured
/// on Emerald Rapids: 41-53 against 155 GFLOP/s a core), so there bf16
/// attention widens K and V (1.13-2.0x the dot product's speed, prefill;
/// decoding alike within the noise).
bool bf16DotPays(llvm::StringRef cpu);

/// Whether the lane-rows kernels' prefetch of the next key block's K and V
/// rows during P·V pays on `cpu` (an LLVM CPU name). It took f32 D = 128
/// and 256 at Sk = 8192 1.14-1.65x on Emerald Rapids and left Zen 4
/// within the noise; on AMD Zen 3 the same kernels ran 1.07-1.30x faster
/// without it (S = 2048 and 8192, D = 64-256, full and causal).
bool blockPrefetchPays(llvm::StringRef cpu);

/// Whether bf16 prefill by the dot product runs faster in 64-key blocks by
/// 4 rows (16 score accumulators) than in 128-key blocks by 3 or 2 rows
/// (24 or 16) on `cpu` (an LLVM CPU name), where 128 keys' K and V panels
/// fit the L1d. On Zen 5 it does at D = 32, 64 and 96 (1.08-1.11x, full and
/// causal; D = 80 0.99-1.02x): 3 rows x 8 score vectors, 8 K vectors and
/// the query pair are 33 registers, one accumulator spilled in the loop.
/// Zen 4, not measured, keeps 128-key blocks.
bool smallBf16BlocksPay(llvm::StringRef cpu);

/// What the choices read of LLVM CPU `cpu` with `vectorWidth` f32 lanes
/// whose features `has` tells (by LLVM's names: "avx512bf16", "amx-tile",
/// ...). The pass's target option (resolveCpuTarget) and attn-compile's
/// host both go through it, so that a choice made per CPU reaches both.
CpuTarget cpuTargetOf(llvm::StringRef cpu, int64_t vectorWidth,
                      llvm::function_ref<bool(llvm::StringRef)> has);

/// Registers LLVM's native target and its assembly printer, once per
/// process whichever thread asks first (LLVM's own registration races).
void initializeNativeTarget();

/// The CPU target that LLVM knows `cpu` (an LLVM CPU name: znver4,
/// sapphirerapids, x86-64-v3, ...) to be, with `features` ("+x,-y") on
/// top; false with `error` set where LLVM does not know the CPU.
bool resolveCpuTarget(llvm::StringRef cpu, llvm::StringRef features,
                      CpuTarget &target, std::string &error);

/// Choices a user fixed (attn-compile's flags); the others are chosen.
struct CpuKernelOverrides {
  /// Query rows per work item, and per work item of causal or windowed
  /// ops (0: min(queryTile, 128), or 256 for bf16 with the dot product).
  int64_t queryTile = ::mlir::attn::defaults::kQueryTileRows,
          bandedQueryTile = 0;
  /// Keys per block and rows per packed block (0: chosen).
  int64_t keyBlock = 0, rowBlock = 0;
  /// Rows of a lane-rows tile (-1: chosen; 0: no lane-rows kernel).
  int64_t laneRows = -1;
  /// Ops of a static Sq up to this are decoding kernels.
  int64_t decodeRows = ::mlir::attn::defaults::kDecodeRows;
};

/// The choice for `op` on a CPU.
KernelAttr chooseCpuKernel(AttentionOp op, const CpuTarget &target,
                           const CpuKernelOverrides &overrides);

/// The lane-rows tile a CPU target takes (overrides.laneRows where set).
int64_t cpuLaneRows(const CpuTarget &target,
                    const CpuKernelOverrides &overrides);

/// Choices a user fixed for a GPU kernel.
struct GpuKernelOverrides {
  /// Warps per thread block.
  int64_t warps = ::mlir::attn::defaults::kGpuWarps;
  /// Query rows per warp: 16, or 32 where the kernel's registers allow it
  /// (16-bit inputs on tensor cores, Dv <= 128; others take 16).
  int64_t rowsPerWarp = ::mlir::attn::defaults::kGpuRowsPerWarp;
  /// Keys per shared-memory tile (0: chosen).
  int64_t keyBlock = 0;
  /// Tensor cores for 16-bit inputs (else FMA).
  bool mma = true;
};

/// The choice for `op` on a GPU.
KernelAttr chooseGpuKernel(AttentionOp op, const GpuKernelOverrides &overrides);

/// Whether `target` names a CUDA architecture (sm_80, sm_90, sm_90a...).
bool isGpuTarget(llvm::StringRef target);

} // namespace attn
} // namespace mlir

#endif // ATTN_TRANSFORMS_KERNELCHOICE_H
