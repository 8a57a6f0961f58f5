//===- TileKeys.cpp - Tile the key dimension of the online form -----------===//
//
// attn.online_attention accumulates into its outs (the running accumulator,
// maximum and sum), so its key dimension tiles like a matmul's reduction
// dimension: an scf.for over key tiles whose iteration arguments carry the
// state. This is FlashAttention's inner loop; each iteration sees one key
// tile, so no score buffer larger than (query tile x key tile) ever exists.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Passes.h"

#include "dialect/AttnOps.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir {
namespace attn {
#define GEN_PASS_DEF_ATTNTILEKEYSPASS
#include "lib/Transforms/Passes.h.inc"
} // namespace attn
} // namespace mlir

using namespace mlir;
using namespace mlir::attn;

namespace {
struct AttnTileKeysPass
    : public mlir::attn::impl::AttnTileKeysPassBase<AttnTileKeysPass> {
  using AttnTileKeysPassBase::AttnTileKeysPassBase;

  void runOnOperation() override {
    if (keyTileSize < 1) {
      getOperation().emitError()
          << "attn-tile-keys: key-tile-size must be >= 1, found "
          << static_cast<int64_t>(keyTileSize);
      return signalPassFailure();
    }
    SmallVector<OnlineAttentionOp> ops;
    getOperation().walk([&](OnlineAttentionOp op) {
      // Skip ops already inside a key loop made by this pass.
      if (op.hasPureTensorSemantics() && !op->hasAttr(kTiledMarker))
        ops.push_back(op);
    });

    IRRewriter rewriter(&getContext());
    for (OnlineAttentionOp op : ops) {
      // The op's chosen key block (#attn.kernel), else the option.
      int64_t tileSize = chosenKeyBlock(op, keyTileSize);
      scf::SCFTilingOptions options;
      options.setLoopType(scf::SCFTilingOptions::LoopType::ForOp)
          .setTileSizes({rewriter.getIndexAttr(0), rewriter.getIndexAttr(0),
                         rewriter.getIndexAttr(0),
                         rewriter.getIndexAttr(tileSize)})
          .setReductionTilingStrategy(ReductionTilingStrategy::FullReduction)
          .setReductionDims({3});
      rewriter.setInsertionPoint(op);
      FailureOr<scf::SCFTilingResult> tiled = scf::tileUsingSCF(
          rewriter, cast<TilingInterface>(op.getOperation()), options);
      if (failed(tiled))
        return signalPassFailure();
      for (Operation *tiledOp : tiled->tiledOps)
        tiledOp->setAttr(kTiledMarker, rewriter.getUnitAttr());
      rewriter.replaceOp(op, tiled->replacements);
    }
    // The marker only guards against re-tiling within this run.
    getOperation().walk(
        [](OnlineAttentionOp op) { op->removeAttr(kTiledMarker); });
  }

  static constexpr llvm::StringLiteral kTiledMarker = "__attn_key_tiled";
};
} // namespace
