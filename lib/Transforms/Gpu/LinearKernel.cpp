//===- LinearKernel.cpp - attn.linear as a GPU kernel ---------------------===//
//
// attn-lower-to-gpu's kernel for linear attention (docs/spec.md, "Linear
// attention"). One thread block per (value column tile, key/value head,
// batch), kLinearThreads threads, f32 FMAs on shared memory. The block
// keeps its key/value head's state for its E = kLinearColumns value
// columns, S [D][E] and z [D], in shared memory and walks the sequence in
// chunks of C rows (the op's chunk):
//
//   non-causal   per key chunk:  S += φ(K_c)ᵀ V_c, z += Σ_j φ(K_c)[j];
//                then per query head h of the GQA group and query chunk:
//                O_c = φ(Q_c) S / (φ(Q_c) z + eps)
//   causal       per chunk, per query head h of the group:
//                A = φ(Q_c) φ(K_c)ᵀ on j ≤ i,
//                O_c = (A V_c + φ(Q_c) S) / (Σ_j A + φ(Q_c) z + eps);
//                then S += φ(K_c)ᵀ V_c, z += Σ_j φ(K_c)[j]
//
// Shared memory: φ(Q_c) and φ(K_c) [C][D + 1] (the odd pitch puts A's key
// rows in different banks), V_c [C][E], A [C][C] (causal), S [D][E], z [D].
// Every step's results are each one thread's (no atomics, the same bits
// for any grid), and the causal sums run over j ≤ i only, so that a NaN
// past the diagonal stays there (the spec's rule). Rows of a chunk past
// the sequence hold zeros, not φ(0).
//
// Parameters as attn-lower-to-gpu's attention kernels: per tensor argument
// a 1-D memref, its sizes and its element strides.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Gpu/LinearKernel.h"
#include "lib/Transforms/Gpu/BlockKernel.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::gpu_kernel;

namespace {

class LinearGpuKernel : public BlockKernel {
public:
  LinearGpuKernel(LinearOp op, bool host)
      : BlockKernel(host, kLinearThreads), op(op) {}

  /// Builds the kernel (a gpu.func, or the host emulation's func.func) of
  /// `func` at the end of `into`.
  LogicalResult build(func::FuncOp func, Block &into);

private:
  LinearOp op;
  bool causal = false, normalized = true, hasFinal = false;
  FeatureMap featureMap = FeatureMap::elu_plus_one;
  int64_t chunk = 0, pitch = 0;
  /// Of `globals`: Q, K, V, [S₀, z₀], O, [S₁, z₁].
  const Global *query = nullptr, *key = nullptr, *value = nullptr,
               *output = nullptr, *state0 = nullptr, *normalizer0 = nullptr,
               *state1 = nullptr, *normalizer1 = nullptr;
  /// The block's batch, key/value head and first value column.
  Value batch, kvHead, firstColumn, columnTile;
  /// Shared memory: φ(Q_c), φ(K_c), V_c, A, S, z.
  Value phiQ, phiK, values, scores, state, normalizer;

  //===--- small builders ---------------------------------------------===//
  Value phi(Value x);

