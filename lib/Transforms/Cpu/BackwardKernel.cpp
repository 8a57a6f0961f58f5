//===- BackwardKernel.cpp - The CPU micro-kernel of attn.attention_backward
//===//
//
// One bufferized attn.attention_backward (a work item: a batch and a
// key/value head with its GQA group of query heads, as attn-tile makes it)
// becomes FlashAttention-2's backward loop:
//
//   per row r of the group:   Q, dO as f32 rows; Δ_r = dO·O − dLSE;
//                             dQ_r = 0
//   per block of 64 keys:     Kᵀ, Vᵀ and K packed as f32; dK, dV = 0
//     per block of rows that see a key of it (the band's rows only, and
//     with a block mask the rows whose table entries keep a score there;
//     on the band's edge, the products stop at the last key vector that a
//     row of the block sees):
//       S  = Q·Kᵀ (scale, soft cap, bias, score_mod)
//       P  = exp(S − LSE), 0 if excluded
//       dP = dO·Vᵀ            dS = P·(dP − Δ)·score_mod'(·)·(1 − (s/c)²)
//       dV += Pᵀ·dO     dK += dSᵀ·Q     dQ += dS·K
//     dK, dV of the block → memory (scaled, rounded once)
//   dQ → memory (scaled, rounded once)
//
// With grad_mask (the bias's gradient dM, [B, Hq, Sq, Sk] f32), each row
// block stores its dS (after the score_mod's derivative and before the soft
// cap's: the bias is added after the cap, the score_mod after the bias) at
// the block's keys, and the rows outside the band get
// zeros there: every element is written once, by vector stores where dM's
// rows have unit stride.
//
// With grad_captures, each score's dS' = P·(dP − Δ) (the gradient of the
// score_mod's result) times the score_mod's derivative in each element of a
// captured tensor that it reads is added to the work item's partial of that
// tensor, at the element read: where the 16 lanes read one element, their
// sum; where they read 16 increasing elements (a relative-position table
// along a row), a gather, add and scatter; otherwise lane by lane. The
// score_mod's input is kept per row block for it.
//
// P is recomputed from the saved LSE, never stored beyond one block of
// rows. Each sum runs in a fixed order: the same inputs give the same bits
// whatever the thread count. The inputs are read once per work item into
// f32 rows padded to whole vectors (O(S·D), dynamic, on the heap), so that
// every inner loop runs on unit-stride f32 whatever the caller's strides and
// element type. With AVX-512 BF16's dot product (recompute-bf16-dot), bf16
// Q and K (and bf16 dO and V) keep their rows as bf16 and every product
// takes vdpbf16ps, a pair a step summed in f32: S = Q·Kᵀ (dP = dO·Vᵀ) over
// pairs of head dims against the block's Kᵀ (Vᵀ) packed as pairs; dV +=
// Pᵀ·dO and dK += dSᵀ·Q over pairs of rows, P and dS rounded to bf16 (as
// FlashAttention rounds them for its tensor cores) and interleaved row
// pair by row pair, against the rows' pairs made the same way once per
// row block; dQ += dS·K over pairs of keys, dS's bf16 rows against K
// packed as pairs of keys. Bit-identical run to run and across thread
// counts as the f32 form is.
//
// The products use blocks of 16 rows: S and dP are register tiles of 4
// rows (passes over Kᵀ and Vᵀ, each tile stored as P or dS before the next;
// on AVX2, whose 16 registers do not hold a row's 8 key vectors for 4
// rows, in slices of 2 vectors), dK and dV register tiles of 4 keys (2 on AVX2)
// x 4 column vectors, each accumulator loaded taking the block's rows; dQ
// passes of 8 rows (4 on AVX2), each accumulator serving 64 keys.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Cpu/KeyBlockEmitter.h"
#include "lib/Transforms/Cpu/MicroKernels.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"

#include <functional>

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::cpu;

namespace {

/// Query rows per block of the backward's products: 16 (each dK/dV
/// accumulator loaded then takes 16 FMAs; against 8 rows 1.05-1.06x at
/// D = 64, 1.03-1.05x at D = 96, alike at D = 128 and 256 on Emerald
/// Rapids, f32 S = 2048). AVX2 took 4 while S and dP were whole row tiles
/// (4 rows x 8 vectors, spilled); in slices (rowsTimesBlock) 16 there too.
int64_t backwardRowBlock(int64_t) { return 16; }

/// The dK/dV register tiles: keys x column vectors (16 accumulators, with a
/// row's vectors and a weight 21 registers: AVX2's 16 take 2 x 4).
int64_t tileKeys(int64_t lanes) { return lanes >= 16 ? 4 : 2; }
constexpr int64_t kTileVectors = 4;
/// Rows a pass of dQ += dS·K (two column chunks each: 16 accumulators of
/// AVX-512's 32 registers; 8 of AVX2's 16, beside the rows' weights).
int64_t queryPass(int64_t lanes) { return lanes >= 16 ? 8 : 4; }

class BackwardLowering : public KeyBlockEmitter {
public:
  BackwardLowering(ImplicitLocOpBuilder &b, AttentionBackwardOp op,
                   int64_t lanes, bool bf16Dot)
      : KeyBlockEmitter(b, op, lanes, backwardRowBlock(lanes),
                        bf16Dot && isBf16(op.getQuery()) &&
                            isBf16(op.getKey())),
        op(op),
        valueDim(cast<ShapedType>(op.getValue().getType()).getDimSize(3)),
        valuePad(llvm::alignTo(valueDim, lanes)),
        valuePairs(bf16Dot && isBf16(op.getGradOutput()) &&
                   isBf16(op.getValue())),
        keyPairs(isBf16(keysT)) {}

