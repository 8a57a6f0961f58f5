//===- ChooseKernels.cpp - Which micro-kernel and blocking an op takes ----===//
//
// attn-choose-kernels records on every attn.attention (that has none) the
// #attn.kernel its target takes: the heuristics of KernelChoice.h, each
// with the measurement that made it. The passes after it read the choice.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/KernelChoice.h"
#include "lib/Transforms/Modifiers.h"
#include "lib/Transforms/Passes.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/TargetParser/Triple.h"
#include "llvm/TargetParser/X86TargetParser.h"

#include <mutex>

namespace mlir {
namespace attn {
#define GEN_PASS_DEF_ATTNCHOOSEKERNELSPASS
#include "lib/Transforms/Passes.h.inc"
} // namespace attn
} // namespace mlir

using namespace mlir;
using namespace mlir::attn;

namespace {

/// What a choice reads of an op.
struct OpShape {
  Type element;
  /// Q, K and V all bf16.
  bool allBf16;
  int64_t headDim, valueDim;
  bool banded;
  /// A static Sq of at most the decoding rows.
  bool decoding;
};

OpShape shapeOf(AttentionOp op, int64_t decodeRows) {
  auto q = cast<ShapedType>(op.getQuery().getType());
  auto v = cast<ShapedType>(op.getValue().getType());
  int64_t rows = q.getDimSize(2);
  auto k = cast<ShapedType>(op.getKey().getType());
  return {q.getElementType(),
          q.getElementType().isBF16() && k.getElementType().isBF16() &&
              v.getElementType().isBF16(),
          q.getDimSize(3),
          v.getDimSize(3),
          op.getCausal() || op.getWindow(),
          !ShapedType::isDynamic(rows) && rows >= 1 && rows <= decodeRows};
}

} // namespace

void mlir::attn::initializeNativeTarget() {
  // LLVM's target registration is not thread-safe: two passes registering
  // at once (attn-opt runs a function pass on every function in parallel)
  // can link the x86-64 target into the registry twice, after which every
  // lookup fails with "Cannot choose between targets".
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

bool mlir::attn::resolveCpuTarget(llvm::StringRef cpu, llvm::StringRef features,
                                  CpuTarget &target, std::string &error) {
  initializeNativeTarget();
  const llvm::Triple triple("x86_64-unknown-linux-gnu");
  const llvm::Target *t = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!t)
    return false;
  std::unique_ptr<llvm::MCSubtargetInfo> info(
      t->createMCSubtargetInfo(triple, cpu, features));
  if (!info || !info->isCPUStringValid(cpu)) {
    error = "unknown CPU '" + cpu.str() +
            "' (an LLVM x86 CPU name: znver4, sapphirerapids, x86-64-v3, ...; "
            "llc -mcpu=help lists them)";
    return false;
  }
  auto has = [&](llvm::StringRef name) {
    for (const llvm::SubtargetFeatureKV &feature :
         info->getAllProcessorFeatures())
      if (name == feature.Key)
        return info->getFeatureBits().test(feature.Value);
    return false;
  };
  target = cpuTargetOf(cpu, has("avx512f") ? 16 : has("avx") ? 8 : 4, has);
  return true;
}

CpuTarget
mlir::attn::cpuTargetOf(llvm::StringRef cpu, int64_t vectorWidth,
                        llvm::function_ref<bool(llvm::StringRef)> has) {
  CpuTarget target;
  target.vectorWidth = vectorWidth;
  target.bf16Dot =
      target.vectorWidth == 16 && has("avx512bf16") && bf16DotPays(cpu);
  target.amx = target.vectorWidth == 16 && has("avx512bf16") &&
               has("amx-tile") && has("amx-bf16");
  target.blockPrefetch = blockPrefetchPays(cpu);
  target.smallBf16Blocks = smallBf16BlocksPay(cpu);
  return target;
}

