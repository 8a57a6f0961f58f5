//===- AdditiveKernel.cpp - The CPU kernel of attn.additive ---------------===//
//
// One bufferized attn.additive (a work item: a batch and a tile of query
// rows, as attn-tile makes it) computes, per batch of the tile,
//
//   projections:  W_qᵀ, W_kᵀ and v packed as f32 (once per work item; by
//                 16x16 register transposes where W's rows have unit
//                 stride); the keys' projection kp = keys · W_kᵀ, 4 keys by
//                 64 of A a register tile, 16 keys at a time into a
//                 scratch tile that 16x16 register transposes store into
//                 kpᵀ [A][Sk] (keys in vector lanes); the rows' qp =
//                 query · W_qᵀ [rows][A]; V packed as f32 rows (vector loads
//                 where its rows have unit stride)
//   per block of R rows, per block of 16 keys (one vector of scores each):
//                 s = Σ_a v[a] · tanh(qp[i,a] + kpᵀ[a, keys])
//                 keys past Sk or under a false keep bit: −inf (a select)
//                 the online softmax: running max and sum, acc = α·acc + P·V
//   per row:      O = acc / sum (0 for a row with no allowed key), and with
//                 the weights out W = exp(s − max) / sum from the row's
//                 scores kept in a buffer
//
// The keys are in vector lanes, so a block's scores need no horizontal
// reduction: each step over A broadcasts qp[i,a] and v[a] and loads one
// vector of kpᵀ that the R rows share. The tanh (a polynomial, from
// attn-approximate-math) dominates: Sq·Sk·A of them. Nothing of size
// Sq·Sk·A exists; the keys' projection is made once per work item.
//
// attn.additive_backward (a work item: a batch and a part of the query
// rows) shares the projections and packs V transposed, Vᵀ [Dv][Sk], and
// the rows' dO; per block of R rows, keys in lanes as above:
//
//   pass 1, per block of 16 keys:  s as above into a buffer; the running
//                 max and sum (the forward's statistics)
//   pass 2, per block of 16 keys:  P = exp(s − m) / sum, dP = dO·Vᵀ (the
//                 rows share each Vᵀ load; 0 where P is 0), Δ = Σ P·dP,
//                 dV += Pᵀ·dO; then dS = P·(dP − Δ) (0 where P is 0)
//   pass 3, per a, per block of 16 keys:  t = tanh(qp + kpᵀ) again,
//                 g = dS·(1 − t²): the rows' sums of g down the keys stay
//                 in registers (grad_qp = v·Σ, one horizontal sum per row
//                 and a), their sum over the rows adds to dkpᵀ [A][Sk], and
//                 Σ dS·t to dv's accumulator
//   per part:     grad_kp = v·dkp (16x16 transposes of dkpᵀ), grad_values,
//                 grad_v
//
// The tanh is computed twice per (row, key, a): once for the scores, once
// for their gradient (keeping t would take Sk·A floats a row).
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

/// Rows of a block (their scores share each kpᵀ load), and the most column
/// vectors a row's P·V accumulates at once (a projection's register tile
/// takes maxAccumulators(lanes) / kRows).
constexpr int64_t kRows = 4;
constexpr int64_t kTileVectors = 4;

