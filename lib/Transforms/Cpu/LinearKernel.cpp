//===- LinearKernel.cpp - The CPU kernels of attn.linear and its backward -===//
//
// One bufferized attn.linear (a work item: a batch and a key/value head,
// with its group of G query heads, as attn-tile makes it) computes
//
//   O[i] = φ(Q[i]) · S_i / (φ(Q[i]) · z_i + eps)
//
// (unnormalized: O[i] = φ(Q[i]) · S_i, no denominator) over an f32 state
// S [D][Dv] and normalizer z [D] (docs/spec.md, "Linear attention"), a chunk of
// C rows at a time, with φ applied as the rows are packed into f32 buffers:
//
//   non-causal:  per chunk of keys:      S += φ(K_c)ᵀ V_c,  z += Σ φ(K_c)
//                per head, per chunk:    O_c = φ(Q_c) S / (φ(Q_c) z + eps)
//   causal:      per chunk:  φ(K_c)ᵀ packed (for A below), then per head
//                  per block of R rows:  A = φ(Q_r) φ(K_c)ᵀ, 0 where j > i
//                                        O_r = (A V_c + φ(Q_r) S)
//                                              / (rowsum A + φ(Q_r) z + eps)
//                then S += φ(K_c)ᵀ V_c,  z += Σ φ(K_c)
//
// Every product is a register tile of R rows by up to tileVectors vectors
// of columns, accumulated by FMAs that broadcast one scalar of the left
// operand: the state's rows (D) and the values' columns (Dv) are the
// vector dims, so no product needs a horizontal reduction except the
// normalizer's dot products (one per row). A chunk's rows past the sequence
// are zero in every buffer and never stored. attn.linear_backward's kernel
// (LinearBackwardLowering, below) is made of the same pieces.
//
//===----------------------------------------------------------------------===//
#include "lib/Support/Limits.h"
#include "lib/Transforms/Cpu/MicroKernels.h"
#include "lib/Transforms/Cpu/VectorEmitter.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::cpu;

namespace {

/// Rows of a register tile.
constexpr int64_t kRows = 4;

/// What the forward's and the backward's kernels share: the dims, φ, the
/// packing of rows as f32 and the register-tile products.
class LinearEmitter : public VectorEmitter {
protected:
  LinearEmitter(ImplicitLocOpBuilder &b, int64_t lanes, Value query,
                Value value, FeatureMap featureMap, int64_t chunkRows)
      : VectorEmitter(b, lanes), featureMap(featureMap) {
    headDim = cast<MemRefType>(query.getType()).getDimSize(3);
    valueDim = cast<MemRefType>(value.getType()).getDimSize(3);
    headPad = llvm::alignTo(headDim, lanes);
    valuePad = llvm::alignTo(valueDim, lanes);
    chunk = llvm::alignTo(chunkRows, lanes);
    // 4 x 4 accumulators on AVX-512, 4 x 2 in AVX2's 16 registers (4 x 4
    // spilled there in every step).
    tileVectors = std::max<int64_t>(1, maxAccumulators(lanes) / kRows);
  }

  Value heap(ArrayRef<int64_t> shape) { return heapBuffer(shape); }

  /// φ of a vector, lanes past `live` (the row's end) 0.
  Value phi(Value x, int64_t live);
  /// Rows [first, first + count) of `source` (at [batch, head]) into
  /// `rows` ([C][pad]) as f32, φ applied when `withPhi`; the buffer's rows
  /// from `count` to C zero.
  void packRows(Value source, Value batch, Value head, Value first, Value count,
                Value rows, int64_t width, bool withPhi);

  /// broadcastProduct at a static column.
  SmallVector<Value> product(Value lo, Value hi, int64_t rows,
                             function_ref<Value(int64_t, Value)> left,
                             Value right, int64_t col, ValueRange acc) {
    return broadcastProduct(lo, hi, rows, left, right, cst(col), acc);
  }
  /// A chunk's sum of outer products into a state: state[d] += Σ_{j <
  /// count} left[j][d] · right[j] (left [C][DPad], right [C][DvPad], state
  /// [DPad][DvPad]), and with `normalizer` normalizer += Σ_j w_j · left[j],
  /// w_j = weights[j] ([C]) or 1 without weights. The forward's S += φ(K)ᵀV,
  /// z += Σ φ(K); the backward's dS += φ(Q)ᵀg, dz += Σ c φ(Q).
  void accumulateState(Value left, Value right, Value count, Value state,
                       Value normalizer, Value weights) {
    accumulateState(left, right, count, state, normalizer, weights, headDim,
                    valuePad);
  }
  /// The same with left's width `rows` and right's `pad` (the state
  /// [rows pad][pad]): e.g. Sᵀ += Vᵀ φ(K).
  void accumulateState(Value left, Value right, Value count, Value state,
                       Value normalizer, Value weights, int64_t rows,
                       int64_t pad);
  /// The rows' vectors of a row block's products, row r's vectors at
  /// [r * (pad / lanes), (r + 1) * (pad / lanes)).
  using RowVectors = SmallVector<Value>;
  /// For the kRows rows from `first` of `left` ([C][depth pad], scalars
  /// broadcast) times `right` ([depth][pad]): init(r, col) then Σ_k
  /// left[first + r][k] · right[k][col..] over k < depth, by tiles of
  /// tileVectors vectors.
  RowVectors rowsTimes(Value left, Value first, int64_t depth, Value right,
                       int64_t pad,
                       function_ref<Value(int64_t, int64_t)> init) {
    return tileRows(pad, init, [&](int64_t col, SmallVector<Value> acc) {
      return product(
          cst(0), cst(depth), kRows,
          [&](int64_t r, Value k) -> Value {
            return memref::LoadOp::create(
                b, left,
                ValueRange{arith::AddIOp::create(b, first, cst(r)), k});
          },
          right, col, acc);
    });
  }
  /// The kRows rows' vectors of `pad` columns by tiles of tileVectors
  /// vectors: init(r, col) then terms(col, acc), which adds to a tile's
  /// accumulators (kRows x n at column col) and returns them.
  RowVectors
  tileRows(int64_t pad, function_ref<Value(int64_t, int64_t)> init,
           function_ref<SmallVector<Value>(int64_t, SmallVector<Value>)> terms);
  /// `from` [C][pad] into `to` [pad][C], by lanes x lanes register
  /// transposes.
  void transposeChunk(Value from, Value to, int64_t pad);
  /// normalizer += Σ_{j < count} w_j · left[j] (left [C][DPad]), w_j =
  /// weights[j] ([C]) or 1 without weights.
  void accumulateNormalizer(Value left, Value count, Value normalizer,
                            Value weights);
  /// `source` [B, Hkv, D, Dv] (or [B, Hkv, D] with `vector`) of the work
  /// item into `into` ([DPad][DvPad] or [DPad], zeroed first; zero alone
  /// without a source), transposed into [DvPad][DPad] with `transpose`.
  void loadState(Value source, Value batch, Value kvHead, Value into,
                 bool vector, bool transpose);
  /// `from` ([DPad][DvPad] or [DPad]) into `out` at [batch, kvHead].
  void storeState(Value from, Value out, Value batch, Value kvHead,
                  bool vector);
  /// body(start, count) for each chunk of C rows of `total`.
  void forChunks(Value total, function_ref<void(Value, Value)> body) {
    forLoop(cst(0), total, cst(chunk), [&](Value start) {
      Value count = arith::MinSIOp::create(
          b, cst(chunk), arith::SubIOp::create(b, total, start));
      body(start, count);
    });
  }
  /// body(first) for each block of kRows rows of a chunk's `count`.
  void forRowBlocks(Value count, function_ref<void(Value)> body) {
    forLoop(cst(0), count, cst(kRows), body);
  }
  /// Stores row `first + r` (r < kRows) of a block where it is below
  /// `count`, at [batch, head, start + first + r] of `memref`.
  void storeRows(Value memref, Value batch, Value head, Value start,
                 Value first, Value count, const RowVectors &rows, int64_t pad,
                 int64_t width);

