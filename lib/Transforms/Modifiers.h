//===- Modifiers.h - Score and mask modifiers in a kernel --*- C++ -*-===//
//
// An attention-like op's `score_mod` and `mask_mod` regions (docs/spec.md,
// "Score and mask modifiers") are scalar functions of a score and the
// position's global indices (b, h, q_idx, kv_idx). A micro-kernel evaluates
// them where it has the scores: on one position (scalars), or on a vector
// of positions, one per lane (the keys of a block, or the rows of a lane-
// rows tile). ModifierEmitter clones a region's ops there, each on vectors
// where one of its operands varies across lanes and on scalars where none
// does (so what depends on the row alone, a head's slope say, is computed
// once), and reads the captured tensors with clamped indices: a scalar
// load, or a gather of the lanes' elements. For the backward it also
// emits the score_mod's derivative in the score, op by op (forward mode),
// and in each element of a captured tensor that it reads (the tensor's
// gradient).
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TRANSFORMS_MODIFIERS_H
#define ATTN_TRANSFORMS_MODIFIERS_H

#include "dialect/AttnOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/InferIntRangeInterface.h"
#include "llvm/ADT/SetVector.h"

#include <memory>

namespace mlir {
namespace attn {

/// `memref` seen as one dimension from its first element (unit stride,
/// spanning every element its strides reach) and the offsets Σ index_d ·
/// stride_d of `indices` there (index scalars, or vectors of `lanes` index):
/// a vector of `lanes` index, for a gather or scatter of the lanes' elements;
/// with `lanes` 0 (scalar indices), one index, for a load.
struct FlatElements {
  Value memref, offsets;
};
FlatElements flatElements(OpBuilder &b, Location loc, Value memref,
                          ArrayRef<Value> indices, int64_t lanes);

/// Whether the block mask's table of attention-like `op` (its captures, as
/// memrefs, and origin given) keeps any score of keys [blockStart,
/// blockStart + blockKeys) for rows [firstRow, firstRow + count) of `head`
/// in `batch` (op-local indices), and whether it declares them all kept (i1
/// each): over the table entries they cover (at most a few; 0 none kept, 2
/// all kept), indices clamped to the table. The CPU's micro-kernels and the
/// GPU's kernels skip a block on the first and leave out the mask_mod on the
/// second.
std::pair<Value, Value> blockTableEntries(OpBuilder &b, Location loc,
                                          Operation *op, ValueRange captures,
                                          ValueRange origin, Value batch,
                                          Value head, Value firstRow,
                                          Value count, Value blockStart,
                                          Value blockKeys);

/// The offsets (in elements of `bytes` bytes) at which prefetches fetch the
/// cache lines of a run of `elements` consecutive elements: one a line, and
/// the last element (a run that does not start a line ends in one more).
SmallVector<int64_t> runLineOffsets(int64_t elements, int64_t bytes);

/// Prefetches into L2 the cache lines of the run of `elements` elements of
/// `memref` from key `first` along its last dimension, the leading indices
/// being `rowIndex` (runLineOffsets' offsets; each key passed through
/// `clampKey`, which keeps it inside the row).
void prefetchRunLines(OpBuilder &b, Location loc, Value memref,
                      ArrayRef<Value> rowIndex, Value first, int64_t elements,
                      function_ref<Value(Value)> clampKey);

/// Whether a modifier of attention-like `op` reads a captured tensor at
/// positions that vary with q_idx as well as kv_idx, its last index being
/// kv_idx plus what does not vary with kv_idx (`mask[b, h, q_idx, kv_idx]`,
/// `bias[h, kv_idx − q_idx + c]`): with keys in lanes, 16 consecutive
/// elements of a row (one vector load); with rows in lanes, a gather.
bool readsRowsAlongKeys(Operation *op);

class ModifierEmitter {
public:
  /// For an attention-like op after bufferization (its captures memrefs).
  template <typename OpTy>
  ModifierEmitter(OpBuilder &b, Location loc, OpTy op)
      : b(b), loc(loc), scoreMod(scoreModOf(op)), maskMod(maskModOf(op)),
        captures(op.getCaptures()) {}
  /// For the regions of an op emitted elsewhere (another function), its
  /// captured tensors being `captures` there.
  ModifierEmitter(OpBuilder &b, Location loc, Region *scoreMod, Region *maskMod,
                  ValueRange captures)
      : b(b), loc(loc), scoreMod(scoreMod), maskMod(maskMod),
        captures(captures) {}

  /// Region values evaluated ahead for one vector of keys (keyReads) or of
  /// rows (queryReads): the region's value -> the value emitted for it.
  using ReadsAhead = DenseMap<Value, Value>;

