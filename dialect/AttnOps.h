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

namespace mlir {
namespace attn {

/// The attributes that say what an attention-like op attends -- scale,
/// causal masking and its alignment, window, soft-cap -- as one value. The
/// ops' builders take it, so that an op made from another copies them
/// whole, and an attribute added to the ops is added here, not at every
/// place that creates one.
struct AttentionAttributes {
  FloatAttr scale;
  UnitAttr causal;
  DiagonalAlignmentAttr alignment;
  WindowAttr window;
  FloatAttr softcap;
  /// The micro-kernel and blocking chosen for the op (attn-choose-kernels).
  KernelAttr kernel;

  /// The attributes of `op` (attn.attention or attn.online_attention).
  template <typename OpTy>
  static AttentionAttributes of(OpTy op) {
    return {op.getScaleAttr(), op.getCausalAttr(), op.getAlignmentAttr(),
            op.getWindowAttr(), op.getSoftcapAttr(), op.getKernelAttr()};
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

} // namespace attn
} // namespace mlir

#define GET_OP_CLASSES
#include "dialect/AttnOps.h.inc"

#endif // ATTN_DIALECT_ATTNOPS_H