/// What attn.additive's and attn.additive_backward's kernels share (OpTy
/// one of them): the network packed, the projections, rows packed as f32,
/// the keep bits of a block of keys.
template <typename OpTy> class AdditiveEmitter : public VectorEmitter {
public:
  AdditiveEmitter(ImplicitLocOpBuilder &b, OpTy op, int64_t lanes)
      : VectorEmitter(b, lanes), op(op),
        maths(b, b.getLoc(), op, SoftmaxConvention::gpu()) {
    auto size = [](Value v, int64_t d) {
      return cast<MemRefType>(v.getType()).getDimSize(d);
    };
    queryDim = size(op.getQuery(), 2);
    keyDim = size(op.getKeys(), 2);
    valueDim = size(op.getValues(), 2);
    attnDim = size(op.getQueryWeight(), 0);
    attnPad = llvm::alignTo(attnDim, lanes);
    valuePad = llvm::alignTo(valueDim, lanes);
  }

protected:
  Value heap(ArrayRef<int64_t> shape, ValueRange dynamicSizes = {}) {
    return heapBuffer(shape, dynamicSizes);
  }
  Value add(Value x, int64_t c) { return arith::AddIOp::create(b, x, cst(c)); }

  /// kpᵀ [A][SkPad] of batch `batch`: keys · W_kᵀ a tile of 4 keys by 64
  /// of A at a time into keyTile, then per 16 keys 16x16 transposes.
  void projectKeys(Value batch, Value keys);
  /// packed [D][APad] = weight [A][D] transposed, columns past A zero.
  void packTransposed(Value weight, Value packed, int64_t dims);
  /// into[intoFirst + r] = source[batch, first + r] · W (weightT: Wᵀ packed
  /// [dims][APad]) for r < count: tiles of `count` rows by 64 of A.
  void projectRows(Value source, Value batch, Value first, int64_t count,
                   Value weightT, int64_t dims, Value into, Value intoFirst);
  /// qp [rows][APad] of the tile's rows.
  void projectQueries(Value batch, Value rows);
  /// into [count (or more)][DvPad] = rows [0, count) of `source` [B, n,
  /// Dv] in batch `batch` as f32 (Dv: the values' dims), zero past them.
  void packRows(Value source, Value batch, Value count, Value into);
  /// W_qᵀ, W_kᵀ and v packed (queryWeightT, keyWeightT, scoreVector).
  void packNetwork();
  /// Whether each key of the block from `start` is allowed for row `row`:
  /// `inRange` (the keys before Sk) and, with a mask, its keep bits.
  Value allowedKeys(Value batch, Value row, Value start, Value keys,
                    Value inRange);
  /// Whether each lane's key of the block from `start` is before Sk.
  Value keysInRange(Value start, Value keys);
  /// Keys padded to whole tiles of the projection.
  Value paddedKeys(Value keys) {
    return arith::MulIOp::create(
        b, arith::CeilDivUIOp::create(b, keys, cst(kTileVectors * lanes)),
        cst(kTileVectors * lanes));
  }
  /// The heap buffers the two kernels share, for `rows` query rows and
  /// `keyPad` keys.
  void allocateShared(Value rows, Value keyPad);
  /// Rows [0, count) of `stats` [2][kRows] as a row block's start: running
  /// max −inf, sum 0.
  void startRows(Value stats, int64_t count) {
    for (int64_t r = 0; r < count; ++r) {
      memref::StoreOp::create(b, f32Const(-kInf), stats,
                              ValueRange{cst(0), cst(r)});
      memref::StoreOp::create(b, f32Const(0.0f), stats,
                              ValueRange{cst(1), cst(r)});
    }
  }
  /// s[r] = Σ_a v[a] · tanh(qp[first + r, a] + kpᵀ[a, start..]), r < count.
  SmallVector<Value> blockScores(Value first, int64_t count, Value start);

  OpTy op;
  AttentionMath maths;
  int64_t queryDim, keyDim, valueDim, attnDim, attnPad, valuePad;
  // Per work item (heap).
  Value queryWeightT;   // [Dq][APad] W_qᵀ
  Value scoreVector;    // [APad] v
  Value keyWeightT;     // [Dk][APad] W_kᵀ
  Value projectedKeysT; // [APad][SkPad] kpᵀ
  Value keyTile;        // [lanes][APad] kp of 16 keys
  Value projectedRows;  // [rows][APad] qp
  Value values;         // [SkPad][DvPad]
  Value keep;           // [lanes]: a block's keep bits as 0 / −inf
  Value rowBuffer;      // [max(DvPad, SkPad, APad)] for element-wise stores
};

class AdditiveLowering : public AdditiveEmitter<AdditiveOp> {
public:
  using AdditiveEmitter::AdditiveEmitter;
  void emit();

private:
  /// The rows [first, first + count) (count <= kRows) of batch `batch`.
  void rowBlock(Value batch, Value first, int64_t count, Value keys);

  Value acc;    // [kRows][DvPad]
  Value stats;  // [2][kRows]: running max, sum
  Value probs;  // [kRows][lanes]: a block's weights
  Value scores; // [kRows][SkPad]: raw scores (weights out only)
};

template <typename OpTy>
void AdditiveEmitter<OpTy>::projectKeys(Value batch, Value keys) {
  Value key = op.getKeys();
  Value keyPad = dim(projectedKeysT, 1);
  // The columns past the last group of 16 keys: zero.
  Value groupsEnd = arith::MulIOp::create(
      b, arith::CeilDivUIOp::create(b, keys, cst(lanes)), cst(lanes));
  forLoop(cst(0), cst(attnPad), cst(1), [&](Value a) {
    forLoop(groupsEnd, keyPad, cst(lanes), [&](Value j) {
      storeVector(zeroVector(), projectedKeysT, {a, j});
    });
  });
  // Per group of 16 keys: kp[j] = Σ_d keys[j][d] · W_kᵀ[d] by tiles of 4
  // keys by 64 of A (each key's row read in place) into keyTile, whose
  // rows past the keys are zero; then kpᵀ's 16 columns of the group, a
  // 16x16 block of A at a time.
  forLoop(cst(0), keys, cst(lanes), [&](Value group) {
    Value count = arith::MinSIOp::create(b, cst(lanes),
                                         arith::SubIOp::create(b, keys, group));
    zeroRows(keyTile, count, cst(lanes), attnPad);
    forBlocks(cst(0), count, kRows, [&](Value first, int64_t rows) {
      projectRows(key, batch, arith::AddIOp::create(b, group, first), rows,
                  keyWeightT, keyDim, keyTile, first);
    });
    forLoop(cst(0), cst(attnPad), cst(lanes), [&](Value a0) {
      SmallVector<Value> rows;
      for (int64_t r = 0; r < lanes; ++r)
        rows.push_back(loadVector(keyTile, {cst(r), a0}));
      for (auto [c, column] : llvm::enumerate(transposeTile(rows)))
        storeVector(column, projectedKeysT, {add(a0, c), group});
    });
  });
}

