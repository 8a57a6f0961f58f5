//===- BackwardKernel.cpp - attn.attention_backward as a GPU kernel -------===//
//
// attn-lower-to-gpu's kernel for the gradients of attention (docs/spec.md,
// "The gradient"): FlashAttention-2's backward in its deterministic form,
// dK/dV and dQ computed by different blocks of one launch, each sum one
// thread's in a fixed order (no atomics, the same bits run to run). T =
// backwardTile(D, Dv) keys or rows a block, kBackwardThreads threads, f32
// FMAs on shared memory (a BlockKernel). The grid is
// (ceil(Sk / T) + G · ceil(Sq / T), Hkv, B):
//
//   key block x < ceil(Sk / T): keys [xT, xT + T) of key/value head y
//     K_c, V_c staged once; dK = dV = 0
//     per query head h of the group, per tile of T rows that sees a key of
//     the block (the causal/window band's tiles only):
//       Q_r, dO_r, LSE_r staged; Δ_r = dO·O − dLSE
//       per cell (i, j): P = exp(s − LSE), dS = P·(Z·dP − Δ)·(derivatives)
//                        (0 where excluded or the row is fully masked; Z
//                        dropout's keep / (1 − p), 1 without)
//       dV[j] += Σ_i P[i][j] Z[i][j] dO[i]      dK[j] += Σ_i dS[i][j] Q[i]
//     dK·scale, dV → memory
//   row block (the others): the tile of T rows of query head yG + h
//     Q_r, dO_r, LSE_r, Δ_r staged once; dQ = 0
//     per key tile the rows see: K_c, V_c staged; the cells as above;
//       dQ[i] += Σ_j dS[i][j] K[j]
//     dQ·scale → memory
//
// P and dS are recomputed by both kinds of block (the score work twice, as
// FlashAttention's deterministic backward pays for dQ without atomics),
// never stored beyond a T x T tile; Δ is recomputed per row tile (Dv FMAs
// a row against the tile's T·(D + Dv)). With grad_mask the key blocks also
// write dM = dS before the soft cap's derivative (0 where excluded) at
// every position of their keys. With a block mask's table, a pair of
// tiles it keeps nothing of is skipped (dM written 0 there), and where it
// declares every score kept the mask_mod is left out. The score function
// is the forward's (AttentionMath, BandArithmetic, ModifierEmitter with the
// score_mod's derivative), at global indices. A position of weight 0 (excluded,
// or a fully masked row) adds nothing to dK, dV and dQ, whatever its Q, K, V or
// dO hold; a NaN at an allowed position reaches the gradients it feeds.
//
// Shared memory: Q_r [T][D+1], dO_r [T][Dv+1], K_c [T][D+1], V_c [T][Dv+1]
// (odd pitches: a cell's threads read different banks), P and dS [T][T+1],
// the accumulators [T][D] (dK or dQ) and [T][Dv] (dV), LSE and Δ [T].
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Gpu/BackwardKernel.h"
#include "lib/Transforms/AttentionMath.h"
#include "lib/Transforms/Gpu/BlockKernel.h"
#include "lib/Transforms/Modifiers.h"

#include <limits>
#include <optional>

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::gpu_kernel;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
/// Shared memory a backward block may take: below the 99 KiB of sm_86 and
/// sm_89 (A100 and H100 have more).
constexpr int64_t kSharedBudget = 96 * 1024;

int64_t sharedBytes(int64_t t, int64_t d, int64_t dv) {
  int64_t floats = 2 * t * (d + 1) + 2 * t * (dv + 1) + 2 * t * (t + 1) +
                   t * d + t * dv + 2 * t;
  return 4 * floats + 16 * 10; // each of the ten tiles 16-byte aligned
}

class BackwardGpuKernel : public BlockKernel {
public:
  BackwardGpuKernel(AttentionBackwardOp op, bool host)
      : BlockKernel(host, kBackwardThreads), op(op) {}

