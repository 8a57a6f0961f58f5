//===- KernelEmitter.h - What the CPU micro-kernels of one op share -*- C++
//-*-===//
//
// The base of every CPU micro-kernel: one attn.online_attention's operands
// and shape, the pass's options, the causal/window band as it applies to a
// block of rows and keys, the score function (scale, soft cap, mask, band)
// and the online update of one row's statistics.
//
// All in base 2: log2(e) joins the score scale, a soft cap takes c·log2(e)
// for c and a bias mask is added times log2(e), so that the scores are
// s·log2(e) and p = exp2(s - m') with m' in base-2 units (see
// LowerToVector.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TRANSFORMS_CPU_KERNELEMITTER_H
#define ATTN_TRANSFORMS_CPU_KERNELEMITTER_H

#include "lib/Transforms/AttentionMath.h"
#include "lib/Transforms/Modifiers.h"
#include "lib/Transforms/Cpu/MicroKernels.h"
#include "lib/Transforms/Cpu/VectorEmitter.h"

namespace mlir {
namespace attn {
namespace cpu {

class KernelEmitter : public VectorEmitter {
public:
  explicit KernelEmitter(const KernelSite &site);

protected:
  OnlineAttentionOp op;
  const Scratch &scratch;
  int64_t keyBlock, bandKeyStep, rowBlock, laneRows, prefetchKeys;
  int64_t headDim, valueDim, valueChunks;
  /// Q·Kᵀ (bf16Dot) and P·V (bf16Values) by AVX-512 BF16's dot product.
  bool bf16Dot, bf16Values;
  /// The lane-rows path's P·V prefetches the next key block.
  bool blockPrefetch;
  /// Set while a kernel emits a key block of a causal or windowed op that
  /// every row of the tile sees whole: no band compares there.
  bool blockInsideBand = false;
  /// Set while emitting a key block that the block table declares full:
  /// applyModifiers leaves the mask_mod out.
  bool maskModOff = false;
  /// Set by a kernel that consults the block table per block of rows
  /// (keptByTable in its body): eachBandBlock then only skips the key
  /// blocks that no row of the tile keeps, and leaves full blocks to it.
  bool tableByRowBlocks = false;
  /// The modifiers' reads by key alone (ModifierEmitter::keyReads) of the
  /// score vectors of the keys from keyReadsStart (op-local), one per
  /// vector, while a kernel's rows score them: applyModifiers takes them
  /// for these keys (the same Value) instead of reading again.
  SmallVector<ModifierEmitter::ReadsAhead> keyReads;
  Value keyReadsStart;
  /// Set while the packed path keeps the rows' sums in scratch.rowSums.
  bool vectorSums = false;
  Value diagonal; // set when the op is causal or windowed
  /// The score function and online update in the CPU's conventions (base
  /// 2, x86's max), and the op's band.
  AttentionMath maths;
  BandArithmetic band;
  /// The op's score_mod and mask_mod.
  ModifierEmitter modifiers;
  using SeenKeys = BandArithmetic::SeenKeys;

  /// The largest lane of a vector by maths.max: a tree of halves.
  Value horizontalMax(Value vec);

  /// A row of the accumulator: (head, row) of op.getAcc() at `batch`.
  struct AccRow {
    Value head, row;
  };
  /// A row's running max and sum (or, with vectorSums, the vector of its
  /// partial sums) as loaded before a block's update.
  struct RowStatistics {
    Value max, sum, partialSums;
  };

  /// Whether the block being emitted applies the causal/window band.
  bool bandApplies();
  /// Whether a key may be excluded for some rows and kept for others by
  /// more than the band: by a mask operand, a mask_mod, or a score_mod
  /// (whose −inf excludes). Its weight is then 0, and P·V must drop its V
  /// row, which may hold a NaN (0 · NaN is NaN).
  bool keysMayBeExcluded() { return op.getMask() || hasModifiers(op); }
  /// The mask of the lanes of value chunk `c` that hold real columns.
  Value chunkMask(int64_t chunk);

  /// `body(key, j)` for the block's keys: key = blockStart + j.
  void eachKey(Value blockStart, Value blockKeys,
               function_ref<void(Value key, Value j)> body);

  /// target[j][c] = rows[min(blockStart + j, lastKey)][c] in f32 for j <
  /// count and `width` columns: whole-vector loads widened where the rows
  /// have unit stride, element copies otherwise.
  void widenRows(Value rowsMemref, Value batch, Value kvHead, Value blockStart,
                 Value count, Value lastKey, int64_t width, Value target);

  /// `prologue(blockStart, blockKeys)`, then `body(blockStart,
  /// blockKeys)`, for each key block that rows [firstRow, firstRow + count)
  /// may see (bandKeyRange). For a causal or windowed op the body is
  /// emitted twice, under an scf.if on whether every row sees the block
  /// whole: with blockInsideBand set (then), so that bandApplies() is false
  /// there, and clear (else). The prologue (what does not depend on the
  /// band: packing or widening K) is emitted once, before the branch.
  /// With `batch` and `head` (rows of one query head) and a block mask's
  /// table on the op (kBlockMaskAttrName), a key block whose table entries
  /// for these rows are all 0 is skipped, prologue included, and one whose
  /// entries are all 2 (full) runs the body with maskModOff set (unless
  /// tableByRowBlocks leaves that to the body). With
  /// `from` and `to`, only the keys of [from, to) among them.
  void eachBandBlock(Value firstRow, Value count, Value keys,
                     function_ref<void(Value, Value)> prologue,
                     function_ref<void(Value, Value)> body, Value batch = {},
                     Value head = {}, Value from = {}, Value to = {});