  /// Prefetch, at each read of a run of consecutive elements (readRun),
  /// the element `elements` further along its row into L1 (0: none). A CPU
  /// kernel that walks the keys a block at a time, each block for all its
  /// rows, gives its key block: each row's next block then comes from
  /// DRAM ahead of its use. (Hundreds of rows a block each make a stream
  /// of their own, more than the hardware prefetchers follow: a
  /// `bias[h, q_idx, kv_idx]` read at S = 2048 left f32 at 2.2x the dense
  /// time, 1.3x with the prefetch.)
  void prefetchRunsAhead(int64_t elements) { runPrefetch = elements; }

  /// Prefetches into L2 the `span` elements from what each of the regions'
  /// reads along a row of a captured tensor (readRun's) loads at global
  /// indices `indices` (j a vector of `lanes` keys): the reads whose
  /// indices vary with q_idx and not with the score, for rows that the
  /// kernel reaches later (KeyBlockEmitter::prefetchRowBlock). Only what
  /// their indices need is emitted (other reads there as loads).
  void prefetchReads(ArrayRef<Value> indices, int64_t lanes, int64_t span);

  bool hasScoreMod() const { return scoreMod; }
  bool hasMaskMod() const { return maskMod; }

  /// The score_mod of f32 score `score` (a scalar or a vector) at the
  /// global indices (b, h, q_idx, kv_idx): integer or index scalars, or
  /// integer vectors of the score's lanes. Returns the new score, of
  /// `score`'s type; with `derivative`, sets it to the new score's
  /// derivative in the score (of the score's type): forward-mode
  /// differentiation of the region's ops, which the backward's verifier
  /// admitted (undifferentiableScoreOp).
  Value score(Value score, ArrayRef<Value> indices, Value *derivative = nullptr,
              const ReadsAhead *reads = nullptr);
  /// The mask_mod at the global indices: i1, or a vector of i1 of `lanes`
  /// lanes where `lanes` > 0 (a scalar result is then broadcast). With
  /// `promised` (i1), true wherever it holds: a block table's promise that
  /// every score of the block is kept, which the CPU honours by leaving the
  /// mask_mod out and the GPU kernels by this OR.
  Value keep(ArrayRef<Value> indices, int64_t lanes, Value promised = Value(),
             const ReadsAhead *reads = nullptr);

  /// The reads of captured tensors in either region whose indices depend
  /// on kv_idx alone (a table of per-key values: a document id, a key
  /// bias), emitted here for global keys `keys` (a vector of integers) so
  /// that score() and keep() of the rows that score these keys take them
  /// as `reads` instead of gathering them again, row after row. Empty where
  /// no read varies with the key alone.
  ReadsAhead keyReads(Value keys) { return readsBy(/*fromEnd=*/1, keys); }
  /// The same for the reads whose indices depend on q_idx alone, for the
  /// global rows `rows` (a vector of integers, rows in lanes).
  ReadsAhead queryReads(Value rows) { return readsBy(/*fromEnd=*/2, rows); }

