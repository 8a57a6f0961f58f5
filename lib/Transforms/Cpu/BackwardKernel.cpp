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
//     per block of rows that see a key of it (the band's rows only):
//       S  = Q·Kᵀ (scale, soft cap, bias)    P  = exp(S − LSE), 0 if excluded
//       dP = dO·Vᵀ                            dS = P·(dP − Δ)·(1 − (s/c)²)
//       dV += Pᵀ·dO     dK += dSᵀ·Q     dQ += dS·K
//     dK, dV of the block → memory (scaled, rounded once)
//   dQ → memory (scaled, rounded once)
//
// P is recomputed from the saved LSE, never stored beyond one block of
// rows. Each sum runs in a fixed order: the same inputs give the same bits
// whatever the thread count. The inputs are read once per work item into
// f32 rows padded to whole vectors (O(S·D), dynamic, on the heap), so that
// every inner loop runs on unit-stride f32 whatever the caller's strides and
// element type. The products use blocks of kRows rows: each K/V vector
// loaded feeds kRows FMAs, each dK/dV accumulator loaded takes kRows.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/AttentionMath.h"
#include "lib/Transforms/Cpu/MicroKernels.h"
#include "lib/Transforms/Cpu/VectorEmitter.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::cpu;

namespace {

/// Keys per block, and query rows per register block.
constexpr int64_t kBlockKeys = 64;
constexpr int64_t kRows = 4;

class BackwardLowering : public VectorEmitter {
public:
  BackwardLowering(ImplicitLocOpBuilder &b, AttentionBackwardOp op,
                   int64_t lanes)
      : VectorEmitter(b, lanes), op(op),
        math(b, b.getLoc(), op, SoftmaxConvention{}),
        headDim(cast<ShapedType>(op.getQuery().getType()).getDimSize(3)),
        valueDim(cast<ShapedType>(op.getValue().getType()).getDimSize(3)),
        headPad(llvm::alignTo(headDim, lanes)),
        valuePad(llvm::alignTo(valueDim, lanes)),
        keyVectors(kBlockKeys / lanes) {}

  void emit();

private:
  /// The rows of one work item and where their f32 copies live.
  struct Group {
    Value batch, kvHead, firstHead, rows;
    Value queryRows, gradOutRows; // [G·Sq][pad] f32
    Value delta, lseRef;          // [G·Sq] f32
    Value gradQuery;              // [G·Sq][DPad] f32 accumulator
  };
  /// One block of keys: [start, start + count).
  struct KeyBlock {
    Value start, count;
  };

  void emitGroup(Group &group);
  void packRows(Group &group, Value g, Value row);
  void packKeyBlock(const Group &group, const KeyBlock &keys);
  void emitRowBlock(const Group &group, const KeyBlock &keys, Value g,
                    Value firstRow, int64_t rowCount);
  void writeKeyBlock(const Group &group, const KeyBlock &keys);
  void writeGradQuery(const Group &group);

  /// The rows (of one head) that see a key of the block: [lo, hi).
  std::pair<Value, Value> rowsSeeing(const KeyBlock &keys, Value rows);
  /// Lanes of key vector `v` that row `row` may see: the block's live keys,
  /// the band, the mask's keep bits (loaded into `keep`).
  Value allowed(const KeyBlock &keys, Value row, int64_t r, int64_t v);
  /// rows[rowAt[r]] · blockᵀ for each row r: `width` columns of the rows
  /// (f32) against the packed block transposed ([width][64]), as register
  /// tiles of rows x key vectors (r-major).
  SmallVector<Value> rowsTimesBlock(Value rows, Value blockT, int64_t width,
                                    ArrayRef<Value> rowAt);
  /// Dropout's Z of the block's key vectors for row `row` of head `head`
  /// (op-local).
  SmallVector<Value> dropoutFactors(const Group &group, Value head, Value row,
                                    const KeyBlock &block);
  /// Fills `keep` (and `bias`) for rows [firstRow, firstRow + rowCount).
  void loadMask(const Group &group, const KeyBlock &keys, Value head,
                Value firstRow, int64_t rowCount);

