//===- WarpTile.h - The GPU kernel's tile and its micro-kernels -*- C++ -*-===//
//
// What attn-lower-to-gpu's micro-kernels share with the converter that
// drives them: the thread block's tile (its geometry, decided from the IR),
// each thread's place in the fragment layout, and small builders; and the
// interface of a micro-kernel, which computes a tile's scores and its P·V
// in that layout:
//
//   mma.sync (MmaSyncKernel.cpp)  16-bit Q, K, V on tensor cores
//                                 (m16n8k16, operands by ldmatrix);
//   FMA      (FmaKernel.cpp)      any type, P through shared memory.
//
// Fragment layout (that of mma.sync m16n8k16's accumulator, once per m16
// block of rows): warp w owns the R = 16M query rows R·w .. R·w + R-1 of
// the tile, M = 1 or 2 blocks of 16 rows (row_block 16 or 32 of the
// #attn.kernel); in block m lane l holds rows r0 = R·w + 16m + l/4 and
// r1 = r0 + 8, and in each group of 8 columns the two columns 2(l%4) and
// 2(l%4)+1. A [rows x N] tile is, block after block, N/8 groups of 4
// values: (r0,c), (r0,c+1), (r1,c), (r1,c+1); value i of group j of block
// m is at (m·N/8 + j)·4 + i. Row statistics are 2M values (r0, r1 of each
// block). Two blocks a warp share each K and V operand between two MMAs
// (FlashAttention-2's 32 rows a warp) at twice the registers.
//
// A new micro-kernel (Hopper's wgmma) is a new file implementing
// GpuMicroKernel and a case in createGpuMicroKernel.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TRANSFORMS_GPU_WARPTILE_H
#define ATTN_TRANSFORMS_GPU_WARPTILE_H

#include "lib/Transforms/AttentionMath.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <memory>

namespace mlir {
namespace attn {
namespace gpu_kernel {

/// A whole kernel argument (its 1-D memref parameter `data`, its sizes and
/// element strides) as a memref of its rank: what the modifiers' reads of a
/// captured tensor take.
inline Value argumentMemref(OpBuilder &b, Location loc, Value data,
                            ArrayRef<Value> sizes, ArrayRef<Value> strides) {
  SmallVector<int64_t> dynamic(sizes.size(), ShapedType::kDynamic);
  auto type = MemRefType::get(
      dynamic, cast<MemRefType>(data.getType()).getElementType(),
      StridedLayoutAttr::get(b.getContext(), /*offset=*/0, dynamic));
  SmallVector<OpFoldResult> sizeFolds(sizes.begin(), sizes.end()),
      strideFolds(strides.begin(), strides.end());
  return memref::ReinterpretCastOp::create(b, loc, type, data,
                                           b.getIndexAttr(0), sizeFolds,
                                           strideFolds);
}

constexpr int64_t kWarpSize = 32;
/// Rows of one mma.sync m16 block; a warp owns 1 or 2 of them.
constexpr int64_t kMmaRows = 16;
constexpr int64_t kMaxRowBlocks = 2;
/// Columns of one fragment group, and of an MMA's reduction step.
constexpr int64_t kGroup = 8, kMmaK = 16;

/// The K/V/Q tile buffers in shared memory, with their row pitches.
struct SharedTiles {
  Value query, keys, values, probs; // probs: FMA path only
};

/// The thread block's tile and this thread's place in it.
class WarpTile {
protected:
  ImplicitLocOpBuilder *builder = nullptr;

  // Tile geometry, from the IR.
  Type elementType;
  int64_t blockRows = 0, keyTile = 0, headDim = 0, valueDim = 0;
  int64_t paddedHeadDim = 0, paddedValueDim = 0, warps = 0;
  /// m16 blocks of rows per warp (M in the layout above).
  int64_t rowBlocks = 1;
  int64_t qPitch = 0, vPitch = 0, pPitch = 0;

  // The thread's place in the fragment layout.
  Value tid, warp, lane, rowInWarp, colPair; // colPair = 2 (lane % 4)
  /// The tile rows of this thread: r0 and r1 of each block, 2M values.
  SmallVector<Value, 2 * kMaxRowBlocks> rows;

  ImplicitLocOpBuilder &b() { return *builder; }
  /// The row of value i of a group of block m.
  Value fragmentRow(int64_t m, int64_t i) { return rows[2 * m + i / 2]; }
  /// Values of a thread's fragment of a [rows x cols] tile.
  int64_t fragmentSize(int64_t cols) const {
    return rowBlocks * cols / kGroup * 4;
  }

