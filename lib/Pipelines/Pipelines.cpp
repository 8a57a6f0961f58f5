//===- Pipelines.cpp - Named pass pipelines of attn -----------------------===//
//
// The stage order of the CPU lowering, in one place. Each stage is a
// registered pass with its own lit test; these pipelines only chain them.
//
//===----------------------------------------------------------------------===//
#include "lib/Pipelines/Pipelines.h"

#include "lib/Transforms/Passes.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::attn;

void mlir::attn::buildAttnTilingPipeline(OpPassManager &pm,
                                         const CpuPipelineOptions &options) {
  OpPassManager &func = pm.nest<func::FuncOp>();
  func.addPass(createAttnTilePass({options.queryTileSize}));
  func.addPass(createAttnOnlineSoftmaxPass());
  func.addPass(createAttnSkipMaskedBlocksPass());
  func.addPass(createAttnTileKeysPass({options.keyTileSize}));
  func.addPass(createCanonicalizerPass());
  func.addPass(createCSEPass());
}

void mlir::attn::buildAttnToLLVMCpuPipeline(OpPassManager &pm,
                                            const CpuPipelineOptions &options) {
  buildAttnTilingPipeline(pm, options);
  pm.addPass(createAttnBufferizePass());
  // In-place slices leave copies of a buffer onto itself: CSE makes their
  // two subviews one, canonicalization drops the self-copy.
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
  {
    OpPassManager &func = pm.nest<func::FuncOp>();
    func.addPass(createAttnLowerToVectorPass(
        {options.vectorWidth, options.keyTileSize}));
    func.addPass(createConvertLinalgToLoopsPass());
  }
  pm.addPass(createAttnOutlineWorkItemsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addNestedPass<func::FuncOp>(createAttnApproximateMathPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertVectorToLLVMPass());
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

void mlir::attn::registerAttnPipelines() {
  PassPipelineRegistration<CpuPipelineOptions>(
      "attn-tiling",
      "Tile attn.attention and rewrite it as the online-softmax key loop "
      "(tensors)",
      buildAttnTilingPipeline);
  PassPipelineRegistration<CpuPipelineOptions>(
      "attn-to-llvm-cpu",
      "Lower attn.attention to the LLVM dialect for the CPU: tiling, online "
      "softmax, masked-block skipping, bufferization, vector micro-kernel, "
      "work items",
      buildAttnToLLVMCpuPipeline);
}
