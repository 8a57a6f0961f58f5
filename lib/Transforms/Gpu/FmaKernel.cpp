//===- FmaKernel.cpp - Scores and P·V by FMA ------------------------------===//
//
// Any element type (f32 inputs, or tensor cores not asked for): each thread
// computes its fragment's scores from the shared Q and K tiles by f32 FMAs,
// and P·V with the weights gone through shared memory, so that each thread
// reads its rows' weight of every key.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Gpu/WarpTile.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::gpu_kernel;

namespace {

class FmaKernel : public GpuMicroKernel {
public:
  using GpuMicroKernel::GpuMicroKernel;

  SmallVector<Value> scores() override;
  void accumulate(SmallVector<Value> &acc, ArrayRef<Value> probs, Value keys,
                  bool dropExcluded) override;
};

} // namespace

/// The same scores by FMA (f32 inputs, or MMA disabled).
SmallVector<Value> FmaKernel::scores() {
  int64_t groups = keyTile / kGroup;
  SmallVector<Value> inits(fragmentSize(keyTile), f32(0));
  return forLoopWith(
      cst(0), cst(headDim), cst(1), inits,
      [&](Value d, ValueRange acc) -> SmallVector<Value> {
        SmallVector<Value, 2 * kMaxRowBlocks> q;
        for (Value row : rows)
          q.push_back(toF32(
              memref::LoadOp::create(b(), shared.query, ValueRange{row, d})));
        SmallVector<Value> next(acc.size());
        for (int64_t j = 0; j < groups; ++j) {
          Value key = add(colPair, cst(j * kGroup));
          Value k[2] = {
              toF32(
                  memref::LoadOp::create(b(), shared.keys, ValueRange{key, d})),
              toF32(memref::LoadOp::create(b(), shared.keys,
                                           ValueRange{add(key, cst(1)), d}))};
          for (int64_t m = 0; m < rowBlocks; ++m)
            for (int64_t i = 0; i < 4; ++i) {
              int64_t at = (m * groups + j) * 4 + i;
              next[at] =
                  math::FmaOp::create(b(), q[2 * m + i / 2], k[i & 1], acc[at]);
            }
        }
        return next;
      });
}

/// acc += P·V by FMA: the weights go through shared memory so that each
/// thread reads its rows' weight of every key.
void FmaKernel::accumulate(SmallVector<Value> &acc, ArrayRef<Value> probs,
                           Value keys, bool dropExcluded) {
  int64_t groups = keyTile / kGroup;
  for (int64_t m = 0; m < rowBlocks; ++m)
    for (int64_t j = 0; j < groups; ++j)
      for (int64_t i = 0; i < 4; ++i)
        memref::StoreOp::create(
            b(), probs[(m * groups + j) * 4 + i], shared.probs,
            ValueRange{fragmentRow(m, i),
                       add(colPair, cst(j * kGroup + (i & 1)))});
  gpu::BarrierOp::create(b());
  acc = forLoopWith(
      cst(0), keys, cst(1), acc,
      [&](Value key, ValueRange state) -> SmallVector<Value> {
        SmallVector<Value, 2 * kMaxRowBlocks> p;
        for (Value row : rows)
          p.push_back(
              memref::LoadOp::create(b(), shared.probs, ValueRange{row, key}));
        return accumulateKey(state, key, p, dropExcluded);
      });
}

SmallVector<Value> GpuMicroKernel::accumulateKey(ValueRange acc, Value key,
                                                 ArrayRef<Value> p,
                                                 bool dropExcluded) {
  // An excluded key has weight exactly 0; 0 · NaN would still leak a NaN
  // value into a row that does not attend to it.
  Value zero = f32(0);
  SmallVector<Value, 2 * kMaxRowBlocks> excluded;
  if (dropExcluded)
    for (Value weight : p)
      excluded.push_back(
          arith::CmpFOp::create(b(), arith::CmpFPredicate::OEQ, weight, zero));
  int64_t groups = paddedValueDim / kGroup;
  SmallVector<Value> next(acc.size());
  for (int64_t e = 0; e < groups; ++e) {
    Value col = add(colPair, cst(e * kGroup));
    Value v[2] = {
        toF32(memref::LoadOp::create(b(), shared.values, ValueRange{key, col})),
        toF32(memref::LoadOp::create(b(), shared.values,
                                     ValueRange{key, add(col, cst(1))}))};
    for (int64_t m = 0; m < rowBlocks; ++m)
      for (int64_t i = 0; i < 4; ++i) {
        int64_t row = 2 * m + i / 2, at = (m * groups + e) * 4 + i;
        Value value = v[i & 1];
        if (dropExcluded)
          value = select(excluded[row], zero, value);
        next[at] = math::FmaOp::create(b(), p[row], value, acc[at]);
      }
  }
  return next;
}

std::unique_ptr<GpuMicroKernel>
mlir::attn::gpu_kernel::createFmaKernel(const WarpTile &tile,
                                        const SharedTiles &shared) {
  return std::make_unique<FmaKernel>(tile, shared);
}
