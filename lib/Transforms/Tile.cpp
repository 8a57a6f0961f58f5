//===- Tile.cpp - Tile attn.attention over its parallel dims --------------===//
//
// The first stage of the lowering: every attn.attention becomes an
// scf.forall over (batch, query head, query tile) whose body computes one
// tile with a smaller attn.attention, every attn.attention_backward and
// attn.linear one over (batch, key/value head), every
// attn.attention_weights one over (batch, query head, query tile), every
// attn.additive one over (batch, query tile). The slicing
// itself (GQA head mapping, mask broadcast, the diagonal in tile coordinates)
// is the op's TilingInterface implementation; this pass only chooses the tile
// sizes.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Passes.h"

#include "dialect/AttnOps.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

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
    if (queryTileSize < 1 || bandedQueryTileSize < 0) {
      getOperation().emitError()
          << "attn-tile: query-tile-size must be >= 1 and "
             "banded-query-tile-size >= 0, found "
          << static_cast<int64_t>(queryTileSize) << " and "
          << static_cast<int64_t>(bandedQueryTileSize);
      return signalPassFailure();
    }
    SmallVector<AttentionOp> ops;
    // Only the outermost ops: a tile produced by this pass is not tiled again.
    getOperation().walk([&](AttentionOp op) {
      if (!insideTile(op))
        ops.push_back(op);
    });

    IRRewriter rewriter(&getContext());
    for (AttentionOp op : ops) {
      // One batch and `queryTileSize` query rows per tile, all keys; one
      // query head (mapping onto one key/value head) or, for ops of at most
      // `groupRows` rows, one GQA group of heads.
      rewriter.setInsertionPoint(op);
      SmallVector<OpFoldResult> tileSizes = {
          rewriter.getIndexAttr(1), headTileSize(rewriter, op), rowTileSize(op),
          rewriter.getIndexAttr(0)};
      scf::SCFTilingOptions options;
      options.setLoopType(scf::SCFTilingOptions::LoopType::ForallOp)
          .setTileSizes(tileSizes);
      if (blockMapping)
        options.setMapping(gridMapping());
      FailureOr<scf::SCFTilingResult> tiled = scf::tileUsingSCF(
          rewriter, cast<TilingInterface>(op.getOperation()), options);
      if (failed(tiled))
        return signalPassFailure();
      rewriter.replaceOp(op, tiled->replacements);
    }

    for (AttentionBackwardOp op : outermostTensorOps<AttentionBackwardOp>())
      if (failed(tileBackward(rewriter, op)))
        return signalPassFailure();
    for (AttentionWeightsOp op : outermostTensorOps<AttentionWeightsOp>())
      if (failed(tileWeights(rewriter, op)))
        return signalPassFailure();
    // attn.linear: one work item per batch and key/value head (a state and
    // the query heads of its GQA group).
    for (LinearOp op : outermostTensorOps<LinearOp>()) {
      rewriter.setInsertionPoint(op);
      if (failed(tileAsForall(
              rewriter, op,
              {rewriter.getIndexAttr(1), rewriter.getIndexAttr(1)})))
        return signalPassFailure();
    }
    // attn.linear_backward: the same work items (its dK, dV, dS and dz
    // those of a key/value head, its dQ those of the head's group).
    for (LinearBackwardOp op : outermostTensorOps<LinearBackwardOp>()) {
      rewriter.setInsertionPoint(op);
      if (failed(tileAsForall(
              rewriter, op,
              {rewriter.getIndexAttr(1), rewriter.getIndexAttr(1)})))
        return signalPassFailure();
    }
    // attn.additive: one work item per batch and `queryTileSize` rows.
    for (AdditiveOp op : outermostTensorOps<AdditiveOp>()) {
      rewriter.setInsertionPoint(op);
      if (failed(tileAsForall(rewriter, op,
                              {rewriter.getIndexAttr(1),
                               rewriter.getIndexAttr(queryTileSize)})))
        return signalPassFailure();
    }
    // attn.additive_backward: one work item per batch and part of the
    // query rows (each part's partial sums are its own).
    for (AdditiveBackwardOp op : outermostTensorOps<AdditiveBackwardOp>()) {
      rewriter.setInsertionPoint(op);
      if (failed(tileAsForall(
              rewriter, op,
              {rewriter.getIndexAttr(1), rewriter.getIndexAttr(1)})))
        return signalPassFailure();
    }
  }

  /// Whether `op` is in a tile that tiling made: in an scf.forall other
  /// than a layer's loop over batches (attn-decompose-mha).
  static bool insideTile(Operation *op) {
    for (auto forall = op->getParentOfType<scf::ForallOp>(); forall;
         forall = forall->getParentOfType<scf::ForallOp>())
      if (!forall->hasAttr(kLayerBatchesAttrName))
        return true;
    return false;
  }

  /// The ops of a kind on tensors that no earlier tiling made.
  template <typename OpTy> SmallVector<OpTy> outermostTensorOps() {
    SmallVector<OpTy> ops;
    getOperation().walk([&](OpTy op) {
      if (!insideTile(op) && op.hasPureTensorSemantics())
        ops.push_back(op);
    });
    return ops;
  }

  /// Replaces `op` by an scf.forall of tiles of `tileSizes`.
  LogicalResult tileAsForall(RewriterBase &rewriter, Operation *op,
                             ArrayRef<OpFoldResult> tileSizes) {
    scf::SCFTilingOptions options;
    options.setLoopType(scf::SCFTilingOptions::LoopType::ForallOp)
        .setTileSizes(tileSizes);
    FailureOr<scf::SCFTilingResult> tiled =
        scf::tileUsingSCF(rewriter, cast<TilingInterface>(op), options);
    if (failed(tiled))
      return failure();
    rewriter.replaceOp(op, tiled->replacements);
    return success();
  }

  /// One work item per batch, query head and `queryTileSize` rows: every
  /// row of the weights is its own (its LSE too).
  LogicalResult tileWeights(RewriterBase &rewriter, AttentionWeightsOp op) {
    rewriter.setInsertionPoint(op);
    return tileAsForall(rewriter, op,
                        {rewriter.getIndexAttr(1), rewriter.getIndexAttr(1),
                         rewriter.getIndexAttr(queryTileSize),
                         rewriter.getIndexAttr(0)});
  }

  /// One work item per batch and key/value head: its GQA group of query
  /// heads, all rows and all keys. Each tile then owns the dQ rows of its
  /// heads and the dK/dV rows of its key/value head, so that the gradients
  /// are sums in an order that no thread count changes.
  LogicalResult tileBackward(RewriterBase &rewriter, AttentionBackwardOp op) {
    rewriter.setInsertionPoint(op);
    auto query = cast<ShapedType>(op.getQuery().getType());
    auto key = cast<ShapedType>(op.getKey().getType());
    // At least 1: a call without query heads has no work item (the
    // runtime gives it zero dK and dV).
    OpFoldResult group;
    if (!query.isDynamicDim(1) && !key.isDynamicDim(1)) {
      group = rewriter.getIndexAttr(std::max<int64_t>(
          query.getDimSize(1) / std::max<int64_t>(key.getDimSize(1), 1), 1));
    } else {
      Location loc = op.getLoc();
      Value heads = arith::DivUIOp::create(
          rewriter, loc, tensor::DimOp::create(rewriter, loc, op.getQuery(), 1),
          tensor::DimOp::create(rewriter, loc, op.getKey(), 1));
      group = arith::MaxUIOp::create(
                  rewriter, loc, heads,
                  arith::ConstantIndexOp::create(rewriter, loc, 1))
                  .getResult();
    }
    return tileAsForall(rewriter, op,
                        {rewriter.getIndexAttr(1), group,
                         rewriter.getIndexAttr(0), rewriter.getIndexAttr(0)});
  }

  /// The forall's dims (batch, head, query tile) as the GPU grid's z, y, x.
  SmallVector<Attribute> gridMapping() {
    MLIRContext *ctx = &getContext();
    return {gpu::GPUBlockMappingAttr::get(ctx, gpu::MappingId::DimZ),
            gpu::GPUBlockMappingAttr::get(ctx, gpu::MappingId::DimY),
            gpu::GPUBlockMappingAttr::get(ctx, gpu::MappingId::DimX)};
  }

  /// The op's chosen query tile (#attn.kernel), else `queryTileSize` rows
  /// (`bandedQueryTileSize` for a causal or windowed op, when set); with
  /// `groupRows` set (the CPU lowering), all of a smaller static Sq, so that
  /// the tile's types and its state buffers are that small (the GPU lowering
  /// needs whole 16-row warp tiles).
  OpFoldResult rowTileSize(AttentionOp op) {
    int64_t rows = cast<ShapedType>(op.getQuery().getType()).getDimSize(2);
    bool banded = op.getCausal() || op.getWindow();
    int64_t tile =
        banded && bandedQueryTileSize > 0 ? bandedQueryTileSize : queryTileSize;
    if (KernelAttr kernel = op.getKernelAttr())
      tile = kernel.getQueryTile();
    if (groupRows > 0 && !ShapedType::isDynamic(rows) && rows >= 1)
      tile = std::min<int64_t>(tile, rows);
    return IntegerAttr::get(IndexType::get(op.getContext()), tile);
  }

  /// The query heads of one tile: 1, or for an op whose static Sq is at
  /// most `groupRows` (decoding) the GQA group G = Hq / Hkv, where G is at
  /// most kMaxGroup (the tile's state, G x Sq rows, lives on the stack). A
  /// larger group is tiled by its largest divisor up to kMaxGroup (a power
  /// of two where G is dynamic): the tiles of one key/value head then read
  /// its K and V once each rather than once per query head. A dynamic G
  /// gives selects with that constant bound.
  OpFoldResult headTileSize(RewriterBase &rewriter, AttentionOp op) {
    constexpr int64_t kMaxGroup = 16;
    auto query = cast<ShapedType>(op.getQuery().getType());
    auto key = cast<ShapedType>(op.getKey().getType());
    OpFoldResult one = rewriter.getIndexAttr(1);
    if (groupRows < 1 || query.isDynamicDim(2) ||
        query.getDimSize(2) > groupRows)
      return one;
    if (!query.isDynamicDim(1) && !key.isDynamicDim(1)) {
      int64_t group =
          query.getDimSize(1) / std::max<int64_t>(key.getDimSize(1), 1);
      int64_t tile = 1;
      for (int64_t t = std::min(group, kMaxGroup); t > 1 && tile == 1; --t)
        if (group % t == 0)
          tile = t;
      return rewriter.getIndexAttr(tile);
    }
    Location loc = op.getLoc();
    auto dim = [&](Value tensor, int64_t index) -> Value {
      return tensor::DimOp::create(rewriter, loc, tensor, index);
    };
    auto cst = [&](int64_t v) -> Value {
      return arith::ConstantIndexOp::create(rewriter, loc, v);
    };
    Value group = arith::DivUIOp::create(rewriter, loc, dim(op.getQuery(), 1),
                                         dim(op.getKey(), 1));
    // 1 <= G <= kMaxGroup, as one unsigned compare (G = 0 when Hq = 0: an
    // empty problem, whose tile must not be 0 heads); else the largest
    // power of two up to kMaxGroup that divides G.
    Value chosen = cst(1);
    for (int64_t t = 2; t <= kMaxGroup; t *= 2) {
      Value divides = arith::CmpIOp::create(
          rewriter, loc, arith::CmpIPredicate::eq,
          arith::RemUIOp::create(rewriter, loc, group, cst(t)), cst(0));
      chosen = arith::SelectOp::create(rewriter, loc, divides, cst(t), chosen);
    }
    Value small = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::ule,
        arith::SubIOp::create(rewriter, loc, group, cst(1)),
        cst(kMaxGroup - 1));
    chosen = arith::SelectOp::create(rewriter, loc, small, group, chosen);
    // min(chosen, kMaxGroup) = chosen; the min states the bound that the
    // tile's state buffers need (ValueBounds cannot see through the select).
    return affine::makeComposedFoldedAffineMin(
        rewriter, loc,
        AffineMap::get(1, 0,
                       {rewriter.getAffineDimExpr(0),
                        rewriter.getAffineConstantExpr(kMaxGroup)},
                       rewriter.getContext()),
        {OpFoldResult(chosen)});
  }
};
} // namespace
