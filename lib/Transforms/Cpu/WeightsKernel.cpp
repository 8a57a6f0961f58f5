//===- WeightsKernel.cpp - The CPU kernel of attn.attention_weights -------===//
//
// One bufferized attn.attention_weights (a work item: a batch, a query head
// and a tile of its rows, as attn-tile makes it) writes its rows of
//
//   W[i,j] = exp(s[i,j] − LSE[i]) · Z[i,j]     (0 where excluded)
//
// per head:              Q as f32 rows (bf16 with the dot product); LSE
//                        from the op, or the rows' own:
//   [own LSE] per block of 64 keys, per block of rows that see one:
//                        the online max and sum of the allowed scores
//   per block of 64 keys: Kᵀ packed as f32 (bf16 pairs with the dot product:
//                        bf16 Q and K where AVX-512 BF16's dot product
//                        pays, as the forward and the backward take it)
//     rows that see none of them: zeros
//     per block of rows that see one: S = Q·Kᵀ (scale, soft cap, bias),
//                        W = exp(S − LSE) where allowed (times dropout's Z)
//
// With a block mask's table (docs/spec.md, "Score and mask modifiers" 7), a
// block of rows whose entries for the key block all say "nothing kept" is
// zeros, with no scores computed, in both passes.
//
// The weights are f32 and written a vector at a time (masked stores on
// unit-stride rows, element by element otherwise): the kernel is bound by
// writing W, which is O(Sq·Sk).
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Cpu/KeyBlockEmitter.h"
#include "lib/Transforms/Cpu/MicroKernels.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::cpu;

namespace {

class WeightsLowering : public KeyBlockEmitter {
  /// Rows ahead of a block of rows whose reads of the mask and the
  /// captures it prefetches.
  static constexpr int64_t kPrefetchRows = 16;

public:
  WeightsLowering(ImplicitLocOpBuilder &b, AttentionWeightsOp op, int64_t lanes,
                  bool bf16Dot)
      : KeyBlockEmitter(b, op, lanes, kRows,
                        bf16Dot && isBf16(op.getQuery()) &&
                            isBf16(op.getKey())),
        op(op) {}

  void emit();

private:
  /// One head's rows and where their f32 copies live.
  struct Head {
    Value batch, head, kvHead, rows;
    Value queryRows; // [Sq][DPad] f32 (bf16 for the dot product)
    Value lseRef;    // [Sq]: the LSE, +inf for a row with no allowed key
  };

  /// `body(block)` for each block of 64 keys, Kᵀ packed.
  void forEachKeyBlock(const Head &head,
                       function_ref<void(const KeyBlock &)> body);
  /// The final scores of rows [firstRow, firstRow + count) against the
  /// packed block (register tiles, r-major), the mask loaded.
  SmallVector<Value> blockScores(const Head &head, const KeyBlock &block,
                                 Value firstRow, int64_t count);
  /// The rows' own LSE into head.lseRef: an online max and sum.
  void computeLse(const Head &head);
  /// W of the head's rows; `view` is the weights with unit-stride rows, or
  /// null where they have none.
  void writeWeights(const Head &head, Value view);
  /// forRowBlocks over [lo, hi), each block of rows through `kept`, or
  /// through `none` where the op's block table says that the block of rows
  /// keeps none of the key block's scores.
  void forTableRowBlocks(const Head &head, const KeyBlock &block, Value lo,
                         Value hi, function_ref<void(Value, int64_t)> kept,
                         function_ref<void(Value, int64_t)> none);
  /// Row `row` of the block's W from `vectors` (keyVectors of them).
  void storeRow(const Head &head, Value view, const KeyBlock &block, Value row,
                ArrayRef<Value> vectors);