  void emit();

private:
  /// The rows of one work item and where their f32 copies live.
  struct Group {
    Value batch, kvHead, firstHead, rows;
    Value queryRows, gradOutRows; // [G·Sq][pad] f32 (bf16 for the dot)
    Value delta, lseRef;          // [G·Sq] f32
    Value gradQuery;              // [G·Sq][DPad] f32 accumulator
  };

  void packRows(Group &group, Value g, Value row);
  void packKeyBlock(const Group &group, const KeyBlock &keys);
  void emitRowBlock(const Group &group, const KeyBlock &keys, Value g,
                    Value firstRow, int64_t rowCount);
  /// emitRowBlock where the block mask's table (if any) keeps a score of
  /// the rows at the block's keys; elsewhere nothing but dM's zeros.
  void emitTableRowBlock(const Group &group, const KeyBlock &keys, Value g,
                         Value firstRow, int64_t rowCount);
  /// P of row `r` of the row block (query `row`, group row `rowAt`) from
  /// its tile of scores, into probs (dropout's factors, the row's
  /// dropoutFactors, into dropScale).
  void storeProbs(const Group &group, const KeyBlock &keys, Value head,
                  int64_t r, Value row, Value rowAt, ArrayRef<Value> scores,
                  ArrayRef<Value> factors);
  /// dS of row `r` from its tile of dP and its P, into grads (with dropout,
  /// P·Z into probs).
  void storeGrads(const Group &group, const KeyBlock &keys, int64_t r,
                  Value row, Value rowAt, ArrayRef<Value> gradProbs);
  /// acc[k] += Σ_r weights[r][k] · rows[rowAt[r]] over the row block's
  /// rows, for each key k < keyEnd of the block (the weights of the others
  /// are 0) and the rows' `pad` columns: f32
  /// weights [rowBlock][64] by FMAs, or their bf16 pairs of rows (pairRows)
  /// by the dot product over pairs of bf16 rows.
  void accumulateKeys(Value acc, Value weights, Value rows, int64_t pad,
                      ArrayRef<Value> rowAt, Value keyEnd);
  /// dQ += dS·K for rows [first, first + count) of the row block, at
  /// columns [c, c + chunks·lanes), over the keys before keyEnd.
  void accumulateQueries(const Group &group, ArrayRef<Value> rowAt,
                         int64_t first, int64_t count, Value c, int64_t chunks,
                         Value keyEnd);
  /// The first rowCount rows of f32 weights ([rowBlock][64]) as bf16 pairs
  /// of rows into `weightPairs` ([rowBlock/2][2·64]: row r's key k at
  /// [r/2][2k + r%2], a row past rowCount 0).
  void pairRows(Value weights, Value weightPairs, int64_t rowCount);
  Value toBf16(Value x);
  /// acc + w·x: an FMA, or with `dot` vdpbf16ps of bf16 pairs.
  Value multiplyAdd(bool dot, Value w, Value x, Value acc) {
    return dot ? Value(x86vector::DotBF16Op::create(b, acc, w, x))
               : fma(w, x, acc);
  }
  Value twice(Value index) { return arith::MulIOp::create(b, index, cst(2)); }
  void writeKeyBlock(const Group &group, const KeyBlock &keys);
  /// The rows of a register tile of rowsTimesBlock.
  int64_t tileRows(ArrayRef<Value> tile) const {
    return static_cast<int64_t>(tile.size()) / keyVectors;
  }
  /// `body(c, chunks)` over the `pad` columns of a row by two vectors a pass
  /// (chunks 2), the last vector alone where their count is odd.
  void forChunkPairs(int64_t pad, function_ref<void(Value, int64_t)> body);
  /// dM at the block's keys of the row block at `firstRow` of `head`: its
  /// dS before the soft cap's derivative.
  void writeGradMask(const Group &group, const KeyBlock &keys, Value head,
                     Value firstRow, int64_t rowCount);
  /// dM at the block's keys of rows [first, last) of `head`, which see none
  /// of them: 0.
  void zeroGradMask(const Group &group, const KeyBlock &keys, Value head,
                    Value first, Value last);
  void writeGradQuery(const Group &group);
  /// Zeros the work item's partials of the captures' gradients.
  void zeroCapturePartials(const Group &group);
  /// Adds dS' (`gradScore`, vector `v` of row `r`) times the score_mod's
  /// derivative in each captured element it reads to the partials, 0 in
  /// the lanes of `none` (P = 0) whatever the derivative is there.
  void addCaptureGradients(const Group &group, int64_t r, int64_t v,
                           Value gradScore, Value none);
  /// partial[batch, kvHead, indices] += contribution, lane by lane
  /// (`indices` scalars or vectors of index).
  void scatterAdd(Value partial, const Group &group, ArrayRef<Value> indices,
                  Value contribution);

