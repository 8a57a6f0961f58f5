//===- Compiler.h - From kernel specs to object files and headers -*- C++
//-*-===//
//
// The library behind attn-compile and attn-run: it builds one function per
// KernelSpec around an attn.attention op, runs the attn-to-llvm-cpu
// pipeline, translates to LLVM IR, adds the C entry points and the
// self-describing kernel table of runtime/include/attn/kernel_abi.h, and
// emits an object file, a shared library and a C header.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_COMPILER_COMPILER_H
#define ATTN_COMPILER_COMPILER_H

#include "lib/Support/Defaults.h"
#include "lib/Support/KernelSpec.h"

#include <algorithm>
#include <string>
#include <vector>

namespace mlir {
class MLIRContext;
class ModuleOp;
namespace attn {
class AttentionOp;
}
} // namespace mlir

namespace attn {

struct CompileOptions {
  /// LLVM CPU name and feature string; empty means the host's.
  std::string targetCpu;
  std::string targetFeatures;
  /// Query rows per CPU work item: each packed K/V block serves that many
  /// rows (128 measured 5-15 % faster than 64 on this project's machines,
  /// 256 another 3-4 % for f32 and 10 % for bf16 full attention).
  int64_t queryTileSize = ::mlir::attn::defaults::kQueryTileRows;
  /// The same for causal and windowed kernels, whose tiles across the
  /// diagonal compute scores the band drops (256 measured 1-9 % slower
  /// than 128 there for f32); 0 means min(queryTileSize, 128), or
  /// min(queryTileSize, 256) for bf16 with the dot product (cpuTileRows in
  /// Codegen.cpp).
  int64_t bandedQueryTileSize = 0;
  int64_t bandedTileRows() const {
    return bandedQueryTileSize > 0 ? bandedQueryTileSize
                                   : std::min<int64_t>(queryTileSize, 128);
  }
  /// Keys per key tile and query rows per micro-kernel block; 0 chooses
  /// per kernel: 64 keys by 4 rows for f32 prefill on AVX-512 (5-8 %
  /// faster than 128 by 2 there; measured 4-10 % slower for decoding and
  /// 10-15 % slower for bf16's dot product at D = 64); for bf16 prefill
  /// with the dot product 64 by 4 where 128 keys' K and V panels would not
  /// fit a 48 KiB L1d (D + Dv > 192: 1.11-1.25x on Zen 5), 128 by 3 where
  /// Dv <= 80 (4-8 % faster than 2 rows at D = 64); 128 by 2 otherwise.
  int64_t keyTileSize = 0;
  int64_t rowBlock = 0;
  /// Keys per step in the packed path's key blocks that a causal or
  /// window band cuts, where each block of rows visits only the keys it
  /// sees; 0 means the largest that divides the key tile up to 64.
  int64_t bandKeyStep = 0;
  /// Query rows per tile of the lane-rows micro-kernel (rows in vector
  /// lanes, for kernels without the bf16 dot product);
  /// -1 chooses: 64 on AVX-512, 24 on AVX2, off (0) otherwise.
  int64_t laneRows = -1;
  /// f32 lanes per vector; 0 derives it from the target features.
  int64_t vectorWidth = 0;
  /// Bytes of K ahead of the scored row that decoding kernels prefetch
  /// (K and V rows, into L2; lane-rows kernels prefetch the next key
  /// block); 0 turns prefetching off.
  int64_t prefetchDistance = ::mlir::attn::defaults::kPrefetchBytes;
  /// Give decoding kernels (a static Sq of at most 4) the key split's
  /// phases (attn-split-keys), with which the runtime spreads a call with
  /// fewer GQA groups than threads over every thread.
  bool splitKeys = true;
  /// Let LLVM's O3 pipeline unroll loops. Off by default: attn-lower-to-
  /// vector already unrolls the register tiles, and on Zen 4 LLVM's
  /// unrolling on top measured no faster for prefill (0.99-1.01x) and 3-7 %
  /// slower for decoding, for 20-25 % more code and 0.15-0.25 s more
  /// compile time.
  bool llvmUnroll = false;
  /// Run the amx micro-kernel's tile operations as scalar loops
  /// (attn-emulate-amx) and choose it as on a CPU with AMX: an AMX kernel's
  /// code runs, slowly, on a CPU without AMX (for tests; the target needs
  /// AVX-512 BF16, whose dot product the AMX kernel's blocks that a band
  /// cuts take).
  bool emulateAmx = false;
  /// Print per-stage timings to stderr: MLIR's passes, translation, LLVM's
  /// optimization and code generation, the link.
  bool timing = false;
  /// The kernel table's symbol. The runtime looks up attn_library_v1 in a
  /// shared library; objects linked into one program need distinct names.
  std::string librarySymbol = "attn_library_v1";
  /// The micro-kernel and blocking of every kernel, as an #attn.kernel
  /// ("<lane_rows, query_tile = 128, key_block = 64, ...>", with or without
  /// "#attn.kernel"); empty: chosen per kernel for the target
  /// (lib/Transforms/KernelChoice.h), with the tile flags above fixing
  /// their parts of the choice.
  std::string kernel;
  /// A CUDA architecture ("sm_80", "sm_90"...) makes GPU kernels; empty
  /// means the CPU. targetFeatures then holds PTX features (default: the
  /// PTX version the architecture needs).
  std::string gpuArch;
  /// Warps per GPU thread block (1-16).
  int64_t gpuWarps = ::mlir::attn::defaults::kGpuWarps;
  /// Query rows per warp (16 or 32; 32 applies to f16/bf16 kernels with
  /// Dv <= 128, the others keep 16).
  int64_t gpuRowsPerWarp = ::mlir::attn::defaults::kGpuRowsPerWarp;
  /// The CUDA toolkit (ptxas) for cubin output; empty: $CUDA_HOME, else
  /// the toolkit found at configure time, else /usr/local/cuda.
  std::string cudaToolkit;
};

/// A compiled GPU kernel's launch shape (see attn_gpu_kernel).
struct GpuKernelInfo {
  std::string name;
  int64_t blockThreads = 0, blockRows = 0, sharedBytes = 0;
};

/// The target a compilation resolves to: the host, or --target-cpu with
/// the features LLVM knows it has, changed by --target-features.
struct ResolvedTarget {
  std::string triple, cpu, features;
  int64_t vectorWidth = 0;
  /// Whether `features` enables `name` ("avx512f").
  bool has(const std::string &name) const;
};
/// Fails with a message for a CPU that LLVM does not know.
bool resolveTarget(const CompileOptions &options, ResolvedTarget &target,
                   std::string &error);

/// The spec an attn.attention op computes (element type, dims, masking,
/// declared static sizes). Fails with a message for ops a kernel cannot be
/// made from (for example a tiled op with a diagonal operand).
bool specFromOp(mlir::attn::AttentionOp op, KernelSpec &spec,
                std::string &error);

/// Gives `spec` the score_mod and/or mask_mod in `regions` (their MLIR as
/// attn.attention prints them, e.g. "score_mod { ^bb0(%s: f32, %b: index,
/// ...): ... attn.yield %r : f32 }") reading tensors of `captureTypes`
/// ("tensor<?xf32>", ...): spec.modifiers and spec.captures. Fails with the
/// parser's or verifier's message.
bool setModifiers(KernelSpec &spec, const std::string &regions,
                  const std::vector<std::string> &captureTypes,
                  std::string &error);

/// Reads an .mlir file and returns the spec of every attn.attention in it,
/// named after its function (with a suffix when a function holds several).
bool specsFromMLIRFile(const std::string &path, std::vector<KernelSpec> &specs,
                       std::string &error);

enum class OutputKind { SharedLibrary, Object, MLIR, LLVMIR, PTX, Cubin };

/// Compiles `specs` into one output file. For MLIR the file holds the
/// kernel functions before lowering; for LLVMIR the optimized LLVM IR (CPU
/// only). With options.gpuArch set, PTX and Cubin write the kernels' image
/// and SharedLibrary/Object a host library whose kernel table embeds the PTX
/// (which the driver compiles for the GPU it runs on); `gpuKernels` then
/// receives their launch shapes.
bool compileKernels(const std::vector<KernelSpec> &specs,
                    const CompileOptions &options, OutputKind kind,
                    const std::string &outputPath, std::string &error,
                    std::vector<GpuKernelInfo> *gpuKernels = nullptr);

/// Query rows up to which a CPU kernel is a decoding kernel: what
/// attn-compile sets the CPU pipeline's decode-rows to.
constexpr int64_t kCpuDecodeRows = ::mlir::attn::defaults::kDecodeRows;

/// Whether `spec` is a decoding kernel on the CPU: a static Sq of at most
/// kCpuDecodeRows.
inline bool isCpuDecoding(const KernelSpec &spec) {
  int64_t rows = spec.staticSizes[3];
  return rows >= 1 && rows <= kCpuDecodeRows;
}

/// Whether a kernel compiled with `options` has the key split's phases
/// (`<name>_partial_*`, `<name>_merge_*`): CPU decoding kernels.
inline bool hasKeySplit(const KernelSpec &spec, const CompileOptions &options) {
  return options.splitKeys && options.gpuArch.empty() && !spec.backward &&
         !spec.linear && !spec.additive && !spec.mha && !spec.weights &&
         !spec.dropout && isCpuDecoding(spec);
}

/// The C header declaring the kernels' entry points and descriptors; it
/// embeds the kernel ABI so that it needs no other header. With `gpu`, the
/// kernels are CUDA kernels: the header gives their entry names, launch
/// shapes and parameter layout instead of CPU entry points.
std::string kernelHeader(const std::vector<KernelSpec> &specs,
                         const std::string &guard,
                         const std::string &librarySymbol = "attn_library_v1",
                         const std::vector<GpuKernelInfo> *gpu = nullptr,
                         const CompileOptions *options = nullptr);

/// "attn <version> (LLVM/MLIR <version>)".
std::string compilerVersion();

} // namespace attn

#endif // ATTN_COMPILER_COMPILER_H