  LogicalResult build(func::FuncOp func, Block &into);

private:
  AttentionBackwardOp op;
  int64_t tile = 0;
  /// The function argument of each operand the kernel reads or writes.
  int query = -1, key = -1, value = -1, mask = -1, output = -1, lse = -1,
      gradOutput = -1, gradLse = -1, gradQuery = -1, gradKey = -1,
      gradValue = -1, gradMask = -1;
  /// Dropout's probability and seed (scalar arguments), or -1.
  int dropoutP = -1, dropoutSeed = -1;
  SmallVector<int> captureArgs;

  // Per block.
  Value batch, kvHead, head, group, rowStart, rows, keyStart, keys;
  Value diagonal;
  std::optional<BandArithmetic> band;
  std::optional<AttentionMath> math;
  SmallVector<Value, 2> captures; // the modifiers' and the table's memrefs
  /// The block table's promise that the current tiles' scores are all kept
  /// (i1, set by tilesMeet), or null without a table.
  Value fullBlock;
  std::optional<ModifierEmitter> modifiers;
  /// Dropout's keep threshold and kept weights' factor 1 / (1 - p).
  Value dropThreshold, dropKept;
  // Shared memory.
  Value qTile, doTile, kTile, vTile, probs, grads, acc, accValue, lseTile,
      deltaTile;

  const Global &arg(int n) { return globals[n]; }
  Value seqQ() { return arg(query).sizes[2]; }
  Value seqK() { return arg(key).sizes[2]; }

  LogicalResult mapOperands(func::FuncOp func);
  int64_t carveTiles();
  /// Block (x, y, z)'s work: a key block or a row block.
  void emitBlock(Value x, Value y, Value z);
  void emitKeyBlock(Value keyTileIndex);
  void emitRowBlock(Value rowTileIndex);
  /// Whether some row of the row tile sees some key of the key tile (the
  /// band's test; true without a band).
  Value tilesMeet();
  /// Rows [first, first + count) of head `sourceHead` of argument `source`
  /// (its `width` elements) into the shared tile `into`, 0 past them.
  void stageTile(Value into, int source, Value sourceHead, Value first,
                 Value count, int64_t width);
  /// K_c and V_c of keys [keyStart, keyStart + keys), 0 past them.
  void stageKeys();
  /// Q_r, dO_r, LSE_r and Δ_r of rows [rowStart, rowStart + rows) of
  /// `head`; past them LSE = -inf (no weight).
  void stageRows();
  /// P and dS of every cell of the tile pair; with `storeGradMask`, dM too.
  void computeCells(bool storeGradMask);
  /// The tile pair's dM where no row sees a key: 0.
  void zeroGradMask();
  /// into[c][e] += Σ_n w[c][n] · x[n][e] over the tile, `w` read as the
  /// transpose of `weights` where `transposed` (the key block's Pᵀ, dSᵀ),
  /// a weight of 0 skipped; `width` columns.
  void addProduct(Value into, int64_t width, Value weights, bool transposed,
                  Value x);
  /// 0 into every cell of a [tile][width] shared tile.
  void zeroTile(Value into, int64_t width);
  /// Rows [0, count) of shared tile `from` (times `scale` where given) to
  /// rows [first, first + count) of head `targetHead` of argument `target`:
  /// stageTile's way back.
  void storeTile(Value from, int64_t width, Value scale, int target,
                 Value targetHead, Value first, Value count);
  /// Σ_e a[i][e] · b[j][e] over `width` elements of two shared tiles.
  Value dot(Value a, Value i, Value bTile, Value j, int64_t width);
};

int64_t BackwardGpuKernel::carveTiles() {
  return carveShared({{&qTile, {tile, headDim + 1}},
                      {&doTile, {tile, valueDim + 1}},
                      {&kTile, {tile, headDim + 1}},
                      {&vTile, {tile, valueDim + 1}},
                      {&probs, {tile, tile + 1}},
                      {&grads, {tile, tile + 1}},
                      {&acc, {tile, headDim}},
                      {&accValue, {tile, valueDim}},
                      {&lseTile, {tile}},
                      {&deltaTile, {tile}}});
}