template <typename OpTy>
void AdditiveEmitter<OpTy>::packTransposed(Value weight, Value packed,
                                           int64_t dims) {
  ifUnitStride(
      weight,
      [&](Value rowsView) {
        // Blocks of 16 rows of W (A) by 16 columns (D): 16 row loads, a
        // register transpose, 16 stores into packed's rows.
        auto block = [&](Value a0, int64_t rows) {
          eachChunk(dims, [&](Value c0, int64_t columns) {
            SmallVector<Value> tileRows;
            for (int64_t r = 0; r < rows; ++r)
              tileRows.push_back(
                  loadChunkF32(rowsView, {add(a0, r), c0}, columns));
            SmallVector<Value> tileColumns = transposeTile(tileRows);
            for (int64_t c = 0; c < columns; ++c)
              storeVector(tileColumns[c], packed, {add(c0, c), a0});
          });
        };
        // The last block's rows past A are 0: so are packed's columns.
        int64_t whole = attnDim / lanes * lanes;
        forLoop(cst(0), cst(whole), cst(lanes),
                [&](Value a0) { block(a0, lanes); });
        if (whole < attnDim)
          block(cst(whole), attnDim - whole);
      },
      [&] {
        forLoop(cst(0), cst(dims), cst(1), [&](Value d) {
          for (int64_t c = 0; c < attnPad; c += lanes)
            storeVector(zeroVector(), packed, {d, cst(c)});
          forLoop(cst(0), cst(attnDim), cst(1), [&](Value a) {
            memref::StoreOp::create(b, loadF32(weight, {a, d}), packed,
                                    ValueRange{d, a});
          });
        });
      });
}

template <typename OpTy>
void AdditiveEmitter<OpTy>::projectRows(Value source, Value batch, Value first,
                                        int64_t count, Value weightT,
                                        int64_t dims, Value into,
                                        Value intoFirst) {
  // count x n accumulators: 4 x 4 on AVX-512, 4 x 2 in AVX2's 16
  // registers.
  int64_t tileVectors = std::max<int64_t>(1, maxAccumulators(lanes) / kRows);
  for (int64_t col = 0; col < attnPad; col += tileVectors * lanes) {
    int64_t n = std::min(tileVectors, (attnPad - col) / lanes);
    SmallVector<Value> acc(count * n, zeroVector());
    acc = broadcastProduct(
        cst(0), cst(dims), count,
        [&](int64_t r, Value d) {
          return loadF32(source, {batch, add(first, r), d});
        },
        weightT, cst(col), acc);
    for (int64_t r = 0; r < count; ++r)
      for (int64_t v = 0; v < n; ++v)
        storeVector(acc[r * n + v], into,
                    {add(intoFirst, r), cst(col + v * lanes)});
  }
}

template <typename OpTy>
void AdditiveEmitter<OpTy>::projectQueries(Value batch, Value rows) {
  forBlocks(cst(0), rows, kRows, [&](Value first, int64_t count) {
    projectRows(op.getQuery(), batch, first, count, queryWeightT, queryDim,
                projectedRows, first);
  });
}

template <typename OpTy>
void AdditiveEmitter<OpTy>::packRows(Value source, Value batch, Value count,
                                     Value into) {
  zeroRows(into, count, dim(into, 0), valuePad);
  ifUnitStride(
      source,
      [&](Value view) {
        forLoop(cst(0), count, cst(1), [&](Value j) {
          for (int64_t c = 0; c < valuePad; c += lanes)
            storeVector(loadRowChunk(view, {batch, j}, c, valueDim), into,
                        {j, cst(c)});
        });
      },
      [&] {
        forLoop(cst(0), count, cst(1), [&](Value j) {
          for (int64_t c = 0; c < valuePad; c += lanes)
            storeVector(zeroVector(), into, {j, cst(c)});
          forLoop(cst(0), cst(valueDim), cst(1), [&](Value c) {
            memref::StoreOp::create(b, loadF32(source, {batch, j, c}), into,
                                    ValueRange{j, c});
          });
        });
      });
}

template <typename OpTy> void AdditiveEmitter<OpTy>::packNetwork() {
  // W_qᵀ, W_kᵀ and v, columns of A past attnDim zero.
  Value scores0 = op.getScoreVector();
  packTransposed(op.getQueryWeight(), queryWeightT, queryDim);
  packTransposed(op.getKeyWeight(), keyWeightT, keyDim);
  for (int64_t c = 0; c < attnPad; c += lanes)
    storeVector(zeroVector(), scoreVector, {cst(c)});
  forLoop(cst(0), cst(attnDim), cst(1), [&](Value a) {
    memref::StoreOp::create(b, loadF32(scores0, {a}), scoreVector,
                            ValueRange{a});
  });
}

template <typename OpTy>
void AdditiveEmitter<OpTy>::allocateShared(Value rows, Value keyPad) {
  queryWeightT = heap({queryDim, attnPad});
  scoreVector = heap({attnPad});
  keyWeightT = heap({keyDim, attnPad});
  projectedKeysT = heap({attnPad, ShapedType::kDynamic}, {keyPad});
  keyTile = heap({lanes, attnPad});
  projectedRows = heap({ShapedType::kDynamic, attnPad}, {rows});
  values = heap({ShapedType::kDynamic, valuePad}, {keyPad});
  keep = heap({lanes});
  Value bufferSize =
      arith::MaxUIOp::create(b, keyPad, cst(std::max(valuePad, attnPad)));
  rowBuffer = heap({ShapedType::kDynamic}, {bufferSize});
}

