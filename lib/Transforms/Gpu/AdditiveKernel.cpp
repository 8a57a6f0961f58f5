//===- AdditiveKernel.cpp - attn.additive as a GPU kernel -----------------===//
//
// attn-lower-to-gpu's kernel for additive attention (docs/spec.md,
// "Additive attention"). One thread block per (tile of R =
// kAdditiveRows query rows, batch), kAdditiveThreads threads, f32 FMAs and
// tanh on shared memory (a BlockKernel):
//
//   qp = Q_tile · W_qᵀ            [R][A], once
//   per key tile of C keys:
//     kp = K_c · W_kᵀ              [C][A] (each query tile makes its own)
//     s[i][j] = Σ_a v[a] tanh(qp[i][a] + kp[j][a]) at allowed (i, j)
//     the online softmax per row (max m, sum l, the tile's weights p)
//     acc[i] = acc[i] · rescale + Σ_j p[i][j] V_c[j]
//   O[i] = acc[i] / l  (0 for a row with no allowed key)
//   with weights: the key tiles once more, W[i][j] = exp(s - m) / l.
//
// Shared memory: qp [R][A + 1], kp [C][A + 1] (the odd pitch puts the
// tile's keys in different banks), v [A], V_c [C][Dv], p [R][C],
// acc [R][Dv], m, l and the rescale [R]. An excluded key (masked, past Sk)
// scores -inf, gets weight 0 and brings none of its V in, whatever its key
// or value holds; a NaN at an allowed key reaches its row (the spec's
// rules). No atomics: each result is one thread's.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Gpu/AdditiveKernel.h"
#include "lib/Transforms/Gpu/BlockKernel.h"

#include <limits>

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::gpu_kernel;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

class AdditiveGpuKernel : public BlockKernel {
public:
  AdditiveGpuKernel(AdditiveOp op, bool host)
      : BlockKernel(host, kAdditiveThreads), op(op) {}

  LogicalResult build(func::FuncOp func, Block &into);

private:
  AdditiveOp op;
  static constexpr int64_t rowTile = kAdditiveRows, keyTile = kAdditiveKeys;
  int64_t queryDim = 0, attnDim = 0, pitch = 0;
  /// Of `globals`.
  const Global *query = nullptr, *keys = nullptr, *values = nullptr,
               *queryWeight = nullptr, *keyWeight = nullptr,
               *scoreVector = nullptr, *mask = nullptr, *output = nullptr,
               *weights = nullptr;
  /// The block's batch, first query row and rows (<= R).
  Value batch, firstRow, rows;
  /// Shared memory.
  Value qp, kp, scoreWeights, valueTile, probs, acc, rowMax, rowSum, rescale;

  int64_t carveTiles();
  /// One block's work.
  void emitBlock();
  /// out[r][a] = Σ_k x[b][first + r][k] · w[a][k] for r < count (0 past
  /// it), the projection of `count` rows of `x` (width `width`).
  void project(Value out, const Global &x, const Global &w, Value first,
               Value count, int64_t tileRows, int64_t width);
  /// The scores of the R x C tile's cells into `probs` (-inf where
  /// excluded), the keys [first, first + count) projected in kp.
  Value score(Value i, Value j, Value first, Value count);
  /// Σ_a v[a] tanh(qp[i][a] + kp[j][a]).
  Value tanhSum(Value i, Value j);
  /// Whether (row i of the tile, key first + j) is allowed.
  Value allowed(Value i, Value j, Value first, Value count);
  /// The online softmax's update of each row from the tile's scores.
  void updateRows();
  /// acc = acc · rescale + p V_c over the tile's keys.
  void accumulate();
  /// O = acc / l, 0 for a row with no allowed key.
  void storeOutputs();
  /// The key tiles once more: the weights exp(s - m) / l.
  void storeWeights();
  Value hasKeys(Value i) {
    // A NaN row (a NaN at an allowed key) has keys: its NaN goes out.
    return arith::CmpFOp::create(b(), arith::CmpFPredicate::UNE,
                                 loadShared(rowMax, {i}), f32(-kInf));
  }
};

int64_t AdditiveGpuKernel::carveTiles() {
  return carveShared({{&qp, {rowTile, pitch}},
                      {&kp, {keyTile, pitch}},
                      {&scoreWeights, {attnDim}},
                      {&valueTile, {keyTile, valueDim}},
                      {&probs, {rowTile, keyTile}},
                      {&acc, {rowTile, valueDim}},
                      {&rowMax, {rowTile}},
                      {&rowSum, {rowTile}},
                      {&rescale, {rowTile}}});
}