  Value zeroVector() { return splat(f32Const(0.0f)); }
  /// x where finite, else 0 (a scalar or a vector): the factor that a
  /// product's weights multiply. A NaN or inf in a row of Q, dO or K
  /// reaches every position that row allows through the weight itself
  /// (its score, hence P and dS, is NaN there); where a position is
  /// excluded, its 0 weight must give 0, not 0·NaN.
  Value finiteOrZero(Value x) {
    Value inf = f32Const(kInf), zero = f32Const(0.0f);
    if (isa<VectorType>(x.getType())) {
      inf = splat(inf);
      zero = splat(zero);
    }
    Value finite = arith::CmpFOp::create(b, arith::CmpFPredicate::OLT,
                                         math::AbsFOp::create(b, x), inf);
    return arith::SelectOp::create(b, finite, x, zero);
  }
  Value fma(Value a, Value x, Value acc) {
    return vector::FMAOp::create(b, a, x, acc);
  }
  Value loadVector(Value memref, ValueRange at) {
    return vector::LoadOp::create(b, vecType, memref, at);
  }
  void storeVector(Value v, Value memref, ValueRange at) {
    vector::StoreOp::create(b, v, memref, at);
  }
  /// memref[at] = 0 for every vector of a [rows][cols] f32 buffer.
  void zeroBuffer(Value buffer, Value rows, int64_t cols);
  /// Rounds an f32 to `memref`'s element type and stores it.
  void storeAs(Value value, Value memref, ValueRange at);
  Value stackBuffer(ArrayRef<int64_t> shape) {
    return memref::AllocaOp::create(b, MemRefType::get(shape, f32),
                                    ValueRange{}, b.getI64IntegerAttr(64));
  }
  Value heapRows(Value rows, int64_t cols) {
    SmallVector<int64_t> shape = {ShapedType::kDynamic};
    if (cols > 0)
      shape.push_back(cols);
    return memref::AllocOp::create(b, MemRefType::get(shape, f32),
                                   ValueRange{rows}, b.getI64IntegerAttr(64));
  }
  /// Index `index` of a mask dim, or 0 where the dim broadcasts (size 1).
  Value maskIndex(int64_t dimIndex, Value index);

  AttentionBackwardOp op;
  AttentionMath math;
  int64_t headDim, valueDim, headPad, valuePad, keyVectors;
  Value diagonal; // null without a band
  std::optional<int64_t> left, right;
  // The packed key block and its accumulators (stack, fixed size).
  Value keysT, valuesT, keyRows; // [DPad][64], [DvPad][64], [64][DPad]
  Value gradKeys, gradValues;    // [64][DPad], [64][DvPad]
  // One block of rows: P, dS (first the soft cap's derivative), the mask.
  Value probs, grads, keep, bias; // [kRows][64]
  // Dropout: each weight's factor Z (1 / (1 − p) or 0), its threshold and
  // the kept weights' factor.
  Value dropScale, dropThreshold, dropKept;
  Value keys; // Sk
};

void BackwardLowering::emit() {
  Value query = op.getQuery(), key = op.getKey();
  diagonal = resolveDiagonal(b, b.getLoc(), op, op.getDiagonal(),
                             [&](Value v, int64_t i) { return dim(v, i); });
  std::tie(left, right) = op.getBandOffsets();
  keys = dim(key, 2);

  keysT = stackBuffer({headPad, kBlockKeys});
  valuesT = stackBuffer({valuePad, kBlockKeys});
  keyRows = stackBuffer({kBlockKeys, headPad});
  gradKeys = stackBuffer({kBlockKeys, headPad});
  gradValues = stackBuffer({kBlockKeys, valuePad});
  probs = stackBuffer({kRows, kBlockKeys});
  grads = stackBuffer({kRows, kBlockKeys});
  if (op.getMask()) {
    keep = stackBuffer({kRows, kBlockKeys});
    bias = stackBuffer({kRows, kBlockKeys});
  }
  if (op.getDropoutP()) {
    dropScale = stackBuffer({kRows, kBlockKeys});
    dropThreshold = dropoutThreshold(b, b.getLoc(), op.getDropoutP());
    dropKept = splat(arith::DivFOp::create(
        b, f32Const(1.0f),
        arith::SubFOp::create(b, f32Const(1.0f), op.getDropoutP())));
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
      group.queryRows = heapRows(groupRows, headPad);
      group.gradOutRows = heapRows(groupRows, valuePad);
      group.delta = heapRows(groupRows, 0);
      group.lseRef = heapRows(groupRows, 0);
      group.gradQuery = heapRows(groupRows, headPad);
      forLoop(cst(0), groupSize, cst(1), [&](Value g) {
        forLoop(cst(0), group.rows, cst(1),
                [&](Value row) { packRows(group, g, row); });
      });
      zeroBuffer(group.gradQuery, groupRows, headPad);
      // Per block of keys: every row of the group that sees one of them.
      forLoop(cst(0), keys, cst(kBlockKeys), [&](Value start) {
        KeyBlock block{start, arith::MinSIOp::create(
                                  b, cst(kBlockKeys),
                                  arith::SubIOp::create(b, keys, start))};
        packKeyBlock(group, block);
        forLoop(cst(0), groupSize, cst(1), [&](Value g) {
          auto [lo, hi] = rowsSeeing(block, group.rows);
          // Whole blocks of kRows rows, then the rest one by one.
          Value count = arith::SubIOp::create(b, hi, lo);
          Value whole = arith::AddIOp::create(
              b, lo,
              arith::MulIOp::create(
                  b, arith::DivUIOp::create(b, count, cst(kRows)), cst(kRows)));
          forLoop(lo, whole, cst(kRows), [&](Value row) {
            emitRowBlock(group, block, g, row, kRows);
          });
          forLoop(whole, hi, cst(1),
                  [&](Value row) { emitRowBlock(group, block, g, row, 1); });
        });
        writeKeyBlock(group, block);
      });
      writeGradQuery(group);
      for (Value buffer : {group.queryRows, group.gradOutRows, group.delta,
                           group.lseRef, group.gradQuery})
        memref::DeallocOp::create(b, buffer);
    });
  });
}