  FeatureMap featureMap;
  int64_t headDim, valueDim, headPad, valuePad, chunk;
  /// Column vectors of a register tile.
  int64_t tileVectors;
  Value rowBuffer; // [max(DPad, DvPad)]: a row for element-wise stores
};

class LinearLowering : public LinearEmitter {
public:
  LinearLowering(ImplicitLocOpBuilder &b, LinearOp op, int64_t lanes)
      : LinearEmitter(b, lanes, op.getQuery(), op.getValue(),
                      op.getEffectiveFeatureMap(), op.getChunkRows()),
        op(op) {}

  void emit();

private:
  /// The f32 buffers of one work item (heap: the state alone is D x Dv).
  struct Buffers {
    Value queries;    // [C][DPad]  φ(Q_c) of one head
    Value keys;       // [C][DPad]  φ(K_c)
    Value keysT;      // [DPad][C]  φ(K_c)ᵀ (causal only)
    Value values;     // [C][DvPad] V_c
    Value scores;     // [R][C]     A of a block of rows (causal only)
    Value state;      // [DPad][DvPad]
    Value normalizer; // [DPad]
  };

  /// The state's chunk update: S += φ(K_c)ᵀ V_c, z += Σ_j φ(K_c)[j].
  void updateState(const Buffers &buf, Value count) {
    accumulateState(buf.keys, buf.values, count, buf.state, buf.normalizer,
                    Value());
  }
  /// O of rows [first, first + kRows) of the chunk at `start` (those below
  /// `count`) for query head `head`: with `causal`, the intra-chunk product
  /// through buf.scores too.
  void outputRows(const Buffers &buf, Value batch, Value head, Value start,
                  Value first, Value count, bool causal);

  LinearOp op;
};

Value LinearEmitter::phi(Value x, int64_t live) {
  Value zero = zeroVector();
  Value y;
  switch (featureMap) {
  case FeatureMap::elu_plus_one: {
    // elu(x) + 1 = x + 1 for x > 0, exp(x) otherwise (NaN: exp(NaN)).
    Value positive =
        arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, x, zero);
    y = arith::SelectOp::create(
        b, positive, arith::AddFOp::create(b, x, splat(f32Const(1.0f))),
        math::ExpOp::create(b, x));
    break;
  }
  case FeatureMap::relu:
    y = arith::MaximumFOp::create(b, x, zero);
    break;
  case FeatureMap::identity:
    y = x;
    break;
  }
  if (live < lanes)
    y = arith::SelectOp::create(b, liveLanes(live), y, zero);
  return y;
}

void LinearEmitter::packRows(Value source, Value batch, Value head, Value first,
                             Value count, Value rows, int64_t width,
                             bool withPhi) {
  int64_t pad = llvm::alignTo(width, lanes);
  auto finish = [&](Value r, ArrayRef<Value> chunks) {
    for (auto [i, v] : llvm::enumerate(chunks)) {
      int64_t live = std::min<int64_t>(lanes, width - int64_t(i) * lanes);
      storeVector(withPhi ? phi(v, live) : v, rows, {r, cst(i * lanes)});
    }
  };
  ifUnitStride(
      source,
      [&](Value view) {
        forLoop(cst(0), count, cst(1), [&](Value r) {
          Value row = arith::AddIOp::create(b, first, r);
          SmallVector<Value> chunks;
          for (int64_t c = 0; c < pad; c += lanes)
            chunks.push_back(loadRowChunk(view, {batch, head, row}, c, width));
          finish(r, chunks);
        });
      },
      [&] {
        // Element by element into the row (pad columns 0), then φ a vector
        // at a time.
        forLoop(cst(0), count, cst(1), [&](Value r) {
          Value row = arith::AddIOp::create(b, first, r);
          forLoop(cst(0), cst(width), cst(1), [&](Value c) {
            memref::StoreOp::create(b, loadF32(source, {batch, head, row, c}),
                                    rows, ValueRange{r, c});
          });
          forLoop(cst(width), cst(pad), cst(1), [&](Value c) {
            memref::StoreOp::create(b, f32Const(0.0f), rows, ValueRange{r, c});
          });
          if (!withPhi)
            return;
          SmallVector<Value> chunks;
          for (int64_t c = 0; c < pad; c += lanes)
            chunks.push_back(loadVector(rows, {r, cst(c)}));
          finish(r, chunks);
        });
      });
  zeroRows(rows, count, cst(chunk), pad);
}

void LinearEmitter::accumulateState(Value left, Value right, Value count,
                                    Value state, Value normalizer,
                                    Value weights, int64_t stateRows,
                                    int64_t pad) {
  // The state's rows d in blocks of kRows (then one at a time), its columns
  // in tiles of tileVectors vectors.
  forBlocks(cst(0), cst(stateRows), kRows, [&](Value first, int64_t rows) {
    for (int64_t col = 0; col < pad; col += tileVectors * lanes) {
      int64_t n = std::min(tileVectors, (pad - col) / lanes);
      SmallVector<Value> acc;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t v = 0; v < n; ++v)
          acc.push_back(
              loadVector(state, {arith::AddIOp::create(b, first, cst(r)),
                                 cst(col + v * lanes)}));
      acc = product(
          cst(0), count, rows,
          [&](int64_t r, Value j) -> Value {
            return memref::LoadOp::create(
                b, left,
                ValueRange{j, arith::AddIOp::create(b, first, cst(r))});
          },
          right, col, acc);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t v = 0; v < n; ++v)
          storeVector(
              acc[r * n + v], state,
              {arith::AddIOp::create(b, first, cst(r)), cst(col + v * lanes)});
    }
  });
  if (normalizer)
    accumulateNormalizer(left, count, normalizer, weights);
}