Value BackwardGpuKernel::dot(Value a, Value i, Value bTile, Value j,
                             int64_t width) {
  return forLoopWith(
      cst(0), cst(width), cst(1), ValueRange{f32(0.0f)},
      [&](Value e, ValueRange sum) -> SmallVector<Value> {
        return {fma(loadShared(a, {i, e}), loadShared(bTile, {j, e}), sum[0])};
      })[0];
}

Value BackwardGpuKernel::tilesMeet() {
  Value meet = arith::ConstantIntOp::create(b(), 1, 1);
  if (diagonal && band->banded()) {
    auto [first, last] = band->keysSomeRowSees(rowStart, rows, seqK());
    meet = andI(lt(first, add(keyStart, keys)), lt(keyStart, last));
  }
  fullBlock = Value();
  if (op->hasAttr(kBlockMaskAttrName)) {
    // The block table's entries over the two tiles (global indices: no
    // origin): none kept skips them, all full leaves the mask_mod out.
    Value kept;
    std::tie(kept, fullBlock) =
        blockTableEntries(b(), b().getLoc(), op, captures, ValueRange(), batch,
                          head, rowStart, rows, keyStart, keys);
    meet = andI(meet, kept);
  }
  return meet;
}

void BackwardGpuKernel::stageTile(Value into, int source, Value sourceHead,
                                  Value first, Value count, int64_t width) {
  forEachCell(tile, width, [&](Value r, Value e) {
    Value v = orZero(lt(r, count), [&] {
      return loadGlobal(arg(source), {batch, sourceHead, add(first, r), e});
    });
    storeShared(v, into, {r, e});
  });
}

void BackwardGpuKernel::stageKeys() {
  stageTile(kTile, key, kvHead, keyStart, keys, headDim);
  stageTile(vTile, value, kvHead, keyStart, keys, valueDim);
}

void BackwardGpuKernel::stageRows() {
  stageTile(qTile, query, head, rowStart, rows, headDim);
  stageTile(doTile, gradOutput, head, rowStart, rows, valueDim);
  forEach(tile, [&](Value i) {
    Value row = add(rowStart, i), inside = lt(i, rows);
    Value rowLse = ifElse(
        inside, b().getF32Type(),
        [&] {
          return loadGlobal(arg(lse), {batch, head, row});
        },
        [&] { return f32(-kInf); });
    storeShared(rowLse, lseTile, {i});
    // Δ from memory (dO_r is being staged by the other threads).
    Value delta = orZero(inside, [&] {
      Value sum = forLoopWith(
          cst(0), cst(valueDim), cst(1), ValueRange{f32(0.0f)},
          [&](Value e, ValueRange s) -> SmallVector<Value> {
            return {fma(loadGlobal(arg(gradOutput), {batch, head, row, e}),
                        loadGlobal(arg(output), {batch, head, row, e}), s[0])};
          })[0];
      if (gradLse >= 0)
        sum = arith::SubFOp::create(
            b(), sum, loadGlobal(arg(gradLse), {batch, head, row}));
      return sum;
    });
    storeShared(delta, deltaTile, {i});
  });
}