  AttentionBackwardOp op;
  int64_t valueDim, valuePad;
  /// dP = dO·Vᵀ and dV += Pᵀ·dO by the dot product: dO's rows bf16, V's
  /// block as pairs, P rounded to bf16.
  bool valuePairs;
  /// S = Q·Kᵀ, dK += dSᵀ·Q and dQ += dS·K by the dot product: Q's rows
  /// bf16, K's block as pairs (keysT, keyRows), dS rounded to bf16.
  bool keyPairs;
  // The packed value block, K as rows and the accumulators (stack).
  // (keyRows: finite K, [64][DPad] f32 or KP2[32][2·DPad] bf16 pairs of
  // keys.)
  Value valuesT, keyRows;     // [DvPad][64] (or pairs), [64][DPad]
  Value gradKeys, gradValues; // [64][DPad], [64][DvPad]
  // One block of rows: P, dS (first the soft cap's derivative); with
  // grad_mask, the dS that dM takes (before that derivative: `grads`
  // itself without a soft cap).
  Value probs, grads, gradScores; // [rowBlock][64]
  Value modSlopes; // [rowBlock][64]: with a score_mod, its derivative
  Value modInputs; // [rowBlock][64]: with grad_captures, its input
  /// Per capture number, its gradient's partials (null: none).
  SmallVector<Value> capturePartials;
  Value rowBuffer; // [64]: a row of dM for element-wise stores
  Value finiteRows; // [rowBlock][max(DPad, DvPad)]: Q or dO, finite or 0
  // The dot product's operands: the same rows as bf16 pairs of rows
  // ([rowBlock/2][2·max]), P and dS as bf16 pairs of rows
  // ([rowBlock/2][2·64]), dS's rows in bf16 ([rowBlock][64]).
  Value rowPairs, probPairs, gradRowPairs, gradPairs;
  Value keys;      // Sk
};

void BackwardLowering::emit() {
  auto bf16Buffer = [&](int64_t rows, int64_t cols) {
    return stackBuffer({rows, cols}, b.getBF16Type());
  };
  keys = dim(key, 2);
  valuesT =
      valuePairs ? pairBuffer(valuePad) : stackBuffer({valuePad, kBlockKeys});
  keyRows = keyPairs ? bf16Buffer(kBlockKeys / 2, 2 * headPad)
                     : stackBuffer({kBlockKeys, headPad});
  gradKeys = stackBuffer({kBlockKeys, headPad});
  gradValues = stackBuffer({kBlockKeys, valuePad});
  probs = stackBuffer({rowBlock, kBlockKeys});
  grads = stackBuffer({rowBlock, kBlockKeys});
  int64_t widest = std::max(headPad, valuePad);
  if (!keyPairs || !valuePairs)
    finiteRows = stackBuffer({rowBlock, widest});
  if (keyPairs || valuePairs)
    rowPairs = bf16Buffer(rowBlock / 2, 2 * widest);
  if (valuePairs)
    probPairs = bf16Buffer(rowBlock / 2, 2 * kBlockKeys);
  if (keyPairs) {
    gradRowPairs = bf16Buffer(rowBlock / 2, 2 * kBlockKeys);
    gradPairs = bf16Buffer(rowBlock, kBlockKeys);
  }
  if (scoreModOf(op))
    modSlopes = stackBuffer({rowBlock, kBlockKeys});
  if (!op.getGradCaptures().empty()) {
    modInputs = stackBuffer({rowBlock, kBlockKeys});
    capturePartials.assign(op.getCaptures().size(), Value());
    for (auto [number, partial] : llvm::zip(
             op.getGradCaptureNumbersAttr().asArrayRef(), op.getGradCaptures()))
      capturePartials[number] = partial;
  }
  if (op.getGradMask()) {
    gradScores =
        op.getSoftcapAttr() ? stackBuffer({rowBlock, kBlockKeys}) : grads;
    rowBuffer = stackBuffer({kBlockKeys});
  }

  Value heads = dim(query, 1), kvHeads = dim(key, 1);
  Value groupSize = arith::DivUIOp::create(b, heads, kvHeads);
  forLoop(cst(0), dim(query, 0), cst(1), [&](Value batch) {
    forLoop(cst(0), kvHeads, cst(1), [&](Value kvHead) {
      Group group;
      group.batch = batch;
      group.kvHead = kvHead;
      group.firstHead = arith::MulIOp::create(b, kvHead, groupSize);
      group.rows = dim(query, 2);
      Value groupRows = arith::MulIOp::create(b, groupSize, group.rows);
      auto rowType = [&](bool pairs) -> Type {
        return pairs ? b.getBF16Type() : f32;
      };
      group.queryRows = heapRows(groupRows, headPad, rowType(keyPairs));
      group.gradOutRows = heapRows(groupRows, valuePad, rowType(valuePairs));
      group.delta = heapRows(groupRows, 0);
      group.lseRef = heapRows(groupRows, 0);
      group.gradQuery = heapRows(groupRows, headPad);
      forLoop(cst(0), groupSize, cst(1), [&](Value g) {
        forLoop(cst(0), group.rows, cst(1),
                [&](Value row) { packRows(group, g, row); });
      });
      zeroRows(group.gradQuery, cst(0), groupRows, headPad);
      zeroCapturePartials(group);
      // Per block of keys: every row of the group that sees one of them.
      forLoop(cst(0), keys, cst(kBlockKeys), [&](Value start) {
        KeyBlock block{start, arith::MinSIOp::create(
                                  b, cst(kBlockKeys),
                                  arith::SubIOp::create(b, keys, start))};
        packKeyBlock(group, block);
        forLoop(cst(0), groupSize, cst(1), [&](Value g) {
          auto [lo, hi] = rowsSeeing(block, group.rows);
          if (gradScores) {
            Value head = arith::AddIOp::create(b, group.firstHead, g);
            zeroGradMask(group, block, head, cst(0), lo);
            zeroGradMask(group, block, head, hi, group.rows);
          }
          forRowBlocks(lo, hi, [&](Value row, int64_t count) {
            emitTableRowBlock(group, block, g, row, count);
          });
        });
        writeKeyBlock(group, block);
      });
      writeGradQuery(group);
      for (Value buffer : {group.queryRows, group.gradOutRows, group.delta,
                           group.lseRef, group.gradQuery})
        memref::DeallocOp::create(b, buffer);
    });
  });
  if (op.getGradMask())
    fenceStreamingStores();
}

void BackwardLowering::packRows(Group &group, Value g, Value row) {
  Value head = arith::AddIOp::create(b, group.firstHead, g);
  Value r =
      arith::AddIOp::create(b, arith::MulIOp::create(b, g, group.rows), row);
  SmallVector<Value> at = {group.batch, head, row};
  packRow(query, group.batch, head, row, group.queryRows, r, headDim, headPad);
  packRow(op.getGradOutput(), group.batch, head, row, group.gradOutRows, r,
          valueDim, valuePad);
  // Δ = dO·O − dLSE in f32: where O's rows have unit stride, the packed
  // row of dO against O's chunks, a vector of partial sums added up at the
  // end (the scalar chain of dependent adds was a tenth of a backward at
  // short key lengths); else column by column.
  Value output = op.getOutput();
  auto deltaIf =
      scf::IfOp::create(b, f32,
                        arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                              innerStride(output), cst(1)),
                        /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(deltaIf.thenBlock());
    Value view = unitStrideRows(output);
    Value sum = zeroVector();
    for (int64_t c = 0; c < valuePad; c += lanes)
      sum = fma(loadRowF32(group.gradOutRows, r, cst(c)),
                loadRowChunk(view, at, c, valueDim), sum);
    scf::YieldOp::create(b, horizontalSum(sum));
    b.setInsertionPointToStart(deltaIf.elseBlock());
    Value dot = forLoopWith(
        cst(0), cst(valueDim), cst(1), {f32Const(0.0f)},
        [&](Value c, ValueRange acc) -> SmallVector<Value> {
          SmallVector<Value> from = at;
          from.push_back(c);
          Value product = arith::MulFOp::create(
              b, loadF32(op.getGradOutput(), from), loadF32(output, from));
          return {arith::AddFOp::create(b, acc[0], product)};
        })[0];
    scf::YieldOp::create(b, dot);
  }
  Value dot = deltaIf.getResult(0);
  if (Value gradLse = op.getGradLse())
    dot = arith::SubFOp::create(b, dot, loadF32(gradLse, at));
  memref::StoreOp::create(b, dot, group.delta, ValueRange{r});
  // A fully masked row has LSE = −inf: exp(s − +inf) = 0 gives it P = 0
  // (never exp(s + inf)).
  Value lse = loadF32(op.getLse(), at);
  Value masked =
      arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, lse, f32Const(-kInf));
  memref::StoreOp::create(
      b, arith::SelectOp::create(b, masked, f32Const(kInf), lse), group.lseRef,
      ValueRange{r});
}

