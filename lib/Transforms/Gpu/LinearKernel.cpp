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
#include "lib/Transforms/Gpu/WarpTile.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::gpu_kernel;

namespace {

/// A kernel argument in global memory: its pointer, sizes and strides.
struct Global {
  Value data;
  Type elementType;
  /// z₀ and z₁ are [B, Hkv, D]; the others rank 4.
  bool normalizerRank = false;
  SmallVector<Value, 4> sizes, strides;
};

/// The function argument that `v` is (a slice of): through
/// tensor.extract_slice and the tiling forall's shared outputs.
BlockArgument rootArgument(Value v) {
  while (true) {
    if (auto slice = v.getDefiningOp<tensor::ExtractSliceOp>()) {
      v = slice.getSource();
      continue;
    }
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg)
      return {};
    auto forall = dyn_cast<scf::ForallOp>(arg.getOwner()->getParentOp());
    if (!forall)
      return arg;
    if (arg.getArgNumber() < forall.getRank())
      return {};
    v = forall.getTiedOpOperand(arg)->get();
  }
}

class LinearGpuKernel : public WarpTile {
public:
  LinearGpuKernel(LinearOp op, bool host)
      : op(op), host(host), threads(host ? 1 : kLinearThreads) {}

  /// Builds the kernel (a gpu.func, or the host emulation's func.func) of
  /// `func` at the end of `into`.
  LogicalResult build(func::FuncOp func, Block &into);

private:
  LinearOp op;
  /// The host emulation: the grid's blocks one after the other, each on
  /// one thread (no barriers), shared memory on the stack.
  bool host;
  int64_t threads;
  bool causal = false, normalized = true, hasFinal = false;
  FeatureMap featureMap = FeatureMap::elu_plus_one;
  int64_t chunk = 0, pitch = 0;
  /// Q, K, V, [S₀, z₀], O, [S₁, z₁] as the function takes them.
  SmallVector<Global> globals;
  const Global *query = nullptr, *key = nullptr, *value = nullptr,
               *output = nullptr, *state0 = nullptr, *normalizer0 = nullptr,
               *state1 = nullptr, *normalizer1 = nullptr;
  /// The block's batch, key/value head and first value column.
  Value batch, kvHead, firstColumn, columnTile;
  /// Shared memory: φ(Q_c), φ(K_c), V_c, A, S, z.
  Value phiQ, phiK, values, scores, state, normalizer;

  //===--- small builders ---------------------------------------------===//
  Value phi(Value x);
  Value fma(Value x, Value y, Value acc) {
    return math::FmaOp::create(b(), x, y, acc);
  }
  Value loadShared(Value tile, ValueRange indices) {
    return memref::LoadOp::create(b(), tile, indices);
  }
  void storeShared(Value v, Value tile, ValueRange indices) {
    memref::StoreOp::create(b(), v, tile, indices);
  }
  Value globalIndex(const Global &g, ArrayRef<Value> indices) {
    Value index = cst(0);
    for (auto [i, stride] : llvm::zip(indices, g.strides))
      index = add(index, mul(i, stride));
    return index;
  }
  /// One element as f32.
  Value loadGlobal(const Global &g, ArrayRef<Value> indices) {
    return toF32(memref::LoadOp::create(b(), g.data,
                                        ValueRange{globalIndex(g, indices)}));
  }
  /// `v` (f32) rounded to g's element type.
  void storeGlobal(Value v, const Global &g, ArrayRef<Value> indices) {
    if (g.elementType != v.getType())
      v = arith::TruncFOp::create(b(), g.elementType, v);
    memref::StoreOp::create(b(), v, g.data,
                            ValueRange{globalIndex(g, indices)});
  }
  void barrier() {
    if (!host)
      gpu::BarrierOp::create(b());
  }
  /// body(i) for i in [0, count), the block's threads striding.
  void forEach(int64_t count, function_ref<void(Value)> body) {
    forLoop(tid, cst(count), cst(threads), body);
  }
  /// body(r, c) for each cell of a [rows][cols] grid, the threads striding
  /// over the cells row by row (consecutive threads, consecutive columns).
  void forEachCell(int64_t rows, int64_t cols,
                   function_ref<void(Value, Value)> body) {
    forEach(rows * cols, [&](Value i) {
      body(arith::DivUIOp::create(b(), i, cst(cols)),
           arith::RemUIOp::create(b(), i, cst(cols)));
    });
  }
  /// body under `cond`.
  void when(Value cond, function_ref<void()> body) {
    auto guard = scf::IfOp::create(b(), cond);
    OpBuilder::InsertionGuard g(b());
    b().setInsertionPoint(guard.thenBlock()->getTerminator());
    body();
  }