void BackwardGpuKernel::computeCells(bool storeGradMask) {
  Type f32Type = b().getF32Type();
  forEachCell(tile, tile, [&](Value i, Value j) {
    Value row = add(rowStart, i), column = add(keyStart, j);
    Value inside = andI(lt(i, rows), lt(j, keys));
    // P, dS (through every derivative) and dS before the soft cap's (dM).
    auto cellIf = scf::IfOp::create(b(), TypeRange{f32Type, f32Type, f32Type},
                                    inside, true);
    {
      OpBuilder::InsertionGuard guard(b());
      b().setInsertionPointToStart(cellIf.elseBlock());
      Value outside = f32(0.0f);
      scf::YieldOp::create(b(), ValueRange{outside, outside, outside});
      b().setInsertionPointToStart(cellIf.thenBlock());
      Value zero = f32(0.0f);
      Value allowed = arith::ConstantIntOp::create(b(), 1, 1);
      if (diagonal && band->banded()) {
        Value center = band->relative(row, Value());
        if (band->right)
          allowed = andI(allowed,
                         arith::CmpIOp::create(b(), arith::CmpIPredicate::sle,
                                               column, band->upper(center)));
        if (band->left)
          allowed = andI(allowed,
                         arith::CmpIOp::create(b(), arith::CmpIPredicate::sge,
                                               column, band->lower(center)));
      }
      Value bias;
      if (mask >= 0) {
        Value m = loadGlobal(arg(mask), {batch, head, row, column});
        if (m.getType().isInteger(1)) {
          allowed = andI(allowed, m);
        } else {
          bias = m;
          allowed =
              andI(allowed, arith::CmpFOp::create(
                                b(), arith::CmpFPredicate::UNE, m, f32(-kInf)));
        }
      }
      SmallVector<Value, 4> indices = {batch, head, row, column};
      if (modifiers && modifiers->hasMaskMod())
        allowed =
            andI(allowed, modifiers->keep(indices, /*lanes=*/0, fullBlock));
      Value rowLse = loadShared(lseTile, {i});
      Value weighted =
          andI(allowed, arith::CmpFOp::create(b(), arith::CmpFPredicate::UNE,
                                              rowLse, f32(-kInf)));
      auto weightIf = scf::IfOp::create(
          b(), TypeRange{f32Type, f32Type, f32Type}, weighted, true);
      b().setInsertionPointToStart(weightIf.elseBlock());
      scf::YieldOp::create(b(), ValueRange{zero, zero, zero});
      b().setInsertionPointToStart(weightIf.thenBlock());
      Value scaled = arith::MulFOp::create(
          b(), dot(qTile, i, kTile, j, headDim), f32(math->scoreScale()));
      Value capped = math->softcap(scaled);
      Value s = bias ? arith::AddFOp::create(b(), capped, bias) : capped;
      Value slope;
      if (modifiers && modifiers->hasScoreMod())
        s = modifiers->score(s, indices, &slope);
      Value p = math::ExpOp::create(b(), arith::SubFOp::create(b(), s, rowLse));
      Value dp = dot(doTile, i, vTile, j, valueDim);
      // Dropout: dS = P·(Z·dP − Δ), and dV's weight is P·Z (the probs
      // tile), Z = keep / (1 − p) with the forward's keep bit.
      Value weight = p;
      if (dropoutP >= 0) {
        auto i32 = [&](Value index) -> Value {
          return arith::IndexCastOp::create(b(), b().getI32Type(), index);
        };
        Value keep =
            dropoutKeep(b(), b().getLoc(), arg(dropoutSeed).data, dropThreshold,
                        i32(batch), i32(head), i32(row), i32(column));
        Value z = select(keep, dropKept, zero);
        dp = arith::MulFOp::create(b(), dp, z);
        weight = arith::MulFOp::create(b(), p, z);
      }
      Value ds = arith::MulFOp::create(
          b(), p, arith::SubFOp::create(b(), dp, loadShared(deltaTile, {i})));
      if (slope) {
        // Through the score_mod; where P = 0 (a score_mod that excludes
        // by -inf, say) nothing, whatever its derivative is there.
        Value none =
            arith::CmpFOp::create(b(), arith::CmpFPredicate::OEQ, p, zero);
        ds = select(none, zero, arith::MulFOp::create(b(), ds, slope));
      }
      Value dsCapped = ds;
      if (math->hasSoftcap()) {
        // d(c·tanh(x/c))/dx = 1 − (t/c)², t the capped score.
        Value ratio =
            arith::DivFOp::create(b(), capped, f32(math->softcapValue()));
        dsCapped = arith::MulFOp::create(
            b(), ds,
            arith::SubFOp::create(b(), f32(1.0f),
                                  arith::MulFOp::create(b(), ratio, ratio)));
      }
      scf::YieldOp::create(b(), ValueRange{weight, dsCapped, ds});
      b().setInsertionPointAfter(weightIf);
      scf::YieldOp::create(b(), weightIf.getResults());
    }
    storeShared(cellIf.getResult(0), probs, {i, j});
    storeShared(cellIf.getResult(1), grads, {i, j});
    if (storeGradMask)
      when(inside, [&] {
        storeGlobal(cellIf.getResult(2), arg(gradMask),
                    {batch, head, row, column});
      });
  });
}