void LinearEmitter::accumulateNormalizer(Value left, Value count,
                                         Value normalizer, Value weights) {
  // Vectors along D.
  for (int64_t c = 0; c < headPad; c += lanes) {
    SmallVector<Value> sum = forLoopWith(
        cst(0), count, cst(1), {loadVector(normalizer, {cst(c)})},
        [&](Value j, ValueRange carried) -> SmallVector<Value> {
          Value row = loadVector(left, {j, cst(c)});
          if (!weights)
            return {arith::AddFOp::create(b, carried[0], row)};
          Value w = splat(memref::LoadOp::create(b, weights, ValueRange{j}));
          return {vector::FMAOp::create(b, w, row, carried[0])};
        });
    storeVector(sum[0], normalizer, {cst(c)});
  }
}

LinearEmitter::RowVectors LinearEmitter::tileRows(
    int64_t pad, function_ref<Value(int64_t, int64_t)> init,
    function_ref<SmallVector<Value>(int64_t, SmallVector<Value>)> terms) {
  int64_t vectors = pad / lanes;
  RowVectors rows(kRows * vectors);
  for (int64_t col = 0; col < pad; col += tileVectors * lanes) {
    int64_t n = std::min(tileVectors, (pad - col) / lanes);
    SmallVector<Value> acc;
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t v = 0; v < n; ++v)
        acc.push_back(init(r, col + v * lanes));
    acc = terms(col, acc);
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t v = 0; v < n; ++v)
        rows[r * vectors + col / lanes + v] = acc[r * n + v];
  }
  return rows;
}

void LinearEmitter::transposeChunk(Value from, Value to, int64_t pad) {
  for (int64_t j0 = 0; j0 < chunk; j0 += lanes)
    forLoop(cst(0), cst(pad), cst(lanes), [&](Value d0) {
      SmallVector<Value> rows;
      for (int64_t r = 0; r < lanes; ++r)
        rows.push_back(loadVector(from, {cst(j0 + r), d0}));
      for (auto [c, column] : llvm::enumerate(transposeTile(rows)))
        storeVector(column, to,
                    {arith::AddIOp::create(b, d0, cst(c)), cst(j0)});
    });
}

void LinearEmitter::storeRows(Value memref, Value batch, Value head,
                              Value start, Value first, Value count,
                              const RowVectors &rows, int64_t pad,
                              int64_t width) {
  int64_t vectors = pad / lanes;
  for (int64_t r = 0; r < kRows; ++r) {
    Value local = arith::AddIOp::create(b, first, cst(r));
    Value inChunk =
        arith::CmpIOp::create(b, arith::CmpIPredicate::slt, local, count);
    auto store = scf::IfOp::create(b, inChunk, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(store.thenBlock()->getTerminator());
    storeRowAs(memref, {batch, head, arith::AddIOp::create(b, start, local)},
               ArrayRef<Value>(rows).slice(r * vectors, vectors), width,
               rowBuffer);
  }
}

void LinearLowering::outputRows(const Buffers &buf, Value batch, Value head,
                                Value start, Value first, Value count,
                                bool causal) {
  auto queryAt = [&](int64_t r, Value d) -> Value {
    return memref::LoadOp::create(
        b, buf.queries, ValueRange{arith::AddIOp::create(b, first, cst(r)), d});
  };
  // The normalizer's part of each row's denominator: φ(Q[i]) · z (none
  // unnormalized).
  bool normalized = !op.getUnnormalized();
  SmallVector<Value> den(kRows);
  for (int64_t r = 0; r < kRows && normalized; ++r) {
    Value row = arith::AddIOp::create(b, first, cst(r)), dot;
    for (int64_t c = 0; c < headPad; c += lanes) {
      Value term =
          arith::MulFOp::create(b, loadVector(buf.queries, {row, cst(c)}),
                                loadVector(buf.normalizer, {cst(c)}));
      dot = dot ? arith::AddFOp::create(b, dot, term) : term;
    }
    den[r] = horizontalSum(dot);
  }
  // Causal: A = φ(Q_r) φ(K_c)ᵀ with j > i zeroed (a select: NaN there
  // stays out), into buf.scores; its row sums join the denominators.
  if (causal) {
    SmallVector<int32_t> iota(lanes);
    for (int64_t l = 0; l < lanes; ++l)
      iota[l] = static_cast<int32_t>(l);
    auto i32Vec = VectorType::get({lanes}, b.getI32Type());
    Value lane = arith::ConstantOp::create(
        b, DenseElementsAttr::get(i32Vec, ArrayRef<int32_t>(iota)));
    SmallVector<Value> rowSums(kRows);
    for (int64_t col = 0; col < chunk; col += tileVectors * lanes) {
      int64_t n = std::min(tileVectors, (chunk - col) / lanes);
      SmallVector<Value> acc(kRows * n, zeroVector());
      acc = product(cst(0), cst(headDim), kRows, queryAt, buf.keysT, col, acc);
      for (int64_t r = 0; r < kRows; ++r) {
        Value row = arith::IndexCastOp::create(
            b, b.getI32Type(), arith::AddIOp::create(b, first, cst(r)));
        for (int64_t v = 0; v < n; ++v) {
          Value keyIndex = arith::AddIOp::create(
              b, lane,
              vector::BroadcastOp::create(
                  b, i32Vec,
                  arith::ConstantIntOp::create(b, col + v * lanes, 32)));
          Value seen = arith::CmpIOp::create(
              b, arith::CmpIPredicate::sle, keyIndex,
              vector::BroadcastOp::create(b, i32Vec, row));
          Value a =
              arith::SelectOp::create(b, seen, acc[r * n + v], zeroVector());
          storeVector(a, buf.scores, {cst(r), cst(col + v * lanes)});
          if (normalized)
            rowSums[r] =
                rowSums[r] ? arith::AddFOp::create(b, rowSums[r], a) : a;
        }
      }
    }
    for (int64_t r = 0; r < kRows && normalized; ++r)
      den[r] = arith::AddFOp::create(b, den[r], horizontalSum(rowSums[r]));
  }
  // One division per row: the numerators are multiplied by its inverse.
  SmallVector<Value> inverse(kRows);
  for (int64_t r = 0; r < kRows && normalized; ++r)
    inverse[r] = splat(arith::DivFOp::create(
        b, f32Const(1.0f),
        arith::AddFOp::create(b, den[r], f32Const(op.getEffectiveEps()))));

  // The numerators, tiles of tileVectors vectors of Dv: A V_c, then
  // φ(Q_r) S; divided and stored.
  SmallVector<Value> outputs(kRows * (valuePad / lanes));
  for (int64_t col = 0; col < valuePad; col += tileVectors * lanes) {
    int64_t n = std::min(tileVectors, (valuePad - col) / lanes);
    SmallVector<Value> acc(kRows * n, zeroVector());
    if (causal) {
      // The keys before the block's rows, then its diagonal: key first + t
      // only for rows r >= t, so that a NaN in a later key's V never meets
      // an earlier row (0 · NaN).
      auto scoreAt = [&](int64_t r, Value j) -> Value {
        return memref::LoadOp::create(b, buf.scores, ValueRange{cst(r), j});
      };
      acc = product(cst(0), first, kRows, scoreAt, buf.values, col, acc);
      for (int64_t t = 0; t < kRows; ++t) {
        Value j = arith::AddIOp::create(b, first, cst(t));
        SmallVector<Value> columns;
        for (int64_t v = 0; v < n; ++v)
          columns.push_back(loadVector(buf.values, {j, cst(col + v * lanes)}));
        for (int64_t r = t; r < kRows; ++r) {
          Value scalar = splat(scoreAt(r, j));
          for (int64_t v = 0; v < n; ++v)
            acc[r * n + v] =
                vector::FMAOp::create(b, scalar, columns[v], acc[r * n + v]);
        }
      }
    }
    acc = product(cst(0), cst(headDim), kRows, queryAt, buf.state, col, acc);
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t v = 0; v < n; ++v)
        outputs[r * (valuePad / lanes) + col / lanes + v] =
            normalized ? arith::MulFOp::create(b, acc[r * n + v], inverse[r])
                       : acc[r * n + v];
  }
  storeRows(op.getOutput(), batch, head, start, first, count, outputs, valuePad,
            valueDim);
}