void BackwardLowering::packRows(Group &group, Value g, Value row) {
  Value head = arith::AddIOp::create(b, group.firstHead, g);
  Value r =
      arith::AddIOp::create(b, arith::MulIOp::create(b, g, group.rows), row);
  SmallVector<Value> at = {group.batch, head, row};
  auto copyRow = [&](Value source, Value target, int64_t width, int64_t pad) {
    forLoop(cst(0), cst(width), cst(1), [&](Value c) {
      SmallVector<Value> from = at;
      from.push_back(c);
      memref::StoreOp::create(b, loadF32(source, from), target,
                              ValueRange{r, c});
    });
    for (int64_t c = width; c < pad; ++c)
      memref::StoreOp::create(b, f32Const(0.0f), target, ValueRange{r, cst(c)});
  };
  copyRow(op.getQuery(), group.queryRows, headDim, headPad);
  copyRow(op.getGradOutput(), group.gradOutRows, valueDim, valuePad);
  // Δ = dO·O − dLSE, in f32 in column order.
  Value dot = forLoopWith(cst(0), cst(valueDim), cst(1), {f32Const(0.0f)},
                          [&](Value c, ValueRange acc) -> SmallVector<Value> {
                            SmallVector<Value> from = at;
                            from.push_back(c);
                            Value product = arith::MulFOp::create(
                                b, loadF32(op.getGradOutput(), from),
                                loadF32(op.getOutput(), from));
                            return {arith::AddFOp::create(b, acc[0], product)};
                          })[0];
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

void BackwardLowering::zeroBuffer(Value buffer, Value rows, int64_t cols) {
  Value zero = zeroVector();
  forLoop(cst(0), rows, cst(1), [&](Value r) {
    for (int64_t c = 0; c < cols; c += lanes)
      storeVector(zero, buffer, {r, cst(c)});
  });
}

void BackwardLowering::packKeyBlock(const Group &group, const KeyBlock &block) {
  // Keys past the block's count stay 0 (their P and dS are 0, and 0·0 is
  // what they add).
  zeroBuffer(keysT, cst(headPad), kBlockKeys);
  zeroBuffer(valuesT, cst(valuePad), kBlockKeys);
  zeroBuffer(keyRows, cst(kBlockKeys), headPad);
  zeroBuffer(gradKeys, cst(kBlockKeys), headPad);
  zeroBuffer(gradValues, cst(kBlockKeys), valuePad);
  forLoop(cst(0), block.count, cst(1), [&](Value k) {
    Value key = arith::AddIOp::create(b, block.start, k);
    forLoop(cst(0), cst(headDim), cst(1), [&](Value c) {
      Value x = loadF32(op.getKey(), {group.batch, group.kvHead, key, c});
      memref::StoreOp::create(b, x, keysT, ValueRange{c, k});
      memref::StoreOp::create(b, finiteOrZero(x), keyRows, ValueRange{k, c});
    });
    forLoop(cst(0), cst(valueDim), cst(1), [&](Value c) {
      Value x = loadF32(op.getValue(), {group.batch, group.kvHead, key, c});
      memref::StoreOp::create(b, x, valuesT, ValueRange{c, k});
    });
  });
}

std::pair<Value, Value> BackwardLowering::rowsSeeing(const KeyBlock &block,
                                                     Value rows) {
  if (!diagonal)
    return {cst(0), rows};
  // Row i sees key j iff j − d − right <= i <= j − d + left.
  Value lo = cst(0), hi = rows;
  Value first = arith::SubIOp::create(b, block.start, diagonal);
  Value last = arith::SubIOp::create(
      b, arith::AddIOp::create(b, first, block.count), cst(1));
  if (right)
    lo = arith::MaxSIOp::create(b, lo,
                                arith::SubIOp::create(b, first, cst(*right)));
  if (left)
    hi = arith::MinSIOp::create(b, hi,
                                arith::AddIOp::create(b, last, cst(*left + 1)));
  hi = arith::MaxSIOp::create(b, hi, lo);
  return {arith::MinSIOp::create(b, lo, rows),
          arith::MinSIOp::create(b, hi, rows)};
}

Value BackwardLowering::maskIndex(int64_t dimIndex, Value index) {
  Value broadcast = arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                          dim(op.getMask(), dimIndex), cst(1));
  return arith::SelectOp::create(b, broadcast, cst(0), index);
}

