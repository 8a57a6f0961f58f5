//===- Bufferize.cpp - One-shot bufferization for attn kernels ------------===//
//
// Upstream One-Shot Module Bufferize, configured for kernels: any caller
// strides at function boundaries, outputs in place, and the per-tile state
// on the stack (attn-outline-work-items gives each tile its alloca scope).
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Passes.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/Transforms/OneShotAnalysis.h"
#include "mlir/Dialect/Bufferization/Transforms/OneShotModuleBufferize.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir {
namespace attn {
#define GEN_PASS_DEF_ATTNBUFFERIZEPASS
#include "lib/Transforms/Passes.h.inc"
} // namespace attn
} // namespace mlir

using namespace mlir;
using namespace mlir::attn;

namespace {
struct AttnBufferizePass
    : public mlir::attn::impl::AttnBufferizePassBase<AttnBufferizePass> {
  void runOnOperation() override {
    bufferization::OneShotBufferizationOptions options;
    options.bufferizeFunctionBoundaries = true;
    options.setFunctionBoundaryTypeConversion(
        bufferization::LayoutMapOption::FullyDynamicLayoutMap);
    options.allocationFn = [](OpBuilder &b, Location loc, MemRefType type,
                              ValueRange dynamicSizes,
                              unsigned alignment) -> FailureOr<Value> {
      return memref::AllocaOp::create(b, loc, type, dynamicSizes,
                                      b.getI64IntegerAttr(64))
          .getResult();
    };
    bufferization::BufferizationState state;
    if (failed(bufferization::runOneShotModuleBufferize(getOperation(),
                                                        options, state)))
      return signalPassFailure();
    dropResultsThatAreArguments(getOperation());
  }

  /// A result that returns an argument (an output written in place) tells
  /// the caller nothing: drop it, for functions nobody in the module calls.
  static void dropResultsThatAreArguments(ModuleOp module) {
    SymbolTableCollection symbols;
    SymbolUserMap users(symbols, module);
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal() || !users.getUsers(func).empty() ||
          !func.getBody().hasOneBlock())
        continue;
      auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
      if (ret.getNumOperands() == 0 ||
          !llvm::all_of(ret.getOperands(),
                        [](Value v) { return isa<BlockArgument>(v); }))
        continue;
      OpBuilder b(ret);
      func::ReturnOp::create(b, ret.getLoc(), ValueRange{});
      ret.erase();
      func.setType(FunctionType::get(func.getContext(),
                                     func.getArgumentTypes(), {}));
    }
  }
};
} // namespace