void BackwardGpuKernel::zeroGradMask() {
  forEachCell(tile, tile, [&](Value i, Value j) {
    when(andI(lt(i, rows), lt(j, keys)), [&] {
      storeGlobal(f32(0.0f), arg(gradMask),
                  {batch, head, add(rowStart, i), add(keyStart, j)});
    });
  });
}

void BackwardGpuKernel::addProduct(Value into, int64_t width, Value weights,
                                   bool transposed, Value x) {
  forEachCell(tile, width, [&](Value c, Value e) {
    Value sum = forLoopWith(
        cst(0), cst(tile), cst(1), ValueRange{loadShared(into, {c, e})},
        [&](Value n, ValueRange acc) -> SmallVector<Value> {
          // A weight of 0 (an excluded position) adds nothing: 0 · NaN
          // would.
          Value w = loadShared(weights, transposed ? ValueRange{n, c}
                                                   : ValueRange{c, n});
          Value zero = arith::CmpFOp::create(b(), arith::CmpFPredicate::OEQ, w,
                                             f32(0.0f));
          return {select(zero, acc[0], fma(w, loadShared(x, {n, e}), acc[0]))};
        })[0];
    storeShared(sum, into, {c, e});
  });
}

void BackwardGpuKernel::zeroTile(Value into, int64_t width) {
  forEachCell(tile, width, [&](Value r, Value e) {
    storeShared(f32(0.0f), into, {r, e});
  });
}

void BackwardGpuKernel::storeTile(Value from, int64_t width, Value scale,
                                  int target, Value targetHead, Value first,
                                  Value count) {
  forEachCell(tile, width, [&](Value r, Value e) {
    when(lt(r, count), [&] {
      Value v = loadShared(from, {r, e});
      if (scale)
        v = arith::MulFOp::create(b(), v, scale);
      storeGlobal(v, arg(target), {batch, targetHead, add(first, r), e});
    });
  });
}

void BackwardGpuKernel::emitKeyBlock(Value keyTileIndex) {
  keyStart = mul(keyTileIndex, cst(tile));
  keys = chunkRows(tile, keyStart, seqK());
  stageKeys();
  zeroTile(acc, headDim);
  zeroTile(accValue, valueDim);
  forLoop(cst(0), group, cst(1), [&](Value member) {
    head = add(mul(kvHead, group), member);
    forLoop(cst(0), seqQ(), cst(tile), [&](Value first) {
      rowStart = first;
      rows = chunkRows(tile, rowStart, seqQ());
      Value meet = tilesMeet();
      when(meet, [&] {
        barrier(); // the previous tile's readers are done
        stageRows();
        barrier();
        computeCells(gradMask >= 0);
        barrier();
        addProduct(accValue, valueDim, probs, /*transposed=*/true, doTile);
        addProduct(acc, headDim, grads, /*transposed=*/true, qTile);
      });
      if (gradMask >= 0)
        when(arith::XOrIOp::create(b(), meet,
                                   arith::ConstantIntOp::create(b(), 1, 1)),
             [&] { zeroGradMask(); });
    });
  });
  barrier();
  storeTile(acc, headDim, f32(math->scoreScale()), gradKey, kvHead, keyStart,
            keys);
  storeTile(accValue, valueDim, Value(), gradValue, kvHead, keyStart, keys);
}

