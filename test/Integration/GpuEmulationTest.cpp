//===- LinearGpuEmulationTest.cpp - The GPU linear kernel, run on the host ===//
//
// attn-lower-to-gpu's linear attention kernel built as its host emulation
// (attn-lower-to-gpu{host-emulation}: the same IR but for the ids, every
// block after the other on one thread) and run by MLIR's JIT on the cases
// the GPU runs (linearGpuConformanceCases), its parameters laid out by the
// runtime's attn_gpu_linear_kernel_params: the kernel's indexing, chunks,
// GQA, value column tiles, state and NaN rule are checked against the
// float64 reference on a machine without a GPU. What the emulation cannot
// check (barriers, 256 threads sharing the tiles) the GPU run of the same
// cases does (GpuConformance, attn-check in the GPU bundle).
//
//===----------------------------------------------------------------------===//
#include "lib/Compiler/CompilerInternal.h"
#include "lib/Harness/Conformance.h"
#include "lib/Harness/Harness.h"
#include "lib/Support/KernelSpec.h"
#include "lib/Transforms/Passes.h"

#include "attn/kernel_abi.h"
#include "mlir/Conversion/ConvertToLLVM/ToLLVMPass.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/Support/TargetSelect.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace attn;

namespace {

/// The linear kernel's arguments for the host buffers of a problem.
attn_linear_args linearArgs(ProblemData &data, LinearData &linear) {
  attn_linear_args args{};
  auto strides = [](const attn_tensor &t, int64_t *out) {
    std::copy(t.strides, t.strides + t.rank, out);
  };
  args.query = data.query.view.data;
  args.key = data.key.view.data;
  args.value = data.value.view.data;
  args.output = data.output.view.data;
  strides(data.query.view, args.query_strides);
  strides(data.key.view, args.key_strides);
  strides(data.value.view, args.value_strides);
  strides(data.output.view, args.output_strides);
  args.batch = data.query.view.shape[0];
  args.heads_q = data.query.view.shape[1];
  args.seq_q = data.query.view.shape[2];
  args.heads_kv = data.key.view.shape[1];
  args.seq_k = data.key.view.shape[2];
  if (linear.hasState) {
    args.initial_state = linear.state0.data();
    args.initial_normalizer = linear.normalizer0.data();
    args.final_state = linear.state.data();
    args.final_normalizer = linear.normalizer.data();
    strides(linear.state0View, args.initial_state_strides);
    strides(linear.normalizer0View, args.initial_normalizer_strides);
    strides(linear.stateView, args.final_state_strides);
    strides(linear.normalizerView, args.final_normalizer_strides);
  }
  return args;
}

TEST(GpuEmulation, LinearKernelMatchesTheReferenceOnTheHost) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  std::vector<ConformanceCase> cases = linearGpuConformanceCases();
  std::vector<KernelSpec> specs;
  for (const ConformanceCase &c : cases) {
    std::string error;
    std::optional<KernelSpec> spec = parseKernelSpec(c.spec, error);
    ASSERT_TRUE(spec) << c.spec << ": " << error;
    specs.push_back(*spec);
  }
  KernelModule kernels(specs);
  ASSERT_TRUE(kernels.module) << kernels.diagnostics;
  for (auto [spec, func] :
       llvm::zip(specs, kernels.module->getOps<mlir::func::FuncOp>()))
    func.setSymName(spec.name);

  mlir::PassManager pm(&kernels.context);
  mlir::attn::AttnLowerToGpuPassOptions lowering;
  lowering.hostEmulation = true;
  pm.addPass(mlir::attn::createAttnLowerToGpuPass(lowering));
  // bf16 rounding without libgcc's __truncsfbf2, which the JIT may not find.
  mlir::attn::AttnApproximateMathPassOptions math;
  math.bf16ByIntegers = true;
  pm.addPass(mlir::attn::createAttnApproximateMathPass(math));
  pm.addPass(mlir::createSCFToControlFlowPass());
  pm.addPass(mlir::memref::createExpandStridedMetadataPass());
  pm.addPass(mlir::createConvertToLLVMPass());
  pm.addPass(mlir::createReconcileUnrealizedCastsPass());
  ASSERT_TRUE(mlir::succeeded(pm.run(*kernels.module))) << kernels.diagnostics;
  mlir::registerBuiltinDialectTranslation(kernels.context);
  mlir::registerLLVMDialectTranslation(kernels.context);
  auto engine = mlir::ExecutionEngine::create(*kernels.module);
  ASSERT_TRUE(bool(engine)) << llvm::toString(engine.takeError());

  for (auto [c, spec] : llvm::zip(cases, specs)) {
    attn_kernel_desc desc{};
    desc.head_dim = spec.headDim;
    desc.value_dim = spec.valueDim;
    desc.has_state = spec.linearState;
    CaseOutcome outcome = runLinearConformanceCase(
        c, [&](ProblemData &data, LinearData &linear, bool) {
          attn_linear_args args = linearArgs(data, linear);
          uint64_t values[ATTN_GPU_MAX_PARAMS];
          void *pointers[ATTN_GPU_MAX_PARAMS];
          int n = attn_gpu_linear_kernel_params(&desc, &args, values, pointers);
          llvm::Error error = (*engine)->invokePacked(
              c.label, llvm::MutableArrayRef<void *>(pointers, n));
          if (error) {
            ADD_FAILURE() << c.label << ": "
                          << llvm::toString(std::move(error));
            return ATTN_ERROR_INTERNAL;
          }
          return ATTN_OK;
        });
    EXPECT_TRUE(outcome.passed) << c.label << ": " << outcome.message;
  }
}

} // namespace
