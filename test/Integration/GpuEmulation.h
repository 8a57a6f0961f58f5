//===- GpuEmulation.h - GPU block kernels JIT-compiled for the host -*- C++
//-*-===//
//
// The host emulations of attn-lower-to-gpu's block kernels
// (attn-lower-to-gpu{host-emulation}), JIT-compiled by MLIR's
// ExecutionEngine and called with the parameters the runtime's
// attn_gpu_*_kernel_params lay out: GpuEmulationTest.cpp and
// ModifiersTest.cpp check the GPU kernels' arithmetic with them on a
// machine without a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEST_INTEGRATION_GPUEMULATION_H
#define ATTN_TEST_INTEGRATION_GPUEMULATION_H

#include "lib/Compiler/CompilerInternal.h"
#include "lib/Harness/Conformance.h"
#include "lib/Harness/Harness.h"
#include "lib/Support/KernelSpec.h"
#include "lib/Transforms/Passes.h"

#include "attn/kernel_abi.h"
#include "mlir/Conversion/ConvertToLLVM/ToLLVMPass.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
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

namespace attn {
namespace emulation {

/// A backward kernel's arguments for the host buffers of a problem (its
/// captured tensors too).
inline attn_backward_args backwardArgs(ProblemData &data,
                                       BackwardData &backward) {
  attn_backward_args args{};
  auto strides = [](const attn_tensor &t, int64_t *out) {
    std::copy(t.strides, t.strides + t.rank, out);
  };
  attn_kernel_args &f = args.forward;
  f.query = data.query.view.data;
  f.key = data.key.view.data;
  f.value = data.value.view.data;
  f.output = data.output.view.data;
  f.lse = static_cast<float *>(backward.lseView.data);
  strides(data.query.view, f.query_strides);
  strides(data.key.view, f.key_strides);
  strides(data.value.view, f.value_strides);
  strides(data.output.view, f.output_strides);
  strides(backward.lseView, f.lse_strides);
  f.dropout_p = data.dropoutP;
  f.dropout_seed = data.dropoutSeed;
  f.batch = data.query.view.shape[0];
  f.heads_q = data.query.view.shape[1];
  f.seq_q = data.query.view.shape[2];
  f.heads_kv = data.key.view.shape[1];
  f.seq_k = data.key.view.shape[2];
  if (data.hasMask) {
    // The runtime's broadcast: stride 0 where the mask has one element.
    f.mask = data.mask.view.data;
    for (int d = 0; d < 4; ++d)
      f.mask_strides[d] =
          data.mask.view.shape[d] == 1 ? 0 : data.mask.view.strides[d];
  }
  for (size_t n = 0; n < data.captureViews.size() && n < ATTN_MAX_CAPTURES;
       ++n) {
    const attn_tensor &t = data.captureViews[n];
    f.captures[n].data = t.data;
    std::copy(t.shape, t.shape + t.rank, f.captures[n].sizes);
    strides(t, f.captures[n].strides);
  }
  args.grad_output = backward.gradOutput.view.data;
  args.grad_query = backward.gradQuery.view.data;
  args.grad_key = backward.gradKey.view.data;
  args.grad_value = backward.gradValue.view.data;
  strides(backward.gradOutput.view, args.grad_output_strides);
  strides(backward.gradQuery.view, args.grad_query_strides);
  strides(backward.gradKey.view, args.grad_key_strides);
  strides(backward.gradValue.view, args.grad_value_strides);
  if (backward.hasGradLse) {
    args.grad_lse = static_cast<const float *>(backward.gradLseView.data);
    strides(backward.gradLseView, args.grad_lse_strides);
  }
  if (backward.hasGradMask) {
    args.grad_mask = static_cast<float *>(backward.gradMaskView.data);
    strides(backward.gradMaskView, args.grad_mask_strides);
  }
  return args;
}

/// A backward kernel's descriptor as attn_gpu_backward_kernel_params reads
/// it, for `spec`; its captures' records go to `captures`.
inline attn_kernel_desc backwardDesc(const KernelSpec &spec,
                                     std::vector<attn_capture_desc> &captures) {
  attn_kernel_desc desc{};
  desc.struct_size = sizeof(desc);
  desc.head_dim = spec.headDim;
  desc.value_dim = spec.valueDim;
  desc.mask_kind = spec.mask == MaskKind::None   ? ATTN_MASK_NONE
                   : spec.mask == MaskKind::Bool ? ATTN_MASK_BOOL
                                                 : ATTN_MASK_BIAS;
  desc.has_lse = 1; // a backward kernel reads the forward's LSE
  desc.has_grad_lse = spec.lse;
  desc.has_grad_mask = spec.gradMask;
  desc.has_dropout = spec.dropout ? 2 : 0; // 16 keep bits a position
  captures.assign(spec.captures.size(), attn_capture_desc{});
  for (size_t n = 0; n < spec.captures.size(); ++n)
    captures[n].rank = spec.captures[n].rank;
  desc.num_captures = static_cast<int32_t>(spec.captures.size());
  desc.captures = captures.data();
  return desc;
}

/// Kernels as host emulations, JIT-compiled.
class Emulation {
public:
  /// The kernels of `specs` (each named by its spec).
  explicit Emulation(std::vector<KernelSpec> specs);
  /// The kernels of a list of cases.
  explicit Emulation(const std::vector<ConformanceCase> &cases)
      : Emulation(specsOf(cases)) {}
  /// Each case with its spec; false where a kernel could not be built.
  bool ok() const { return engine != nullptr; }
  const std::vector<KernelSpec> &specs() const { return specsOfCases; }
  /// Calls kernel `name` with the parameters in `pointers`.
  attn_status invoke(const std::string &name, void **pointers, int count);

private:
  static std::vector<KernelSpec>
  specsOf(const std::vector<ConformanceCase> &cases) {
    std::vector<KernelSpec> specs;
    for (const ConformanceCase &c : cases) {
      std::string error;
      std::optional<KernelSpec> spec = parseKernelSpec(c.spec, error);
      if (!spec) {
        ADD_FAILURE() << c.spec << ": " << error;
        return {};
      }
      specs.push_back(*spec);
    }
    return specs;
  }