void BackwardGpuKernel::emitRowBlock(Value rowTileIndex) {
  Value rowTiles = arith::CeilDivUIOp::create(b(), seqQ(), cst(tile));
  head = add(mul(kvHead, group),
             arith::DivUIOp::create(b(), rowTileIndex, rowTiles));
  rowStart =
      mul(arith::RemUIOp::create(b(), rowTileIndex, rowTiles), cst(tile));
  rows = chunkRows(tile, rowStart, seqQ());
  stageRows();
  zeroTile(acc, headDim);
  forLoop(cst(0), seqK(), cst(tile), [&](Value first) {
    keyStart = first;
    keys = chunkRows(tile, keyStart, seqK());
    when(tilesMeet(), [&] {
      barrier(); // the previous tile's readers are done
      stageKeys();
      barrier();
      computeCells(/*storeGradMask=*/false);
      barrier();
      addProduct(acc, headDim, grads, /*transposed=*/false, kTile);
    });
  });
  barrier();
  storeTile(acc, headDim, f32(math->scoreScale()), gradQuery, head, rowStart,
            rows);
}

void BackwardGpuKernel::emitBlock(Value x, Value y, Value z) {
  batch = z;
  kvHead = y;
  Value kvHeads = arg(key).sizes[1];
  group = arith::DivUIOp::create(b(), arg(query).sizes[1],
                                 arith::MaxUIOp::create(b(), kvHeads, cst(1)));
  Value keyTiles = arith::CeilDivUIOp::create(b(), seqK(), cst(tile));
  auto kind = scf::IfOp::create(b(), lt(x, keyTiles), /*withElse=*/true);
  OpBuilder::InsertionGuard guard(b());
  b().setInsertionPoint(kind.thenBlock()->getTerminator());
  emitKeyBlock(x);
  b().setInsertionPoint(kind.elseBlock()->getTerminator());
  emitRowBlock(sub(x, keyTiles));
}

LogicalResult BackwardGpuKernel::mapOperands(func::FuncOp func) {
  if (!op.getGradCaptures().empty())
    return op.emitOpError("attn-lower-to-gpu: the gradients of captured "
                          "tensors have no GPU lowering yet (the CPU "
                          "lowering has them)");
  auto argument = [&](Value v, int &into) -> LogicalResult {
    if (!v)
      return success();
    into = argumentOf(v);
    if (into < 0 || !isa<RankedTensorType>(func.getArgumentTypes()[into]))
      return op.emitOpError("attn-lower-to-gpu: every tensor of the backward "
                            "must be an argument of its function (the "
                            "kernel's parameters)");
    return success();
  };
  for (auto [v, into] :
       llvm::zip(SmallVector<Value>{op.getQuery(), op.getKey(), op.getValue(),
                                    op.getMask(), op.getOutput(), op.getLse(),
                                    op.getGradOutput(), op.getGradLse(),
                                    op.getGradQuery(), op.getGradKey(),
                                    op.getGradValue(), op.getGradMask()},
                 SmallVector<int *>{&query, &key, &value, &mask, &output, &lse,
                                    &gradOutput, &gradLse, &gradQuery, &gradKey,
                                    &gradValue, &gradMask}))
    if (failed(argument(v, *into)))
      return failure();
  for (Value capture : op.getCaptures()) {
    captureArgs.push_back(-1);
    if (failed(argument(capture, captureArgs.back())))
      return failure();
  }
  if (op.getDropoutP()) {
    dropoutP = argumentOf(op.getDropoutP());
    dropoutSeed = argumentOf(op.getDropoutSeed());
    if (dropoutP < 0 || dropoutSeed < 0)
      return op.emitOpError("attn-lower-to-gpu: dropout's probability and "
                            "seed must be arguments of the function (the "
                            "kernel's parameters)");
  }
  for (auto [n, t] : llvm::enumerate(func.getArgumentTypes()))
    if (!isa<RankedTensorType>(t) && static_cast<int>(n) != dropoutP &&
        static_cast<int>(n) != dropoutSeed)
      return op.emitOpError("attn-lower-to-gpu: the kernel's function "
                            "takes tensors (and dropout's scalars), found ")
             << t;
  auto type = [&](int n) {
    return cast<RankedTensorType>(func.getArgumentTypes()[n]);
  };
  headDim = type(query).getDimSize(3);
  valueDim = type(value).getDimSize(3);
  if (ShapedType::isDynamic(headDim) || ShapedType::isDynamic(valueDim))
    return op.emitOpError("attn-lower-to-gpu: a GPU backward kernel needs "
                          "static D and Dv");
  elementType = type(query).getElementType();
  tile = backwardTile(headDim, valueDim);
  return success();
}