bool mlir::attn::bf16DotPays(llvm::StringRef cpu) {
  // Intel's AVX-512 BF16 cores (Cooper Lake's is Cascade Lake's core with
  // the instruction added; measured on Emerald Rapids, whose core Sapphire
  // Rapids shares). Generic names (x86-64-v4 with +avx512bf16) and AMD's
  // keep the dot product.
  switch (llvm::X86::parseArchX86(cpu, /*Only64Bit=*/true)) {
  case llvm::X86::CK_Cooperlake:
  case llvm::X86::CK_SapphireRapids:
  case llvm::X86::CK_Emeraldrapids:
  case llvm::X86::CK_Graniterapids:
  case llvm::X86::CK_GraniterapidsD:
  case llvm::X86::CK_Diamondrapids:
    return false;
  default:
    return true;
  }
}

bool mlir::attn::blockPrefetchPays(llvm::StringRef cpu) {
  // Measured on Zen 3 (EPYC, family 25 model 1: 32 KiB L1d, 512 KiB L2),
  // attn-bench --compare against --prefetch-bytes=0. Zen 2 and earlier,
  // not measured, keep it.
  return llvm::X86::parseArchX86(cpu, /*Only64Bit=*/true) !=
         llvm::X86::CK_ZNVER3;
}

bool mlir::attn::smallBf16BlocksPay(llvm::StringRef cpu) {
  // Measured on Zen 5 (EPYC, family 26 model 2: 48 KiB L1d), attn-bench
  // --compare against --key-tile-size=64 --row-block=4, S = 1024-4096.
  return llvm::X86::parseArchX86(cpu, /*Only64Bit=*/true) ==
         llvm::X86::CK_ZNVER5;
}

int64_t mlir::attn::cpuLaneRows(const CpuTarget &target,
                                const CpuKernelOverrides &overrides) {
  // Rows in lanes: 4 vectors of 16 rows on AVX-512, 3 of 8 on AVX2 (whose
  // 16 registers hold a 3 x 4 accumulator tile; measured 1.9-2.1x the
  // packed path there).
  if (overrides.laneRows >= 0)
    return overrides.laneRows;
  return target.vectorWidth == 16 ? 64 : target.vectorWidth == 8 ? 24 : 0;
}