  /// `prologue()` then `body()` if the block table keeps any score of keys
  /// [blockStart, blockStart + blockKeys) for rows [firstRow, firstRow +
  /// count) of `head`; with `splitFull` and a mask_mod, `body()` twice,
  /// under an scf.if on whether the table declares them all full: with
  /// maskModOff set (then), and clear (else).
  void keptByTable(Value batch, Value head, Value firstRow, Value count,
                   Value blockStart, Value blockKeys,
                   function_ref<void()> prologue, function_ref<void()> body,
                   bool splitFull = true);

  /// The factor from raw scores q·k to the base-2 scores the softmax
  /// takes: the op's scale times log2(e), rounded once.
  Value scoreScale();

  /// A vector of raw scores scaled (to base 2), then soft-capped.
  Value scaleAndCap(Value s);

  /// The op's soft cap c · tanh(s / c) of a base-2 score s (c · log2(e)
  /// in place of c), else s.
  Value softcap(Value s) { return maths.softcap(s); }

  /// softcap(s) for a score, and -inf for an excluded one (-inf), for the
  /// lane-rows blocks that cap scores as the softmax reads them.
  Value softcapScore(Value s);
  RowStatistics loadStatistics(Value batch, const AccRow &at);

  /// Whether the op has a keep mask (i1), not none or a float bias.
  bool hasKeepMask();
  /// Index `full` of the op's mask in dimension `dim` (b, h, q, kv), or 0
  /// where the mask's type has a static 1 there (a broadcast dimension).
  Value maskIndex(unsigned dim, Value full);
  /// The op's mask at (batch, head, row, key) (op-local indices) as an f32
  /// bias: a float mask's value widened, a keep mask's false -inf, true 0.
  Value maskBiasAt(Value batch, Value head, Value row, Value key);
  /// maskBiasAt for keys [key, key + lanes) of a mask view whose rows have
  /// unit stride, at mask indices `rowIndex` (b, h, row: maskIndex's): a
  /// vector load of a float mask's elements or a keep mask's bytes, only
  /// the keys where `live` (i1 lanes) is set read (the others 0) where it
  /// is given.
  Value maskBiasChunk(Value view, ArrayRef<Value> rowIndex, Value key,
                      Value live = Value());
  /// The mask row of the block as an additive f32 bias in scratch.rowBias.
  void packMaskRow(Value batch, Value head, Value row, Value blockStart,
                   Value blockKeys);

  /// Scale, soft-cap, mask and band one row's scores of the block, update
  /// its running max and sum from `old`, store its weights p in
  /// probs[slot] (and as bf16 in probPairs[slot] when `storePairs`) and
  /// return the rescale factor alpha = exp(m_old - m_new). With dropout,
  /// the row's keep bits are `dropKeeps` where given (dropoutKeeps of
  /// several rows at once), else its own dropoutKeeps.
  Value updateRowStatistics(Value batch, const AccRow &at, RowStatistics old,
                            int64_t slot, MutableArrayRef<Value> scores,
                            Value blockStart, Value blockKeys, bool storePairs,
                            bool scaledAndCapped = false,
                            ArrayRef<Value> dropKeeps = {});
  /// The indices (i32) in the lanes of vector `v` from `first` (i32): the
  /// keys of a row's score vector, or the rows of a lane-rows vector:
  /// first + v·lanes + lane.
  Value laneIndices(Value first, int64_t v);
  /// The op's global index (i32) in dim `dim` (b, h, q, kv) of op-local
  /// index `local`.
  Value globalIndexOf(unsigned dim, Value local);
  /// The score_mod of base-2 score `s` (a scalar or a vector) at global
  /// `indices` (i32 scalars or lane vectors): the region takes natural
  /// units, the base-2 score times ln 2, and its result times log2(e).
  Value scoreModInBase2(Value s, ArrayRef<Value> indices,
                        const ModifierEmitter::ReadsAhead *reads = nullptr);
  /// The score_mod of a row's score vectors (base 2) of the block from
  /// blockStart, and the mask_mod's exclusions or'ed into `excluded`
  /// (vectors of i1, null where nothing is excluded yet); op-local indices.
  void applyModifiers(Value batch, Value head, Value row, Value blockStart,
                      MutableArrayRef<Value> scores,
                      MutableArrayRef<Value> excluded);
  /// The modifiers' reads by key alone of `vectors` score vectors of keys
  /// from blockStart (op-local), for keyReads; empty where they read
  /// nothing by key alone.
  SmallVector<ModifierEmitter::ReadsAhead> readByKey(Value blockStart,
                                                     int64_t vectors);
  /// keyReads' entry for score vector `v` of the keys from blockStart where
  /// they were read ahead for those keys (the same Value), else null.
  const ModifierEmitter::ReadsAhead *readsAhead(Value blockStart,
                                                size_t v) const;

  /// Whether the mask_mod keeps any of the `vectors` score vectors of keys
  /// from blockStart (op-local) for any of `rows` (i1): the keep bits
  /// applyModifiers computes for them (which LLVM then reuses), or'ed.
  Value anyKeptByMaskMod(Value batch, ArrayRef<AccRow> rows, Value blockStart,
                         int64_t vectors);

  /// Dropout's keep bits (i1 vectors) of a block's `vectors` score vectors
  /// for each of `rows` (op-local indices; keys from blockStart): row by
  /// row, `vectors` a row.
  SmallVector<Value> dropoutKeeps(Value batch, ArrayRef<AccRow> rows,
                                  Value blockStart, int64_t vectors);
};

} // namespace cpu
} // namespace attn
} // namespace mlir

#endif // ATTN_TRANSFORMS_CPU_KERNELEMITTER_H
