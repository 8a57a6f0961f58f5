//===- TileMemory.h - The GPU kernel's global tensors and shared tiles -*- C++
//-*-===//
//
// The layers of attn-lower-to-gpu's converter below the IR walk: the
// kernel's tensors in global memory (views of its arguments) and the tiles
// it stages in shared memory (TileMemory), and the online-softmax step's
// arithmetic on the fragments (SoftmaxStep): the score function and the
// row statistics, from AttentionMath in the GPU's conventions.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TRANSFORMS_GPU_TILEMEMORY_H
#define ATTN_TRANSFORMS_GPU_TILEMEMORY_H

#include "lib/Transforms/Gpu/WarpTile.h"
#include "lib/Transforms/Modifiers.h"

#include "dialect/AttnOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir {
namespace attn {
namespace gpu_kernel {

/// A function argument in global memory: the kernel's pointer parameter
/// (a 1-D memref) and its sizes and element strides (index values).
struct GlobalTensor {
  Value data;
  Type elementType; // the tensor's: i1 for a keep-mask (stored as i8)
  SmallVector<Value, 4> sizes, strides;
  /// Whether its rows can be copied in 16-byte cp.async chunks: unit
  /// innermost stride, other strides and the pointer 16-byte aligned.
  Value asyncCopyable;
};

/// A slice of a global tensor: offsets and sizes in its coordinates.
struct View {
  unsigned tensor;
  SmallVector<Value, 4> offsets, sizes;
};

/// One thread's part of a state tensor (see the file comment).
struct Fragments {
  SmallVector<Value> values;
};

inline int64_t elementBytes(Type t) { return t.getIntOrFloatBitWidth() / 8; }

/// The kernel's tensors in global memory and its shared-memory tiles.
class TileMemory : public WarpTile {
protected:
  /// cp.async copies where the layout allows (16-bit inputs).
  bool asyncCopy = false;
  SmallVector<GlobalTensor> globals;
  DenseMap<Value, View> views;
  SharedTiles shared;

  //===--- global memory ----------------------------------------------===//
  /// The linear element index of `indices` (relative to the view).
  Value globalIndex(const View &view, ArrayRef<Value> indices) {
    const GlobalTensor &g = globals[view.tensor];
    Value index = cst(0);
    for (auto [d, i] : llvm::enumerate(indices))
      index = add(index, mul(add(view.offsets[d], i), g.strides[d]));
    return index;
  }
  /// One element as f32 (a keep-mask element as i1).
  Value loadGlobal(const View &view, ArrayRef<Value> indices) {
    const GlobalTensor &g = globals[view.tensor];
    Value v = memref::LoadOp::create(b(), g.data,
                                     ValueRange{globalIndex(view, indices)});
    if (g.elementType.isInteger(1))
      return arith::CmpIOp::create(
          b(), arith::CmpIPredicate::ne, v,
          arith::ConstantOp::create(b(), b().getI8IntegerAttr(0)));
    return toF32(v);
  }

  /// Copies `rows` x `cols` elements of `view` into `tile` (see stageTile).
  void stageTile(Value tile, const View &view, Value rows, int64_t cols,
                 int64_t paddedCols);
  /// The query tile of `view` into shared memory, landed on return.
  void stageQuery(const View &view);
  /// Waits until at most `pending` groups of cp.async copies are in flight.
  void waitForCopies(unsigned pending);
  /// Whether `g`'s rows can be copied in 16-byte chunks (a run-time i1).
  Value asyncCopyable(const GlobalTensor &g);
  void copyTileAsync(Value tile, const View &view, Value rows, int64_t cols,
                     int64_t paddedCols);
  void copyTileByElements(Value tile, const View &view, Value rows,
                          int64_t cols, int64_t paddedCols);
};

/// The online-softmax step's arithmetic on the thread's fragments.
class SoftmaxStep : public TileMemory {
protected:
  /// The op's score function and online update in the GPU's conventions.
  AttentionMath maths(OnlineAttentionOp op) {
    return AttentionMath(b(), b().getLoc(), op, SoftmaxConvention::gpu());
  }
  /// Scale, soft cap, mask, score_mod, band and mask_mod of the fragment's
  /// scores, `keys` keys in the tile; `diagonalOperand` is the op's
  /// diagonal and `origin` its global indices (b, h, i, j of the tile's
  /// first element) as converted; `modifiers` null without modifiers;
  /// `fullBlock` (i1, or null) a block table's promise that the mask_mod
  /// keeps every score of the tile, which then is not applied.
  void maskScores(OnlineAttentionOp op, SmallVector<Value> &scores, Value keys,
                  Value diagonalOperand, ValueRange origin,
                  ModifierEmitter *modifiers, Value fullBlock = Value());
  /// The online update of the rows' max and sum; scores become weights.
  /// Returns the rescale factors of the thread's rows (2 per row block).
  SmallVector<Value> updateStatistics(OnlineAttentionOp op,
                                      SmallVector<Value> &scores,
                                      Fragments &max, Fragments &sum);
  /// Dropout on the weights (after the online update, which sums them
  /// undropped): each becomes P·Z, Z = keep / (1 - p) with the keep bit of
  /// its global (b, h, i, j); `dropoutP` and `seed` are the op's operands
  /// as converted.
  void dropWeights(SmallVector<Value> &weights, Value dropoutP, Value seed,
                   ValueRange origin);
  /// The 4 lanes of a row combine their partial max or sum.
  Value rowReduce(AttentionMath &maths, Value v, bool isMax);
};

} // namespace gpu_kernel
} // namespace attn
} // namespace mlir

#endif // ATTN_TRANSFORMS_GPU_TILEMEMORY_H