  /// A read of a captured f32 tensor by the score_mod, as the gradient of
  /// that tensor needs it: which capture, the element's indices (clamped as
  /// the read clamps them: index scalars, or vectors of index where they
  /// vary across the score's lanes) and the derivative of the new score in
  /// the element read (of the score's type).
  struct CaptureRead {
    unsigned capture;
    SmallVector<Value, 4> indices;
    Value derivative;
  };
  /// For each read in the score_mod of a capture that `wanted` accepts:
  /// emits the score_mod at (`score`, `indices`) with the derivative in that
  /// read's element (forward mode seeded there, as score()'s is in the
  /// score) and hands the read to `use`.
  void captureReads(Value score, ArrayRef<Value> indices,
                    function_ref<bool(unsigned)> wanted,
                    function_ref<void(const CaptureRead &)> use);

private:
  /// Emits `region` with its block's arguments bound to `arguments` and
  /// returns what it yields, `lanes` wide where anything varies (0: all
  /// scalars). With `derivative`, sets it to the yield's derivative in the
  /// first argument, or with `seed` (an attn.captured of the region) in
  /// the element that `seed` reads, whose clamped indices go to
  /// `seedIndices`.
  Value emit(Region &region, ArrayRef<Value> arguments, int64_t lanes,
             Value *derivative = nullptr, Operation *seed = nullptr,
             SmallVectorImpl<Value> *seedIndices = nullptr,
             const ReadsAhead *reads = nullptr);
  /// keyReads (the index argument `fromEnd` from the last: 1 kv_idx, 2
  /// q_idx) and queryReads.
  ReadsAhead readsBy(unsigned fromEnd, Value indices);
  /// The signed ranges of a region's integer and index values, from its
  /// index arguments' (0 ≤ index < 2³¹, docs/spec.md) through the ops'
  /// InferIntRangeInterface; computed once per region.
  using IndexRanges = DenseMap<Value, ConstantIntRanges>;
  const IndexRanges &rangesOf(Region &region);
  /// Index arithmetic on lanes in i32 (`narrow`: a region value -> its
  /// lanes as i32, where they were made so).
  struct Narrowing {
    const IndexRanges &ranges;
    DenseMap<Value, Value> narrow;
  };
  /// `op` (not an attn.captured) on the emitted `operands`: on scalars
  /// where none is a vector, else on vectors of `lanes` (scalar operands
  /// broadcast), and with `narrowing` on i32 lanes where its index values
  /// all fit (tryNarrow); its results mapped in `mapping`.
  Operation *emitOp(Operation &op, ArrayRef<Value> operands, int64_t lanes,
                    IRMapping &mapping, Narrowing *narrowing = nullptr);
  /// `op` on i32 lanes if it is index arithmetic or a comparison whose
  /// index operands and results all lie in i32's range (they compute the
  /// same values there: 16 lanes a register where index takes two), else
  /// null.
  Operation *tryNarrow(Operation &op, ArrayRef<Value> operands, int64_t lanes,
                       IRMapping &mapping, Narrowing &narrowing);
  /// The derivative of `op`'s (float) result `result` (emitted, on
  /// `operands`) from its operands' derivatives (null: 0).
  Value derivativeOf(Operation &op, ValueRange operands, Value result,
                     ArrayRef<Value> operandDerivatives);
  /// prefetchReads' prefetches of one read of capture `number` at the
  /// emitted `indices`, where it reads a run of a row.
  void prefetchRun(unsigned number, ArrayRef<Value> indices, int64_t span);
  /// What prefetchReads emits of a region: the reads it prefetches
  /// (`targets`) and the ops their indices need (`needed`).
  struct PrefetchSlice {
    SetVector<Operation *> targets;
    DenseSet<Operation *> needed;
  };
  /// `region`'s PrefetchSlice (analysed once, kept for later rows).
  const PrefetchSlice &prefetchSliceOf(Region &region);
  /// Element `indices` of capture `number`, clamped into its bounds (the
  /// clamped indices into `clampedOut` where given).
  Value read(unsigned number, ArrayRef<Value> indices, Type element,
             int64_t lanes, SmallVectorImpl<Value> *clampedOut = nullptr);
  /// `index` (a scalar or lanes of index) clamped into [0, size − 1] of
  /// `capture`'s dimension `dim`.
  Value clampInto(Value capture, unsigned dim, Value index, int64_t lanes);
  /// The elements at the `clamped` indices (lanes in the last) by a gather.
  Value gather(Value capture, ArrayRef<Value> clamped, VectorType resultType);
  /// A read whose last index, `index`, alone varies across the lanes (the
  /// others `clamped`, the last null): readRun, or readShortRow where the
  /// row is short.
  Value readAlongRow(Value capture, ArrayRef<Value> clamped, Value index,
                     VectorType resultType);
  /// One vector load where the lanes read consecutive elements inside a
  /// contiguous row (checked at run time), else a gather.
  Value readRun(Value capture, ArrayRef<Value> clamped,
                ArrayRef<Value> rowStart, Value index, Value rowSize,
                Value contiguous, VectorType resultType);
  /// A read from a contiguous row of at most 32 elements: two masked loads
  /// and a permute of the two registers (AVX-512, 16 lanes of 32 bits).
  Value readShortRow(Value capture, ArrayRef<Value> rowStart, Value index,
                     Value rowSize, VectorType resultType);
  /// An index argument as `index` (a scalar) or a vector of index.
  Value asIndex(Value v);
  /// A float constant of `type` (a scalar or a vector: splat).
  Value floatConstant(Type type, double value);
  /// `v` as a vector of `lanes` (itself if it is one).
  Value broadcast(Value v, int64_t lanes);

  OpBuilder &b;
  Location loc;
  Region *scoreMod, *maskMod;
  ValueRange captures;
  int64_t runPrefetch = 0;
  /// rangesOf's, per region (held apart: a reference outlives insertions).
  DenseMap<Region *, std::unique_ptr<IndexRanges>> ranges;
  /// prefetchSliceOf's, per region.
  DenseMap<Region *, std::unique_ptr<PrefetchSlice>> prefetchSlices;
};

} // namespace attn
} // namespace mlir

#endif // ATTN_TRANSFORMS_MODIFIERS_H