void BackwardLowering::loadMask(const Group &group, const KeyBlock &block,
                                Value head, Value firstRow, int64_t rowCount) {
  Value mask = op.getMask();
  bool isBias = !cast<MemRefType>(mask.getType()).getElementType().isInteger(1);
  Value zero = zeroVector();
  for (int64_t r = 0; r < rowCount; ++r) {
    for (int64_t c = 0; c < kBlockKeys; c += lanes) {
      storeVector(zero, keep, {cst(r), cst(c)});
      storeVector(zero, bias, {cst(r), cst(c)});
    }
    Value row = arith::AddIOp::create(b, firstRow, cst(r));
    Value mb = maskIndex(0, group.batch), mh = maskIndex(1, head),
          mi = maskIndex(2, row);
    forLoop(cst(0), block.count, cst(1), [&](Value k) {
      Value key = arith::AddIOp::create(b, block.start, k);
      Value kept;
      if (isBias) {
        Value x = loadF32(mask, {mb, mh, mi, key});
        kept = arith::CmpFOp::create(b, arith::CmpFPredicate::ONE, x,
                                     f32Const(-kInf));
        // NaN != −inf: a NaN bias is kept, and makes its score NaN.
        kept = arith::OrIOp::create(
            b, kept, arith::CmpFOp::create(b, arith::CmpFPredicate::UNO, x, x));
        memref::StoreOp::create(b, x, bias, ValueRange{cst(r), k});
      } else {
        kept = memref::LoadOp::create(b, mask, ValueRange{mb, mh, mi, key});
      }
      memref::StoreOp::create(
          b, arith::SelectOp::create(b, kept, f32Const(1.0f), f32Const(0.0f)),
          keep, ValueRange{cst(r), k});
    });
  }
}