void AdditiveGpuKernel::project(Value out, const Global &x, const Global &w,
                                Value first, Value count, int64_t tileRows,
                                int64_t width) {
  forEachCell(tileRows, attnDim, [&](Value r, Value a) {
    Value p = orZero(lt(r, count), [&] {
      return forLoopWith(cst(0), cst(width), cst(1), ValueRange{f32(0.0f)},
                         [&](Value k, ValueRange sum) -> SmallVector<Value> {
                           return {fma(loadGlobal(x, {batch, add(first, r), k}),
                                       loadGlobal(w, {a, k}), sum[0])};
                         })[0];
    });
    storeShared(p, out, {r, a});
  });
}

Value AdditiveGpuKernel::allowed(Value i, Value j, Value first, Value count) {
  Value inside = andI(lt(i, rows), lt(j, count));
  if (!mask)
    return inside;
  return ifElse(
      inside, b().getI1Type(),
      [&] {
        return loadGlobal(*mask, {batch, add(firstRow, i), add(first, j)});
      },
      [&] { return arith::ConstantIntOp::create(b(), 0, 1).getResult(); });
}

Value AdditiveGpuKernel::tanhSum(Value i, Value j) {
  return forLoopWith(cst(0), cst(attnDim), cst(1), ValueRange{f32(0.0f)},
                     [&](Value a, ValueRange sum) -> SmallVector<Value> {
                       Value t = math::TanhOp::create(
                           b(),
                           arith::AddFOp::create(b(), loadShared(qp, {i, a}),
                                                 loadShared(kp, {j, a})));
                       return {fma(loadShared(scoreWeights, {a}), t, sum[0])};
                     })[0];
}

Value AdditiveGpuKernel::score(Value i, Value j, Value first, Value count) {
  return ifElse(
      allowed(i, j, first, count), b().getF32Type(),
      [&] { return tanhSum(i, j); }, [&] { return f32(-kInf); });
}

void AdditiveGpuKernel::updateRows() {
  forEach(rowTile, [&](Value i) {
    Value old = loadShared(rowMax, {i});
    Value max = forLoopWith(cst(0), cst(keyTile), cst(1), ValueRange{old},
                            [&](Value j, ValueRange m) -> SmallVector<Value> {
                              return {maxF(m[0], loadShared(probs, {i, j}))};
                            })[0];
    // No allowed key yet: weights 0, nothing rescaled (exp(-inf + inf)
    // would be NaN).
    Value none =
        arith::CmpFOp::create(b(), arith::CmpFPredicate::OEQ, max, f32(-kInf));
    Value base = select(none, f32(0.0f), max);
    Value sum = forLoopWith(
        cst(0), cst(keyTile), cst(1), ValueRange{f32(0.0f)},
        [&](Value j, ValueRange l) -> SmallVector<Value> {
          Value p = math::ExpOp::create(
              b(), arith::SubFOp::create(b(), loadShared(probs, {i, j}), base));
          storeShared(p, probs, {i, j});
          return {arith::AddFOp::create(b(), l[0], p)};
        })[0];
    Value factor =
        select(none, f32(1.0f),
               math::ExpOp::create(b(), arith::SubFOp::create(b(), old, max)));
    storeShared(factor, rescale, {i});
    storeShared(max, rowMax, {i});
    storeShared(fma(loadShared(rowSum, {i}), factor, sum), rowSum, {i});
  });
}

void AdditiveGpuKernel::accumulate() {
  forEachCell(rowTile, valueDim, [&](Value i, Value c) {
    Value start = arith::MulFOp::create(b(), loadShared(acc, {i, c}),
                                        loadShared(rescale, {i}));
    Value sum = forLoopWith(
        cst(0), cst(keyTile), cst(1), ValueRange{start},
        [&](Value j, ValueRange a) -> SmallVector<Value> {
          // A key of weight 0 (excluded, or underflowed) brings none of
          // its V in: 0 · NaN would.
          Value p = loadShared(probs, {i, j});
          Value zero = arith::CmpFOp::create(b(), arith::CmpFPredicate::OEQ, p,
                                             f32(0.0f));
          return {
              select(zero, a[0], fma(p, loadShared(valueTile, {j, c}), a[0]))};
        })[0];
    storeShared(sum, acc, {i, c});
  });
}

void AdditiveGpuKernel::storeOutputs() {
  forEachCell(rowTile, valueDim, [&](Value i, Value c) {
    when(lt(i, rows), [&] {
      Value o = orZero(hasKeys(i), [&] {
        return arith::DivFOp::create(b(), loadShared(acc, {i, c}),
                                     loadShared(rowSum, {i}));
      });
      storeGlobal(o, *output, {batch, add(firstRow, i), c});
    });
  });
}