  AttentionWeightsOp op;
  Value rowBuffer; // [64]: a row of W for element-wise stores
};

void WeightsLowering::emit() {
  rowBuffer = stackBuffer({kBlockKeys});
  Value weights = op.getWeights();
  forLoop(cst(0), dim(query, 0), cst(1), [&](Value batch) {
    forLoop(cst(0), dim(query, 1), cst(1), [&](Value headIndex) {
      Head head{batch, headIndex, kvHeadOf(headIndex), dim(query, 2)};
      head.queryRows =
          heapRows(head.rows, headPad, isBf16(keysT) ? b.getBF16Type() : f32);
      head.lseRef = heapRows(head.rows, 0);
      forLoop(cst(0), head.rows, cst(1), [&](Value row) {
        packRow(query, batch, headIndex, row, head.queryRows, row, headDim,
                headPad);
      });
      if (Value lse = op.getLse()) {
        // A fully masked row has LSE = −inf: exp(s − +inf) = 0 gives it
        // W = 0 (never exp(s + inf)).
        forLoop(cst(0), head.rows, cst(1), [&](Value row) {
          Value x = loadF32(lse, {batch, headIndex, row});
          Value masked = arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, x,
                                               f32Const(-kInf));
          memref::StoreOp::create(
              b, arith::SelectOp::create(b, masked, f32Const(kInf), x),
              head.lseRef, ValueRange{row});
        });
      } else {
        computeLse(head);
      }
      ifUnitStride(
          weights, [&](Value view) { writeWeights(head, view); },
          [&] { writeWeights(head, Value()); });
      memref::DeallocOp::create(b, head.queryRows);
      memref::DeallocOp::create(b, head.lseRef);
    });
  });
  fenceStreamingStores();
}

void WeightsLowering::forEachKeyBlock(
    const Head &head, function_ref<void(const KeyBlock &)> body) {
  Value keys = dim(key, 2);
  forLoop(cst(0), keys, cst(kBlockKeys), [&](Value start) {
    KeyBlock block{start,
                   arith::MinSIOp::create(
                       b, cst(kBlockKeys), arith::SubIOp::create(b, keys, start))};
    packKeys(head.batch, head.kvHead, block);
    body(block);
  });
}

SmallVector<Value> WeightsLowering::blockScores(const Head &head,
                                                const KeyBlock &block,
                                                Value firstRow,
                                                int64_t count) {
  loadRowBlock(head.batch, block, head.head, firstRow, count);
  SmallVector<Value> rowAt;
  for (int64_t r = 0; r < count; ++r)
    rowAt.push_back(arith::AddIOp::create(b, firstRow, cst(r)));
  SmallVector<Value> scores;
  rowsTimesBlock(head.queryRows, keysT, headDim, rowAt,
                 [&](int64_t first, ArrayRef<Value> tile) {
                   for (auto [i, s] : llvm::enumerate(tile))
                     scores.push_back(
                         finalScore(s, first + i / keyVectors, i % keyVectors));
                 });
  // What the rows kPrefetchRows further read of the mask and the captures
  // here (the blocks of rows are short: the next one's would come late).
  prefetchRowBlock(head.batch, block, head.head,
                   arith::AddIOp::create(b, firstRow, cst(kPrefetchRows)),
                   count, head.rows);
  return scores;
}

