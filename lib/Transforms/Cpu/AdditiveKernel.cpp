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
/// vectors of a projection's register tile.
constexpr int64_t kRows = 4;
constexpr int64_t kTileVectors = 4;

class AdditiveLowering : public VectorEmitter {
public:
  AdditiveLowering(ImplicitLocOpBuilder &b, AdditiveOp op, int64_t lanes)
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

  void emit();

private:
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
  /// V [SkPad][DvPad] of batch `batch` as f32.
  void packValues(Value batch, Value keys);
  /// The rows [first, first + count) (count <= kRows) of batch `batch`.
  void rowBlock(Value batch, Value first, int64_t count, Value keys);

  AdditiveOp op;
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
  Value acc;            // [kRows][DvPad]
  Value stats;          // [2][kRows]: running max, sum
  Value probs;          // [kRows][lanes]: a block's weights
  Value keep;           // [lanes]: a block's keep bits as 0 / −inf
  Value scores;         // [kRows][SkPad]: raw scores (weights out only)
  Value rowBuffer;      // [max(DvPad, SkPad)] for element-wise stores
};

void AdditiveLowering::projectKeys(Value batch, Value keys) {
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

void AdditiveLowering::packTransposed(Value weight, Value packed,
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

void AdditiveLowering::projectRows(Value source, Value batch, Value first,
                                   int64_t count, Value weightT, int64_t dims,
                                   Value into, Value intoFirst) {
  for (int64_t col = 0; col < attnPad; col += kTileVectors * lanes) {
    int64_t n = std::min(kTileVectors, (attnPad - col) / lanes);
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

void AdditiveLowering::projectQueries(Value batch, Value rows) {
  forBlocks(cst(0), rows, kRows, [&](Value first, int64_t count) {
    projectRows(op.getQuery(), batch, first, count, queryWeightT, queryDim,
                projectedRows, first);
  });
}

void AdditiveLowering::packValues(Value batch, Value keys) {
  Value value = op.getValues();
  zeroRows(values, keys, dim(values, 0), valuePad);
  ifUnitStride(
      value,
      [&](Value view) {
        forLoop(cst(0), keys, cst(1), [&](Value j) {
          for (int64_t c = 0; c < valuePad; c += lanes)
            storeVector(loadRowChunk(view, {batch, j}, c, valueDim), values,
                        {j, cst(c)});
        });
      },
      [&] {
        forLoop(cst(0), keys, cst(1), [&](Value j) {
          for (int64_t c = 0; c < valuePad; c += lanes)
            storeVector(zeroVector(), values, {j, cst(c)});
          forLoop(cst(0), cst(valueDim), cst(1), [&](Value c) {
            memref::StoreOp::create(b, loadF32(value, {batch, j, c}), values,
                                    ValueRange{j, c});
          });
        });
      });
}

void AdditiveLowering::rowBlock(Value batch, Value first, int64_t count,
                                Value keys) {
  Value minusInf = f32Const(-kInf);
  for (int64_t r = 0; r < count; ++r) {
    memref::StoreOp::create(b, minusInf, stats, ValueRange{cst(0), cst(r)});
    memref::StoreOp::create(b, f32Const(0.0f), stats,
                            ValueRange{cst(1), cst(r)});
    for (int64_t c = 0; c < valuePad; c += lanes)
      storeVector(zeroVector(), acc, {cst(r), cst(c)});
  }
  Value mask = op.getMask();
  SmallVector<int32_t> iota(lanes);
  for (int64_t l = 0; l < lanes; ++l)
    iota[l] = static_cast<int32_t>(l);
  auto i32Vec = VectorType::get({lanes}, b.getI32Type());
  Value lane = arith::ConstantOp::create(
      b, DenseElementsAttr::get(i32Vec, ArrayRef<int32_t>(iota)));
  Value keyCount = vector::BroadcastOp::create(
      b, i32Vec, arith::IndexCastOp::create(b, b.getI32Type(), keys));

  forLoop(cst(0), keys, cst(lanes), [&](Value start) {
    // The block's scores: Σ_a v[a] · tanh(qp[i,a] + kpᵀ[a, keys]).
    SmallVector<Value> s = forLoopWith(
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
    // Keys past Sk, and those a false keep bit excludes: −inf by a select
    // (a NaN score of an excluded key stays out).
    Value inRange = arith::CmpIOp::create(
        b, arith::CmpIPredicate::slt,
        arith::AddIOp::create(
            b, lane,
            vector::BroadcastOp::create(
                b, i32Vec,
                arith::IndexCastOp::create(b, b.getI32Type(), start))),
        keyCount);
    Value minusInfVec = splat(minusInf);
    MemRefType maskType =
        mask ? cast<MemRefType>(mask.getType()) : MemRefType();
    for (int64_t r = 0; r < count; ++r) {
      Value allowed = inRange;
      if (mask) {
        Value row = add(first, r);
        Value mb = maskType.getDimSize(0) == 1 ? cst(0) : batch;
        Value mq = maskType.getDimSize(1) == 1 ? cst(0) : row;
        forLoop(cst(0), cst(lanes), cst(1), [&](Value l) {
          Value key = arith::AddIOp::create(b, start, l);
          // Lanes past Sk read key Sk - 1's bit: masked by inRange anyway.
          Value at = arith::MinSIOp::create(
              b, key, arith::SubIOp::create(b, keys, cst(1)));
          Value bit = memref::LoadOp::create(b, mask, ValueRange{mb, mq, at});
          memref::StoreOp::create(
              b, arith::SelectOp::create(b, bit, f32Const(0.0f), minusInf),
              keep, ValueRange{l});
        });
        Value kept =
            arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ,
                                  loadVector(keep, {cst(0)}), zeroVector());
        allowed = arith::AndIOp::create(b, allowed, kept);
      }
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
      Value w = arith::MulFOp::create(
          b,
          maths.exp(arith::SubFOp::create(
              b, loadVector(scores, {cst(r), start}), splat(reference))),
          splat(inverse));
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
  Value keyPad = arith::MulIOp::create(
      b, arith::CeilDivUIOp::create(b, keys, cst(kTileVectors * lanes)),
      cst(kTileVectors * lanes));
  queryWeightT = heap({queryDim, attnPad});
  scoreVector = heap({attnPad});
  keyWeightT = heap({keyDim, attnPad});
  projectedKeysT = heap({attnPad, ShapedType::kDynamic}, {keyPad});
  keyTile = heap({lanes, attnPad});
  projectedRows = heap({ShapedType::kDynamic, attnPad}, {rows});
  values = heap({ShapedType::kDynamic, valuePad}, {keyPad});
  acc = heap({kRows, valuePad});
  stats = heap({2, kRows});
  probs = heap({kRows, lanes});
  keep = heap({lanes});
  if (op.getWeights())
    scores = heap({kRows, ShapedType::kDynamic}, {keyPad});
  Value bufferSize = arith::MaxUIOp::create(b, keyPad, cst(valuePad));
  rowBuffer = heap({ShapedType::kDynamic}, {bufferSize});

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

  forLoop(cst(0), dim(query, 0), cst(1), [&](Value batch) {
    projectKeys(batch, keys);
    projectQueries(batch, rows);
    packValues(batch, keys);
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

} // namespace

void mlir::attn::cpu::emitAdditive(ImplicitLocOpBuilder &b, AdditiveOp op,
                                   int64_t lanes) {
  AdditiveLowering(b, op, lanes).emit();
}