void BackwardLowering::packKeyBlock(const Group &group, const KeyBlock &block) {
  // Keys past the block's count stay 0 (their P and dS are 0, and 0·0 is
  // what they add).
  packKeys(group.batch, group.kvHead, block, keyRows);
  packBlockT(op.getValue(), group.batch, group.kvHead, block, valuesT,
             valueDim);
  zeroRows(gradKeys, cst(0), cst(kBlockKeys), headPad);
  zeroRows(gradValues, cst(0), cst(kBlockKeys), valuePad);
}

void BackwardLowering::emitTableRowBlock(const Group &group,
                                         const KeyBlock &block, Value g,
                                         Value firstRow, int64_t rowCount) {
  if (!attention->hasAttr(kBlockMaskAttrName))
    return emitRowBlock(group, block, g, firstRow, rowCount);
  Value head = arith::AddIOp::create(b, group.firstHead, g);
  Value kept =
      blockTableEntries(attention, captures, origin, group.batch, head,
                        firstRow, cst(rowCount), block.start, block.count)
          .first;
  auto keptIf =
      scf::IfOp::create(b, kept,
                        /*withElseRegion=*/static_cast<bool>(gradScores));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(keptIf.thenBlock()->getTerminator());
  emitRowBlock(group, block, g, firstRow, rowCount);
  if (gradScores) {
    b.setInsertionPoint(keptIf.elseBlock()->getTerminator());
    zeroGradMask(group, block, head, firstRow,
                 arith::AddIOp::create(b, firstRow, cst(rowCount)));
  }
}