  //===--- small builders ---------------------------------------------===//
  Value cst(int64_t v) { return arith::ConstantIndexOp::create(b(), v); }
  Value f32(float v) {
    return arith::ConstantOp::create(b(), b().getF32FloatAttr(v));
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b(), x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b(), x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b(), x, y); }
  Value lt(Value x, Value y) {
    return arith::CmpIOp::create(b(), arith::CmpIPredicate::slt, x, y);
  }
  Value andI(Value x, Value y) { return arith::AndIOp::create(b(), x, y); }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b(), c, x, y);
  }
  Value toF32(Value v) {
    return v.getType().isF32()
               ? v
               : arith::ExtFOp::create(b(), b().getF32Type(), v);
  }
  void forLoop(Value lb, Value ub, Value step, function_ref<void(Value)> body) {
    buildLoop(b(), b().getLoc(), lb, ub, step, body);
  }
  SmallVector<Value>
  forLoopWith(Value lb, Value ub, Value step, ValueRange inits,
              function_ref<SmallVector<Value>(Value, ValueRange)> body) {
    return buildLoopWith(b(), b().getLoc(), lb, ub, step, inits, body);
  }
  /// `then` under `cond`, with `otherwise` as the value when false.
  Value ifElse(Value cond, Type type, function_ref<Value()> then,
               function_ref<Value()> otherwise) {
    auto op = scf::IfOp::create(b(), TypeRange{type}, cond,
                                /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b());
    b().setInsertionPointToStart(op.thenBlock());
    scf::YieldOp::create(b(), then());
    b().setInsertionPointToStart(op.elseBlock());
    scf::YieldOp::create(b(), otherwise());
    return op.getResult(0);
  }
};

/// The micro-kernels of attn-lower-to-gpu.
enum class GpuMicroKernelKind { MmaSync, Fma };

/// One way to compute a tile's scores and P·V in the fragment layout.
class GpuMicroKernel : public WarpTile {
public:
  GpuMicroKernel(const WarpTile &tile, const SharedTiles &shared)
      : WarpTile(tile), shared(shared) {}
  virtual ~GpuMicroKernel() = default;

  /// What the kernel's lanes compute once, in the kernel's prologue.
  virtual void buildPrologue() {}
  /// S = Q·Kᵀ of the thread's fragment (fragmentSize(keyTile) values),
  /// from the staged Q and K tiles.
  virtual SmallVector<Value> scores() = 0;
  /// acc += P·V over the tile's `keys` keys, from the staged V tile. With
  /// `dropExcluded`, where a key may be excluded for some rows: a key of
  /// weight 0 brings none of its V in (0 · NaN would).
  virtual void accumulate(SmallVector<Value> &acc, ArrayRef<Value> probs,
                          Value keys, bool dropExcluded) = 0;

protected:
  /// acc + p · V[key] by FMA over the thread's value columns, `p` the
  /// weights of the thread's rows (`rows`); with `dropExcluded`, a row whose
  /// weight is 0 takes none of the key's V (0 · NaN would be NaN). In
  /// FmaKernel.cpp; mma.sync's NaN fallback uses it too.
  SmallVector<Value> accumulateKey(ValueRange acc, Value key, ArrayRef<Value> p,
                                   bool dropExcluded);

  /// The converter's, carved in the prologue.
  const SharedTiles &shared;
};

/// Whether micro-kernel `kind` takes P through shared memory.
inline bool needsProbsTile(GpuMicroKernelKind kind) {
  return kind == GpuMicroKernelKind::Fma;
}

std::unique_ptr<GpuMicroKernel> createMmaSyncKernel(const WarpTile &tile,
                                                    const SharedTiles &shared);
std::unique_ptr<GpuMicroKernel> createFmaKernel(const WarpTile &tile,
                                                const SharedTiles &shared);

/// Micro-kernel `kind` for `tile`.
inline std::unique_ptr<GpuMicroKernel>
createGpuMicroKernel(GpuMicroKernelKind kind, const WarpTile &tile,
                     const SharedTiles &shared) {
  switch (kind) {
  case GpuMicroKernelKind::MmaSync:
    return createMmaSyncKernel(tile, shared);
  case GpuMicroKernelKind::Fma:
    return createFmaKernel(tile, shared);
  }
  llvm_unreachable("unknown GPU micro-kernel");
}

} // namespace gpu_kernel
} // namespace attn
} // namespace mlir

#endif // ATTN_TRANSFORMS_GPU_WARPTILE_H
