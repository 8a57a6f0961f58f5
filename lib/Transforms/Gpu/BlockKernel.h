//===- BlockKernel.h - GPU kernels as loops of a block's threads -*- C++
//-*-===//
//
// The base of attn-lower-to-gpu's kernels for the ops other than the
// forward's attention (Gpu/LinearKernel.cpp, Gpu/AdditiveKernel.cpp,
// Gpu/BackwardKernel.cpp): a block's threads stride
// over the cells of shared-memory tiles in loops separated by barriers, and
// no value of one thread crosses a barrier. That shape gives the host
// emulation for free: the same body on one thread (stride 1, no barriers),
// the grid's blocks one after the other, the tiles on the stack, which the
// tests lower to LLVM and run on a machine without a GPU.
//
// Parameters as the attention kernels': per tensor argument of the function
// a 1-D memref, its sizes and its element strides (i64); a scalar argument
// (f32 or i64) as itself.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TRANSFORMS_GPU_BLOCKKERNEL_H
#define ATTN_TRANSFORMS_GPU_BLOCKKERNEL_H

#include "lib/Transforms/Gpu/WarpTile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <array>

namespace mlir {
namespace attn {
namespace gpu_kernel {

/// A kernel argument in global memory: its pointer, sizes and strides; or
/// a scalar argument (dropout's probability or seed): `data` alone.
struct Global {
  Value data;
  Type elementType; // i1 for a keep-mask (stored as i8)
  SmallVector<Value, 4> sizes, strides;
};

/// A shared-memory tile to carve: where its view goes, and its f32 shape.
struct SharedTile {
  Value *view;
  SmallVector<int64_t, 2> shape;
};

class BlockKernel : public WarpTile {
protected:
  BlockKernel(bool host, int64_t blockThreads)
      : host(host), threads(host ? 1 : blockThreads),
        blockThreads(blockThreads) {}

  /// The host emulation: the grid's blocks one after the other, each on
  /// one thread (no barriers), shared memory on the stack.
  bool host;
  /// The stride of the cell loops (1 on the host) and the block's size.
  int64_t threads, blockThreads;
  /// The function's arguments, in order.
  SmallVector<Global> globals;

  /// Whether `op`'s operands are `func`'s arguments in order (through the
  /// tiling's slices and shared outputs); else an error on `op`.
  static LogicalResult checkArguments(func::FuncOp func, Operation *op);
  /// The number of the function argument that `v` is (a slice of), through
  /// the tiling's slices and shared outputs; -1 if none.
  static int argumentOf(Value v);

  /// Scalar `v` of the function (index arithmetic on its arguments' sizes,
  /// as the tiling computes a causal diagonal) rebuilt in the kernel, a
  /// `tensor.dim` of an argument read from its size parameter; null (and an
  /// error on `user`) for anything else.
  Value rebuildScalar(Value v, Operation *user);
  /// The whole argument `g` as a memref of its rank (argumentMemref).
  Value globalMemref(const Global &g) {
    return argumentMemref(b(), b().getLoc(), g.data, g.sizes, g.strides);
  }

  /// Builds the kernel of `func` at the end of `into` and fills `globals`:
  /// a gpu.func of `blockThreads` threads whose block ids (x, y, z) go to
  /// `body`, carrying `blockRows` (attn.block_rows) and the bytes `carve`
  /// returns (attn.shared_memory_bytes); or the host emulation's func.func,
  /// `body` inside loops over the grid `gridSizes()` (read after the
  /// parameters). `carve` makes the shared tiles (carveShared).
  void buildKernel(func::FuncOp func, Block &into, int64_t blockRows,
                   function_ref<std::array<Value, 3>()> gridSizes,
                   function_ref<int64_t()> carve,
                   function_ref<void(Value, Value, Value)> body);
  /// Views of one buffer for `tiles`, each 16-byte aligned: dynamic shared
  /// memory, or a stack buffer on the host. Returns the bytes.
  int64_t carveShared(ArrayRef<SharedTile> tiles);

  //===--- small builders ---------------------------------------------===//
  Value fma(Value x, Value y, Value acc) {
    return math::FmaOp::create(b(), x, y, acc);
  }
  Value maxF(Value x, Value y) { return arith::MaximumFOp::create(b(), x, y); }
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
  /// One element as f32 (a keep-mask's as i1).
  Value loadGlobal(const Global &g, ArrayRef<Value> indices);
  /// `v` (f32) rounded to g's element type.
  void storeGlobal(Value v, const Global &g, ArrayRef<Value> indices);
  void barrier() {
    if (!host)
      gpu::BarrierOp::create(b());
  }
  /// body(i) for i in [0, count), the block's threads striding.
  void forEach(Value count, function_ref<void(Value)> body) {
    forLoop(tid, count, cst(threads), body);
  }
  void forEach(int64_t count, function_ref<void(Value)> body) {
    forEach(cst(count), body);
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
  /// `x` if `cond`, else 0 (f32), `x` built only under `cond`.
  Value orZero(Value cond, function_ref<Value()> x) {
    return ifElse(cond, b().getF32Type(), x, [&] { return f32(0.0f); });
  }
  /// The first `count` rows of a chunk starting at `first` of `length`.
  Value chunkRows(int64_t chunk, Value first, Value length) {
    return arith::MinSIOp::create(b(), cst(chunk), sub(length, first));
  }

private:
  std::unique_ptr<ImplicitLocOpBuilder> ownedBuilder;
};

} // namespace gpu_kernel
} // namespace attn
} // namespace mlir

#endif // ATTN_TRANSFORMS_GPU_BLOCKKERNEL_H
