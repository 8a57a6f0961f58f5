//===- LinearKernel.cpp - The CPU kernel of attn.linear -------------------===//
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
// are zero in every buffer and never stored.
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

class LinearLowering : public VectorEmitter {
public:
  LinearLowering(ImplicitLocOpBuilder &b, LinearOp op, int64_t lanes)
      : VectorEmitter(b, lanes), op(op) {
    headDim = cast<MemRefType>(op.getQuery().getType()).getDimSize(3);
    valueDim = cast<MemRefType>(op.getValue().getType()).getDimSize(3);
    headPad = llvm::alignTo(headDim, lanes);
    valuePad = llvm::alignTo(valueDim, lanes);
    chunk = llvm::alignTo(op.getChunkRows(), lanes);
    // 4 x 4 accumulators on AVX-512, 4 x 2 in AVX2's 16 registers (4 x 4
    // spilled there in every step).
    tileVectors = std::max<int64_t>(1, maxAccumulators(lanes) / kRows);
  }

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
  /// The state's chunk update: S += φ(K_c)ᵀ V_c, z += Σ_j φ(K_c)[j].
  void updateState(const Buffers &buf, Value count);
  /// O of rows [first, first + kRows) of the chunk at `start` (those below
  /// `count`) for query head `head`: with `causal`, the intra-chunk product
  /// through buf.scores too.
  void outputRows(const Buffers &buf, Value batch, Value head, Value start,
                  Value first, Value count, bool causal);

  LinearOp op;
  int64_t headDim, valueDim, headPad, valuePad, chunk;
  /// Column vectors of a register tile.
  int64_t tileVectors;
  Value outputRow; // [DvPad]: a row of O for element-wise stores
};

Value LinearLowering::phi(Value x, int64_t live) {
  Value zero = zeroVector();
  Value y;
  switch (op.getEffectiveFeatureMap()) {
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

void LinearLowering::packRows(Value source, Value batch, Value head,
                              Value first, Value count, Value rows,
                              int64_t width, bool withPhi) {
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

void LinearLowering::updateState(const Buffers &buf, Value count) {
  // S's rows d in blocks of kRows (then one at a time), its columns in
  // tiles of tileVectors vectors: S[d] += Σ_j φK[j][d] · V[j].
  forBlocks(cst(0), cst(headDim), kRows, [&](Value first, int64_t rows) {
    for (int64_t col = 0; col < valuePad; col += tileVectors * lanes) {
      int64_t n = std::min(tileVectors, (valuePad - col) / lanes);
      SmallVector<Value> acc;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t v = 0; v < n; ++v)
          acc.push_back(
              loadVector(buf.state, {arith::AddIOp::create(b, first, cst(r)),
                                     cst(col + v * lanes)}));
      acc = product(
          cst(0), count, rows,
          [&](int64_t r, Value j) -> Value {
            return memref::LoadOp::create(
                b, buf.keys,
                ValueRange{j, arith::AddIOp::create(b, first, cst(r))});
          },
          buf.values, col, acc);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t v = 0; v < n; ++v)
          storeVector(
              acc[r * n + v], buf.state,
              {arith::AddIOp::create(b, first, cst(r)), cst(col + v * lanes)});
    }
  });
  // z += Σ_j φK[j]: vectors along D.
  for (int64_t c = 0; c < headPad; c += lanes) {
    SmallVector<Value> sum = forLoopWith(
        cst(0), count, cst(1), {loadVector(buf.normalizer, {cst(c)})},
        [&](Value j, ValueRange carried) -> SmallVector<Value> {
          return {arith::AddFOp::create(b, carried[0],
                                        loadVector(buf.keys, {j, cst(c)}))};
        });
    storeVector(sum[0], buf.normalizer, {cst(c)});
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
  for (int64_t r = 0; r < kRows; ++r) {
    Value local = arith::AddIOp::create(b, first, cst(r));
    Value inChunk =
        arith::CmpIOp::create(b, arith::CmpIPredicate::slt, local, count);
    auto store = scf::IfOp::create(b, inChunk, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(store.thenBlock()->getTerminator());
    storeRowAs(op.getOutput(),
               {batch, head, arith::AddIOp::create(b, start, local)},
               ArrayRef<Value>(outputs).slice(r * (valuePad / lanes),
                                              valuePad / lanes),
               valueDim, outputRow);
  }
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
  outputRow = heap({valuePad});

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
                       buf.normalizer, buf.keysT, buf.scores, outputRow})
    if (buffer)
      memref::DeallocOp::create(b, buffer);
}

} // namespace

void mlir::attn::cpu::emitLinear(ImplicitLocOpBuilder &b, LinearOp op,
                                 int64_t lanes) {
  LinearLowering(b, op, lanes).emit();
}