KernelAttr mlir::attn::chooseCpuKernel(AttentionOp op, const CpuTarget &target,
                                       const CpuKernelOverrides &overrides) {
  OpShape shape = shapeOf(op, overrides.decodeRows);
  bool bf16 = shape.element.isBF16();
  // bf16 takes the dot product with a mask too: the packed path reads a
  // block's mask row by vector loads (16 keep bytes or bias elements a
  // load) and keeps the dot product in P·V where the block's V is finite.
  // Zen 5, S = 2048 H = 8, a keep mask's packed kernel against lane rows
  // (widened, no dot product): D = 64 1.51-1.56x, [S, S] 1.54-1.56x,
  // D = 128 1.42-1.46x. (Before, reading the mask element by element and
  // P·V in f32, lane rows were 1.22-1.53x faster on Zen 4.)
  bool bf16Dot = target.bf16Dot && bf16;

  // Query rows per work item: each packed K/V block serves that many rows
  // (128 measured 5-15 % faster than 64, 256 another 3-4 % for f32 and 10 %
  // for bf16 full attention). Causal and windowed ops, whose tiles across
  // the diagonal compute scores the band drops, take 128 (256 measured 1-9
  // % slower there for f32), and 256 for bf16 with the dot product (the
  // packed path, where rows that see a whole block of a tile's band run it
  // without the band's compares): 1.02-1.04x for bf16 causal and windowed
  // kernels on Zen 4 (f32 and f16, on the lane-rows path: 0.98-1.00x).
  int64_t bandedTile = overrides.bandedQueryTile > 0
                           ? overrides.bandedQueryTile
                           : std::min<int64_t>(overrides.queryTile, 128);
  if (overrides.bandedQueryTile == 0 && !shape.decoding && bf16Dot)
    bandedTile = std::min<int64_t>(overrides.queryTile, 256);
  int64_t queryTile = shape.banded ? bandedTile : overrides.queryTile;

  // Blocking: 128 keys by 2 rows, unless on AVX-512 for prefill:
  // - f32: 64-key blocks by 4 rows (16 score accumulators either way; the
  //   Kᵀ and V panels are half as large and each serves twice the rows;
  //   5-8 % faster, but 4-10 % slower for decoding);
  // - bf16 with the dot product: 64 keys by 4 rows where 128 keys' K and
  //   V panels (bf16, 256 (D + Dv) bytes) would not fit a 48 KiB L1d
  //   (Zen 5's and recent Xeons'): D = Dv >= 112 (measured on Zen 5,
  //   D = 112-256 full, causal, windowed and masked: 1.11-1.25x against
  //   128 x 2; D = 96, whose panels just fit, 0.96x), and at every D on
  //   Zen 5 (smallBf16BlocksPay). Else 3 rows where their P·V accumulators
  //   fit one pass (3 x Dv/16 <= 16 vectors, Dv <= 80): 24 score
  //   accumulators for 128 keys; 4-8 % faster than 2 rows at D = 64 on
  //   Zen 4, full and causal.
  int64_t keyBlock = ::mlir::attn::defaults::kKeyBlock,
          rowBlock = ::mlir::attn::defaults::kRowBlock;
  if (target.vectorWidth == 16 && !shape.decoding) {
    constexpr int64_t kL1Bytes = 48 * 1024;
    bool panelsFit = 128 * (shape.headDim + shape.valueDim) * 2 <= kL1Bytes;
    if (shape.element.isF32() ||
        (bf16Dot && (!panelsFit || target.smallBf16Blocks))) {
      keyBlock = 64;
      rowBlock = 4;
    } else if (bf16Dot && 3 * llvm::divideCeil(shape.valueDim, 16) <= 16) {
      rowBlock = 3;
    }
  }
  if (overrides.keyBlock > 0)
    keyBlock = overrides.keyBlock;
  if (overrides.rowBlock > 0)
    rowBlock = overrides.rowBlock;

  // AMX tiles for bf16 prefill where the tiles' shapes fit the head dims
  // (16 x 32 bf16 tiles of Q, 16 x 16 f32 tiles of P·V): blocks of 16 rows
  // (a tile's) and 64 keys (4 score tiles and 2 P·V steps, 8 tiles live at
  // most), Q·Kᵀ and P·V on the tile unit, the softmax between them in
  // AVX-512 (see docs/design.md, "AMX").
  if (target.amx && shape.allBf16 && !shape.decoding &&
      shape.headDim % 32 == 0 && shape.valueDim % 16 == 0)
    return KernelAttr::get(op.getContext(), MicroKernel::amx, queryTile,
                           overrides.keyBlock > 0 &&
                                   overrides.keyBlock % 32 == 0
                               ? overrides.keyBlock
                               : 64,
                           /*rowBlock=*/16, /*laneRows=*/0, /*bf16Dot=*/true,
                           /*blockPrefetch=*/true);

  // Rows in lanes for ops without the bf16 dot product: 10-20 % faster
  // than the packed path for f32 prefill on Zen 4, 16-25 % for f16; with a
  // mask operand (transposed a block at a time) 1.26-2.08x on Emerald
  // Rapids, 1.35-1.51x there with AVX2. The modifiers, dropout and a block
  // mask's table run in either. But a modifier that reads a captured
  // tensor along the keys at each row (`mask[b, h, q_idx, kv_idx]`) reads
  // 16 keys' elements by one load where keys are in lanes and gathers them
  // where rows are: the packed path there (Zen 5, f32 S = 2048 D = 64, a
  // mask_mod reading an [8, S, S] int32 tensor: 26.8 against 50.2 ms).
  int64_t laneRows = cpuLaneRows(target, overrides);
  bool lanes = laneRows > 0 && !bf16Dot &&
               !(overrides.laneRows < 0 && readsRowsAlongKeys(op));
  return KernelAttr::get(op.getContext(),
                         lanes ? MicroKernel::lane_rows : MicroKernel::packed,
                         queryTile, keyBlock, rowBlock, laneRows, bf16Dot,
                         /*blockPrefetch=*/!lanes || target.blockPrefetch);
}

