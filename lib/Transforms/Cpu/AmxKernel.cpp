//===- AmxKernel.cpp - The packed micro-kernel on AMX tiles ---------------===//
//
// The packed path (PackedKernel.cpp) with a block's two products on Intel's
// AMX tile unit (bf16 Q, K and V; D a multiple of 32, Dv of 16). K and V
// are packed as the bf16 dot product packs them, which is the layout a
// tile multiply's right operand takes (VNNI pairs: KP[d/2][2j + d%2] for
// Q·Kᵀ, VP2[j/2][2e + j%2] for P·V); per block of 16 query rows (a tile's
// rows):
//
//   Q rows -> amxQuery [16][D] bf16          (the left tiles, 16 x 32)
//   S = Q·Kᵀ: per 16 keys one f32 tile, summed over D in steps of 32
//             -> amxScores [16][keyBlock]
//   per row: the softmax's online update in AVX-512 (KernelEmitter), p as
//            bf16 -> probPairs [16][keyBlock]
//   P·V: per 16 columns of Dv one f32 tile, summed over the keys in steps
//        of 32 -> amxOutput [16][Dv]; acc = alpha·acc + amxOutput, per row
//
// At most 4 accumulator tiles, one left and one right tile are live (6 of
// the 8 tile registers: more spill silently, ../shared/notes). The tiles
// live within one block of straight-line code, never across a loop, so
// that LLVM's tile configuration (one ldtilecfg per function) and the
// conversion to LLVM see no tile-typed block arguments.
//
// A block the causal or window band cuts keeps the packed path's P·V (f32
// FMAs at its edges, so that an excluded key's NaN V stays out); so does
// an op whose V is not paired (a mask operand). Where the tiles multiply a
// whole block, the pair rows past a partial block's keys are zero: a stale
// NaN there would reach the row through its weight 0.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Cpu/PackedKernel.h"

#include "mlir/Dialect/AMX/AMXDialect.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::cpu;

namespace {

/// Accumulator tiles of one pass (with a left and a right tile: 6 of 8).
constexpr int64_t kAccumulatorTiles = 4;
/// bf16 elements of a tile row (64 bytes): a step of the products' sums.
constexpr int64_t kTileStep = 32;

class AmxKernel : public PackedKernel {
public:
  using PackedKernel::PackedKernel;

protected:
  void packValues(Value batch, Value kvHead, Value blockStart,
                  Value blockKeys) override {
    PackedKernel::packValues(batch, kvHead, blockStart, blockKeys);
    if (!bf16Values)
      return;
    // P·V's tiles read whole steps of 32 keys: the pair rows past a
    // partial block's keys (the last block's) are zero.
    Value from = arith::CeilDivUIOp::create(b, blockKeys, cst(2));
    auto zero = vector::BroadcastOp::create(
        b, VectorType::get({kTileStep}, b.getBF16Type()),
        arith::ConstantOp::create(b, b.getZeroAttr(b.getBF16Type())));
    int64_t columns =
        cast<MemRefType>(scratch.valuePairs.getType()).getDimSize(1);
    forLoop(from, cst(keyBlock / 2), cst(1), [&](Value row) {
      for (int64_t c = 0; c < columns; c += kTileStep)
        vector::StoreOp::create(b, zero, scratch.valuePairs,
                                ValueRange{row, cst(c)});
    });
  }