void BackwardLowering::emitRowBlock(const Group &group, const KeyBlock &block,
                                    Value g, Value firstRow, int64_t rowCount) {
  Value head = arith::AddIOp::create(b, group.firstHead, g);
  Value groupRow = arith::AddIOp::create(
      b, arith::MulIOp::create(b, g, group.rows), firstRow);
  SmallVector<Value> rowAt, row;
  for (int64_t r = 0; r < rowCount; ++r) {
    rowAt.push_back(arith::AddIOp::create(b, groupRow, cst(r)));
    row.push_back(arith::AddIOp::create(b, firstRow, cst(r)));
  }
  // Rows to which the mask_mod leaves no key of the block (most blocks of
  // rows of short documents, inside a block table's partial blocks): P and
  // dS are 0 there, and nothing is added but their d(bias), 0.
  OpBuilder::InsertionGuard skipGuard(b);
  if (Value any = loadRowBlock(group.batch, block, head, firstRow, rowCount)) {
    auto anyIf =
        scf::IfOp::create(b, any,
                          /*withElseRegion=*/static_cast<bool>(gradScores));
    if (gradScores) {
      b.setInsertionPoint(anyIf.elseBlock()->getTerminator());
      zeroGradMask(group, block, head, firstRow,
                   arith::AddIOp::create(b, firstRow, cst(rowCount)));
    }
    b.setInsertionPoint(anyIf.thenBlock()->getTerminator());
  }
  // On a band's edge the products skip the key vectors that no row of the
  // block (of a register tile, for S and dP) sees: their P and dS are 0.
  auto seenVectors = [&](int64_t first, int64_t count) {
    return seenKeyVectors(block, arith::AddIOp::create(b, firstRow, cst(first)),
                          count);
  };
  Value seen = seenVectors(0, rowCount);
  Value keyEnd =
      seen ? arith::MulIOp::create(b, seen, cst(lanes)) : cst(kBlockKeys);

  // S = Q·Kᵀ: per column of Q, keyVectors loads of Kᵀ feed the tile's FMAs;
  // P = exp(s − LSE) where allowed, the soft cap's derivative into grads.
  rowsTimesBlock(
      group.queryRows, keysT, headDim, rowAt,
      [&](int64_t first, ArrayRef<Value> scores) {
        int64_t rows = tileRows(scores);
        // Dropout's factors of the tile's rows at once: two rows share a
        // Philox.
        SmallVector<Value> factors;
        if (dropScale)
          factors =
              dropoutFactors(group.batch, head,
                             ArrayRef<Value>(row).slice(first, rows), block);
        for (int64_t t = 0; t < rows; ++t)
          storeProbs(group, block, head, first + t, row[first + t],
                     rowAt[first + t], scores.slice(t * keyVectors, keyVectors),
                     factors.empty() ? ArrayRef<Value>()
                                     : ArrayRef<Value>(factors).slice(
                                           t * keyVectors, keyVectors));
      },
      seenVectors);
  // The next row block's mask and captured tensors' elements at these keys
  // (this one's have been read, by the mask's loads and the scores' reads:
  // a burst of prefetches before them kept them waiting). A float mask's or
  // a capture's (rows of 4-5 lines) a dP tile's rows at a time, between the
  // tiles: against all 16 rows here, f32 D = 64 1.03x, bf16 1.07x, D = 128
  // 1.014x; a keep mask's (1-2 lines a row) all here, where spreading them
  // cost 0.98x (Zen 5, S = 2048).
  bool spread = bias || modifiers.hasScoreMod() || modifiers.hasMaskMod();
  if (!spread)
    prefetchRowBlock(group.batch, block, head,
                     arith::AddIOp::create(b, firstRow, cst(rowCount)),
                     rowCount, group.rows);
  // dP = dO·Vᵀ, then dS = P·(dP − Δ) (· the soft cap's derivative).
  rowsTimesBlock(
      group.gradOutRows, valuesT, valueDim, rowAt,
      [&](int64_t first, ArrayRef<Value> gradProbs) {
        if (spread)
          prefetchRowBlock(
              group.batch, block, head,
              arith::AddIOp::create(b, firstRow, cst(rowCount + first)),
              tileRows(gradProbs), group.rows);
        for (int64_t t = 0; t < tileRows(gradProbs); ++t)
          storeGrads(group, block, first + t, row[first + t], rowAt[first + t],
                     gradProbs.slice(t * keyVectors, keyVectors));
      },
      seenVectors);

  // dM = dS at the block's keys of these rows.
  if (gradScores)
    writeGradMask(group, block, head, firstRow, rowCount);
  if (valuePairs)
    pairRows(probs, probPairs, rowCount);
  if (keyPairs) {
    pairRows(grads, gradRowPairs, rowCount);
    for (int64_t r = 0; r < rowCount; ++r)
      for (int64_t v = 0; v < keyVectors; ++v)
        vector::StoreOp::create(
            b, toBf16(loadVector(grads, {cst(r), cst(v * lanes)})), gradPairs,
            ValueRange{cst(r), cst(v * lanes)});
  }
  accumulateKeys(gradValues, valuePairs ? probPairs : probs, group.gradOutRows,
                 valuePad, rowAt, keyEnd);
  accumulateKeys(gradKeys, keyPairs ? gradRowPairs : grads, group.queryRows,
                 headPad, rowAt, keyEnd);
  // At most queryPass rows a pass: two chunks of each are all the
  // accumulators the registers hold beside K's chunks and the weights.
  int64_t pass = queryPass(lanes);
  for (int64_t first = 0; first < rowCount; first += pass) {
    int64_t count = std::min(pass, rowCount - first);
    forChunkPairs(headPad, [&](Value c, int64_t chunks) {
      accumulateQueries(group, rowAt, first, count, c, chunks, keyEnd);
    });
  }
}

void BackwardLowering::accumulateKeys(Value acc, Value weights, Value rows,
                                      int64_t pad, ArrayRef<Value> rowAt,
                                      Value keyEnd) {
  // acc[k] += Σ_r weights[r][k] · rows[r] for each key k of the block, as
  // register tiles of kTileKeys keys x up to kTileVectors column vectors
  // summed down the block's rows: each tile loaded takes a step per row (a
  // pair of rows by the dot product) per accumulator, and its
  // kTileKeys·kTileVectors sums are independent chains (an accumulator a
  // key summed down the rows in place was one chain of rowCount dependent
  // FMAs). The rows are first copied with non-finite elements 0 (an
  // excluded weight is 0, and 0·inf must add 0), once per row block
  // instead of once per tile: as f32, or for the dot product as bf16 pairs
  // of rows (RP[r/2][2c + r%2], against the weights as pairs of rows too).
  int64_t rowCount = rowAt.size();
  bool dot = isBf16(weights);
  Value copy = dot ? rowPairs : finiteRows;
  int64_t steps = dot ? llvm::divideCeil(rowCount, 2) : rowCount;
  auto chunkType = VectorType::get({lanes}, b.getBF16Type());
  for (int64_t s = 0; s < steps; ++s)
    for (int64_t c = 0; c < pad; c += lanes) {
      if (!dot) {
        storeVector(finiteOrZero(loadRowF32(rows, rowAt[s], cst(c))), copy,
                    {cst(s), cst(c)});
        continue;
      }
      auto chunk = [&](int64_t r) -> Value {
        if (r >= rowCount)
          return arith::ConstantOp::create(
              b, DenseElementsAttr::get(chunkType,
                                        b.getZeroAttr(b.getBF16Type())));
        return vector::LoadOp::create(b, chunkType, rows,
                                      ValueRange{rowAt[r], cst(c)});
      };
      Value pair =
          vector::InterleaveOp::create(b, chunk(2 * s), chunk(2 * s + 1));
      vector::StoreOp::create(b, finiteOrZeroBf16(pair), copy,
                              ValueRange{cst(s), cst(2 * c)});
    }
  const int64_t kTileKeys = tileKeys(lanes);
  auto tiles = [&](Value c, int64_t vectors) {
    forLoop(cst(0), keyEnd, cst(kTileKeys), [&](Value k) {
      SmallVector<Value> keyAt, colAt, sums;
      for (int64_t i = 0; i < kTileKeys; ++i)
        keyAt.push_back(arith::AddIOp::create(b, k, cst(i)));
      for (int64_t j = 0; j < vectors; ++j)
        colAt.push_back(arith::AddIOp::create(b, c, cst(j * lanes)));
      for (Value key : keyAt)
        for (Value col : colAt)
          sums.push_back(loadVector(acc, {key, col}));
      for (int64_t s = 0; s < steps; ++s) {
        SmallVector<Value> x;
        for (Value col : colAt)
          x.push_back(dot ? loadPairs(copy, {cst(s), twice(col)})
                          : loadVector(copy, {cst(s), col}));
        for (int64_t i = 0; i < kTileKeys; ++i) {
          Value w = dot ? broadcastPairAt(weights, {cst(s), twice(keyAt[i])})
                        : splat(memref::LoadOp::create(
                              b, weights, ValueRange{cst(s), keyAt[i]}));
          for (int64_t j = 0; j < vectors; ++j)
            sums[i * vectors + j] =
                multiplyAdd(dot, w, x[j], sums[i * vectors + j]);
        }
      }
      for (int64_t i = 0; i < kTileKeys; ++i)
        for (int64_t j = 0; j < vectors; ++j)
          storeVector(sums[i * vectors + j], acc, {keyAt[i], colAt[j]});
    });
  };
  int64_t vectorCount = pad / lanes, whole = vectorCount / kTileVectors;
  if (whole)
    forLoop(cst(0), cst(whole * kTileVectors * lanes),
            cst(kTileVectors * lanes),
            [&](Value c) { tiles(c, kTileVectors); });
  if (vectorCount % kTileVectors)
    tiles(cst(whole * kTileVectors * lanes), vectorCount % kTileVectors);
}

