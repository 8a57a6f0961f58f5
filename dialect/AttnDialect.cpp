//===- AttnDialect.cpp - The attn dialect ---------------------------------===//
//
// Registers the dialect's operations and attributes, and the bufferization
// model of attn.online_attention: a destination-style op whose memref form
// writes its three state buffers in place.
//
//===----------------------------------------------------------------------===//
#include "dialect/AttnDialect.h"
#include "dialect/AttnOps.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/DstBufferizableOpInterfaceImpl.h"
#include "mlir/IR/DialectRegistry.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::attn;

#include "dialect/AttnDialect.cpp.inc"
#include "dialect/AttnEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/AttnAttrs.cpp.inc"

void AttnDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialect/AttnOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialect/AttnAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Bufferization
//===----------------------------------------------------------------------===//

namespace {
struct OnlineAttentionBufferization
    : public bufferization::DstBufferizableOpInterfaceExternalModel<
          OnlineAttentionBufferization, OnlineAttentionOp> {
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const bufferization::BufferizationOptions &options,
                          bufferization::BufferizationState &state) const {
    auto online = cast<OnlineAttentionOp>(op);
    if (!online.hasPureTensorSemantics())
      return op->emitOpError("mixes tensor and memref operands");
    SmallVector<Value> operands;
    for (Value operand : op->getOperands()) {
      if (!isa<TensorType>(operand.getType())) {
        operands.push_back(operand);
        continue;
      }
      FailureOr<Value> buffer =
          bufferization::getBuffer(rewriter, operand, options, state);
      if (failed(buffer))
        return failure();
      operands.push_back(*buffer);
    }
    rewriter.setInsertionPoint(op);
    OperationState newState(op->getLoc(), op->getName(), operands,
                            TypeRange{}, op->getAttrs());
    Operation *bufferized = rewriter.create(newState);
    auto newOp = cast<OnlineAttentionOp>(bufferized);
    bufferization::replaceOpWithBufferizedValues(
        rewriter, op, {newOp.getAcc(), newOp.getMax(), newOp.getSum()});
    return success();
  }
};
} // namespace

void mlir::attn::registerBufferizableOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, AttnDialect *) {
    OnlineAttentionOp::attachInterface<OnlineAttentionBufferization>(*ctx);
  });
}
