//===- Tile.cpp - Tile attn.attention over its parallel dims --------------===//
//
// The first stage of the lowering: every attn.attention becomes an
// scf.forall over (batch, query head, query tile) whose body computes one
// tile with a smaller attn.attention. The slicing itself (GQA head mapping,
// mask broadcast, the diagonal in tile coordinates) is the op's
// TilingInterface implementation; this pass only chooses the tile sizes.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Passes.h"

#include "dialect/AttnOps.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir {
namespace attn {
#define GEN_PASS_DEF_ATTNTILEPASS
#include "lib/Transforms/Passes.h.inc"
} // namespace attn
} // namespace mlir

using namespace mlir;
using namespace mlir::attn;

namespace {
struct AttnTilePass : public mlir::attn::impl::AttnTilePassBase<AttnTilePass> {
  using AttnTilePassBase::AttnTilePassBase;

  void runOnOperation() override {
    if (queryTileSize < 1) {
      getOperation().emitError()
          << "attn-tile: query-tile-size must be >= 1, found "
          << static_cast<int64_t>(queryTileSize);
      return signalPassFailure();
    }
    SmallVector<AttentionOp> ops;
    // Only the outermost ops: a tile produced by this pass is not tiled again.
    getOperation().walk([&](AttentionOp op) {
      if (!op->getParentOfType<scf::ForallOp>())
        ops.push_back(op);
    });

    IRRewriter rewriter(&getContext());
    for (AttentionOp op : ops) {
      // One batch and one query head per tile (a head tile maps onto one
      // key/value head), `queryTileSize` query rows, all keys.
      SmallVector<OpFoldResult> tileSizes = {
          rewriter.getIndexAttr(1), rewriter.getIndexAttr(1),
          rewriter.getIndexAttr(queryTileSize), rewriter.getIndexAttr(0)};
      scf::SCFTilingOptions options;
      options.setLoopType(scf::SCFTilingOptions::LoopType::ForallOp)
          .setTileSizes(tileSizes);
      rewriter.setInsertionPoint(op);
      FailureOr<scf::SCFTilingResult> tiled = scf::tileUsingSCF(
          rewriter, cast<TilingInterface>(op.getOperation()), options);
      if (failed(tiled))
        return signalPassFailure();
      rewriter.replaceOp(op, tiled->replacements);
    }
  }
};
} // namespace