  //===--- the kernel's steps -----------------------------------------===//
  /// The shared-memory tiles (phiQ ... normalizer); returns their bytes.
  int64_t carveTiles();
  void setBlock(Value x, Value y, Value z) {
    columnTile = x;
    firstColumn = mul(x, cst(kLinearColumns));
    kvHead = y;
    batch = z;
  }
  /// One block's work: the state, the chunks, the outputs.
  void emitBlock();
  /// Rows [first, first + rows) of `g` at head `head` into `tile` ([C][*])
  /// as f32, columns [col0, col0 + width), φ applied when `withPhi`; rows
  /// and columns past the tensor's end zero.
  void stageRows(Value tile, const Global &g, Value head, Value first,
                 Value rows, Value col0, int64_t width, bool withPhi);
  /// S and z from S₀, z₀ (zero without them).
  void loadState();
  /// S₁, z₁ from S and z (z by the first column tile's block).
  void storeState();
  /// S += φ(K_c)ᵀ V_c, z += Σ_j φ(K_c)[j] over the chunk's `rows` rows.
  void updateState(Value rows);
  /// A[i][j] = φ(Q_c)[i] · φ(K_c)[j] for j ≤ i < rows, 0 elsewhere.
  void computeScores(Value rows);
  /// O rows [first, first + rows) of query head `head`; with `intra` the
  /// chunk's causal product A V_c added.
  void storeOutputs(Value head, Value first, Value rows, bool intra);
  Value chunkRows(Value first, Value length) {
    return BlockKernel::chunkRows(chunk, first, length);
  }
};

Value LinearGpuKernel::phi(Value x) {
  switch (featureMap) {
  case FeatureMap::elu_plus_one: {
    // elu(x) + 1 = x + 1 for x > 0, exp(x) otherwise (NaN: exp(NaN)).
    Value positive =
        arith::CmpFOp::create(b(), arith::CmpFPredicate::OGT, x, f32(0.0f));
    return select(positive, arith::AddFOp::create(b(), x, f32(1.0f)),
                  math::ExpOp::create(b(), x));
  }
  case FeatureMap::relu:
    return maxF(x, f32(0.0f));
  case FeatureMap::identity:
    return x;
  }
  llvm_unreachable("unknown feature map");
}

void LinearGpuKernel::stageRows(Value tile, const Global &g, Value head,
                                Value first, Value rows, Value col0,
                                int64_t width, bool withPhi) {
  forEachCell(chunk, width, [&](Value r, Value c) {
    Value col = add(col0, c);
    Value inside = andI(lt(r, rows), lt(col, g.sizes[3]));
    Value v = orZero(inside, [&] {
      Value x = loadGlobal(g, {batch, head, add(first, r), col});
      return withPhi ? phi(x) : x;
    });
    storeShared(v, tile, {r, c});
  });
}

void LinearGpuKernel::loadState() {
  forEachCell(headDim, kLinearColumns, [&](Value d, Value e) {
    Value col = add(firstColumn, e);
    auto initial = [&] { return loadGlobal(*state0, {batch, kvHead, d, col}); };
    Value s = state0 ? orZero(lt(col, cst(valueDim)), initial) : f32(0.0f);
    storeShared(s, state, {d, e});
  });
  forEach(headDim, [&](Value d) {
    Value z =
        normalizer0 ? loadGlobal(*normalizer0, {batch, kvHead, d}) : f32(0.0f);
    storeShared(z, normalizer, {d});
  });
}

void LinearGpuKernel::storeState() {
  forEachCell(headDim, kLinearColumns, [&](Value d, Value e) {
    Value col = add(firstColumn, e);
    when(lt(col, cst(valueDim)), [&] {
      storeGlobal(loadShared(state, {d, e}), *state1, {batch, kvHead, d, col});
    });
  });
  when(arith::CmpIOp::create(b(), arith::CmpIPredicate::eq, columnTile, cst(0)),
       [&] {
         forEach(headDim, [&](Value d) {
           storeGlobal(loadShared(normalizer, {d}), *normalizer1,
                       {batch, kvHead, d});
         });
       });
}

void LinearGpuKernel::updateState(Value rows) {
  forEachCell(headDim, kLinearColumns, [&](Value d, Value e) {
    Value first =
        arith::CmpIOp::create(b(), arith::CmpIPredicate::eq, e, cst(0));
    // The normalizer's column d once, by the thread of (d, 0).
    SmallVector<Value> sums =
        forLoopWith(cst(0), rows, cst(1), ValueRange{f32(0.0f), f32(0.0f)},
                    [&](Value j, ValueRange acc) -> SmallVector<Value> {
                      Value k = loadShared(phiK, {j, d});
                      return {fma(k, loadShared(values, {j, e}), acc[0]),
                              arith::AddFOp::create(b(), acc[1], k)};
                    });
    storeShared(arith::AddFOp::create(b(), loadShared(state, {d, e}), sums[0]),
                state, {d, e});
    when(first, [&] {
      storeShared(
          arith::AddFOp::create(b(), loadShared(normalizer, {d}), sums[1]),
          normalizer, {d});
    });
  });
}

void LinearGpuKernel::computeScores(Value rows) {
  forEachCell(chunk, chunk, [&](Value i, Value j) {
    Value seen =
        andI(lt(i, rows),
             arith::CmpIOp::create(b(), arith::CmpIPredicate::ule, j, i));
    Value a = orZero(seen, [&] {
      return forLoopWith(cst(0), cst(headDim), cst(1), ValueRange{f32(0.0f)},
                         [&](Value d, ValueRange acc) -> SmallVector<Value> {
                           return {fma(loadShared(phiQ, {i, d}),
                                       loadShared(phiK, {j, d}), acc[0])};
                         })[0];
    });
    storeShared(a, scores, {i, j});
  });
}

void LinearGpuKernel::storeOutputs(Value head, Value first, Value rows,
                                   bool intra) {
  forEachCell(chunk, kLinearColumns, [&](Value i, Value e) {
    Value col = add(firstColumn, e);
    when(andI(lt(i, rows), lt(col, cst(valueDim))), [&] {
      // (numerator, denominator): φ(Q_c)[i] · (S[:, e], z), then with
      // `intra` Σ_{j ≤ i} A[i][j] · (V_c[j][e], 1).
      SmallVector<Value> inits = {f32(0.0f)};
      if (normalized)
        inits.push_back(f32(0.0f));
      SmallVector<Value> acc = forLoopWith(
          cst(0), cst(headDim), cst(1), inits,
          [&](Value d, ValueRange acc) -> SmallVector<Value> {
            Value q = loadShared(phiQ, {i, d});
            SmallVector<Value> next = {
                fma(q, loadShared(state, {d, e}), acc[0])};
            if (normalized)
              next.push_back(fma(q, loadShared(normalizer, {d}), acc[1]));
            return next;
          });
      if (intra)
        acc = forLoopWith(cst(0), add(i, cst(1)), cst(1), acc,
                          [&](Value j, ValueRange acc) -> SmallVector<Value> {
                            Value a = loadShared(scores, {i, j});
                            SmallVector<Value> next = {
                                fma(a, loadShared(values, {j, e}), acc[0])};
                            if (normalized)
                              next.push_back(
                                  arith::AddFOp::create(b(), acc[1], a));
                            return next;
                          });
      Value o = acc[0];
      if (normalized)
        o = arith::DivFOp::create(
            b(), o,
            arith::AddFOp::create(b(), acc[1], f32(op.getEffectiveEps())));
      storeGlobal(o, *output, {batch, head, add(first, i), col});
    });
  });
}

int64_t LinearGpuKernel::carveTiles() {
  SmallVector<SharedTile> tiles = {{&phiQ, {chunk, pitch}},
                                   {&phiK, {chunk, pitch}},
                                   {&values, {chunk, kLinearColumns}},
                                   {&state, {headDim, kLinearColumns}},
                                   {&normalizer, {headDim}}};
  // The chunk's scores A only for the causal form.
  if (causal)
    tiles.insert(tiles.begin() + 3, {&scores, {chunk, chunk}});
  return carveShared(tiles);
}

LogicalResult LinearGpuKernel::build(func::FuncOp func, Block &into) {
  if (failed(checkArguments(func, op)))
    return failure();
  auto queryType = cast<RankedTensorType>(func.getArgumentTypes()[0]);
  auto valueType = cast<RankedTensorType>(func.getArgumentTypes()[2]);
  if (queryType.isDynamicDim(3) || valueType.isDynamicDim(3))
    return op.emitOpError("attn-lower-to-gpu: a GPU linear attention kernel "
                          "needs static D and Dv");
  elementType = queryType.getElementType();
  headDim = queryType.getDimSize(3);
  valueDim = valueType.getDimSize(3);
  causal = op.getCausal();
  normalized = !op.getUnnormalized();
  featureMap = op.getEffectiveFeatureMap();
  chunk = op.getChunkRows();
  pitch = headDim + 1;
  bool hasInitial = op.getStateIn() != nullptr;
  hasFinal = op.getStateOut() != nullptr;
  auto grid = [&]() -> std::array<Value, 3> {
    return {cst(llvm::divideCeil(valueDim, kLinearColumns)), key->sizes[1],
            query->sizes[0]};
  };
  // For a linear kernel the launch's "rows" are value columns per block.
  buildKernel(
      func, into, kLinearColumns, grid,
      [&] {
        query = &globals[0];
        key = &globals[1];
        value = &globals[2];
        if (hasInitial) {
          state0 = &globals[3];
          normalizer0 = &globals[4];
        }
        output = &globals[hasInitial ? 5 : 3];
        if (hasFinal) {
          state1 = output + 1;
          normalizer1 = output + 2;
        }
        return carveTiles();
      },
      [&](Value x, Value y, Value z) {
        setBlock(x, y, z);
        emitBlock();
      });
  return success();
}

void LinearGpuKernel::emitBlock() {
  Value heads = query->sizes[1], kvHeads = key->sizes[1];
  Value group = arith::DivUIOp::create(b(), heads, kvHeads);
  Value queries = query->sizes[2], keys = key->sizes[2];
  auto headOf = [&](Value g) { return add(mul(kvHead, group), g); };
  loadState();
  barrier();
  if (causal) {
    forLoop(cst(0), queries, cst(chunk), [&](Value first) {
      Value rows = chunkRows(first, queries);
      stageRows(phiK, *key, kvHead, first, rows, cst(0), headDim, true);
      stageRows(values, *value, kvHead, first, rows, firstColumn,
                kLinearColumns, false);
      forLoop(cst(0), group, cst(1), [&](Value g) {
        stageRows(phiQ, *query, headOf(g), first, rows, cst(0), headDim, true);
        barrier();
        computeScores(rows);
        barrier();
        storeOutputs(headOf(g), first, rows, /*intra=*/true);
        barrier();
      });
      updateState(rows);
      barrier();
    });
    if (hasFinal)
      storeState();
    return;
  }
  forLoop(cst(0), keys, cst(chunk), [&](Value first) {
    Value rows = chunkRows(first, keys);
    stageRows(phiK, *key, kvHead, first, rows, cst(0), headDim, true);
    stageRows(values, *value, kvHead, first, rows, firstColumn, kLinearColumns,
              false);
    barrier();
    updateState(rows);
    barrier();
  });
  if (hasFinal)
    storeState();
  forLoop(cst(0), group, cst(1), [&](Value g) {
    forLoop(cst(0), queries, cst(chunk), [&](Value first) {
      Value rows = chunkRows(first, queries);
      stageRows(phiQ, *query, headOf(g), first, rows, cst(0), headDim, true);
      barrier();
      storeOutputs(headOf(g), first, rows, /*intra=*/false);
      barrier();
    });
  });
}

} // namespace

LogicalResult
mlir::attn::gpu_kernel::buildLinearGpuKernel(func::FuncOp func, LinearOp op,
                                             gpu::GPUModuleOp gpuModule) {
  return LinearGpuKernel(op, /*host=*/false).build(func, *gpuModule.getBody());
}

LogicalResult
mlir::attn::gpu_kernel::buildLinearHostEmulation(func::FuncOp func, LinearOp op,
                                                 ModuleOp module) {
  return LinearGpuKernel(op, /*host=*/true).build(func, *module.getBody());
}
