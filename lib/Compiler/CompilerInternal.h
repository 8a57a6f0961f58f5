//===- CompilerInternal.h - Shared pieces of lib/Compiler -------*- C++ -*-===//
#ifndef ATTN_COMPILER_COMPILERINTERNAL_H
#define ATTN_COMPILER_COMPILERINTERNAL_H

#include "lib/Support/KernelSpec.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace attn {
mlir::Type elementTypeOf(mlir::MLIRContext *ctx, ElementType type);
/// Builds `@<spec.name>_impl`, the kernel function around attn.attention.
mlir::func::FuncOp buildKernelFunction(mlir::OpBuilder &b, mlir::Location loc,
                                       const KernelSpec &spec);
} // namespace attn

#endif // ATTN_COMPILER_COMPILERINTERNAL_H