void BackwardLowering::accumulateQueries(const Group &group,
                                         ArrayRef<Value> rowAt, int64_t first,
                                         int64_t count, Value c, int64_t chunks,
                                         Value keyEnd) {
  // dQ[r] += Σ_k dS[r][k] · K[k]: per K chunk loaded, `count` FMAs (dot
  // products of a pair of keys: dS's bf16 rows against KP2[k/2][2c + k%2]),
  // two chunks a pass where the head has them. The sums run down the keys,
  // so `count` accumulators alone are `count` chains of dependent FMAs: on a
  // core with two FMA ports (Intel's) four of them kept one port busy (the
  // dQ loop then took ~30 % of a D = 64 backward).
  auto column = [&](int64_t h) {
    return arith::AddIOp::create(b, c, cst(h * lanes));
  };
  SmallVector<Value> init;
  for (int64_t h = 0; h < chunks; ++h)
    for (int64_t r = first; r < first + count; ++r)
      init.push_back(loadVector(group.gradQuery, {rowAt[r], column(h)}));
  Value steps = keyPairs ? arith::DivUIOp::create(b, keyEnd, cst(2)) : keyEnd;
  SmallVector<Value> sums = forLoopWith(
      cst(0), steps, cst(1), init,
      [&](Value k, ValueRange acc) -> SmallVector<Value> {
        SmallVector<Value> ds;
        for (int64_t r = first; r < first + count; ++r)
          ds.push_back(keyPairs ? broadcastPairAt(gradPairs, {cst(r), twice(k)})
                                : splat(memref::LoadOp::create(
                                      b, grads, ValueRange{cst(r), k})));
        SmallVector<Value> next;
        for (int64_t h = 0; h < chunks; ++h) {
          Value kc = keyPairs ? loadPairs(keyRows, {k, twice(column(h))})
                              : loadVector(keyRows, {k, column(h)});
          for (int64_t r = 0; r < count; ++r)
            next.push_back(
                multiplyAdd(keyPairs, ds[r], kc, acc[h * count + r]));
        }
        return next;
      });
  for (int64_t h = 0; h < chunks; ++h)
    for (int64_t r = 0; r < count; ++r)
      storeVector(sums[h * count + r], group.gradQuery,
                  {rowAt[first + r], column(h)});
}

void BackwardLowering::pairRows(Value weights, Value weightPairs,
                                int64_t rowCount) {
  // Rows 2p and 2p + 1 rounded to bf16 and interleaved, key by key (a row
  // past rowCount 0).
  auto chunkType = VectorType::get({lanes}, b.getBF16Type());
  Value zero = arith::ConstantOp::create(
      b, DenseElementsAttr::get(chunkType, b.getZeroAttr(b.getBF16Type())));
  for (int64_t p = 0; p < llvm::divideCeil(rowCount, 2); ++p)
    for (int64_t v = 0; v < keyVectors; ++v) {
      auto row = [&](int64_t r) {
        return r < rowCount
                   ? toBf16(loadVector(weights, {cst(r), cst(v * lanes)}))
                   : zero;
      };
      vector::StoreOp::create(
          b, vector::InterleaveOp::create(b, row(2 * p), row(2 * p + 1)),
          weightPairs, ValueRange{cst(p), cst(2 * v * lanes)});
    }
}

Value BackwardLowering::toBf16(Value x) {
  return arith::TruncFOp::create(b, VectorType::get({lanes}, b.getBF16Type()),
                                 x);
}