void LinearLowering::emit() {
  Value query = op.getQuery(), key = op.getKey(), value = op.getValue();
  bool causal = op.getCausal();
  Buffers buf;
  buf.queries = heap({chunk, headPad});
  buf.keys = heap({chunk, headPad});
  buf.values = heap({chunk, valuePad});
  buf.state = heap({headPad, valuePad});
  buf.normalizer = heap({headPad});
  if (causal) {
    buf.keysT = heap({headPad, chunk});
    buf.scores = heap({kRows, chunk});
  }
  rowBuffer = heap({std::max(headPad, valuePad)});

  forLoop(cst(0), dim(key, 0), cst(1), [&](Value batch) {
    forLoop(cst(0), dim(key, 1), cst(1), [&](Value kvHead) {
      Value group = arith::DivUIOp::create(b, dim(query, 1), dim(key, 1));
      Value firstHead = arith::MulIOp::create(b, kvHead, group);
      // S₀ and z₀, or 0; pad rows and columns 0.
      loadState(op.getStateIn(), batch, kvHead, buf.state, false, false);
      loadState(op.getNormalizerIn(), batch, kvHead, buf.normalizer, true,
                false);

      Value keys = dim(key, 2), rows = dim(query, 2);
      auto packKeysValues = [&](Value start, Value count) {
        packRows(key, batch, kvHead, start, count, buf.keys, headDim, true);
        packRows(value, batch, kvHead, start, count, buf.values, valueDim,
                 false);
      };
      auto forHeads = [&](function_ref<void(Value)> body) {
        forLoop(cst(0), group, cst(1),
                [&](Value g) { body(arith::AddIOp::create(b, firstHead, g)); });
      };

      if (causal) {
        forChunks(keys, [&](Value start, Value count) {
          packKeysValues(start, count);
          // φ(K_c)ᵀ for A's columns.
          transposeChunk(buf.keys, buf.keysT, headPad);
          forHeads([&](Value head) {
            packRows(query, batch, head, start, count, buf.queries, headDim,
                     true);
            forRowBlocks(count, [&](Value first) {
              outputRows(buf, batch, head, start, first, count, true);
            });
          });
          updateState(buf, count);
        });
      } else {
        forChunks(keys, [&](Value start, Value count) {
          packKeysValues(start, count);
          updateState(buf, count);
        });
        forHeads([&](Value head) {
          forChunks(rows, [&](Value start, Value count) {
            packRows(query, batch, head, start, count, buf.queries, headDim,
                     true);
            forRowBlocks(count, [&](Value first) {
              outputRows(buf, batch, head, start, first, count, false);
            });
          });
        });
      }

      // The final state, where asked.
      if (Value s1 = op.getStateOut()) {
        storeState(buf.state, s1, batch, kvHead, false);
        storeState(buf.normalizer, op.getNormalizerOut(), batch, kvHead, true);
      }
    });
  });
  for (Value buffer : {buf.queries, buf.keys, buf.values, buf.state,
                       buf.normalizer, buf.keysT, buf.scores, rowBuffer})
    if (buffer)
      memref::DeallocOp::create(b, buffer);
}

/// attn.linear_backward's kernel (docs/spec.md, "Gradient of linear
/// attention", non-causal): per work item, with Sᵀ and z in buffers,
///
///   per head, per chunk of rows:  g = dO / (φ(Q)·z + eps), c = −(g·O)
///     (a row at a time), dQ = (g Sᵀ + c z) ∘ φ'(Q) by register tiles,
///     then dS += φ(Q)ᵀ g, dz += Σ c φ(Q)
///   per chunk of keys:            dK = (V dSᵀ + dz) ∘ φ'(K), dV = φ(K) dS
///
/// so that every product broadcasts a scalar of a row against vectors of
/// D or Dv, as the forward's.
class LinearBackwardLowering : public LinearEmitter {
public:
  LinearBackwardLowering(ImplicitLocOpBuilder &b, LinearBackwardOp op,
                         int64_t lanes)
      : LinearEmitter(b, lanes, op.getQuery(), op.getValue(),
                      op.getEffectiveFeatureMap(),
                      ::attn::kLinearBackwardChunk),
        op(op), normalized(!op.getUnnormalized()) {}

  void emit();

private:
  /// φ'(x) from φ(x) (a vector): min(φ, 1) for elu + 1 (1 above 0, exp(x)
  /// = φ below; NaN stays NaN); 1 where φ > 0 or NaN for relu (PyTorch's
  /// relu backward passes a NaN input's gradient). Not for the identity.
  Value slope(Value phi);
  /// A row block's vectors (kRows rows of DPad) times φ' of the rows of
  /// `rows` (φ, [C][DPad]) from `first`; nothing for the identity (φ' = 1).
  void timesSlope(RowVectors &block, Value rows, Value first);
  /// g and c of rows [first, first + kRows) of the packed chunk, given
  /// each row's denominator (eps included): the rows of `grads` (dO)
  /// become g in place, `coeff[row]` = c.
  void rowFactors(Value first, function_ref<Value(int64_t)> denominator);
  /// φ(Q_r)·z of row `first + r` of the packed chunk (a scalar).
  Value normalizerDot(Value first, int64_t r);

  //===--- the causal form ------------------------------------------===//
  /// Per work item: forward in time for dQ (and each row's denominator,
  /// kept), backward in time for dK, dV and the state's gradients.
  void emitCausal(Value batch, Value kvHead, Value firstHead, Value group);
  /// scores[r][i] for the block's kRows rows from `first` of `left` against
  /// the chunk's columns i of `rightT` ([depth pad][C]): Σ_k left[first +
  /// r][k] · rightT[k][i] (plus add(r, col), a vector, where given), kept
  /// where keep(r, i) and 0 elsewhere (a select: a NaN there stays out).
  void blockScores(Value left, Value first, int64_t depth, Value rightT,
                   function_ref<Value(int64_t, int64_t)> add,
                   function_ref<Value(int64_t, Value)> keep, Value into);
  /// acc (kRows x n vectors at `col`) += Σ_k scores[r][k] · rows[k][col..]
  /// over the k each row r of the block from `first` pairs with: `lower`,
  /// k < first then the diagonal k = first + t, t <= r (a query row's keys);
  /// else k >= first + kRows (below `count`) then t >= r (a key's rows).
  SmallVector<Value> triangle(Value scores, Value rows, Value first,
                              Value count, bool lower, int64_t col,
                              SmallVector<Value> acc);