KernelAttr mlir::attn::chooseGpuKernel(AttentionOp op,
                                       const GpuKernelOverrides &overrides) {
  auto q = cast<ShapedType>(op.getQuery().getType());
  auto v = cast<ShapedType>(op.getValue().getType());
  Type element = q.getElementType();
  // Keys per shared-memory tile: 64, or 32 for f32 head dims above 128 so
  // that Q, K, V and P tiles fit an sm_80 block's 163 KiB.
  bool wide = std::max(q.getDimSize(3), v.getDimSize(3)) > 128;
  int64_t keyBlock = overrides.keyBlock > 0 ? overrides.keyBlock
                     : element.isF32() && wide
                         ? 32
                         : ::mlir::attn::defaults::kGpuKeyBlock;
  bool mma = overrides.mma && (element.isF16() || element.isBF16());
  // Two m16 blocks a warp double the accumulator and score registers
  // (Dv + Bc/2 floats a thread at 32 rows): only tensor-core kernels with
  // Dv <= 128 stay within 255 registers. row_block 0 is 16 rows.
  int64_t rowsPerWarp =
      overrides.rowsPerWarp > 16 && mma && v.getDimSize(3) <= 128
          ? overrides.rowsPerWarp
          : 16;
  return KernelAttr::get(op.getContext(),
                         mma ? MicroKernel::mma_sync : MicroKernel::fma,
                         rowsPerWarp * overrides.warps, keyBlock,
                         /*rowBlock=*/rowsPerWarp == 16 ? 0 : rowsPerWarp,
                         /*laneRows=*/0, /*bf16Dot=*/false,
                         /*blockPrefetch=*/true);
}

bool mlir::attn::isGpuTarget(llvm::StringRef target) {
  unsigned number = 0;
  if (!target.consume_front("sm_") || target.consumeInteger(10, number))
    return false;
  return number >= 80 && (target.empty() || target == "a");
}

namespace {

struct AttnChooseKernelsPass
    : public mlir::attn::impl::AttnChooseKernelsPassBase<
          AttnChooseKernelsPass> {
  using AttnChooseKernelsPassBase::AttnChooseKernelsPassBase;

  /// Resolves a CPU target once, before the functions run in parallel.
  LogicalResult initialize(MLIRContext *) override {
    if (!isGpuTarget(target))
      cpuResolved = resolveCpuTarget(target, features, cpu, cpuError);
    return success();
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    std::function<KernelAttr(AttentionOp)> choose;
    if (isGpuTarget(target)) {
      GpuKernelOverrides overrides;
      overrides.warps = warps;
      overrides.rowsPerWarp = rowsPerWarp;
      overrides.keyBlock = keyBlock;
      overrides.mma = mma;
      choose = [=](AttentionOp op) { return chooseGpuKernel(op, overrides); };
    } else {
      if (!cpuResolved) {
        func.emitError() << "attn-choose-kernels: " << cpuError;
        return signalPassFailure();
      }
      CpuKernelOverrides overrides;
      overrides.queryTile = queryTile;
      overrides.bandedQueryTile = bandedQueryTile;
      overrides.keyBlock = keyBlock;
      overrides.rowBlock = rowBlock;
      overrides.laneRows = laneRows;
      overrides.decodeRows = decodeRows;
      choose = [this, overrides](AttentionOp op) {
        return chooseCpuKernel(op, cpu, overrides);
      };
    }
    // A choice already on the op (written by hand) stays.
    func.walk([&](AttentionOp op) {
      if (!op.getKernelAttr())
        op.setKernelAttr(choose(op));
    });
  }

private:
  CpuTarget cpu;
  bool cpuResolved = false;
  std::string cpuError;
};

} // namespace
