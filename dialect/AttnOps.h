//===- AttnOps.h - Operations of the attn dialect ---------------*- C++ -*-===//
#ifndef ATTN_DIALECT_ATTNOPS_H
#define ATTN_DIALECT_ATTNOPS_H

#include "dialect/AttnDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/TilingInterface.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir {
namespace attn {

/// The attributes that say what an attention-like op attends -- scale,
/// causal masking and its alignment, window, soft-cap -- as one value. The
/// ops' builders take it, so that an op made from another copies them
/// whole, and an attribute added to the ops is added here, not at every
/// place that creates one.
/// The block table of a block-sparse mask (FlexAttention's BlockMask):
/// array<i64: capture, query_block, key_block> on an attention-like op. Its
/// capture is an i32 tensor [B or 1, Hq or 1, query blocks, key blocks]
/// (indices clamp, so a dim of 1 broadcasts) whose zero entries mark key
/// blocks that no query of the query block keeps: the kernels may skip
/// them. A hint that must be conservative; the mask_mod still decides.
constexpr llvm::StringLiteral kBlockMaskAttrName = "attn.block_mask";

struct AttentionAttributes {
  FloatAttr scale;
  UnitAttr causal;
  DiagonalAlignmentAttr alignment;
  WindowAttr window;
  FloatAttr softcap;
  /// The micro-kernel and blocking chosen for the op (attn-choose-kernels).
  KernelAttr kernel;
  /// Dropout's probability (f32) and seed (i64), both null without dropout,
  /// and the global (b, h, i, j) of the op's element (0, 0, 0, 0): empty for
  /// an untiled op (all 0). Operands, not attributes, but what an op made
  /// from another carries over with them (tiling shifts the origin).
  Value dropoutP, dropoutSeed;
  SmallVector<Value, 4> origin;
  /// The score and mask modifiers: the op whose `score_mod` and `mask_mod`
  /// regions an op made from it clones (null: none), and the tensors they
  /// read (`captures`, whole under every tiling: the regions see global
  /// indices).
  Operation *modifiers = nullptr;
  SmallVector<Value, 2> captures;
  /// The block-sparse mask's table (kBlockMaskAttrName), or null.
  DenseI64ArrayAttr blockMask;

  /// The attributes of `op` (an attention-like op).
  template <typename OpTy>
  static AttentionAttributes of(OpTy op) {
    AttentionAttributes attributes{op.getScaleAttr(),  op.getCausalAttr(),
                                   op.getAlignmentAttr(), op.getWindowAttr(),
                                   op.getSoftcapAttr(), op.getKernelAttr()};
    attributes.dropoutP = op.getDropoutP();
    attributes.dropoutSeed = op.getDropoutSeed();
    attributes.origin.assign(op.getOrigin().begin(), op.getOrigin().end());
    if (!op.getModifiers().empty())
      attributes.modifiers = op.getOperation();
    attributes.captures.assign(op.getCaptures().begin(),
                               op.getCaptures().end());
    attributes.blockMask =
        op->template getAttrOfType<DenseI64ArrayAttr>(kBlockMaskAttrName);
    return attributes;
  }
  /// Clones the modifiers' regions into `state` (a builder's, whose two
  /// regions are empty), and gives it the block mask.
  void cloneModifiersInto(OperationState &state) const;
  /// How many modifier regions an op made from these has.
  unsigned modifierCount() const {
    return modifiers ? modifiers->getNumRegions() : 0;
  }
  /// With the origin moved to `origin`.
  AttentionAttributes withOrigin(ArrayRef<Value> newOrigin) const {
    AttentionAttributes copy = *this;
    copy.origin.assign(newOrigin.begin(), newOrigin.end());
    return copy;
  }
  /// For a tile or a key range, whose diagonal is an operand.
  AttentionAttributes withoutAlignment() const {
    AttentionAttributes copy = *this;
    copy.alignment = {};
    return copy;
  }
  /// Without the band: for a key range that every row sees whole.
  AttentionAttributes withoutBand() const {
    AttentionAttributes copy = withoutAlignment();
    copy.causal = {};
    copy.window = {};
    return copy;
  }
};

/// An attention-like op's score_mod region (its block takes the score and
/// b, h, q_idx, kv_idx), or null.
Region *scoreModOf(Operation *op);
/// An attention-like op's mask_mod region (b, h, q_idx, kv_idx), or null.
Region *maskModOf(Operation *op);
/// The numbers of the captures that an attention-like op's score_mod reads
/// (attn.captured): those a gradient reaches. Empty without a score_mod.
llvm::SmallDenseSet<int64_t> scoreModReads(Operation *op);

/// How a score_mod op's result changes with the score, for the backward
/// (docs/spec.md, "Gradients"): ops whose derivative the compiler generates
/// (arithmetic, select, min/max, the smooth math functions), ops that are
/// piecewise constant in their float operands (floor, ceil, round, and
/// every integer or i1 result), and the rest.
enum class ScoreDerivative { Generated, Zero, Unknown };
ScoreDerivative scoreDerivativeOf(Operation *op);
/// The first op of `scoreMod` that depends on the score and whose
/// derivative is Unknown, or null when the backward can differentiate it.
Operation *undifferentiableScoreOp(Region &scoreMod);

/// Whether an attention-like op has a score or mask modifier.
template <typename OpTy> bool hasModifiers(OpTy op) {
  return !op.getModifiers().empty();
}

/// Whether an attention-like op reads its global indices (b, h, i, j):
/// dropout's keep bits, the modifiers and a block mask's table do, so its
/// tiles carry an origin.
template <typename OpTy> bool needsGlobalIndices(OpTy op) {
  return op.getDropoutP() || hasModifiers(op) ||
         op->hasAttr(kBlockMaskAttrName);
}

} // namespace attn
} // namespace mlir

#define GET_OP_CLASSES
#include "dialect/AttnOps.h.inc"

#endif // ATTN_DIALECT_ATTNOPS_H