void WeightsLowering::forTableRowBlocks(
    const Head &head, const KeyBlock &block, Value lo, Value hi,
    function_ref<void(Value, int64_t)> kept,
    function_ref<void(Value, int64_t)> none) {
  if (!op->hasAttr(kBlockMaskAttrName))
    return forRowBlocks(lo, hi, kept);
  forRowBlocks(lo, hi, [&](Value firstRow, int64_t count) {
    Value any = blockTableEntries(op, op.getCaptures(), op.getOrigin(),
                                  head.batch, head.head, firstRow, cst(count),
                                  block.start, block.count)
                    .first;
    auto ifKept = scf::IfOp::create(b, any, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(ifKept.thenBlock()->getTerminator());
    kept(firstRow, count);
    b.setInsertionPoint(ifKept.elseBlock()->getTerminator());
    none(firstRow, count);
  });
}

void WeightsLowering::computeLse(const Head &head) {
  Value maxRows = heapRows(head.rows, 0), sumRows = heapRows(head.rows, 0);
  forLoop(cst(0), head.rows, cst(1), [&](Value row) {
    memref::StoreOp::create(b, f32Const(-kInf), maxRows, ValueRange{row});
    memref::StoreOp::create(b, f32Const(0.0f), sumRows, ValueRange{row});
  });
  forEachKeyBlock(head, [&](const KeyBlock &block) {
    auto [lo, hi] = rowsSeeing(block, head.rows);
    // A block of rows that keeps nothing here adds nothing to its rows.
    auto nothing = [](Value, int64_t) {};
    forTableRowBlocks(
        head, block, lo, hi,
        [&](Value firstRow, int64_t count) {
          SmallVector<Value> scores = blockScores(head, block, firstRow, count);
          Value minusInf = splat(f32Const(-kInf));
          for (int64_t r = 0; r < count; ++r) {
            Value row = arith::AddIOp::create(b, firstRow, cst(r));
            // The allowed scores; −inf elsewhere (whatever NaN is there).
            SmallVector<Value> allowedScores;
            Value blockMax;
            for (int64_t v = 0; v < keyVectors; ++v) {
              allowedScores.push_back(arith::SelectOp::create(
                  b, allowed(block, row, r, v), scores[r * keyVectors + v],
                  minusInf));
              blockMax = blockMax ? math.max(blockMax, allowedScores.back())
                                  : allowedScores.back();
            }
            blockMax = vector::ReductionOp::create(
                b, vector::CombiningKind::MAXIMUMF, blockMax);
            Value oldMax = memref::LoadOp::create(b, maxRows, ValueRange{row});
            AttentionMath::MaxUpdate update = math.updateMax(oldMax, blockMax);
            Value reference = splat(update.reference), sum;
            for (Value s : allowedScores) {
              Value p = math.exp(arith::SubFOp::create(b, s, reference));
              sum = sum ? arith::AddFOp::create(b, sum, p) : p;
            }
            Value oldSum = memref::LoadOp::create(b, sumRows, ValueRange{row});
            memref::StoreOp::create(b, update.max, maxRows, ValueRange{row});
            memref::StoreOp::create(
                b, math.updateSum(oldSum, update.alpha, {horizontalSum(sum)}),
                sumRows, ValueRange{row});
          }
        },
        nothing);
  });
  // LSE = m + log(l); +inf (W = 0) for a row that saw no allowed key.
  forLoop(cst(0), head.rows, cst(1), [&](Value row) {
    Value max = memref::LoadOp::create(b, maxRows, ValueRange{row});
    Value sum = memref::LoadOp::create(b, sumRows, ValueRange{row});
    Value lse = arith::AddFOp::create(b, max, math::LogOp::create(b, sum));
    Value empty = arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, max,
                                        f32Const(-kInf));
    memref::StoreOp::create(
        b, arith::SelectOp::create(b, empty, f32Const(kInf), lse), head.lseRef,
        ValueRange{row});
  });
  memref::DeallocOp::create(b, maxRows);
  memref::DeallocOp::create(b, sumRows);
}

void WeightsLowering::writeWeights(const Head &head, Value view) {
  SmallVector<Value> zeros(keyVectors, zeroVector());
  forEachKeyBlock(head, [&](const KeyBlock &block) {
    auto [lo, hi] = rowsSeeing(block, head.rows);
    // Rows outside the band see none of the block's keys.
    forLoop(cst(0), lo, cst(1),
            [&](Value row) { storeRow(head, view, block, row, zeros); });
    forLoop(hi, head.rows, cst(1),
            [&](Value row) { storeRow(head, view, block, row, zeros); });
    auto storeZeroRows = [&](Value firstRow, int64_t count) {
      for (int64_t r = 0; r < count; ++r)
        storeRow(head, view, block, arith::AddIOp::create(b, firstRow, cst(r)),
                 zeros);
    };
    forTableRowBlocks(
        head, block, lo, hi,
        [&](Value firstRow, int64_t count) {
          SmallVector<Value> scores = blockScores(head, block, firstRow, count);
          for (int64_t r = 0; r < count; ++r) {
            Value row = arith::AddIOp::create(b, firstRow, cst(r));
            Value lse =
                splat(memref::LoadOp::create(b, head.lseRef, ValueRange{row}));
            SmallVector<Value> factors;
            if (dropoutP)
              factors = dropoutFactors(head.batch, head.head, {row}, block);
            SmallVector<Value> weights;
            for (int64_t v = 0; v < keyVectors; ++v) {
              Value p = math.exp(
                  arith::SubFOp::create(b, scores[r * keyVectors + v], lse));
              if (dropoutP)
                p = arith::MulFOp::create(b, p, factors[v]);
              weights.push_back(arith::SelectOp::create(
                  b, allowed(block, row, r, v), p, zeroVector()));
            }
            storeRow(head, view, block, row, weights);
          }
        },
        storeZeroRows);
  });
}

void WeightsLowering::storeRow(const Head &head, Value view,
                               const KeyBlock &block, Value row,
                               ArrayRef<Value> vectors) {
  storeKeyRow(op.getWeights(), view, rowBuffer, block,
              {head.batch, head.head, row}, vectors, /*streaming=*/true);
}

} // namespace

void mlir::attn::cpu::emitWeights(ImplicitLocOpBuilder &b,
                                  AttentionWeightsOp op, int64_t lanes,
                                  bool bf16Dot) {
  WeightsLowering(b, op, lanes, bf16Dot).emit();
}