  void emitRows(Value batch, ArrayRef<AccRow> block, Value blockStart,
                Value blockKeys, Value packed, int64_t scoreVectors) override {
    assert(lanes == 16 && block.size() == kAmxRows &&
           "the AMX path takes AVX-512 and blocks of a tile's 16 rows");
    copyQueryRows(batch, block);
    scoreTiles(packed, scoreVectors);

    // The softmax of each row, its statistics and scores loaded as its
    // update reads them (16 rows' loaded together spilled). A slot that
    // repeats the previous slot's row (the last block's) takes that slot's
    // weights and alpha instead of updating the row twice: P·V then gives
    // both slots the same sums, whichever stores last.
    SmallVector<Value> alphas;
    for (int64_t r = 0; r < kAmxRows; ++r) {
      auto update = [&, r = r] {
        SmallVector<Value> scores;
        for (int64_t v = 0; v < scoreVectors; ++v)
          scores.push_back(
              vector::LoadOp::create(b, vecType, scratch.amxScores,
                                     ValueRange{cst(r), cst(v * lanes)}));
        return updateRowStatistics(batch, block[r],
                                   loadStatistics(batch, block[r]), r, scores,
                                   blockStart, blockKeys,
                                   /*storePairs=*/bf16Values);
      };
      if (r == 0) {
        alphas.push_back(update());
        continue;
      }
      Value fresh = arith::CmpIOp::create(b, arith::CmpIPredicate::ne,
                                          block[r].row, block[r - 1].row);
      auto slot = scf::IfOp::create(b, f32, fresh, /*withElseRegion=*/true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(slot.thenBlock());
      scf::YieldOp::create(b, update());
      b.setInsertionPointToStart(slot.elseBlock());
      copyWeights(r - 1, r, scoreVectors);
      scf::YieldOp::create(b, alphas[r - 1]);
      alphas.push_back(slot.getResult(0));
    }

    // Keys that a row may exclude go through the packed path's P·V, which
    // keeps an excluded key's V out where the block holds an inf or NaN.
    if (!bf16Values || bandApplies() || keysMayBeExcluded() ||
        (scoreVectors * lanes) % kTileStep)
      return accumulateBlock(batch, block, alphas, blockStart, blockKeys,
                             packed);
    valueTiles(packed, scoreVectors * lanes);
    addBlockOutput(batch, block, alphas);
  }

private:
  Type bf16Tile() {
    return amx::TileType::get({kAmxRows, kTileStep}, b.getBF16Type());
  }
  Type f32Tile() { return amx::TileType::get({kAmxRows, lanes}, f32); }

  /// amxQuery[r] = the bf16 Q row of slot r: 32-element vector copies where
  /// Q's rows have unit stride, else element by element.
  void copyQueryRows(Value batch, ArrayRef<AccRow> block) {
    auto rowChunk = VectorType::get({kTileStep}, b.getBF16Type());
    ifUnitStride(
        op.getQuery(),
        [&](Value rows) {
          for (auto [r, at] : llvm::enumerate(block))
            for (int64_t d = 0; d < headDim; d += kTileStep)
              vector::StoreOp::create(
                  b,
                  vector::LoadOp::create(
                      b, rowChunk, rows,
                      ValueRange{batch, at.head, at.row, cst(d)}),
                  scratch.amxQuery, ValueRange{cst(r), cst(d)});
        },
        [&] {
          for (size_t r = 0; r < block.size(); ++r)
            forLoop(cst(0), cst(headDim), cst(1), [&](Value d) {
              memref::StoreOp::create(
                  b,
                  memref::LoadOp::create(
                      b, op.getQuery(),
                      ValueRange{batch, block[r].head, block[r].row, d}),
                  scratch.amxQuery, ValueRange{cst(r), d});
            });
        });
  }

  /// into[r][16c + i] = Σ_s left(s)[r]·right(s, c)[·][i] for c < columns
  /// (16 f32 columns a tile) over `steps` steps of 32 bf16: per group of 4
  /// accumulator tiles, each step's left tile loaded once and shared by the
  /// group's right tiles.
  void tileProducts(int64_t columns, int64_t steps,
                    function_ref<Value(int64_t)> left,
                    function_ref<Value(int64_t, int64_t)> right, Value into) {
    for (int64_t first = 0; first < columns; first += kAccumulatorTiles) {
      int64_t count = std::min(kAccumulatorTiles, columns - first);
      SmallVector<Value> sums;
      for (int64_t t = 0; t < count; ++t)
        sums.push_back(amx::TileZeroOp::create(b, f32Tile()));
      for (int64_t s = 0; s < steps; ++s) {
        Value leftTile = left(s);
        for (int64_t t = 0; t < count; ++t)
          sums[t] = amx::TileMulFOp::create(b, f32Tile(), leftTile,
                                            right(s, first + t), sums[t]);
      }
      for (int64_t t = 0; t < count; ++t)
        amx::TileStoreOp::create(
            b, into, ValueRange{cst(0), cst((first + t) * lanes)}, sums[t]);
    }
  }

  Value loadTile(Value buffer, Value row, Value column) {
    return amx::TileLoadOp::create(b, bf16Tile(), buffer,
                                   ValueRange{row, column});
  }

  /// amxScores[r][16v + i] = Q[r]·K[packed + 16v + i] for v <
  /// scoreVectors, summed over D 32 head dims a step: a Q tile (16 rows x
  /// 32 dims) by a K tile (16 pair rows x 16 keys' pairs).
  void scoreTiles(Value packed, int64_t scoreVectors) {
    Value packedPairs = arith::MulIOp::create(b, packed, cst(2));
    tileProducts(
        scoreVectors, headDim / kTileStep,
        [&](int64_t s) {
          return loadTile(scratch.amxQuery, cst(0), cst(s * kTileStep));
        },
        [&](int64_t s, int64_t v) {
          return loadTile(
              scratch.keyPairs, cst(s * kTileStep / 2),
              arith::AddIOp::create(b, packedPairs, cst(2 * v * lanes)));
        },
        scratch.amxScores);
  }

  /// amxOutput[r][16c + i] = Σ_j probPairs[r][j]·V[packed + j][16c + i]
  /// over the block's `keys` (a multiple of 32), 32 keys a step: a P tile
  /// (16 rows x 32 keys) by a V tile (16 key pairs x 16 columns' pairs).
  void valueTiles(Value packed, int64_t keys) {
    Value pairRow = arith::DivUIOp::create(b, packed, cst(2));
    tileProducts(
        valueDim / lanes, keys / kTileStep,
        [&](int64_t s) {
          return loadTile(scratch.probPairs, cst(0), cst(s * kTileStep));
        },
        [&](int64_t s, int64_t c) {
          return loadTile(
              scratch.valuePairs,
              arith::AddIOp::create(b, pairRow, cst(s * kTileStep / 2)),
              cst(2 * c * lanes));
        },
        scratch.amxOutput);
  }

  /// probs[to] = probs[from] (and probPairs) for the scored keys.
  void copyWeights(int64_t from, int64_t to, int64_t scoreVectors) {
    std::pair<Value, VectorType> buffers[] = {
        {scratch.probs, vecType},
        {scratch.probPairs, VectorType::get({lanes}, b.getBF16Type())}};
    for (auto [buffer, type] : ArrayRef(buffers).take_front(bf16Values ? 2 : 1))
      for (int64_t v = 0; v < scoreVectors; ++v)
        vector::StoreOp::create(
            b,
            vector::LoadOp::create(b, type, buffer,
                                   ValueRange{cst(from), cst(v * lanes)}),
            buffer, ValueRange{cst(to), cst(v * lanes)});
  }

  /// acc[r] = alpha[r]·acc[r] + amxOutput[r] for the block's rows; a slot
  /// that repeats the previous slot's row (the last block's) adds nothing.
  void addBlockOutput(Value batch, ArrayRef<AccRow> block,
                      ArrayRef<Value> alphas) {
    for (auto [r, at] : llvm::enumerate(block)) {
      auto update = [&, r = r, at = at] {
        Value alpha = splat(alphas[r]);
        for (int64_t c = 0; c < valueDim; c += lanes) {
          SmallVector<Value, 4> index = {batch, at.head, at.row, cst(c)};
          Value acc = vector::LoadOp::create(b, vecType, op.getAcc(), index);
          Value block = vector::LoadOp::create(b, vecType, scratch.amxOutput,
                                               ValueRange{cst(r), cst(c)});
          vector::StoreOp::create(b,
                                  vector::FMAOp::create(b, acc, alpha, block),
                                  op.getAcc(), index);
        }
      };
      if (r == 0) {
        update();
        continue;
      }
      Value fresh = arith::CmpIOp::create(b, arith::CmpIPredicate::ne, at.row,
                                          block[r - 1].row);
      auto guard = scf::IfOp::create(b, fresh);
      OpBuilder::InsertionGuard insertion(b);
      b.setInsertionPoint(guard.thenBlock()->getTerminator());
      update();
    }
  }
};

} // namespace

void mlir::attn::cpu::emitAmxHead(const KernelSite &site, Value batch,
                                  Value head, Value kvHead, Value rows,
                                  Value keys) {
  AmxKernel(site).emitPackedHead(batch, head, kvHead, rows, keys);
}