  std::vector<KernelSpec> specsOfCases;
  std::unique_ptr<KernelModule> kernels;
  std::unique_ptr<mlir::ExecutionEngine> engine;
};

inline Emulation::Emulation(std::vector<KernelSpec> specs)
    : specsOfCases(std::move(specs)) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  if (specsOfCases.empty())
    return;
  kernels = std::make_unique<KernelModule>(specsOfCases);
  if (!kernels->module) {
    ADD_FAILURE() << kernels->diagnostics;
    return;
  }
  for (auto [spec, func] :
       llvm::zip(specsOfCases, kernels->module->getOps<mlir::func::FuncOp>()))
    func.setSymName(spec.name);
  mlir::PassManager pm(&kernels->context);
  mlir::attn::AttnLowerToGpuPassOptions lowering;
  lowering.hostEmulation = true;
  pm.addPass(mlir::attn::createAttnLowerToGpuPass(lowering));
  // bf16 rounding without libgcc's __truncsfbf2, which the JIT may not find.
  mlir::attn::AttnApproximateMathPassOptions math;
  math.bf16ByIntegers = true;
  pm.addPass(mlir::attn::createAttnApproximateMathPass(math));
  pm.addPass(mlir::createSCFToControlFlowPass());
  pm.addPass(mlir::memref::createExpandStridedMetadataPass());
  pm.addPass(mlir::createConvertMathToLibmPass());
  pm.addPass(mlir::createConvertToLLVMPass());
  pm.addPass(mlir::createReconcileUnrealizedCastsPass());
  if (mlir::failed(pm.run(*kernels->module))) {
    ADD_FAILURE() << kernels->diagnostics;
    return;
  }
  mlir::registerBuiltinDialectTranslation(kernels->context);
  mlir::registerLLVMDialectTranslation(kernels->context);
  auto created = mlir::ExecutionEngine::create(*kernels->module);
  if (!created) {
    ADD_FAILURE() << llvm::toString(created.takeError());
    return;
  }
  engine = std::move(*created);
}

inline attn_status Emulation::invoke(const std::string &name, void **pointers,
                                     int count) {
  llvm::Error error = engine->invokePacked(
      name, llvm::MutableArrayRef<void *>(pointers, count));
  if (error) {
    ADD_FAILURE() << name << ": " << llvm::toString(std::move(error));
    return ATTN_ERROR_INTERNAL;
  }
  return ATTN_OK;
}

} // namespace emulation
} // namespace attn

#endif // ATTN_TEST_INTEGRATION_GPUEMULATION_H