Value BackwardLowering::allowed(const KeyBlock &block, Value row, int64_t r,
                                int64_t v) {
  // Lane l stands for key start + v·lanes + l.
  SmallVector<int32_t> iota;
  for (int64_t l = 0; l < lanes; ++l)
    iota.push_back(static_cast<int32_t>(v * lanes + l));
  Value local = arith::ConstantOp::create(
      b, DenseElementsAttr::get(idxVecType, ArrayRef<int32_t>(iota)));
  Value live =
      arith::CmpIOp::create(b, arith::CmpIPredicate::slt, local,
                            splat(clampToI32(block.count, 0, kBlockKeys)));
  if (diagonal) {
    // rel = row + d − start: the row's diagonal key in block coordinates.
    Value rel = arith::SubIOp::create(
        b, arith::AddIOp::create(b, row, diagonal), block.start);
    if (left) {
      Value from = arith::SubIOp::create(b, rel, cst(*left));
      live = arith::AndIOp::create(
          b, live,
          arith::CmpIOp::create(b, arith::CmpIPredicate::sge, local,
                                splat(clampToI32(from, -1, kBlockKeys + 1))));
    }
    if (right) {
      Value to = arith::AddIOp::create(b, rel, cst(*right));
      live = arith::AndIOp::create(
          b, live,
          arith::CmpIOp::create(b, arith::CmpIPredicate::sle, local,
                                splat(clampToI32(to, -1, kBlockKeys + 1))));
    }
  }
  if (keep) {
    Value bits = loadVector(keep, {cst(r), cst(v * lanes)});
    live = arith::AndIOp::create(
        b, live,
        arith::CmpFOp::create(b, arith::CmpFPredicate::ONE, bits,
                              zeroVector()));
  }
  return live;
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
  if (op.getMask())
    loadMask(group, block, head, firstRow, rowCount);

  // S = Q·Kᵀ: per column of Q, keyVectors loads of Kᵀ feed rowCount FMAs.
  SmallVector<Value> scores =
      rowsTimesBlock(group.queryRows, keysT, headDim, rowAt);
  // P = exp(s − LSE) where allowed; the soft cap's derivative into grads.
  Value scale = splat(f32Const(static_cast<float>(math.scoreScale())));
  for (int64_t r = 0; r < rowCount; ++r) {
    Value lse =
        splat(memref::LoadOp::create(b, group.lseRef, ValueRange{rowAt[r]}));
    SmallVector<Value> factors;
    if (dropScale)
      factors = dropoutFactors(group, head, row[r], block);
    for (int64_t v = 0; v < keyVectors; ++v) {
      Value s = arith::MulFOp::create(b, scores[r * keyVectors + v], scale);
      if (FloatAttr cap = op.getSoftcapAttr()) {
        s = math.softcap(s);
        Value t = arith::MulFOp::create(
            b, s, splat(f32Const(1.0f / cap.getValueAsDouble())));
        Value derivative = arith::SubFOp::create(
            b, splat(f32Const(1.0f)), arith::MulFOp::create(b, t, t));
        storeVector(derivative, grads, {cst(r), cst(v * lanes)});
      }
      if (bias)
        s = arith::AddFOp::create(b, s,
                                  loadVector(bias, {cst(r), cst(v * lanes)}));
      Value p = math.exp(arith::SubFOp::create(b, s, lse));
      p = arith::SelectOp::create(b, allowed(block, row[r], r, v), p,
                                  zeroVector());
      storeVector(p, probs, {cst(r), cst(v * lanes)});
      if (dropScale)
        storeVector(factors[v], dropScale, {cst(r), cst(v * lanes)});
    }
  }

  // dP = dO·Vᵀ, then dS = P·(dP − Δ) (· the soft cap's derivative).
  SmallVector<Value> gradProbs =
      rowsTimesBlock(group.gradOutRows, valuesT, valueDim, rowAt);
  for (int64_t r = 0; r < rowCount; ++r) {
    Value delta =
        splat(memref::LoadOp::create(b, group.delta, ValueRange{rowAt[r]}));
    for (int64_t v = 0; v < keyVectors; ++v) {
      Value p = loadVector(probs, {cst(r), cst(v * lanes)});
      // Dropout: dS = P·(Z·dP − Δ), and P·V's weights are P·Z.
      Value dp = gradProbs[r * keyVectors + v];
      Value z;
      if (dropScale) {
        z = loadVector(dropScale, {cst(r), cst(v * lanes)});
        dp = arith::MulFOp::create(b, dp, z);
      }
      Value ds =
          arith::MulFOp::create(b, p, arith::SubFOp::create(b, dp, delta));
      if (op.getSoftcapAttr())
        ds = arith::MulFOp::create(b, ds,
                                   loadVector(grads, {cst(r), cst(v * lanes)}));
      // An excluded position contributes nothing, whatever V holds there.
      ds = arith::SelectOp::create(b, allowed(block, row[r], r, v), ds,
                                   zeroVector());
      storeVector(ds, grads, {cst(r), cst(v * lanes)});
      if (z)
        storeVector(arith::MulFOp::create(b, p, z), probs,
                    {cst(r), cst(v * lanes)});
    }
  }

  // acc[k] += Σ_r weights[r][k] · rows[r] for each key k of the block, by
  // chunks of columns: each accumulator loaded takes rowCount FMAs.
  auto accumulateKeys = [&](Value acc, Value weights, Value rows, int64_t pad) {
    forLoop(cst(0), cst(pad), cst(lanes), [&](Value c) {
      SmallVector<Value> chunk;
      for (int64_t r = 0; r < rowCount; ++r)
        chunk.push_back(finiteOrZero(loadVector(rows, {rowAt[r], c})));
      forLoop(cst(0), cst(kBlockKeys), cst(1), [&](Value k) {
        Value sum = loadVector(acc, {k, c});
        for (int64_t r = 0; r < rowCount; ++r)
          sum = fma(
              splat(memref::LoadOp::create(b, weights, ValueRange{cst(r), k})),
              chunk[r], sum);
        storeVector(sum, acc, {k, c});
      });
    });
  };
  accumulateKeys(gradValues, probs, group.gradOutRows, valuePad);
  accumulateKeys(gradKeys, grads, group.queryRows, headPad);

  // dQ[r] += Σ_k dS[r][k] · K[k]: per K chunk loaded, rowCount FMAs.
  forLoop(cst(0), cst(headPad), cst(lanes), [&](Value c) {
    SmallVector<Value> init;
    for (int64_t r = 0; r < rowCount; ++r)
      init.push_back(loadVector(group.gradQuery, {rowAt[r], c}));
    SmallVector<Value> sums = forLoopWith(
        cst(0), cst(kBlockKeys), cst(1), init,
        [&](Value k, ValueRange acc) -> SmallVector<Value> {
          Value kc = loadVector(keyRows, {k, c});
          SmallVector<Value> next;
          for (int64_t r = 0; r < rowCount; ++r)
            next.push_back(fma(
                splat(memref::LoadOp::create(b, grads, ValueRange{cst(r), k})),
                kc, acc[r]));
          return next;
        });
    for (int64_t r = 0; r < rowCount; ++r)
      storeVector(sums[r], group.gradQuery, {rowAt[r], c});
  });
}

