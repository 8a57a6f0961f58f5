//===- VectorEmitter.h - Vector builders of the CPU micro-kernels -*- C++
//-*-===//
//
// The small builders that every CPU micro-kernel of attn-lower-to-vector
// uses: constants and splats of a fixed vector width, loops, row chunks
// loaded (masked, widened to f32), lane reductions in the micro-kernels'
// conventions, prefetches, and the x86 bf16 pair layouts that AVX-512
// BF16's dot product (vdpbf16ps) reads. Nothing here knows the op.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TRANSFORMS_CPU_VECTOREMITTER_H
#define ATTN_TRANSFORMS_CPU_VECTOREMITTER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir {
namespace attn {
namespace cpu {

class VectorEmitter {
public:
  VectorEmitter(ImplicitLocOpBuilder &b, int64_t lanes);

protected:
  ImplicitLocOpBuilder &b;
  /// f32 lanes per vector (16 on AVX-512, 8 on AVX2).
  int64_t lanes;
  Type f32;
  VectorType vecType, maskVecType, idxVecType;

  //===--- small builders ---------------------------------------------===//

  Value cst(int64_t v);
  Value f32Const(float v);
  Value splat(Value scalar);
  Value dim(Value memref, int64_t index);
  /// Loads one element and widens it to f32.
  Value loadF32(Value memref, ValueRange indices);
  void forLoop(Value lb, Value ub, Value step, function_ref<void(Value)> body);
  /// An scf.for carrying vectors; `body` returns the next values.
  SmallVector<Value>
  forLoopWith(Value lb, Value ub, Value step, ValueRange inits,
              function_ref<SmallVector<Value>(Value, ValueRange)> body);
  Value zeroVector() { return splat(f32Const(0.0f)); }
  Value loadVector(Value memref, ValueRange at) {
    return vector::LoadOp::create(b, vecType, memref, at);
  }
  void storeVector(Value v, Value memref, ValueRange at) {
    vector::StoreOp::create(b, v, memref, at);
  }
  /// Prefetches into L2 the cache lines of a run of `elements` elements of
  /// `memref` along its last dimension, at `rowIndex` (the other dims)
  /// from `first` (keys clamped to the last; runLineOffsets). The kernels
  /// prefetch each row's run of the keys that they read next where a tile
  /// holds more rows than the hardware prefetchers follow streams. (Into
  /// L2: rows 2^k bytes apart share their L1 sets, 12 ways on Zen 5, and
  /// evicted each other there.)
  void prefetchRun(Value memref, ArrayRef<Value> rowIndex, Value first,
                   int64_t elements);
  /// Zeros rows [from, to) of an f32 or 16-bit buffer, `cols` columns each
  /// (a multiple of a vector's elements: lanes, or 2·lanes 16-bit ones).
  void zeroRows(Value buffer, Value from, Value to, int64_t cols);
  /// An f32 buffer of `shape` on the heap (64-byte aligned), its dynamic
  /// dims `dynamicSizes`; the caller deallocates it.
  Value heapBuffer(ArrayRef<int64_t> shape, ValueRange dynamicSizes = {});
  /// `body(first, count)` over [lo, hi): whole blocks of `size`, then the
  /// rest one at a time (count 1).
  void forBlocks(Value lo, Value hi, int64_t size,
                 function_ref<void(Value, int64_t)> body) {
    forBlocks(lo, hi, {size, 1}, body);
  }
  /// The same with blocks of sizes[0], then of sizes[1] in what is left,
  /// ... (decreasing, the last 1).
  void forBlocks(Value lo, Value hi, ArrayRef<int64_t> sizes,
                 function_ref<void(Value, int64_t)> body);

  /// The sum of a vector's lanes in any order (reassoc: a log-depth tree,
  /// not the 16 dependent adds of an ordered reduction).
  Value horizontalSum(Value vec);
  Value clampToI32(Value index, int64_t lo, int64_t hi);