  //===--- the kernel's steps -----------------------------------------===//
  /// The globals from the function's parameters.
  void readParameters(Block &entry);
  /// The shared-memory tiles (phiQ ... normalizer); returns their bytes.
  int64_t carveShared();
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
    return arith::MinSIOp::create(b(), cst(chunk), sub(length, first));
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
    return arith::MaximumFOp::create(b(), x, f32(0.0f));
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
    Value v = ifElse(
        inside, b().getF32Type(),
        [&] {
          Value x = loadGlobal(g, {batch, head, add(first, r), col});
          return withPhi ? phi(x) : x;
        },
        [&] { return f32(0.0f); });
    storeShared(v, tile, {r, c});
  });
}

void LinearGpuKernel::loadState() {
  forEachCell(headDim, kLinearColumns, [&](Value d, Value e) {
    Value col = add(firstColumn, e);
    auto initial = [&] { return loadGlobal(*state0, {batch, kvHead, d, col}); };
    Value s = state0 ? ifElse(lt(col, cst(valueDim)), b().getF32Type(), initial,
                              [&] { return f32(0.0f); })
                     : f32(0.0f);
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
    Value a = ifElse(
        seen, b().getF32Type(),
        [&] {
          return forLoopWith(
              cst(0), cst(headDim), cst(1), ValueRange{f32(0.0f)},
              [&](Value d, ValueRange acc) -> SmallVector<Value> {
                return {fma(loadShared(phiQ, {i, d}), loadShared(phiK, {j, d}),
                            acc[0])};
              })[0];
        },
        [&] { return f32(0.0f); });
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

void LinearGpuKernel::readParameters(Block &entry) {
  unsigned next = 0;
  for (Global &g : globals) {
    g.data = entry.getArgument(next++);
    for (SmallVector<Value, 4> *list : {&g.sizes, &g.strides})
      for (int64_t d = 0; d < (g.normalizerRank ? 3 : 4); ++d)
        list->push_back(arith::IndexCastOp::create(b(), b().getIndexType(),
                                                   entry.getArgument(next++)));
  }
}

int64_t LinearGpuKernel::carveShared() {
  // Dynamic shared memory on the GPU; on the host one stack buffer.
  Attribute space;
  if (!host)
    space = gpu::AddressSpaceAttr::get(
        b().getContext(), gpu::GPUDialect::getWorkgroupAddressSpace());
  int64_t bytes = 0;
  auto size = [&](ArrayRef<int64_t> shape) {
    int64_t n = 4;
    for (int64_t d : shape)
      n *= d;
    return llvm::alignTo(n, 16);
  };
  // The tiles and their shapes (A only for the causal form).
  SmallVector<std::pair<Value *, SmallVector<int64_t, 2>>> tiles = {
      {&phiQ, {chunk, pitch}},
      {&phiK, {chunk, pitch}},
      {&values, {chunk, kLinearColumns}},
      {&state, {headDim, kLinearColumns}},
      {&normalizer, {headDim}}};
  if (causal)
    tiles.insert(tiles.begin() + 3, {&scores, {chunk, chunk}});
  for (auto &[tile, shape] : tiles)
    bytes += size(shape);
  auto rawType =
      MemRefType::get({host ? bytes : ShapedType::kDynamic}, b().getI8Type(),
                      MemRefLayoutAttrInterface(), space);
  Value raw =
      host ? memref::AllocaOp::create(b(), rawType).getResult()
           : gpu::DynamicSharedMemoryOp::create(b(), rawType).getResult();
  int64_t offset = 0;
  for (auto &[tile, shape] : tiles) {
    auto type = MemRefType::get(shape, b().getF32Type(),
                                MemRefLayoutAttrInterface(), space);
    *tile = memref::ViewOp::create(b(), type, raw, cst(offset), ValueRange{});
    offset += size(shape);
  }
  return bytes;
}

LogicalResult LinearGpuKernel::build(func::FuncOp func, Block &into) {
  // The function's arguments must be the op's operands, in order.
  SmallVector<Value> operands(op->getOperands());
  if (func.getNumArguments() != operands.size())
    return op.emitOpError("attn-lower-to-gpu: a linear attention kernel's "
                          "function takes the op's operands as its arguments "
                          "(Q, K, V, [S0, z0], O, [S1, z1]), found ")
           << func.getNumArguments() << " arguments for " << operands.size()
           << " operands";
  for (auto [n, operand] : llvm::enumerate(operands))
    if (rootArgument(operand) != func.getArgument(n))
      return op.emitOpError("attn-lower-to-gpu: operand ")
             << n << " is not the function's argument " << n
             << ": a linear attention kernel's function takes the op's "
                "operands as its arguments, in order";
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

  MLIRContext *ctx = func.getContext();
  SmallVector<Type> params;
  Type i64 = IntegerType::get(ctx, 64);
  for (Type t : func.getArgumentTypes()) {
    auto tensor = cast<RankedTensorType>(t);
    params.push_back(
        MemRefType::get({ShapedType::kDynamic}, tensor.getElementType()));
    params.append(2 * tensor.getRank(), i64);
    Global g;
    g.elementType = tensor.getElementType();
    g.normalizerRank = tensor.getRank() == 3;
    globals.push_back(std::move(g));
  }
  bool hasInitial = op.getStateIn() != nullptr;
  hasFinal = op.getStateOut() != nullptr;
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

  auto moduleBuilder = OpBuilder::atBlockEnd(&into);
  auto type = FunctionType::get(ctx, params, {});
  ImplicitLocOpBuilder ownedBuilder(op.getLoc(), ctx);
  builder = &ownedBuilder;
  if (host) {
    auto kernel = func::FuncOp::create(moduleBuilder, func.getLoc(),
                                       func.getName(), type);
    b().setInsertionPointToStart(kernel.addEntryBlock());
    readParameters(kernel.getBody().front());
    tid = cst(0);
    carveShared();
    // The grid, block after block.
    Value columnTiles = cst(llvm::divideCeil(valueDim, kLinearColumns));
    forLoop(cst(0), query->sizes[0], cst(1), [&](Value z) {
      forLoop(cst(0), key->sizes[1], cst(1), [&](Value y) {
        forLoop(cst(0), columnTiles, cst(1), [&](Value x) {
          setBlock(x, y, z);
          emitBlock();
        });
      });
    });
    func::ReturnOp::create(b());
  } else {
    auto kernel = gpu::GPUFuncOp::create(moduleBuilder, func.getLoc(),
                                         func.getName(), type);
    kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                    UnitAttr::get(ctx));
    kernel.setKnownBlockSizeAttr(DenseI32ArrayAttr::get(
        ctx, {static_cast<int32_t>(kLinearThreads), 1, 1}));
    // As the attention kernels: ptxas may use the registers the index
    // arithmetic wants (aiming at more resident blocks it spilled on sm_90).
    kernel->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                    IntegerAttr::get(IntegerType::get(ctx, 32), 1));
    // For a linear kernel the launch's "rows" are value columns per block.
    kernel->setAttr("attn.block_rows", IntegerAttr::get(i64, kLinearColumns));
    b().setInsertionPointToStart(&kernel.getBody().front());
    readParameters(kernel.getBody().front());
    tid = gpu::ThreadIdOp::create(b(), gpu::Dimension::x);
    setBlock(gpu::BlockIdOp::create(b(), gpu::Dimension::x),
             gpu::BlockIdOp::create(b(), gpu::Dimension::y),
             gpu::BlockIdOp::create(b(), gpu::Dimension::z));
    kernel->setAttr("attn.shared_memory_bytes",
                    b().getI64IntegerAttr(carveShared()));
    emitBlock();
    gpu::ReturnOp::create(b());
  }
  builder = nullptr;
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