template <typename OpTy>
SmallVector<Value>
AdditiveEmitter<OpTy>::blockScores(Value first, int64_t count, Value start) {
  return forLoopWith(
      cst(0), cst(attnDim), cst(1), SmallVector<Value>(count, zeroVector()),
      [&](Value a, ValueRange carried) {
        Value kp = loadVector(projectedKeysT, {a, start});
        Value weight =
            splat(memref::LoadOp::create(b, scoreVector, ValueRange{a}));
        SmallVector<Value> next;
        for (int64_t r = 0; r < count; ++r) {
          Value qp = splat(memref::LoadOp::create(
              b, projectedRows, ValueRange{add(first, r), a}));
          Value t = math::TanhOp::create(b, arith::AddFOp::create(b, qp, kp));
          next.push_back(vector::FMAOp::create(b, weight, t, carried[r]));
        }
        return next;
      });
}

template <typename OpTy>
Value AdditiveEmitter<OpTy>::keysInRange(Value start, Value keys) {
  SmallVector<int32_t> iota(lanes);
  for (int64_t l = 0; l < lanes; ++l)
    iota[l] = static_cast<int32_t>(l);
  auto i32Vec = VectorType::get({lanes}, b.getI32Type());
  Value lane = arith::ConstantOp::create(
      b, DenseElementsAttr::get(i32Vec, ArrayRef<int32_t>(iota)));
  Value keyCount = vector::BroadcastOp::create(
      b, i32Vec, arith::IndexCastOp::create(b, b.getI32Type(), keys));
  return arith::CmpIOp::create(
      b, arith::CmpIPredicate::slt,
      arith::AddIOp::create(
          b, lane,
          vector::BroadcastOp::create(
              b, i32Vec, arith::IndexCastOp::create(b, b.getI32Type(), start))),
      keyCount);
}

template <typename OpTy>
Value AdditiveEmitter<OpTy>::allowedKeys(Value batch, Value row, Value start,
                                         Value keys, Value inRange) {
  Value mask = op.getMask();
  if (!mask)
    return inRange;
  auto maskType = cast<MemRefType>(mask.getType());
  Value mb = maskType.getDimSize(0) == 1 ? cst(0) : batch;
  Value mq = maskType.getDimSize(1) == 1 ? cst(0) : row;
  Value minusInf = f32Const(-kInf);
  forLoop(cst(0), cst(lanes), cst(1), [&](Value l) {
    Value key = arith::AddIOp::create(b, start, l);
    // Lanes past Sk read key Sk - 1's bit: masked by inRange anyway.
    Value at =
        arith::MinSIOp::create(b, key, arith::SubIOp::create(b, keys, cst(1)));
    Value bit = memref::LoadOp::create(b, mask, ValueRange{mb, mq, at});
    memref::StoreOp::create(
        b, arith::SelectOp::create(b, bit, f32Const(0.0f), minusInf), keep,
        ValueRange{l});
  });
  Value kept = arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ,
                                     loadVector(keep, {cst(0)}), zeroVector());
  return arith::AndIOp::create(b, inRange, kept);
}