void BackwardLowering::storeProbs(const Group &group, const KeyBlock &block,
                                  Value head, int64_t r, Value row, Value rowAt,
                                  ArrayRef<Value> scores,
                                  ArrayRef<Value> factors) {
  Value lse = splat(memref::LoadOp::create(b, group.lseRef, ValueRange{rowAt}));
  for (int64_t v = 0; v < keyVectors; ++v) {
    Value s = finalScore(scores[v], r, v, grads, modSlopes, modInputs);
    Value p = math.exp(arith::SubFOp::create(b, s, lse));
    p = arith::SelectOp::create(b, allowed(block, row, r, v), p, zeroVector());
    storeVector(p, probs, {cst(r), cst(v * lanes)});
    if (dropScale)
      storeVector(factors[v], dropScale, {cst(r), cst(v * lanes)});
  }
}

void BackwardLowering::storeGrads(const Group &group, const KeyBlock &block,
                                  int64_t r, Value row, Value rowAt,
                                  ArrayRef<Value> gradProbs) {
  Value delta =
      splat(memref::LoadOp::create(b, group.delta, ValueRange{rowAt}));
  for (int64_t v = 0; v < keyVectors; ++v) {
    Value p = loadVector(probs, {cst(r), cst(v * lanes)});
    // Dropout: dS = P·(Z·dP − Δ), and P·V's weights are P·Z.
    Value dp = gradProbs[v];
    Value z;
    if (dropScale) {
      z = loadVector(dropScale, {cst(r), cst(v * lanes)});
      dp = arith::MulFOp::create(b, dp, z);
    }
    Value ds = arith::MulFOp::create(b, p, arith::SubFOp::create(b, dp, delta));
    if (modSlopes) {
      // Through the score_mod; where P = 0 (a score_mod that excludes by
      // −inf, say) nothing, whatever its derivative is there.
      Value slope = loadVector(modSlopes, {cst(r), cst(v * lanes)});
      Value none =
          arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, p, zeroVector());
      if (modInputs)
        addCaptureGradients(group, r, v, ds, none);
      ds = arith::SelectOp::create(b, none, zeroVector(),
                                   arith::MulFOp::create(b, ds, slope));
    }
    if (op.getSoftcapAttr()) {
      // dM takes dS before the soft cap's derivative (0 where excluded).
      if (gradScores)
        storeVector(arith::SelectOp::create(b, allowed(block, row, r, v), ds,
                                            zeroVector()),
                    gradScores, {cst(r), cst(v * lanes)});
      ds = arith::MulFOp::create(b, ds,
                                 loadVector(grads, {cst(r), cst(v * lanes)}));
    }
    // An excluded position contributes nothing, whatever V holds there.
    ds =
        arith::SelectOp::create(b, allowed(block, row, r, v), ds, zeroVector());
    storeVector(ds, grads, {cst(r), cst(v * lanes)});
    if (z)
      storeVector(arith::MulFOp::create(b, p, z), probs,
                  {cst(r), cst(v * lanes)});
  }
}

void BackwardLowering::forChunkPairs(int64_t pad,
                                     function_ref<void(Value, int64_t)> body) {
  int64_t pairsEnd = pad / (2 * lanes) * (2 * lanes);
  forLoop(cst(0), cst(pairsEnd), cst(2 * lanes), [&](Value c) { body(c, 2); });
  if (pairsEnd < pad)
    body(cst(pairsEnd), 1);
}

void BackwardLowering::writeKeyBlock(const Group &group,
                                     const KeyBlock &block) {
  Value scale = f32Const(op.getEffectiveScale());
  forLoop(cst(0), block.count, cst(1), [&](Value k) {
    Value key = arith::AddIOp::create(b, block.start, k);
    forLoop(cst(0), cst(headDim), cst(1), [&](Value c) {
      Value x = memref::LoadOp::create(b, gradKeys, ValueRange{k, c});
      storeAs(arith::MulFOp::create(b, x, scale), op.getGradKey(),
              {group.batch, group.kvHead, key, c});
    });
    forLoop(cst(0), cst(valueDim), cst(1), [&](Value c) {
      storeAs(memref::LoadOp::create(b, gradValues, ValueRange{k, c}),
              op.getGradValue(), {group.batch, group.kvHead, key, c});
    });
  });
}

void BackwardLowering::writeGradMask(const Group &group, const KeyBlock &block,
                                     Value head, Value firstRow,
                                     int64_t rowCount) {
  Value gradMask = op.getGradMask();
  auto write = [&](Value view) {
    for (int64_t r = 0; r < rowCount; ++r) {
      SmallVector<Value> vectors;
      for (int64_t v = 0; v < keyVectors; ++v)
        vectors.push_back(loadVector(gradScores, {cst(r), cst(v * lanes)}));
      storeKeyRow(
          gradMask, view, rowBuffer, block,
          {group.batch, head, arith::AddIOp::create(b, firstRow, cst(r))},
          vectors, /*streaming=*/true);
    }
  };
  ifUnitStride(
      gradMask, [&](Value view) { write(view); }, [&] { write(Value()); });
}

void BackwardLowering::zeroGradMask(const Group &group, const KeyBlock &block,
                                    Value head, Value first, Value last) {
  Value gradMask = op.getGradMask();
  SmallVector<Value> zeros(keyVectors, zeroVector());
  auto write = [&](Value view) {
    forLoop(first, last, cst(1), [&](Value row) {
      storeKeyRow(gradMask, view, rowBuffer, block, {group.batch, head, row},
                  zeros, /*streaming=*/true);
    });
  };
  ifUnitStride(
      gradMask, [&](Value view) { write(view); }, [&] { write(Value()); });
}

