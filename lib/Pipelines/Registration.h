//===- Registration.h - Everything attn's tools register --------*- C++ -*-===//
#ifndef ATTN_PIPELINES_REGISTRATION_H
#define ATTN_PIPELINES_REGISTRATION_H

namespace mlir {
class DialectRegistry;
namespace attn {

/// The attn dialect, the upstream dialects its lowering passes through, and
/// the external interface models (bufferization, value bounds, LLVM
/// translation) those stages need.
void registerAttnDialects(DialectRegistry &registry);

/// Every attn pass and pipeline, and the upstream passes.
void registerAllAttnPasses();

} // namespace attn
} // namespace mlir

#endif // ATTN_PIPELINES_REGISTRATION_H