  /// dQ of the rows [first, first + kRows) of the chunk at `start`.
  void queryGradients(Value batch, Value head, Value start, Value first,
                      Value count);
  /// dK and dV of the keys [first, first + kRows) of the chunk at `start`.
  void keyGradients(Value batch, Value kvHead, Value start, Value first,
                    Value count);
  LinearBackwardOp op;
  bool normalized;
  struct {
    Value queries;     // [C][DPad]    φ(Q) of a chunk of one head
    Value grads;       // [C][DvPad]   dO, then g
    Value outputs;     // [C][DvPad]   O (normalized only)
    Value coeff;       // [C]          c (normalized only)
    Value keys;        // [C][DPad]    φ(K) of a chunk
    Value values;      // [C][DvPad]   V
    Value stateT;      // [DvPad][DPad] Sᵀ
    Value normalizer;  // [DPad]      z
    Value dState;      // [DPad][DvPad] dS
    Value dStateT;     // [DvPad][DPad] dSᵀ
    Value dNormalizer; // [DPad]     dz
    // Causal only:
    Value keysT, valuesT;   // [DPad][C], [DvPad][C]  φ(K_c)ᵀ, V_cᵀ
    Value queriesT, gradsT; // [DPad][C], [DvPad][C]  φ(Q_c)ᵀ, gᵀ
    Value scores, scores2;  // [R][C]  a block's A and B (or their ᵀ)
    Value keyGrads;         // [C][DPad]   dφ(K) of a chunk, summed
    Value valueGrads;       // [C][DvPad]  dV of a chunk, summed
    Value denominators;     // [G][Sq + C] each row's, from the first pass
  } buf;
};

Value LinearBackwardLowering::slope(Value phi) {
  switch (featureMap) {
  case FeatureMap::elu_plus_one:
    return arith::MinimumFOp::create(b, phi, splat(f32Const(1.0f)));
  case FeatureMap::relu: {
    Value kept =
        arith::CmpFOp::create(b, arith::CmpFPredicate::UGT, phi, zeroVector());
    return arith::SelectOp::create(b, kept, splat(f32Const(1.0f)),
                                   zeroVector());
  }
  case FeatureMap::identity:
    break;
  }
  llvm_unreachable("the identity's φ' is 1: no slope to multiply by");
}

void LinearBackwardLowering::timesSlope(RowVectors &block, Value rows,
                                        Value first) {
  if (featureMap == FeatureMap::identity)
    return;
  int64_t vectors = headPad / lanes;
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t v = 0; v < vectors; ++v) {
      Value phi = loadVector(
          rows, {arith::AddIOp::create(b, first, cst(r)), cst(v * lanes)});
      block[r * vectors + v] =
          arith::MulFOp::create(b, block[r * vectors + v], slope(phi));
    }
}

Value LinearBackwardLowering::normalizerDot(Value first, int64_t r) {
  Value row = arith::AddIOp::create(b, first, cst(r)), dot;
  for (int64_t c = 0; c < headPad; c += lanes) {
    Value term =
        arith::MulFOp::create(b, loadVector(buf.queries, {row, cst(c)}),
                              loadVector(buf.normalizer, {cst(c)}));
    dot = dot ? arith::AddFOp::create(b, dot, term) : term;
  }
  return horizontalSum(dot);
}

void LinearBackwardLowering::rowFactors(
    Value first, function_ref<Value(int64_t)> denominator) {
  for (int64_t r = 0; r < kRows; ++r) {
    Value row = arith::AddIOp::create(b, first, cst(r));
    Value inverse =
        splat(arith::DivFOp::create(b, f32Const(1.0f), denominator(r)));
    Value gDotO;
    for (int64_t c = 0; c < valuePad; c += lanes) {
      Value g = arith::MulFOp::create(b, loadVector(buf.grads, {row, cst(c)}),
                                      inverse);
      storeVector(g, buf.grads, {row, cst(c)});
      Value term =
          arith::MulFOp::create(b, g, loadVector(buf.outputs, {row, cst(c)}));
      gDotO = gDotO ? arith::AddFOp::create(b, gDotO, term) : term;
    }
    memref::StoreOp::create(b, arith::NegFOp::create(b, horizontalSum(gDotO)),
                            buf.coeff, ValueRange{row});
  }
}

void LinearBackwardLowering::queryGradients(Value batch, Value head,
                                            Value start, Value first,
                                            Value count) {
  if (normalized)
    rowFactors(first, [&](int64_t r) -> Value {
      return arith::AddFOp::create(b, normalizerDot(first, r),
                                   f32Const(op.getEffectiveEps()));
    });
  // dφ(Q) = g Sᵀ (+ c z), times φ'(Q).
  RowVectors rows = rowsTimes(
      buf.grads, first, valueDim, buf.stateT, headPad,
      [&](int64_t r, int64_t col) -> Value {
        if (!normalized)
          return zeroVector();
        Value c = memref::LoadOp::create(
            b, buf.coeff, ValueRange{arith::AddIOp::create(b, first, cst(r))});
        return arith::MulFOp::create(b, splat(c),
                                     loadVector(buf.normalizer, {cst(col)}));
      });
  timesSlope(rows, buf.queries, first);
  storeRows(op.getGradQuery(), batch, head, start, first, count, rows, headPad,
            headDim);
}

void LinearBackwardLowering::keyGradients(Value batch, Value kvHead,
                                          Value start, Value first,
                                          Value count) {
  // dφ(K) = V dSᵀ + dz, times φ'(K).
  RowVectors keyRows =
      rowsTimes(buf.values, first, valueDim, buf.dStateT, headPad,
                [&](int64_t, int64_t col) {
                  return loadVector(buf.dNormalizer, {cst(col)});
                });
  timesSlope(keyRows, buf.keys, first);
  storeRows(op.getGradKey(), batch, kvHead, start, first, count, keyRows,
            headPad, headDim);
  // dV = φ(K) dS.
  RowVectors valueRows =
      rowsTimes(buf.keys, first, headDim, buf.dState, valuePad,
                [&](int64_t, int64_t) { return zeroVector(); });
  storeRows(op.getGradValue(), batch, kvHead, start, first, count, valueRows,
            valuePad, valueDim);
}

