//===- CompilerInternal.h - Shared pieces of lib/Compiler -------*- C++ -*-===//
#ifndef ATTN_COMPILER_COMPILERINTERNAL_H
#define ATTN_COMPILER_COMPILERINTERNAL_H

#include "lib/Support/KernelSpec.h"

#include "lib/Compiler/Compiler.h"
#include "lib/Transforms/KernelChoice.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/Timing.h"

#include <memory>

namespace attn {
/// A context with attn's dialects and a module holding one kernel function
/// per spec (in spec order); diagnostics collect every message. `module` is
/// null when the functions do not verify.
struct KernelModule {
  explicit KernelModule(const std::vector<KernelSpec> &specs);
  mlir::MLIRContext context;
  std::string diagnostics;
  mlir::OwningOpRef<mlir::ModuleOp> module;

private:
  std::unique_ptr<mlir::ScopedDiagnosticHandler> handler;
};

/// The compiled image of CUDA kernels and their launch shapes.
struct GpuImage {
  std::string arch;
  bool cubin = false;
  std::string bytes; // PTX text with its NUL, or the cubin
  std::vector<GpuKernelInfo> kernels;
};
/// Lowers `specs` through attn-to-nvvm for options.gpuArch and serializes
/// them: PTX, or cubin through ptxas. The lowering's passes and the
/// serialization are timed under `timing`.
bool compileGpuImage(const std::vector<KernelSpec> &specs,
                     const CompileOptions &options, bool cubin, GpuImage &image,
                     std::string &error, mlir::TimingScope &timing);
/// The PTX feature string an architecture needs ("+ptx80" for sm_80/sm_90).
std::string defaultPtxFeatures(const std::string &arch);
/// The CUDA toolkit options and the environment point to.
std::string findCudaToolkit(const CompileOptions &options);

/// The choices `options` fix for a GPU kernel (the others are chosen).
inline mlir::attn::GpuKernelOverrides gpuOverrides(const CompileOptions &options) {
  mlir::attn::GpuKernelOverrides overrides;
  overrides.warps = options.gpuWarps;
  overrides.rowsPerWarp = options.gpuRowsPerWarp;
  overrides.keyBlock = options.keyTileSize;
  return overrides;
}
/// Records each kernel's #attn.kernel on its op: `options.kernel` where
/// given, else `choose(op)`; and the key split's attribute on decoding
/// kernels that get one. False with `error` set for a --kernel that is not
/// an #attn.kernel.
bool chooseKernels(
    mlir::ModuleOp module, llvm::ArrayRef<KernelSpec> specs,
    const CompileOptions &options,
    llvm::function_ref<mlir::attn::KernelAttr(mlir::attn::AttentionOp)> choose,
    std::string &error);

mlir::Type elementTypeOf(mlir::MLIRContext *ctx, ElementType type);
mlir::Type captureElementType(mlir::MLIRContext *ctx, CaptureType type);
/// Builds `@<spec.name>_impl`, the kernel function around attn.attention;
/// null (with an error emitted) where the spec's modifiers do not parse.
mlir::func::FuncOp buildKernelFunction(mlir::OpBuilder &b, mlir::Location loc,
                                       const KernelSpec &spec);
} // namespace attn

#endif // ATTN_COMPILER_COMPILERINTERNAL_H