LogicalResult BackwardGpuKernel::build(func::FuncOp func, Block &into) {
  if (failed(mapOperands(func)))
    return failure();
  LogicalResult result = success();
  auto grid = [&]() -> std::array<Value, 3> {
    Value kvHeads = arg(key).sizes[1];
    Value group = arith::DivUIOp::create(
        b(), arg(query).sizes[1], arith::MaxUIOp::create(b(), kvHeads, cst(1)));
    Value blocks =
        add(arith::CeilDivUIOp::create(b(), seqK(), cst(tile)),
            mul(group, arith::CeilDivUIOp::create(b(), seqQ(), cst(tile))));
    return {blocks, kvHeads, arg(query).sizes[0]};
  };
  buildKernel(
      func, into, tile, grid, [&] { return carveTiles(); },
      [&](Value x, Value y, Value z) {
        if (failed(result))
          return;
        math.emplace(b(), b().getLoc(), op, SoftmaxConvention::gpu());
        diagonal = Value();
        if (Value given = op.getDiagonal()) {
          diagonal = rebuildScalar(given, op);
          if (!diagonal) {
            result = failure();
            return;
          }
        } else {
          diagonal = resolveDiagonal(
              b(), b().getLoc(), op, Value(), [&](Value operand, int64_t dim) {
                return arg(argumentOf(operand)).sizes[dim];
              });
        }
        band.emplace(b(), b().getLoc(), op, diagonal);
        if (dropoutP >= 0) {
          dropThreshold =
              dropoutThreshold(b(), b().getLoc(), arg(dropoutP).data);
          dropKept = dropoutKeptScale(b(), b().getLoc(), arg(dropoutP).data);
        }
        captures.clear();
        for (int n : captureArgs)
          captures.push_back(globalMemref(arg(n)));
        if (hasModifiers(op)) {
          modifiers.emplace(b(), b().getLoc(), scoreModOf(op), maskModOf(op),
                            captures);
        }
        emitBlock(x, y, z);
      });
  return result;
}

} // namespace

int64_t mlir::attn::gpu_kernel::backwardTile(int64_t headDim,
                                             int64_t valueDim) {
  for (int64_t t : {32, 16})
    if (sharedBytes(t, headDim, valueDim) <= kSharedBudget)
      return t;
  return 8;
}

LogicalResult mlir::attn::gpu_kernel::buildBackwardGpuKernel(
    func::FuncOp func, AttentionBackwardOp op, gpu::GPUModuleOp gpuModule) {
  return BackwardGpuKernel(op, /*host=*/false)
      .build(func, *gpuModule.getBody());
}

LogicalResult mlir::attn::gpu_kernel::buildBackwardHostEmulation(
    func::FuncOp func, AttentionBackwardOp op, ModuleOp module) {
  return BackwardGpuKernel(op, /*host=*/true).build(func, *module.getBody());
}