void LinearEmitter::loadState(Value source, Value batch, Value kvHead,
                              Value into, bool vector, bool transpose) {
  Value zero = zeroVector();
  if (vector) {
    for (int64_t c = 0; c < headPad; c += lanes)
      storeVector(zero, into, {cst(c)});
  } else {
    int64_t rows = transpose ? valuePad : headPad;
    int64_t cols = transpose ? headPad : valuePad;
    forLoop(cst(0), cst(rows), cst(1), [&](Value r) {
      for (int64_t c = 0; c < cols; c += lanes)
        storeVector(zero, into, {r, cst(c)});
    });
  }
  if (!source)
    return;
  forLoop(cst(0), cst(headDim), cst(1), [&](Value d) {
    if (vector) {
      memref::StoreOp::create(
          b, memref::LoadOp::create(b, source, ValueRange{batch, kvHead, d}),
          into, ValueRange{d});
      return;
    }
    forLoop(cst(0), cst(valueDim), cst(1), [&](Value e) {
      Value x =
          memref::LoadOp::create(b, source, ValueRange{batch, kvHead, d, e});
      memref::StoreOp::create(b, x, into,
                              transpose ? ValueRange{e, d} : ValueRange{d, e});
    });
  });
}

void LinearEmitter::storeState(Value from, Value out, Value batch, Value kvHead,
                               bool vector) {
  forLoop(cst(0), cst(headDim), cst(1), [&](Value d) {
    if (vector) {
      memref::StoreOp::create(b, memref::LoadOp::create(b, from, ValueRange{d}),
                              out, ValueRange{batch, kvHead, d});
      return;
    }
    forLoop(cst(0), cst(valueDim), cst(1), [&](Value e) {
      memref::StoreOp::create(b,
                              memref::LoadOp::create(b, from, ValueRange{d, e}),
                              out, ValueRange{batch, kvHead, d, e});
    });
  });
}

void LinearBackwardLowering::emit() {
  Value query = op.getQuery(), key = op.getKey();
  buf.queries = heap({chunk, headPad});
  buf.grads = heap({chunk, valuePad});
  buf.keys = heap({chunk, headPad});
  buf.values = heap({chunk, valuePad});
  buf.stateT = heap({valuePad, headPad});
  buf.normalizer = heap({headPad});
  buf.dState = heap({headPad, valuePad});
  buf.dStateT = heap({valuePad, headPad});
  buf.dNormalizer = heap({headPad});
  if (normalized) {
    buf.outputs = heap({chunk, valuePad});
    buf.coeff = heap({chunk});
  }
  rowBuffer = heap({std::max(headPad, valuePad)});

  bool causal = op.getCausal();
  Value group = arith::DivUIOp::create(b, dim(query, 1), dim(key, 1));
  if (causal) {
    buf.keysT = heap({headPad, chunk});
    buf.valuesT = heap({valuePad, chunk});
    buf.queriesT = heap({headPad, chunk});
    buf.gradsT = heap({valuePad, chunk});
    buf.scores = heap({kRows, chunk});
    buf.scores2 = heap({kRows, chunk});
    buf.keyGrads = heap({chunk, headPad});
    buf.valueGrads = heap({chunk, valuePad});
    if (normalized)
      buf.denominators = heapBuffer(
          {ShapedType::kDynamic, ShapedType::kDynamic},
          {group, arith::AddIOp::create(b, dim(query, 2), cst(chunk))});
  }

  forLoop(cst(0), dim(key, 0), cst(1), [&](Value batch) {
    forLoop(cst(0), dim(key, 1), cst(1), [&](Value kvHead) {
      Value firstHead = arith::MulIOp::create(b, kvHead, group);
      if (causal) {
        emitCausal(batch, kvHead, firstHead, group);
        return;
      }
      loadState(op.getState(), batch, kvHead, buf.stateT, false, true);
      loadState(op.getNormalizer(), batch, kvHead, buf.normalizer, true, false);
      loadState(op.getGradFinalState(), batch, kvHead, buf.dState, false,
                false);
      loadState(op.getGradFinalNormalizer(), batch, kvHead, buf.dNormalizer,
                true, false);

      // The query rows of every head of the group: dQ, and their sums
      // into dS and dz.
      forLoop(cst(0), group, cst(1), [&](Value g) {
        Value head = arith::AddIOp::create(b, firstHead, g);
        forChunks(dim(query, 2), [&](Value start, Value count) {
          packRows(query, batch, head, start, count, buf.queries, headDim,
                   true);
          packRows(op.getGradOutput(), batch, head, start, count, buf.grads,
                   valueDim, false);
          if (normalized)
            packRows(op.getOutput(), batch, head, start, count, buf.outputs,
                     valueDim, false);
          forRowBlocks(count, [&](Value first) {
            queryGradients(batch, head, start, first, count);
          });
          accumulateState(buf.queries, buf.grads, count, buf.dState,
                          normalized ? buf.dNormalizer : Value(), buf.coeff);
        });
      });

      // dSᵀ, then the keys: dK and dV.
      forLoop(cst(0), cst(headPad), cst(1), [&](Value d) {
        forLoop(cst(0), cst(valuePad), cst(1), [&](Value e) {
          memref::StoreOp::create(
              b, memref::LoadOp::create(b, buf.dState, ValueRange{d, e}),
              buf.dStateT, ValueRange{e, d});
        });
      });
      forChunks(dim(key, 2), [&](Value start, Value count) {
        packRows(key, batch, kvHead, start, count, buf.keys, headDim, true);
        packRows(op.getValue(), batch, kvHead, start, count, buf.values,
                 valueDim, false);
        forRowBlocks(count, [&](Value first) {
          keyGradients(batch, kvHead, start, first, count);
        });
      });

      if (Value out = op.getGradInitialState()) {
        storeState(buf.dState, out, batch, kvHead, false);
        storeState(buf.dNormalizer, op.getGradInitialNormalizer(), batch,
                   kvHead, true);
      }
    });
  });
  for (Value buffer :
       {buf.queries, buf.grads,    buf.outputs,     buf.coeff,
        buf.keys,    buf.values,   buf.stateT,      buf.normalizer,
        buf.dState,  buf.dStateT,  buf.dNormalizer, buf.keysT,
        buf.valuesT, buf.queriesT, buf.gradsT,      buf.scores,
        buf.scores2, buf.keyGrads, buf.valueGrads,  buf.denominators,
        rowBuffer})
    if (buffer)
      memref::DeallocOp::create(b, buffer);
}

