//===- Passes.h - The passes of attn's lowering -----------------*- C++ -*-===//
#ifndef ATTN_TRANSFORMS_PASSES_H
#define ATTN_TRANSFORMS_PASSES_H

#include "dialect/AttnOps.h"
#include "lib/Transforms/KernelChoice.h"
#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
namespace attn {

#define GEN_PASS_DECL
#include "lib/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "lib/Transforms/Passes.h.inc"

/// The attribute that marks a function as a kernel entry point for
/// attn-outline-work-items.
inline constexpr llvm::StringLiteral kKernelAttrName = "attn.kernel";

/// Marks the scf.forall over a multi-head layer's batches that
/// attn-decompose-mha makes: the ops in it are whole per batch, and
/// attn-tile tiles them as it tiles ops outside any forall.
inline constexpr llvm::StringLiteral kLayerBatchesAttrName =
    "attn.layer_batches";

/// The attribute that asks attn-split-keys to add the key-split (partial
/// and merge) kernels of a kernel.
inline constexpr llvm::StringLiteral kSplitKeysAttrName = "attn.split_keys";
/// Marks the normalization's generics that fold attention sinks into the
/// final state (attn-online-softmax), which the GPU lowering does not take
/// yet.
inline constexpr llvm::StringLiteral kSinksAttrName = "attn.sinks";

/// A unit attribute on a `math.exp2` whose operand is never positive nor
/// +inf (the softmax's s - m'; NaN may occur): attn-approximate-math may
/// then leave out its upper clamp.
inline constexpr llvm::StringLiteral kNonPositiveAttr = "attn.nonpositive";

/// The key block of `op`'s #attn.kernel where it has one, else `option`
/// (the pass's).
template <typename OpTy>
int64_t chosenKeyBlock(OpTy op, int64_t option) {
  if (KernelAttr kernel = op.getKernelAttr())
    return kernel.getKeyBlock();
  return option;
}

/// Whether attn-lower-to-vector's lane-rows micro-kernel can take `op`: not
/// bf16 Q and K where the bf16 dot product (`bf16Dot`) takes those. A mask
/// operand, dropout, the modifiers and a block mask's table run in either
/// path.
inline bool laneRowsCandidate(OnlineAttentionOp op, bool bf16Dot) {
  auto isBF16 = [](Value v) {
    return getElementTypeOrSelf(v.getType()).isBF16();
  };
  return !(bf16Dot && isBF16(op.getQuery()) && isBF16(op.getKey()));
}

} // namespace attn
} // namespace mlir

#endif // ATTN_TRANSFORMS_PASSES_H
