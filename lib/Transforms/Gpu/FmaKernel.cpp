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
  SmallVector<Value> inits(groups * 4, f32(0));
  return forLoopWith(
      cst(0), cst(headDim), cst(1), inits,
      [&](Value d, ValueRange acc) -> SmallVector<Value> {
        Value q0 = toF32(
            memref::LoadOp::create(b(), shared.query, ValueRange{row0, d}));
        Value q1 = toF32(
            memref::LoadOp::create(b(), shared.query, ValueRange{row1, d}));
        SmallVector<Value> next;
        for (int64_t j = 0; j < groups; ++j) {
          Value key = add(colPair, cst(j * kGroup));
          Value k0 = toF32(
              memref::LoadOp::create(b(), shared.keys, ValueRange{key, d}));
          Value k1 = toF32(memref::LoadOp::create(
              b(), shared.keys, ValueRange{add(key, cst(1)), d}));
          next.push_back(math::FmaOp::create(b(), q0, k0, acc[j * 4 + 0]));
          next.push_back(math::FmaOp::create(b(), q0, k1, acc[j * 4 + 1]));
          next.push_back(math::FmaOp::create(b(), q1, k0, acc[j * 4 + 2]));
          next.push_back(math::FmaOp::create(b(), q1, k1, acc[j * 4 + 3]));
        }
        return next;
      });
}

/// acc += P·V by FMA: the weights go through shared memory so that each
/// thread reads its rows' weight of every key.
void FmaKernel::accumulate(SmallVector<Value> &acc, ArrayRef<Value> probs,
                           Value keys, bool dropExcluded) {
  for (int64_t j = 0; j < keyTile / kGroup; ++j)
    for (int64_t i = 0; i < 4; ++i)
      memref::StoreOp::create(
          b(), probs[j * 4 + i], shared.probs,
          ValueRange{fragmentRow(i), add(colPair, cst(j * kGroup + (i & 1)))});
  gpu::BarrierOp::create(b());
  acc = forLoopWith(
      cst(0), keys, cst(1), acc,
      [&](Value key, ValueRange state) -> SmallVector<Value> {
        Value p[2] = {
            memref::LoadOp::create(b(), shared.probs, ValueRange{row0, key}),
            memref::LoadOp::create(b(), shared.probs, ValueRange{row1, key})};
        return accumulateKey(state, key, p, dropExcluded);
      });
}

SmallVector<Value> GpuMicroKernel::accumulateKey(ValueRange acc, Value key,
                                                 ArrayRef<Value> p,
                                                 bool dropExcluded) {
  // An excluded key has weight exactly 0; 0 · NaN would still leak a NaN
  // value into a row that does not attend to it.
  Value zero = f32(0);
  Value excluded[2];
  if (dropExcluded)
    for (int r = 0; r < 2; ++r)
      excluded[r] =
          arith::CmpFOp::create(b(), arith::CmpFPredicate::OEQ, p[r], zero);
  SmallVector<Value> next;
  for (int64_t e = 0; e < paddedValueDim / kGroup; ++e) {
    Value col = add(colPair, cst(e * kGroup));
    Value v[2] = {
        toF32(memref::LoadOp::create(b(), shared.values, ValueRange{key, col})),
        toF32(memref::LoadOp::create(b(), shared.values,
                                     ValueRange{key, add(col, cst(1))}))};
    for (int64_t i = 0; i < 4; ++i) {
      Value value = v[i & 1];
      if (dropExcluded)
        value = select(excluded[i / 2], zero, value);
      next.push_back(math::FmaOp::create(b(), p[i / 2], value, acc[e * 4 + i]));
    }
  }
  return next;
}

std::unique_ptr<GpuMicroKernel>
mlir::attn::gpu_kernel::createFmaKernel(const WarpTile &tile,
                                        const SharedTiles &shared) {
  return std::make_unique<FmaKernel>(tile, shared);
}