void LinearBackwardLowering::blockScores(
    Value left, Value first, int64_t depth, Value rightT,
    function_ref<Value(int64_t, int64_t)> add,
    function_ref<Value(int64_t, Value)> keep, Value into) {
  auto i32Vec = VectorType::get({lanes}, b.getI32Type());
  SmallVector<int32_t> iota(lanes);
  for (int64_t l = 0; l < lanes; ++l)
    iota[l] = static_cast<int32_t>(l);
  Value lane = arith::ConstantOp::create(
      b, DenseElementsAttr::get(i32Vec, ArrayRef<int32_t>(iota)));
  auto leftAt = [&](int64_t r, Value k) -> Value {
    return memref::LoadOp::create(
        b, left, ValueRange{arith::AddIOp::create(b, first, cst(r)), k});
  };
  for (int64_t col = 0; col < chunk; col += tileVectors * lanes) {
    int64_t n = std::min(tileVectors, (chunk - col) / lanes);
    SmallVector<Value> acc(kRows * n, zeroVector());
    acc = product(cst(0), cst(depth), kRows, leftAt, rightT, col, acc);
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t v = 0; v < n; ++v) {
        int64_t at = col + v * lanes;
        Value x = acc[r * n + v];
        if (add)
          x = arith::AddFOp::create(b, x, add(r, at));
        Value index = arith::AddIOp::create(
            b, lane,
            vector::BroadcastOp::create(
                b, i32Vec, arith::ConstantIntOp::create(b, at, 32)));
        x = arith::SelectOp::create(b, keep(r, index), x, zeroVector());
        storeVector(x, into, {cst(r), cst(at)});
      }
  }
}

SmallVector<Value> LinearBackwardLowering::triangle(Value scores, Value rows,
                                                    Value first, Value count,
                                                    bool lower, int64_t col,
                                                    SmallVector<Value> acc) {
  int64_t n = acc.size() / kRows;
  auto scoreAt = [&](int64_t r, Value k) -> Value {
    return memref::LoadOp::create(b, scores, ValueRange{cst(r), k});
  };
  if (lower)
    acc = product(cst(0), first, kRows, scoreAt, rows, col, acc);
  else
    acc = product(arith::AddIOp::create(b, first, cst(kRows)), count, kRows,
                  scoreAt, rows, col, acc);
  // The block's diagonal: only the pairs on the right side of it, so that
  // a NaN in a row past (or before) a row's own position never meets it
  // (0 · NaN).
  for (int64_t t = 0; t < kRows; ++t) {
    Value k = arith::AddIOp::create(b, first, cst(t));
    SmallVector<Value> columns;
    for (int64_t v = 0; v < n; ++v)
      columns.push_back(loadVector(rows, {k, cst(col + v * lanes)}));
    for (int64_t r = 0; r < kRows; ++r) {
      if (lower ? r < t : r > t)
        continue;
      Value scalar = splat(scoreAt(r, k));
      for (int64_t v = 0; v < n; ++v)
        acc[r * n + v] =
            vector::FMAOp::create(b, scalar, columns[v], acc[r * n + v]);
    }
  }
  return acc;
}