void BackwardLowering::writeGradQuery(const Group &group) {
  Value scale = f32Const(op.getEffectiveScale());
  Value groupSize =
      arith::DivUIOp::create(b, dim(op.getQuery(), 1), dim(op.getKey(), 1));
  forLoop(cst(0), groupSize, cst(1), [&](Value g) {
    Value head = arith::AddIOp::create(b, group.firstHead, g);
    forLoop(cst(0), group.rows, cst(1), [&](Value row) {
      Value r = arith::AddIOp::create(
          b, arith::MulIOp::create(b, g, group.rows), row);
      forLoop(cst(0), cst(headDim), cst(1), [&](Value c) {
        Value x = memref::LoadOp::create(b, group.gradQuery, ValueRange{r, c});
        storeAs(arith::MulFOp::create(b, x, scale), op.getGradQuery(),
                {group.batch, head, row, c});
      });
    });
  });
}

void BackwardLowering::zeroCapturePartials(const Group &group) {
  for (Value partial : op.getGradCaptures()) {
    int64_t rank = cast<ShapedType>(partial.getType()).getRank();
    SmallVector<Value> at = {group.batch, group.kvHead};
    std::function<void(int64_t)> zeroFrom = [&](int64_t d) {
      if (d == rank) {
        memref::StoreOp::create(b, f32Const(0.0f), partial, at);
        return;
      }
      forLoop(cst(0), dim(partial, d), cst(1), [&](Value i) {
        at.push_back(i);
        zeroFrom(d + 1);
        at.pop_back();
      });
    };
    zeroFrom(2);
  }
}

void BackwardLowering::addCaptureGradients(const Group &group, int64_t r,
                                           int64_t v, Value gradScore,
                                           Value none) {
  Value input = loadVector(modInputs, {cst(r), cst(v * lanes)});
  modifiers.captureReads(
      input, globalIndices(r, v),
      [&](unsigned number) {
        return static_cast<bool>(capturePartials[number]);
      },
      [&](const ModifierEmitter::CaptureRead &read) {
        Value contribution =
            arith::MulFOp::create(b, gradScore, read.derivative);
        scatterAdd(
            capturePartials[read.capture], group, read.indices,
            arith::SelectOp::create(b, none, zeroVector(), contribution));
      });
}

void BackwardLowering::scatterAdd(Value partial, const Group &group,
                                  ArrayRef<Value> indices, Value contribution) {
  // One element for every lane: their sum.
  auto addAt = [&](ValueRange at, Value x) {
    Value old = memref::LoadOp::create(b, partial, at);
    memref::StoreOp::create(b, arith::AddFOp::create(b, old, x), partial, at);
  };
  SmallVector<Value> at = {group.batch, group.kvHead};
  at.append(indices.begin(), indices.end());
  if (llvm::none_of(indices, [](Value index) {
        return isa<VectorType>(index.getType());
      }))
    return addAt(at, horizontalSum(contribution));

  // The lanes' elements as offsets into the partial seen as one dimension.
  auto indexVector = VectorType::get({lanes}, b.getIndexType());
  FlatElements elements = flatElements(b, b.getLoc(), partial, at, lanes);
  Value flat = elements.memref, offsets = elements.offsets;
  auto allOf = [&](Value bits) {
    return vector::ReductionOp::create(b, vector::CombiningKind::AND, bits);
  };
  Value first = vector::ExtractOp::create(b, offsets, ArrayRef<int64_t>{0});
  Value same = allOf(arith::CmpIOp::create(
      b, arith::CmpIPredicate::eq, offsets,
      vector::BroadcastOp::create(b, indexVector, first)));
  auto addFlat = [&](Value offset, Value x) {
    Value old = memref::LoadOp::create(b, flat, offset);
    memref::StoreOp::create(b, arith::AddFOp::create(b, old, x), flat, offset);
  };
  auto sameIf = scf::IfOp::create(b, same, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(sameIf.thenBlock()->getTerminator());
  addFlat(first, horizontalSum(contribution));

  // Increasing offsets (each lane's above the one before): 16 distinct
  // elements, a gather and a scatter.
  b.setInsertionPoint(sameIf.elseBlock()->getTerminator());
  SmallVector<int64_t> nextLane;
  for (int64_t l = 1; l < lanes; ++l)
    nextLane.push_back(l);
  nextLane.push_back(lanes - 1);
  Value next = vector::ShuffleOp::create(b, offsets, offsets, nextLane);
  SmallVector<bool> lastLane(lanes, false);
  lastLane.back() = true;
  Value increasing = allOf(arith::OrIOp::create(
      b, arith::CmpIOp::create(b, arith::CmpIPredicate::ult, offsets, next),
      arith::ConstantOp::create(
          b, DenseElementsAttr::get(VectorType::get({lanes}, b.getI1Type()),
                                    lastLane))));
  auto increasingIf = scf::IfOp::create(b, increasing, /*withElseRegion=*/true);
  b.setInsertionPoint(increasingIf.thenBlock()->getTerminator());
  Value zero = cst(0);
  Value allLanes = vector::ConstantMaskOp::create(
      b, VectorType::get({lanes}, b.getI1Type()), ArrayRef<int64_t>{lanes});
  Value old = vector::GatherOp::create(b, vecType, flat, ValueRange{zero},
                                       offsets, allLanes, zeroVector());
  vector::ScatterOp::create(b, Type(), flat, ValueRange{zero}, offsets,
                            allLanes,
                            arith::AddFOp::create(b, old, contribution));
  // Otherwise lane by lane, in lane order.
  b.setInsertionPoint(increasingIf.elseBlock()->getTerminator());
  for (int64_t l = 0; l < lanes; ++l)
    addFlat(vector::ExtractOp::create(b, offsets, ArrayRef<int64_t>{l}),
            vector::ExtractOp::create(b, contribution, ArrayRef<int64_t>{l}));
}

} // namespace

void mlir::attn::cpu::emitBackward(ImplicitLocOpBuilder &b,
                                   AttentionBackwardOp op, int64_t lanes,
                                   bool bf16Dot) {
  BackwardLowering(b, op, lanes, bf16Dot).emit();
}