SmallVector<Value> BackwardLowering::dropoutFactors(const Group &group,
                                                    Value head, Value row,
                                                    const KeyBlock &block) {
  auto global = [&](unsigned dim, Value local) {
    return globalIndex(b, b.getLoc(), op.getOrigin(), dim, local);
  };
  SmallVector<Value> keeps = dropoutKeepVectors(
      b, b.getLoc(), op.getDropoutSeed(), dropThreshold, global(0, group.batch),
      global(1, head), global(2, row), global(3, block.start), lanes,
      keyVectors);
  SmallVector<Value> factors;
  for (Value keep : keeps)
    factors.push_back(arith::SelectOp::create(b, keep, dropKept, zeroVector()));
  return factors;
}

SmallVector<Value> BackwardLowering::rowsTimesBlock(Value rows, Value blockT,
                                                    int64_t width,
                                                    ArrayRef<Value> rowAt) {
  int64_t rowCount = rowAt.size();
  SmallVector<Value> zeros(rowCount * keyVectors, zeroVector());
  return forLoopWith(
      cst(0), cst(width), cst(1), zeros,
      [&](Value c, ValueRange acc) -> SmallVector<Value> {
        SmallVector<Value> columns, next;
        for (int64_t v = 0; v < keyVectors; ++v)
          columns.push_back(loadVector(blockT, {c, cst(v * lanes)}));
        for (int64_t r = 0; r < rowCount; ++r) {
          Value x =
              splat(memref::LoadOp::create(b, rows, ValueRange{rowAt[r], c}));
          for (int64_t v = 0; v < keyVectors; ++v)
            next.push_back(fma(x, columns[v], acc[r * keyVectors + v]));
        }
        return next;
      });
}

void BackwardLowering::storeAs(Value value, Value memref, ValueRange at) {
  Type elem = cast<MemRefType>(memref.getType()).getElementType();
  if (elem != f32)
    value = arith::TruncFOp::create(b, elem, value);
  memref::StoreOp::create(b, value, memref, at);
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

} // namespace

void mlir::attn::cpu::emitBackward(ImplicitLocOpBuilder &b,
                                   AttentionBackwardOp op, int64_t lanes) {
  BackwardLowering(b, op, lanes).emit();
}