  /// Whether the block mask's table of attention-like `op` (its captures
  /// and origin given) keeps any score of keys [blockStart, blockStart +
  /// blockKeys) for rows [firstRow, firstRow + count) of `head` in `batch`
  /// (op-local indices), and whether it declares them all kept (i1 each):
  /// over the table entries they cover (at most a few; 0 none kept, 2 all
  /// kept), indices clamped to the table.
  std::pair<Value, Value> blockTableEntries(Operation *op, ValueRange captures,
                                            ValueRange origin, Value batch,
                                            Value head, Value firstRow,
                                            Value count, Value blockStart,
                                            Value blockKeys);

  /// Runs `body` in an scf.if taken when `count` is odd.
  void ifOdd(Value count, function_ref<void()> body);

  /// `body(c0, columns)` for the `chunk`-wide chunks of `width` columns
  /// (`lanes` by default): an scf.for over the whole chunks, then the
  /// partial one (columns < chunk).
  void eachChunk(int64_t width, function_ref<void(Value, int64_t)> body,
                 int64_t chunk = 0);

  /// `fast(rows)` with `memref` seen with a unit innermost stride where it
  /// has one, else `slow()`: an scf.if on the stride.
  void ifUnitStride(Value memref, function_ref<void(Value)> fast,
                    function_ref<void()> slow);

  /// The innermost stride of `memref` (any rank).
  Value innerStride(Value memref);
  /// `memref` seen with a unit innermost stride (valid where it has one).
  Value unitStrideRows(Value memref);

  /// acc[r * n + v] += Σ_{k in [lo, hi)} left(r, k) · right[k][col + v·lanes]
  /// for r < rows, v < n (`acc` holds rows x n vectors, `right` is an f32
  /// [K][N] buffer): a register tile of FMAs that broadcast one scalar of
  /// the left operand per row and load each vector of the right once.
  SmallVector<Value> broadcastProduct(Value lo, Value hi, int64_t rows,
                                      function_ref<Value(int64_t, Value)> left,
                                      Value right, Value col, ValueRange acc);

  /// Row `rowIndex` of `memref` (any rank; f32, f16 or bf16 elements) from
  /// the f32 `vectors`, its first `width` elements: (masked) vector stores
  /// where its rows have unit stride, else element by element through
  /// `rowBuffer` (f32, room for every vector).
  void storeRowAs(Value memref, ValueRange rowIndex, ArrayRef<Value> vectors,
                  int64_t width, Value rowBuffer);

  /// The mask of a vector's first `live` lanes.
  Value liveLanes(int64_t live);
  /// A vector of `lanes` 16-bit or f32 elements as f32.
  Value widenToF32(Value v);
  /// `width` elements of a unit-stride row from column `col`, in the row's
  /// element type; columns past `limit` read as 0.
  Value loadRawChunk(Value rowsMemref, ValueRange rowIndex, int64_t col,
                     int64_t limit, int64_t width);
  /// `width` elements of a unit-stride row from column `col`, of which the
  /// first `live` are read (the others are 0).
  Value loadRawChunkAt(Value rowsMemref, ValueRange rowIndex, Value col,
                       int64_t live, int64_t width);
  /// The same with the count read known at run time: `live` elements
  /// (an index), the others 0.
  Value loadRawChunkAt(Value rowsMemref, ValueRange rowIndex, Value col,
                       Value live, int64_t width);
  /// The same where `mask` (i1 lanes, as many as read) is set.
  Value loadRawChunkWhere(Value rowsMemref, ValueRange rowIndex, Value col,
                          Value mask);
  /// `lanes` elements of a unit-stride row from column `col` (masked past
  /// `limit` columns), widened to f32.
  Value loadRowChunk(Value rowsMemref, ValueRange rowIndex, int64_t col,
                     int64_t limit);