void AdditiveLowering::rowBlock(Value batch, Value first, int64_t count,
                                Value keys) {
  Value minusInf = f32Const(-kInf);
  startRows(stats, count);
  for (int64_t r = 0; r < count; ++r)
    for (int64_t c = 0; c < valuePad; c += lanes)
      storeVector(zeroVector(), acc, {cst(r), cst(c)});
  Value mask = op.getMask();

  forLoop(cst(0), keys, cst(lanes), [&](Value start) {
    // The block's scores: Σ_a v[a] · tanh(qp[i,a] + kpᵀ[a, keys]).
    SmallVector<Value> s = blockScores(first, count, start);
    // Keys past Sk, and those a false keep bit excludes: −inf by a select
    // (a NaN score of an excluded key stays out).
    Value inRange = keysInRange(start, keys);
    Value minusInfVec = splat(minusInf);
    for (int64_t r = 0; r < count; ++r) {
      Value allowed = allowedKeys(batch, add(first, r), start, keys, inRange);
      s[r] = arith::SelectOp::create(b, allowed, s[r], minusInfVec);
    }
    // The online softmax of each row, and its P·V.
    for (int64_t r = 0; r < count; ++r) {
      if (scores)
        storeVector(s[r], scores, {cst(r), start});
      Value blockMax =
          vector::ReductionOp::create(b, vector::CombiningKind::MAXIMUMF, s[r]);
      Value oldMax =
          memref::LoadOp::create(b, stats, ValueRange{cst(0), cst(r)});
      AttentionMath::MaxUpdate update = maths.updateMax(oldMax, blockMax);
      Value p =
          maths.exp(arith::SubFOp::create(b, s[r], splat(update.reference)));
      Value oldSum =
          memref::LoadOp::create(b, stats, ValueRange{cst(1), cst(r)});
      memref::StoreOp::create(b, update.max, stats, ValueRange{cst(0), cst(r)});
      memref::StoreOp::create(
          b, maths.updateSum(oldSum, update.alpha, {horizontalSum(p)}), stats,
          ValueRange{cst(1), cst(r)});
      storeVector(p, probs, {cst(r), cst(0)});
      Value alpha = splat(update.alpha);
      for (int64_t c = 0; c < valuePad; c += kTileVectors * lanes) {
        int64_t n = std::min(kTileVectors, (valuePad - c) / lanes);
        SmallVector<Value> rowAcc;
        for (int64_t v = 0; v < n; ++v)
          rowAcc.push_back(arith::MulFOp::create(
              b, loadVector(acc, {cst(r), cst(c + v * lanes)}), alpha));
        if (mask) {
          // A key that the mask excludes has p = 0, and must add 0 even
          // where its V holds a NaN: a select rather than the FMA alone.
          rowAcc = forLoopWith(
              cst(0), cst(lanes), cst(1), rowAcc,
              [&](Value l, ValueRange carried) {
                Value p =
                    memref::LoadOp::create(b, probs, ValueRange{cst(r), l});
                Value dropped = arith::CmpFOp::create(
                    b, arith::CmpFPredicate::OEQ, p, f32Const(0.0f));
                Value j = arith::AddIOp::create(b, start, l);
                SmallVector<Value> next;
                for (int64_t v = 0; v < n; ++v) {
                  Value term = arith::MulFOp::create(
                      b, splat(p), loadVector(values, {j, cst(c + v * lanes)}));
                  next.push_back(arith::AddFOp::create(
                      b, carried[v],
                      arith::SelectOp::create(b, dropped, zeroVector(), term)));
                }
                return next;
              });
        } else {
          rowAcc = broadcastProduct(
              start, add(start, lanes), 1,
              [&](int64_t, Value j) {
                return memref::LoadOp::create(
                    b, probs,
                    ValueRange{cst(r), arith::SubIOp::create(b, j, start)});
              },
              values, cst(c), rowAcc);
        }
        for (int64_t v = 0; v < n; ++v)
          storeVector(rowAcc[v], acc, {cst(r), cst(c + v * lanes)});
      }
    }
  });

  // O = acc / sum, 0 for a row without an allowed key; the weights.
  for (int64_t r = 0; r < count; ++r) {
    Value row = add(first, r);
    Value max = memref::LoadOp::create(b, stats, ValueRange{cst(0), cst(r)});
    Value sum = memref::LoadOp::create(b, stats, ValueRange{cst(1), cst(r)});
    Value empty = arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, sum,
                                        f32Const(0.0f));
    Value inverse =
        arith::SelectOp::create(b, empty, f32Const(0.0f),
                                arith::DivFOp::create(b, f32Const(1.0f), sum));
    SmallVector<Value> out;
    for (int64_t c = 0; c < valuePad; c += lanes)
      out.push_back(arith::MulFOp::create(b, loadVector(acc, {cst(r), cst(c)}),
                                          splat(inverse)));
    storeRowAs(op.getOutput(), {batch, row}, out, valueDim, rowBuffer);
    if (!scores)
      continue;
    // W = exp(s − m) / sum; 0 at excluded keys (s = −inf) and on an empty
    // row (its m is −inf: the reference 0 keeps exp(−inf) = 0).
    Value reference = arith::SelectOp::create(
        b, arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, max, minusInf),
        f32Const(0.0f), max);
    Value weights = op.getWeights();
    forLoop(cst(0), keys, cst(lanes), [&](Value start) {
      Value s = loadVector(scores, {cst(r), start});
      Value w = arith::MulFOp::create(
          b, maths.exp(arith::SubFOp::create(b, s, splat(reference))),
          splat(inverse));
      // An excluded key's weight is 0 even in a NaN row (exp(−inf − NaN)
      // would be NaN).
      w = arith::SelectOp::create(
          b,
          arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, s,
                                splat(minusInf)),
          zeroVector(), w);
      Value live = arith::SubIOp::create(b, keys, start);
      ifUnitStride(
          weights,
          [&](Value view) {
            vector::MaskedStoreOp::create(
                b, view, ValueRange{batch, row, start},
                vector::CreateMaskOp::create(b, maskVecType, ValueRange{live}),
                w);
          },
          [&] {
            storeVector(w, rowBuffer, {cst(0)});
            forLoop(cst(0), arith::MinSIOp::create(b, live, cst(lanes)), cst(1),
                    [&](Value l) {
                      memref::StoreOp::create(
                          b,
                          memref::LoadOp::create(b, rowBuffer, ValueRange{l}),
                          weights,
                          ValueRange{batch, row,
                                     arith::AddIOp::create(b, start, l)});
                    });
          });
    });
  }
}

void AdditiveLowering::emit() {
  Value query = op.getQuery();
  Value keys = dim(op.getKeys(), 1), rows = dim(query, 1);
  // Keys padded to whole tiles of the projection (zero columns).
  Value keyPad = paddedKeys(keys);
  allocateShared(rows, keyPad);
  acc = heap({kRows, valuePad});
  stats = heap({2, kRows});
  probs = heap({kRows, lanes});
  if (op.getWeights())
    scores = heap({kRows, ShapedType::kDynamic}, {keyPad});
  packNetwork();

  forLoop(cst(0), dim(query, 0), cst(1), [&](Value batch) {
    projectKeys(batch, keys);
    projectQueries(batch, rows);
    packRows(op.getValues(), batch, keys, values);
    forBlocks(cst(0), rows, kRows, [&](Value first, int64_t count) {
      rowBlock(batch, first, count, keys);
    });
  });
  for (Value buffer :
       {queryWeightT, scoreVector, keyWeightT, projectedKeysT, keyTile,
        projectedRows, values, acc, stats, probs, keep, scores, rowBuffer})
    if (buffer)
      memref::DeallocOp::create(b, buffer);
}

