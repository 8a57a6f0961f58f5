//===- Pipelines.cpp - Named pass pipelines of attn -----------------------===//
//
// The stage order of the CPU and GPU lowerings, in one place. Each stage is a
// registered pass with its own lit test; these pipelines only chain them.
//
//===----------------------------------------------------------------------===//
#include "lib/Pipelines/Pipelines.h"

#include "lib/Transforms/Passes.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::attn;

void mlir::attn::buildAttnTilingPipeline(OpPassManager &pm,
                                         const TilingConfig &config) {
  // A multi-head layer becomes matmuls around attn.attention first.
  pm.addNestedPass<func::FuncOp>(createAttnDecomposeMhaPass());
  // Bands a mask_mod states become attributes, which tiling skips by.
  pm.addPass(createAttnBandFromMaskModPass());
  {
    OpPassManager &func = pm.nest<func::FuncOp>();
    func.addPass(
        createAttnTilePass({config.queryTileSize, config.bandedQueryTileSize,
                            config.decodeRows, config.blockMapping}));
    func.addPass(createAttnOnlineSoftmaxPass());
  }
  // Kernels marked attn.split_keys get their key-split twins here, before
  // their key ranges are clamped and tiled.
  pm.addPass(createAttnSplitKeysPass({config.keyTileSize}));
  OpPassManager &func = pm.nest<func::FuncOp>();
  // With lane rows on, the micro-kernels walk an op's key blocks themselves
  // (the lane-rows path transposes its rows in and out once per op), each
  // query tile only the keys its rows see: ops stay whole and their key
  // loop is not tiled.
  func.addPass(createAttnSkipMaskedBlocksPass(
      {config.alignKeyRanges ? config.keyTileSize : 0,
       /*wholeOps=*/config.laneRows > 0}));
  if (config.laneRows == 0)
    func.addPass(createAttnTileKeysPass({config.keyTileSize}));
  func.addPass(createCanonicalizerPass());
  func.addPass(createCSEPass());
}

void mlir::attn::buildAttnToLLVMCpuPipeline(OpPassManager &pm,
                                            const CpuPipelineOptions &options) {
  // First, while the op's mask_mod is whole (attn-band-from-mask-mod may
  // move a band out of it).
  pm.addPass(createAttnBlockTablePass());
  buildAttnTilingPipeline(pm, TilingConfig::from(options));
  pm.addPass(createAttnBufferizePass());
  // In-place slices leave copies of a buffer onto itself: CSE makes their
  // two subviews one, canonicalization drops the self-copy.
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
  {
    OpPassManager &func = pm.nest<func::FuncOp>();
    AttnLowerToVectorPassOptions vector;
    vector.vectorWidth = options.vectorWidth;
    vector.keyBlock = options.keyTileSize;
    vector.rowBlock = options.rowBlock;
    vector.bandKeyStep = options.bandKeyStep;
    vector.laneRows = options.laneRows;
    vector.bf16Dot = options.bf16Dot;
    vector.recomputeBf16Dot = options.recomputeBf16Dot;
    vector.directRows = options.decodeRows;
    vector.prefetchDistance = options.prefetchDistance;
    func.addPass(createAttnLowerToVectorPass(vector));
    if (options.emulateAmx)
      func.addPass(createAttnEmulateAmxPass());
    func.addPass(createAttnVectorizeRowsPass({options.vectorWidth}));
    func.addPass(createConvertLinalgToLoopsPass());
  }
  pm.addPass(createAttnOutlineWorkItemsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  AttnApproximateMathPassOptions math;
  math.avx512 = options.avx512Exp;
  math.bf16ByIntegers = options.bf16ByIntegers;
  pm.addNestedPass<func::FuncOp>(createAttnApproximateMathPass(math));
  pm.addPass(createSCFToControlFlowPass());
  ConvertVectorToLLVMPassOptions toLLVM;
  toLLVM.x86Vector = options.bf16Dot;
  toLLVM.amx = options.amx && !options.emulateAmx;
  pm.addPass(createConvertVectorToLLVMPass(toLLVM));
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createUBToLLVMConversionPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}

void mlir::attn::buildAttnToNVVMPipeline(OpPassManager &pm,
                                         const GpuPipelineOptions &options) {
  TilingConfig tiling;
  tiling.queryTileSize = options.rowsPerWarp * options.warps;
  tiling.keyTileSize = options.keyTileSize;
  // attn-lower-to-gpu maps one query head to blockIdx.y.
  tiling.decodeRows = 0;
  // The grid is always (query tiles, Hq, B): a static size must not fold
  // one of the forall's dims away.
  tiling.blockMapping = true;
  // Its key tile may differ per kernel (attn.key_tile_size); and no GPU
  // run has checked aligned ranges yet.
  tiling.alignKeyRanges = false;
  buildAttnTilingPipeline(pm, tiling);
  AttnLowerToGpuPassOptions lowering;
  lowering.useMma = options.mma;
  lowering.rowsPerWarp = options.rowsPerWarp;
  pm.addPass(createAttnLowerToGpuPass(lowering));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.features = options.features;
  target.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(target));
  OpPassManager &gpu = pm.nest<gpu::GPUModuleOp>();
  // ex2/lg2 instructions for exp/log/tanh: no libdevice call.
  gpu.addPass(createAttnApproximateMathPass({/*nvvm=*/true}));
  gpu.addPass(createConvertNVGPUToNVVMPass());
  gpu.addPass(createLowerAffinePass());
  gpu.addPass(createSCFToControlFlowPass());
  gpu.addPass(createConvertMathToLLVMPass());
  gpu.addPass(memref::createExpandStridedMetadataPass());
  gpu.addPass(createLowerAffinePass());
  // MLIR's memref calling convention: the pointer arguments are dynamic
  // 1-D memrefs, which the bare-pointer convention cannot take.
  gpu.addPass(createConvertGpuOpsToNVVMOps());
  pm.addPass(createConvertNVVMToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void mlir::attn::registerAttnPipelines() {
  PassPipelineRegistration<TilingPipelineOptions>(
      "attn-tiling",
      "Tile attn.attention and rewrite it as the online-softmax key loop "
      "(tensors)",
      [](OpPassManager &pm, const TilingPipelineOptions &options) {
        TilingConfig config = TilingConfig::from(options);
        config.blockMapping = options.blockMapping;
        buildAttnTilingPipeline(pm, config);
      });
  PassPipelineRegistration<CpuPipelineOptions>(
      "attn-to-llvm-cpu",
      "Lower attn.attention to the LLVM dialect for the CPU: tiling, online "
      "softmax, masked-block skipping, bufferization, vector micro-kernel, "
      "work items",
      buildAttnToLLVMCpuPipeline);
  PassPipelineRegistration<GpuPipelineOptions>(
      "attn-to-nvvm",
      "Lower attn.attention to an NVVM GPU kernel: tiling, online softmax, "
      "masked-block skipping, thread blocks and warps, shared-memory tiles, "
      "tensor-core MMA",
      buildAttnToNVVMPipeline);
}