void AdditiveGpuKernel::storeWeights() {
  Value seqK = keys->sizes[1];
  forLoop(cst(0), seqK, cst(keyTile), [&](Value first) {
    Value count = chunkRows(keyTile, first, seqK);
    project(kp, *keys, *keyWeight, first, count, keyTile, headDim);
    barrier();
    forEachCell(rowTile, keyTile, [&](Value i, Value j) {
      when(andI(lt(i, rows), lt(j, count)), [&] {
        // 0 at an excluded key, even in a NaN row.
        Value w = orZero(allowed(i, j, first, count), [&] {
          Value p = math::ExpOp::create(
              b(), arith::SubFOp::create(b(), tanhSum(i, j),
                                         loadShared(rowMax, {i})));
          return arith::DivFOp::create(b(), p, loadShared(rowSum, {i}));
        });
        storeGlobal(w, *weights, {batch, add(firstRow, i), add(first, j)});
      });
    });
    barrier();
  });
}

void AdditiveGpuKernel::emitBlock() {
  Value seqQ = query->sizes[1], seqK = keys->sizes[1];
  rows = chunkRows(rowTile, firstRow, seqQ);
  forEach(attnDim, [&](Value a) {
    storeShared(loadGlobal(*scoreVector, {a}), scoreWeights, {a});
  });
  forEach(rowTile, [&](Value i) {
    storeShared(f32(-kInf), rowMax, {i});
    storeShared(f32(0.0f), rowSum, {i});
  });
  forEachCell(rowTile, valueDim, [&](Value i, Value c) {
    storeShared(f32(0.0f), acc, {i, c});
  });
  project(qp, *query, *queryWeight, firstRow, rows, rowTile, queryDim);
  barrier();
  forLoop(cst(0), seqK, cst(keyTile), [&](Value first) {
    Value count = chunkRows(keyTile, first, seqK);
    project(kp, *keys, *keyWeight, first, count, keyTile, headDim);
    forEachCell(keyTile, valueDim, [&](Value j, Value c) {
      Value v = orZero(lt(j, count), [&] {
        return loadGlobal(*values, {batch, add(first, j), c});
      });
      storeShared(v, valueTile, {j, c});
    });
    barrier();
    forEachCell(rowTile, keyTile, [&](Value i, Value j) {
      storeShared(score(i, j, first, count), probs, {i, j});
    });
    barrier();
    updateRows();
    barrier();
    accumulate();
    barrier();
  });
  storeOutputs();
  if (weights)
    storeWeights();
}

LogicalResult AdditiveGpuKernel::build(func::FuncOp func, Block &into) {
  if (failed(checkArguments(func, op)))
    return failure();
  auto dim = [&](unsigned arg, unsigned d) {
    return cast<RankedTensorType>(func.getArgumentTypes()[arg]).getDimSize(d);
  };
  queryDim = dim(0, 2);
  headDim = dim(1, 2);
  valueDim = dim(2, 2);
  attnDim = dim(3, 0);
  if (ShapedType::isDynamic(queryDim) || ShapedType::isDynamic(headDim) ||
      ShapedType::isDynamic(valueDim) || ShapedType::isDynamic(attnDim))
    return op.emitOpError("attn-lower-to-gpu: a GPU additive attention "
                          "kernel needs static Dq, Dk, Dv and A");
  elementType =
      cast<RankedTensorType>(func.getArgumentTypes()[0]).getElementType();
  pitch = attnDim + 1;
  bool hasMask = op.getMask() != nullptr;
  bool hasWeights = op.getWeights() != nullptr;
  auto grid = [&]() -> std::array<Value, 3> {
    Value tiles =
        arith::CeilDivUIOp::create(b(), query->sizes[1], cst(rowTile));
    return {tiles, query->sizes[0], cst(1)};
  };
  buildKernel(
      func, into, rowTile, grid,
      [&] {
        query = &globals[0];
        keys = &globals[1];
        values = &globals[2];
        queryWeight = &globals[3];
        keyWeight = &globals[4];
        scoreVector = &globals[5];
        unsigned next = 6;
        if (hasMask)
          mask = &globals[next++];
        output = &globals[next++];
        if (hasWeights)
          weights = &globals[next];
        return carveTiles();
      },
      [&](Value x, Value y, Value) {
        firstRow = mul(x, cst(rowTile));
        batch = y;
        emitBlock();
      });
  return success();
}

} // namespace

LogicalResult
mlir::attn::gpu_kernel::buildAdditiveGpuKernel(func::FuncOp func, AdditiveOp op,
                                               gpu::GPUModuleOp gpuModule) {
  return AdditiveGpuKernel(op, /*host=*/false)
      .build(func, *gpuModule.getBody());
}

LogicalResult mlir::attn::gpu_kernel::buildAdditiveHostEmulation(
    func::FuncOp func, AdditiveOp op, ModuleOp module) {
  return AdditiveGpuKernel(op, /*host=*/true).build(func, *module.getBody());
}
