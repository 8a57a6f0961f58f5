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
                       Value normalizer, Value weights);
  /// The rows' vectors of a row block's products, row r's vectors at
  /// [r * (pad / lanes), (r + 1) * (pad / lanes)).
  using RowVectors = SmallVector<Value>;
  /// For the kRows rows from `first` of `left` ([C][depth pad], scalars
  /// broadcast) times `right` ([depth][pad]): init(r, col) then Σ_k
  /// left[first + r][k] · right[k][col..] over k < depth, by tiles of
  /// tileVectors vectors.
  RowVectors rowsTimes(Value left, Value first, int64_t depth, Value right,
                       int64_t pad, function_ref<Value(int64_t, int64_t)> init);
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
                                    Value weights) {
  // The state's rows d in blocks of kRows (then one at a time), its columns
  // in tiles of tileVectors vectors.
  forBlocks(cst(0), cst(headDim), kRows, [&](Value first, int64_t rows) {
    for (int64_t col = 0; col < valuePad; col += tileVectors * lanes) {
      int64_t n = std::min(tileVectors, (valuePad - col) / lanes);
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
  if (!normalizer)
    return;
  // The normalizer: vectors along D.
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

LinearEmitter::RowVectors
LinearEmitter::rowsTimes(Value left, Value first, int64_t depth, Value right,
                         int64_t pad,
                         function_ref<Value(int64_t, int64_t)> init) {
  int64_t vectors = pad / lanes;
  RowVectors rows(kRows * vectors);
  auto leftAt = [&](int64_t r, Value k) -> Value {
    return memref::LoadOp::create(
        b, left, ValueRange{arith::AddIOp::create(b, first, cst(r)), k});
  };
  for (int64_t col = 0; col < pad; col += tileVectors * lanes) {
    int64_t n = std::min(tileVectors, (pad - col) / lanes);
    SmallVector<Value> acc;
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t v = 0; v < n; ++v)
        acc.push_back(init(r, col + v * lanes));
    acc = product(cst(0), cst(depth), kRows, leftAt, right, col, acc);
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t v = 0; v < n; ++v)
        rows[r * vectors + col / lanes + v] = acc[r * n + v];
  }
  return rows;
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
      Value zero = zeroVector();
      forLoop(cst(0), cst(headPad), cst(1), [&](Value d) {
        for (int64_t c = 0; c < valuePad; c += lanes)
          storeVector(zero, buf.state, {d, cst(c)});
      });
      for (int64_t c = 0; c < headPad; c += lanes)
        storeVector(zero, buf.normalizer, {cst(c)});
      if (Value s0 = op.getStateIn()) {
        Value z0 = op.getNormalizerIn();
        forLoop(cst(0), cst(headDim), cst(1), [&](Value d) {
          forLoop(cst(0), cst(valueDim), cst(1), [&](Value c) {
            memref::StoreOp::create(
                b,
                memref::LoadOp::create(b, s0, ValueRange{batch, kvHead, d, c}),
                buf.state, ValueRange{d, c});
          });
          memref::StoreOp::create(
              b, memref::LoadOp::create(b, z0, ValueRange{batch, kvHead, d}),
              buf.normalizer, ValueRange{d});
        });
      }

      Value keys = dim(key, 2), rows = dim(query, 2);
      auto forChunks = [&](Value total, function_ref<void(Value, Value)> body) {
        forLoop(cst(0), total, cst(chunk), [&](Value start) {
          Value count = arith::MinSIOp::create(
              b, cst(chunk), arith::SubIOp::create(b, total, start));
          body(start, count);
        });
      };
      auto forRowBlocks = [&](Value count, function_ref<void(Value)> body) {
        forLoop(cst(0), count, cst(kRows), body);
      };
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
          forLoop(cst(0), cst(chunk), cst(1), [&](Value j) {
            forLoop(cst(0), cst(headPad), cst(1), [&](Value d) {
              memref::StoreOp::create(
                  b, memref::LoadOp::create(b, buf.keys, ValueRange{j, d}),
                  buf.keysT, ValueRange{d, j});
            });
          });
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
        Value z1 = op.getNormalizerOut();
        forLoop(cst(0), cst(headDim), cst(1), [&](Value d) {
          forLoop(cst(0), cst(valueDim), cst(1), [&](Value c) {
            memref::StoreOp::create(
                b, memref::LoadOp::create(b, buf.state, ValueRange{d, c}), s1,
                ValueRange{batch, kvHead, d, c});
          });
          memref::StoreOp::create(
              b, memref::LoadOp::create(b, buf.normalizer, ValueRange{d}), z1,
              ValueRange{batch, kvHead, d});
        });
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
                      op.getEffectiveFeatureMap(), kDefaultChunk),
        op(op), normalized(!op.getUnnormalized()) {}

  void emit();

private:
  /// Rows per chunk (the forward's default).
  static constexpr int64_t kDefaultChunk = 16;

  /// φ'(x) from φ(x) (a vector): min(φ, 1) for elu + 1 (1 above 0, exp(x)
  /// = φ below; NaN stays NaN); 1 where φ > 0 or NaN for relu (PyTorch's
  /// relu backward passes a NaN input's gradient). Not for the identity.
  Value slope(Value phi);
  /// A row block's vectors (kRows rows of DPad) times φ' of the rows of
  /// `rows` (φ, [C][DPad]) from `first`; nothing for the identity (φ' = 1).
  void timesSlope(RowVectors &block, Value rows, Value first);
  /// g and c of rows [first, first + kRows) of the packed chunk: the rows
  /// of `grads` (dO) become g in place, `coeff[row]` = c.
  void rowFactors(Value first);
  /// dQ of the rows [first, first + kRows) of the chunk at `start`.
  void queryGradients(Value batch, Value head, Value start, Value first,
                      Value count);
  /// dK and dV of the keys [first, first + kRows) of the chunk at `start`.
  void keyGradients(Value batch, Value kvHead, Value start, Value first,
                    Value count);
  /// `source` [B, Hkv, D, Dv] (or [B, Hkv, D] with `vector`) of the work
  /// item into `into` ([DPad][DvPad] or [DPad], zeroed first), transposed
  /// into [DvPad][DPad] with `transpose`.
  void loadState(Value source, Value batch, Value kvHead, Value into,
                 bool vector, bool transpose);
  /// `from` ([DPad][DvPad] or [DPad]) into `out` at [batch, kvHead].
  void storeState(Value from, Value out, Value batch, Value kvHead,
                  bool vector);

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

void LinearBackwardLowering::rowFactors(Value first) {
  for (int64_t r = 0; r < kRows; ++r) {
    Value row = arith::AddIOp::create(b, first, cst(r)), dot;
    for (int64_t c = 0; c < headPad; c += lanes) {
      Value term =
          arith::MulFOp::create(b, loadVector(buf.queries, {row, cst(c)}),
                                loadVector(buf.normalizer, {cst(c)}));
      dot = dot ? arith::AddFOp::create(b, dot, term) : term;
    }
    Value inverse = splat(arith::DivFOp::create(
        b, f32Const(1.0f),
        arith::AddFOp::create(b, horizontalSum(dot),
                              f32Const(op.getEffectiveEps()))));
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
    rowFactors(first);
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

void LinearBackwardLowering::loadState(Value source, Value batch, Value kvHead,
                                       Value into, bool vector,
                                       bool transpose) {
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

void LinearBackwardLowering::storeState(Value from, Value out, Value batch,
                                        Value kvHead, bool vector) {
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

  forLoop(cst(0), dim(key, 0), cst(1), [&](Value batch) {
    forLoop(cst(0), dim(key, 1), cst(1), [&](Value kvHead) {
      Value group = arith::DivUIOp::create(b, dim(query, 1), dim(key, 1));
      Value firstHead = arith::MulIOp::create(b, kvHead, group);
      loadState(op.getState(), batch, kvHead, buf.stateT, false, true);
      loadState(op.getNormalizer(), batch, kvHead, buf.normalizer, true, false);
      loadState(op.getGradFinalState(), batch, kvHead, buf.dState, false,
                false);
      loadState(op.getGradFinalNormalizer(), batch, kvHead, buf.dNormalizer,
                true, false);
      auto forChunks = [&](Value total, function_ref<void(Value, Value)> body) {
        forLoop(cst(0), total, cst(chunk), [&](Value start) {
          Value count = arith::MinSIOp::create(
              b, cst(chunk), arith::SubIOp::create(b, total, start));
          body(start, count);
        });
      };
      auto forRowBlocks = [&](Value count, function_ref<void(Value)> body) {
        forLoop(cst(0), count, cst(kRows), body);
      };

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
  for (Value buffer : {buf.queries, buf.grads, buf.outputs, buf.coeff, buf.keys,
                       buf.values, buf.stateT, buf.normalizer, buf.dState,
                       buf.dStateT, buf.dNormalizer, rowBuffer})
    if (buffer)
      memref::DeallocOp::create(b, buffer);
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