class AdditiveBackwardLowering : public AdditiveEmitter<AdditiveBackwardOp> {
public:
  using AdditiveEmitter::AdditiveEmitter;
  void emit();

private:
  /// Vᵀ [DvPad][SkPad] from `values` (V packed as f32 rows).
  void transposeValues(Value keyPad);
  /// The rows [first, first + count) (count <= kRows) of batch `batch`:
  /// their grad_qp, and their parts of the partial sums.
  void rowBlock(Value batch, Value first, int64_t count, Value keys);
  /// The part's partial sums into grad_kp, grad_values and grad_v.
  void storePart(Value batch, Value part, Value keys);

  Value valuesT;    // [DvPad][SkPad] Vᵀ
  Value gradRows;   // [rows][DvPad] dO
  Value probs;      // [kRows][SkPad] the scores, then P
  Value grads;      // [kRows][SkPad] dP, then dS
  Value stats;      // [2][kRows]: running max, sum
  Value gradKeysT;  // [APad][SkPad] Σ_i g (before the factor v)
  Value gradValues; // [SkPad][DvPad] Σ_i P·dO
  Value gradScore;  // [APad] Σ dS·t
};

void AdditiveBackwardLowering::transposeValues(Value keyPad) {
  forLoop(cst(0), keyPad, cst(lanes), [&](Value j0) {
    for (int64_t c0 = 0; c0 < valuePad; c0 += lanes) {
      SmallVector<Value> rows;
      for (int64_t r = 0; r < lanes; ++r)
        rows.push_back(loadVector(values, {add(j0, r), cst(c0)}));
      for (auto [c, column] : llvm::enumerate(transposeTile(rows)))
        storeVector(column, valuesT, {cst(c0 + c), j0});
    }
  });
}