  /// The keep bits of `lanes` elements of a unit-stride i1 row from `at`
  /// (the last index a column), of which the lanes of `live` are read (the
  /// others false): a masked load of the row's bytes through its aligned
  /// pointer (a vector of i1 is a bit vector in memory; an i1 memref holds
  /// a byte an element), a non-zero byte true.
  Value loadKeepBits(Value rowsView, ValueRange at, Value live);
  /// The address (bytes, as an index) of element `at` of a unit-stride
  /// view (an i1 element a byte).
  Value elementAddress(Value rowsView, ValueRange at);

  /// `columns` (at most `lanes`) elements of a unit-stride row from `at`
  /// (the last index a column), widened to f32; lanes past them read 0.
  Value loadChunkF32(Value rowsView, ArrayRef<Value> at, int64_t columns);

  /// Prefetches the cache lines of a unit-stride row of `size` elements
  /// (one per 64 bytes, and its last element for a row not line-aligned).
  void prefetchRow(Value rowsMemref, ValueRange rowIndex, int64_t size);

  /// The columns of the `lanes` x `lanes` tile whose rows are `rows` (at
  /// most `lanes` vectors; missing rows are 0): log2(lanes) levels of
  /// two-vector shuffles, each an x86 unpack or lane shuffle.
  SmallVector<Value> transposeTile(ArrayRef<Value> rows);

  /// Rows [start, start + count) of a [..., rows, width] memref with unit-
  /// stride rows (`rowsView` at `prefix`, its leading indices) transposed
  /// into `target`, `lanes` rows x `lanes` 32-bit words at a time (row
  /// loads, one vector.transpose, column stores): an f32 target [width][N]
  /// gets row j's column c at [c][j]; a bf16 target [words][2N] gets the
  /// pairs of 16-bit columns as words, row j's columns 2p and 2p + 1 at
  /// [p][2j] and [p][2j + 1] (an odd width's last pair ends in 0). In the
  /// last group of `lanes` rows, the rows past the count read as 0
  /// (`zeroPast`, which also prefetches each next group's rows while a
  /// group is transposed) or as the last row again.
  void transposeRows(Value rowsView, ValueRange prefix, Value start,
                     Value count, int64_t width, Value target, bool zeroPast);

  /// Lane n of the result = the sum of vectors[n]'s lanes (as many vectors
  /// as lanes): each level adds the two halves of every segment of a pair
  /// of vectors, gathered by two shuffles, halving the segments' length and
  /// the number of vectors.
  Value transposedSum(ArrayRef<Value> vectors);

  /// The column, of a group of 2 x lanes, that lane `lane` of the low
  /// (or high) unpack of two V rows pairs: the unpacks take 4 of each 8
  /// columns (one 128-bit lane of bf16), the low ones the first 4.
  static int64_t unpackedColumn(int64_t lane, bool high);
  /// Two chunks' accumulators (columns [0, lanes) and [lanes, 2 lanes) of
  /// a group) in the column order of pairs unpacked as loaded (see
  /// accumulateByBf16Dot), and back.
  std::pair<Value, Value> toUnpackedOrder(Value first, Value second);
  std::pair<Value, Value> fromUnpackedOrder(Value low, Value high);

  /// The bf16 pair (lo, hi) in every 32-bit lane of a dot product operand.
  Value broadcastPair(Value lo, Value hi);
  /// A vector<2xbf16> in every 32-bit lane of a dot product operand.
  Value broadcastPair(Value pair);
  /// The pair of bf16 elements at `at` (the last index a column) of a bf16
  /// buffer, in every 32-bit lane.
  Value broadcastPairAt(Value memref, ValueRange at);
  /// `lanes` pairs (2·lanes bf16 elements) of a bf16 buffer from `at`.
  Value loadPairs(Value memref, ValueRange at);
};

} // namespace cpu
} // namespace attn
} // namespace mlir

#endif // ATTN_TRANSFORMS_CPU_VECTOREMITTER_H
