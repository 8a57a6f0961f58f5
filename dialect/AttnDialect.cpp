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
// #attn.kernel
//===----------------------------------------------------------------------===//

LogicalResult KernelAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 MicroKernel microKernel, int64_t queryTile,
                                 int64_t keyBlock, int64_t rowBlock,
                                 int64_t laneRows, bool bf16Dot,
                                 bool blockPrefetch) {
  if (queryTile < 1 || keyBlock < 1)
    return emitError() << "#attn.kernel: query_tile and key_block must be "
                          "positive, found "
                       << queryTile << " and " << keyBlock;
  if (!blockPrefetch && microKernel != MicroKernel::lane_rows)
    return emitError() << "#attn.kernel: block_prefetch is a choice of the "
                          "lane_rows micro-kernel, found block_prefetch = "
                          "false on "
                       << stringifyMicroKernel(microKernel);
  if (microKernel == MicroKernel::amx) {
    if (rowBlock != 16 || keyBlock % 32 != 0 || !bf16Dot)
      return emitError() << "#attn.kernel: amx takes row_block = 16 (a "
                            "tile's rows), a key_block that is a multiple of "
                            "32 and bf16_dot = true (its K and V pairs), "
                            "found row_block = "
                         << rowBlock << ", key_block = " << keyBlock
                         << ", bf16_dot = " << (bf16Dot ? "true" : "false");
    return success();
  }
  if (microKernel == MicroKernel::mma_sync || microKernel == MicroKernel::fma) {
    if (laneRows || bf16Dot)
      return emitError() << "#attn.kernel: lane_rows and bf16_dot are CPU "
                            "choices; a GPU micro-kernel ("
                         << stringifyMicroKernel(microKernel)
                         << ") takes neither";
    if (rowBlock != 0 && rowBlock != 16 && rowBlock != 32)
      return emitError() << "#attn.kernel: a GPU micro-kernel's row_block is "
                            "its query rows a warp, 16 (or 0) or 32, found "
                         << rowBlock;
    int64_t rowsPerWarp = rowBlock ? rowBlock : 16;
    if (queryTile % rowsPerWarp || queryTile > 16 * rowsPerWarp ||
        keyBlock % 16)
      return emitError() << "#attn.kernel: a GPU micro-kernel's query_tile "
                            "must be 1 to 16 warps of "
                         << rowsPerWarp
                         << " rows and its key_block a multiple of 16, found "
                         << queryTile << " and " << keyBlock;
    return success();
  }
  if (rowBlock < 0 || rowBlock > 8 || laneRows < 0)
    return emitError() << "#attn.kernel: row_block must be in [0, 8] and "
                          "lane_rows at least 0, found "
                       << rowBlock << " and " << laneRows;
  switch (microKernel) {
  case MicroKernel::lane_rows:
    if (laneRows == 0)
      return emitError() << "#attn.kernel: lane_rows needs a lane_rows tile "
                            "(lane_rows = N)";
    return success();
  case MicroKernel::packed:
  case MicroKernel::amx:
    return success();
  case MicroKernel::mma_sync:
  case MicroKernel::fma:
    break; // above
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Bufferization
//===----------------------------------------------------------------------===//

namespace {
/// The bufferization of an attn op in destination-passing style that takes
/// tensors or memrefs (the online, backward, weights, linear and additive
/// ops): the same op on buffers, writing its outs in place.
template <typename OpTy>
struct MemRefFormBufferization
    : public bufferization::DstBufferizableOpInterfaceExternalModel<
          MemRefFormBufferization<OpTy>, OpTy> {
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const bufferization::BufferizationOptions &options,
                          bufferization::BufferizationState &state) const {
    auto dps = cast<DestinationStyleOpInterface>(op);
    if (!dps.hasPureTensorSemantics())
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
    // The modifiers' regions move over as they are: they compute scalars.
    for (Region &region : op->getRegions())
      newState.addRegion()->takeBody(region);
    auto bufferized =
        cast<DestinationStyleOpInterface>(rewriter.create(newState));
    bufferization::replaceOpWithBufferizedValues(
        rewriter, op, SmallVector<Value>(bufferized.getDpsInits()));
    return success();
  }
};
} // namespace

void mlir::attn::registerBufferizableOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, AttnDialect *) {
    OnlineAttentionOp::attachInterface<
        MemRefFormBufferization<OnlineAttentionOp>>(*ctx);
    AttentionBackwardOp::attachInterface<
        MemRefFormBufferization<AttentionBackwardOp>>(*ctx);
    AttentionWeightsOp::attachInterface<
        MemRefFormBufferization<AttentionWeightsOp>>(*ctx);
    LinearOp::attachInterface<MemRefFormBufferization<LinearOp>>(*ctx);
    LinearBackwardOp::attachInterface<
        MemRefFormBufferization<LinearBackwardOp>>(*ctx);
    AdditiveOp::attachInterface<MemRefFormBufferization<AdditiveOp>>(*ctx);
    AdditiveBackwardOp::attachInterface<
        MemRefFormBufferization<AdditiveBackwardOp>>(*ctx);
  });
}