void LinearBackwardLowering::emitCausal(Value batch, Value kvHead,
                                        Value firstHead, Value group) {
  Value query = op.getQuery(), key = op.getKey();
  Value seq = dim(query, 2);
  auto i32Vec = VectorType::get({lanes}, b.getI32Type());
  auto i32Splat = [&](Value index) -> Value {
    return vector::BroadcastOp::create(
        b, i32Vec, arith::IndexCastOp::create(b, b.getI32Type(), index));
  };
  auto plus = [&](Value x, int64_t v) -> Value {
    return arith::AddIOp::create(b, x, cst(v));
  };
  auto forHeads = [&](function_ref<void(Value, Value)> body) {
    forLoop(cst(0), group, cst(1),
            [&](Value g) { body(g, arith::AddIOp::create(b, firstHead, g)); });
  };
  auto packKeysValues = [&](Value start, Value count) {
    packRows(key, batch, kvHead, start, count, buf.keys, headDim, true);
    packRows(op.getValue(), batch, kvHead, start, count, buf.values, valueDim,
             false);
  };
  auto packRowsOf = [&](Value head, Value start, Value count) {
    packRows(query, batch, head, start, count, buf.queries, headDim, true);
    packRows(op.getGradOutput(), batch, head, start, count, buf.grads, valueDim,
             false);
    if (normalized)
      packRows(op.getOutput(), batch, head, start, count, buf.outputs, valueDim,
               false);
  };
  auto coeffAt = [&](Value first, int64_t r) -> Value {
    return memref::LoadOp::create(b, buf.coeff, ValueRange{plus(first, r)});
  };
  auto denominatorAt = [&](Value g, Value start, Value first, int64_t r) {
    return SmallVector<Value, 2>{
        g, arith::AddIOp::create(b, start, plus(first, r))};
  };
  int64_t keyVectors = headPad / lanes, valueVectors = valuePad / lanes;

  // Forward in time: S₀ and z₀ plus the chunks before (Sᵀ, for g Sᵀ).
  loadState(op.getState(), batch, kvHead, buf.stateT, false, true);
  loadState(op.getNormalizer(), batch, kvHead, buf.normalizer, true, false);
  forChunks(seq, [&](Value start, Value count) {
    packKeysValues(start, count);
    transposeChunk(buf.keys, buf.keysT, headPad);
    transposeChunk(buf.values, buf.valuesT, valuePad);
    forHeads([&](Value g, Value head) {
      packRowsOf(head, start, count);
      forRowBlocks(count, [&](Value first) {
        // The keys j <= i of the chunk.
        auto seen = [&](int64_t r, Value index) -> Value {
          return arith::CmpIOp::create(b, arith::CmpIPredicate::sle, index,
                                       i32Splat(plus(first, r)));
        };
        if (normalized) {
          // den = φ(Q)·z + rowsum A + eps, A = φ(Q) φ(K)ᵀ; kept for the
          // second pass.
          blockScores(buf.queries, first, headDim, buf.keysT, {}, seen,
                      buf.scores);
          rowFactors(first, [&](int64_t r) -> Value {
            Value sum;
            for (int64_t c = 0; c < chunk; c += lanes) {
              Value a = loadVector(buf.scores, {cst(r), cst(c)});
              sum = sum ? arith::AddFOp::create(b, sum, a) : a;
            }
            Value den = arith::AddFOp::create(
                b,
                arith::AddFOp::create(b, normalizerDot(first, r),
                                      horizontalSum(sum)),
                f32Const(op.getEffectiveEps()));
            memref::StoreOp::create(b, den, buf.denominators,
                                    denominatorAt(g, start, first, r));
            return den;
          });
        }
        // B = g Vᵀ + c over the keys j <= i; dφ(Q) = B φ(K) + g Sᵀ + c z.
        blockScores(
            buf.grads, first, valueDim, buf.valuesT,
            [&](int64_t r, int64_t) -> Value {
              return normalized ? splat(coeffAt(first, r)) : zeroVector();
            },
            seen, buf.scores2);
        RowVectors rows = tileRows(
            headPad,
            [&](int64_t r, int64_t col) -> Value {
              if (!normalized)
                return zeroVector();
              return arith::MulFOp::create(
                  b, splat(coeffAt(first, r)),
                  loadVector(buf.normalizer, {cst(col)}));
            },
            [&](int64_t col, SmallVector<Value> acc) {
              acc = product(
                  cst(0), cst(valueDim), kRows,
                  [&](int64_t r, Value e) -> Value {
                    return memref::LoadOp::create(
                        b, buf.grads, ValueRange{plus(first, r), e});
                  },
                  buf.stateT, col, acc);
              return triangle(buf.scores2, buf.keys, first, count,
                              /*lower=*/true, col, acc);
            });
        timesSlope(rows, buf.queries, first);
        storeRows(op.getGradQuery(), batch, head, start, first, count, rows,
                  headPad, headDim);
      });
    });
    // The chunk joins the state: Sᵀ += Vᵀ φ(K), z += Σ φ(K).
    accumulateState(buf.values, buf.keys, count, buf.stateT, Value(), Value(),
                    valueDim, headPad);
    accumulateNormalizer(buf.keys, count, buf.normalizer, Value());
  });

  // Backward in time: dS and dz of the rows after each chunk (dS_fin and
  // dz_fin first), as dS and dSᵀ.
  loadState(op.getGradFinalState(), batch, kvHead, buf.dState, false, false);
  loadState(op.getGradFinalState(), batch, kvHead, buf.dStateT, false, true);
  loadState(op.getGradFinalNormalizer(), batch, kvHead, buf.dNormalizer, true,
            false);
  Value chunks = arith::CeilDivUIOp::create(b, seq, cst(chunk));
  forLoop(cst(0), chunks, cst(1), [&](Value n) {
    Value last = arith::SubIOp::create(b, chunks, cst(1));
    Value start =
        arith::MulIOp::create(b, arith::SubIOp::create(b, last, n), cst(chunk));
    Value count = arith::MinSIOp::create(b, cst(chunk),
                                         arith::SubIOp::create(b, seq, start));
    packKeysValues(start, count);
    // The rows of later chunks: dφ(K) = V dSᵀ + dz, dV = φ(K) dS.
    forRowBlocks(count, [&](Value first) {
      RowVectors keyRows =
          rowsTimes(buf.values, first, valueDim, buf.dStateT, headPad,
                    [&](int64_t, int64_t col) {
                      return loadVector(buf.dNormalizer, {cst(col)});
                    });
      RowVectors valueRows =
          rowsTimes(buf.keys, first, headDim, buf.dState, valuePad,
                    [&](int64_t, int64_t) { return zeroVector(); });
      for (int64_t r = 0; r < kRows; ++r) {
        for (int64_t v = 0; v < keyVectors; ++v)
          storeVector(keyRows[r * keyVectors + v], buf.keyGrads,
                      {plus(first, r), cst(v * lanes)});
        for (int64_t v = 0; v < valueVectors; ++v)
          storeVector(valueRows[r * valueVectors + v], buf.valueGrads,
                      {plus(first, r), cst(v * lanes)});
      }
    });
    // Each head's rows of the chunk: the keys' pairs with rows i >= j.
    forHeads([&](Value g, Value head) {
      packRowsOf(head, start, count);
      if (normalized)
        forRowBlocks(count, [&](Value first) {
          rowFactors(first, [&](int64_t r) -> Value {
            return memref::LoadOp::create(b, buf.denominators,
                                          denominatorAt(g, start, first, r));
          });
        });
      transposeChunk(buf.queries, buf.queriesT, headPad);
      transposeChunk(buf.grads, buf.gradsT, valuePad);
      forRowBlocks(count, [&](Value first) {
        // The rows i >= j (and below count) of key j = first + r.
        auto seenBy = [&](int64_t r, Value index) -> Value {
          Value after = arith::CmpIOp::create(b, arith::CmpIPredicate::sge,
                                              index, i32Splat(plus(first, r)));
          Value inside = arith::CmpIOp::create(b, arith::CmpIPredicate::slt,
                                               index, i32Splat(count));
          return arith::AndIOp::create(b, after, inside);
        };
        // Aᵀ = φ(K) φ(Q)ᵀ and Bᵀ = V gᵀ + c; dφ(K) += Bᵀ φ(Q), dV += Aᵀ g.
        blockScores(buf.keys, first, headDim, buf.queriesT, {}, seenBy,
                    buf.scores);
        blockScores(
            buf.values, first, valueDim, buf.gradsT,
            [&](int64_t, int64_t col) -> Value {
              return normalized ? loadVector(buf.coeff, {cst(col)})
                                : zeroVector();
            },
            seenBy, buf.scores2);
        auto addTo = [&](Value sums, Value scores, Value rows, int64_t pad) {
          RowVectors block = tileRows(
              pad,
              [&](int64_t r, int64_t col) {
                return loadVector(sums, {plus(first, r), cst(col)});
              },
              [&](int64_t col, SmallVector<Value> acc) {
                return triangle(scores, rows, first, count, /*lower=*/false,
                                col, acc);
              });
          for (int64_t r = 0; r < kRows; ++r)
            for (int64_t v = 0; v < pad / lanes; ++v)
              storeVector(block[r * (pad / lanes) + v], sums,
                          {plus(first, r), cst(v * lanes)});
        };
        addTo(buf.keyGrads, buf.scores2, buf.queries, headPad);
        addTo(buf.valueGrads, buf.scores, buf.grads, valuePad);
      });
      // The chunk's rows join dS, dSᵀ and dz.
      accumulateState(buf.queries, buf.grads, count, buf.dState,
                      normalized ? buf.dNormalizer : Value(), buf.coeff);
      accumulateState(buf.grads, buf.queries, count, buf.dStateT, Value(),
                      Value(), valueDim, headPad);
    });
    // dK = dφ(K) ∘ φ'(K) and dV of the chunk's keys.
    forRowBlocks(count, [&](Value first) {
      RowVectors keyRows(kRows * keyVectors), valueRows(kRows * valueVectors);
      for (int64_t r = 0; r < kRows; ++r) {
        for (int64_t v = 0; v < keyVectors; ++v)
          keyRows[r * keyVectors + v] =
              loadVector(buf.keyGrads, {plus(first, r), cst(v * lanes)});
        for (int64_t v = 0; v < valueVectors; ++v)
          valueRows[r * valueVectors + v] =
              loadVector(buf.valueGrads, {plus(first, r), cst(v * lanes)});
      }
      timesSlope(keyRows, buf.keys, first);
      storeRows(op.getGradKey(), batch, kvHead, start, first, count, keyRows,
                headPad, headDim);
      storeRows(op.getGradValue(), batch, kvHead, start, first, count,
                valueRows, valuePad, valueDim);
    });
  });
  if (Value out = op.getGradInitialState()) {
    storeState(buf.dState, out, batch, kvHead, false);
    storeState(buf.dNormalizer, op.getGradInitialNormalizer(), batch, kvHead,
               true);
  }
}

} // namespace

void mlir::attn::cpu::emitLinear(ImplicitLocOpBuilder &b, LinearOp op,
                                 int64_t lanes) {
  LinearLowering(b, op, lanes).emit();
}

void mlir::attn::cpu::emitLinearBackward(ImplicitLocOpBuilder &b,
                                         LinearBackwardOp op, int64_t lanes) {
  LinearBackwardLowering(b, op, lanes).emit();
}