void AdditiveBackwardLowering::rowBlock(Value batch, Value first, int64_t count,
                                        Value keys) {
  Value minusInf = f32Const(-kInf);
  startRows(stats, count);
  // Pass 1: the scores (kept) and each row's max and sum.
  forLoop(cst(0), keys, cst(lanes), [&](Value start) {
    SmallVector<Value> s = blockScores(first, count, start);
    Value inRange = keysInRange(start, keys);
    for (int64_t r = 0; r < count; ++r) {
      Value allowed = allowedKeys(batch, add(first, r), start, keys, inRange);
      Value score = arith::SelectOp::create(b, allowed, s[r], splat(minusInf));
      storeVector(score, probs, {cst(r), start});
      Value oldMax =
          memref::LoadOp::create(b, stats, ValueRange{cst(0), cst(r)});
      AttentionMath::MaxUpdate update = maths.updateMax(
          oldMax, vector::ReductionOp::create(
                      b, vector::CombiningKind::MAXIMUMF, score));
      Value p =
          maths.exp(arith::SubFOp::create(b, score, splat(update.reference)));
      Value oldSum =
          memref::LoadOp::create(b, stats, ValueRange{cst(1), cst(r)});
      memref::StoreOp::create(b, update.max, stats, ValueRange{cst(0), cst(r)});
      memref::StoreOp::create(
          b, maths.updateSum(oldSum, update.alpha, {horizontalSum(p)}), stats,
          ValueRange{cst(1), cst(r)});
    }
  });
  // P = exp(s − m) / sum: 0 at excluded keys (s = −inf) and on a row with
  // no allowed key (its m is −inf: the reference 0 keeps exp(−inf) = 0).
  SmallVector<Value> reference, inverse;
  for (int64_t r = 0; r < count; ++r) {
    Value max = memref::LoadOp::create(b, stats, ValueRange{cst(0), cst(r)});
    Value sum = memref::LoadOp::create(b, stats, ValueRange{cst(1), cst(r)});
    reference.push_back(splat(arith::SelectOp::create(
        b, arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, max, minusInf),
        f32Const(0.0f), max)));
    inverse.push_back(splat(arith::SelectOp::create(
        b,
        arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, sum,
                              f32Const(0.0f)),
        f32Const(0.0f), arith::DivFOp::create(b, f32Const(1.0f), sum))));
  }
  // Pass 2: P, dP = dO·Vᵀ (the rows share each Vᵀ load), Δ = Σ P·dP, and
  // dV += Pᵀ·dO key by key.
  SmallVector<Value> delta = forLoopWith(
      cst(0), keys, cst(lanes), SmallVector<Value>(count, zeroVector()),
      [&](Value start, ValueRange carried) {
        SmallVector<Value> p;
        for (int64_t r = 0; r < count; ++r) {
          p.push_back(arith::MulFOp::create(
              b,
              maths.exp(arith::SubFOp::create(
                  b, loadVector(probs, {cst(r), start}), reference[r])),
              inverse[r]));
          storeVector(p[r], probs, {cst(r), start});
        }
        SmallVector<Value> dp = broadcastProduct(
            cst(0), cst(valueDim), count,
            [&](int64_t r, Value c) {
              return memref::LoadOp::create(b, gradRows,
                                            ValueRange{add(first, r), c});
            },
            valuesT, start, SmallVector<Value>(count, zeroVector()));
        SmallVector<Value> next;
        for (int64_t r = 0; r < count; ++r) {
          // dP = 0 where P is 0: an excluded key's V may hold a NaN, which
          // must not reach Δ.
          Value dropped = arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ,
                                                p[r], zeroVector());
          dp[r] = arith::SelectOp::create(b, dropped, zeroVector(), dp[r]);
          storeVector(dp[r], grads, {cst(r), start});
          next.push_back(vector::FMAOp::create(b, p[r], dp[r], carried[r]));
        }
        forLoop(cst(0), cst(lanes), cst(1), [&](Value l) {
          Value j = arith::AddIOp::create(b, start, l);
          for (int64_t c = 0; c < valuePad; c += kTileVectors * lanes) {
            int64_t n = std::min(kTileVectors, (valuePad - c) / lanes);
            SmallVector<Value> rowAcc;
            for (int64_t v = 0; v < n; ++v)
              rowAcc.push_back(loadVector(gradValues, {j, cst(c + v * lanes)}));
            rowAcc = broadcastProduct(
                first, add(first, count), 1,
                [&](int64_t, Value i) {
                  return memref::LoadOp::create(
                      b, probs,
                      ValueRange{arith::SubIOp::create(b, i, first), j});
                },
                gradRows, cst(c), rowAcc);
            for (int64_t v = 0; v < n; ++v)
              storeVector(rowAcc[v], gradValues, {j, cst(c + v * lanes)});
          }
        });
        return next;
      });
  // dS = P·(dP − Δ), 0 where P is 0 (even where Δ is not finite).
  SmallVector<Value> rowDelta;
  for (int64_t r = 0; r < count; ++r)
    rowDelta.push_back(splat(horizontalSum(delta[r])));
  forLoop(cst(0), keys, cst(lanes), [&](Value start) {
    for (int64_t r = 0; r < count; ++r) {
      Value p = loadVector(probs, {cst(r), start});
      Value ds = arith::MulFOp::create(
          b, p,
          arith::SubFOp::create(b, loadVector(grads, {cst(r), start}),
                                rowDelta[r]));
      Value dropped =
          arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, p, zeroVector());
      storeVector(arith::SelectOp::create(b, dropped, zeroVector(), ds), grads,
                  {cst(r), start});
    }
  });
  // Pass 3: per a, g = dS·(1 − t²) and dS·t down the keys.
  bool masked = static_cast<bool>(op.getMask());
  Value gradQp = op.getGradQueryProjection();
  forLoop(cst(0), cst(attnDim), cst(1), [&](Value a) {
    SmallVector<Value> qp;
    for (int64_t r = 0; r < count; ++r)
      qp.push_back(splat(memref::LoadOp::create(b, projectedRows,
                                                ValueRange{add(first, r), a})));
    SmallVector<Value> sums = forLoopWith(
        cst(0), keys, cst(lanes), SmallVector<Value>(count + 1, zeroVector()),
        [&](Value start, ValueRange carried) {
          Value kp = loadVector(projectedKeysT, {a, start});
          Value column; // Σ_r g (the first row's g to start)
          SmallVector<Value> next;
          Value dv = carried[count];
          for (int64_t r = 0; r < count; ++r) {
            Value t =
                math::TanhOp::create(b, arith::AddFOp::create(b, qp[r], kp));
            Value ds = loadVector(grads, {cst(r), start});
            Value dt = arith::MulFOp::create(b, ds, t);
            Value g =
                vector::FMAOp::create(b, arith::NegFOp::create(b, dt), t, ds);
            if (masked) {
              // An excluded key's t may be NaN (a NaN in its keys): its
              // dS = 0 must give 0.
              Value live = arith::CmpFOp::create(b, arith::CmpFPredicate::UNE,
                                                 ds, zeroVector());
              dt = arith::SelectOp::create(b, live, dt, zeroVector());
              g = arith::SelectOp::create(b, live, g, zeroVector());
            }
            next.push_back(arith::AddFOp::create(b, carried[r], g));
            column =
                column ? arith::AddFOp::create(b, column, g).getResult() : g;
            dv = arith::AddFOp::create(b, dv, dt);
          }
          storeVector(arith::AddFOp::create(
                          b, loadVector(gradKeysT, {a, start}), column),
                      gradKeysT, {a, start});
          next.push_back(dv);
          return next;
        });
    Value weight = memref::LoadOp::create(b, scoreVector, ValueRange{a});
    for (int64_t r = 0; r < count; ++r)
      memref::StoreOp::create(
          b, arith::MulFOp::create(b, weight, horizontalSum(sums[r])), gradQp,
          ValueRange{batch, add(first, r), a});
    memref::StoreOp::create(
        b,
        arith::AddFOp::create(
            b, memref::LoadOp::create(b, gradScore, ValueRange{a}),
            horizontalSum(sums[count])),
        gradScore, ValueRange{a});
  });
}

void AdditiveBackwardLowering::storePart(Value batch, Value part, Value keys) {
  Value gradKp = op.getGradKeyProjection();
  // grad_kp = v·dkp: per 16 keys, 16x16 transposes of dkpᵀ into keyTile's
  // rows (one key each), then the keys' rows.
  forLoop(cst(0), keys, cst(lanes), [&](Value j0) {
    for (int64_t a0 = 0; a0 < attnPad; a0 += lanes) {
      SmallVector<Value> rows;
      for (int64_t r = 0; r < lanes; ++r)
        rows.push_back(loadVector(gradKeysT, {cst(a0 + r), j0}));
      Value weight = loadVector(scoreVector, {cst(a0)});
      for (auto [c, column] : llvm::enumerate(transposeTile(rows)))
        storeVector(arith::MulFOp::create(b, column, weight), keyTile,
                    {cst(c), cst(a0)});
    }
    Value count = arith::MinSIOp::create(b, cst(lanes),
                                         arith::SubIOp::create(b, keys, j0));
    forLoop(cst(0), count, cst(1), [&](Value c) {
      SmallVector<Value> row;
      for (int64_t a0 = 0; a0 < attnPad; a0 += lanes)
        row.push_back(loadVector(keyTile, {c, cst(a0)}));
      storeRowAs(gradKp, {batch, part, arith::AddIOp::create(b, j0, c)}, row,
                 attnDim, rowBuffer);
    });
  });
  forLoop(cst(0), keys, cst(1), [&](Value j) {
    SmallVector<Value> row;
    for (int64_t c = 0; c < valuePad; c += lanes)
      row.push_back(loadVector(gradValues, {j, cst(c)}));
    storeRowAs(op.getGradValues(), {batch, part, j}, row, valueDim, rowBuffer);
  });
  SmallVector<Value> row;
  for (int64_t a0 = 0; a0 < attnPad; a0 += lanes)
    row.push_back(loadVector(gradScore, {cst(a0)}));
  storeRowAs(op.getGradScoreVector(), {batch, part}, row, attnDim, rowBuffer);
}

void AdditiveBackwardLowering::emit() {
  Value query = op.getQuery();
  Value keys = dim(op.getKeys(), 1), rows = dim(query, 1);
  Value keyPad = paddedKeys(keys);
  allocateShared(rows, keyPad);
  valuesT = heap({valuePad, ShapedType::kDynamic}, {keyPad});
  gradRows = heap({ShapedType::kDynamic, valuePad}, {rows});
  probs = heap({kRows, ShapedType::kDynamic}, {keyPad});
  grads = heap({kRows, ShapedType::kDynamic}, {keyPad});
  stats = heap({2, kRows});
  gradKeysT = heap({attnPad, ShapedType::kDynamic}, {keyPad});
  gradValues = heap({ShapedType::kDynamic, valuePad}, {keyPad});
  gradScore = heap({attnPad});
  packNetwork();
  // Part p holds rows [min(Sq, p·R), min(Sq, (p + 1)·R)), R = ⌈Sq / P⌉.
  Value parts = dim(op.getGradKeyProjection(), 1);
  Value perPart = arith::CeilDivUIOp::create(b, rows, parts);

  forLoop(cst(0), dim(query, 0), cst(1), [&](Value batch) {
    projectKeys(batch, keys);
    projectQueries(batch, rows);
    packRows(op.getValues(), batch, keys, values);
    transposeValues(keyPad);
    packRows(op.getGradOutput(), batch, rows, gradRows);
    forLoop(cst(0), parts, cst(1), [&](Value part) {
      Value lo = arith::MinUIOp::create(
          b, arith::MulIOp::create(b, part, perPart), rows);
      Value hi = arith::MinUIOp::create(
          b, arith::AddIOp::create(b, lo, perPart), rows);
      forLoop(cst(0), cst(attnPad), cst(1), [&](Value a) {
        forLoop(cst(0), keyPad, cst(lanes), [&](Value j) {
          storeVector(zeroVector(), gradKeysT, {a, j});
        });
      });
      zeroRows(gradValues, cst(0), keyPad, valuePad);
      for (int64_t c = 0; c < attnPad; c += lanes)
        storeVector(zeroVector(), gradScore, {cst(c)});
      forBlocks(lo, hi, kRows, [&](Value first, int64_t count) {
        rowBlock(batch, first, count, keys);
      });
      storePart(batch, part, keys);
    });
  });
  for (Value buffer :
       {queryWeightT, scoreVector, keyWeightT, projectedKeysT, keyTile,
        projectedRows, values, keep, rowBuffer, valuesT, gradRows, probs, grads,
        stats, gradKeysT, gradValues, gradScore})
    memref::DeallocOp::create(b, buffer);
}

} // namespace

void mlir::attn::cpu::emitAdditiveBackward(ImplicitLocOpBuilder &b,
                                           AdditiveBackwardOp op,
                                           int64_t lanes) {
  AdditiveBackwardLowering(b, op, lanes).emit();
}

void mlir::attn::cpu::emitAdditive(ImplicitLocOpBuilder &b, AdditiveOp op,
                                   int64_t lanes) {
  AdditiveLowering(b, op, lanes).emit();
}
