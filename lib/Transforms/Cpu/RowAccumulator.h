//===- RowAccumulator.h - P·V of a block of query rows -----------*- C++
//-*-===//
//
// acc[r] = alpha[r]·acc[r] + Σ_j p[r][j]·V[j] for a block of query rows that
// share each V vector they load: f32 FMAs (dropping the keys a row does not
// see, so that a NaN in an excluded V row stays out), or AVX-512 BF16's dot
// product on key pairs of bf16 V. The packed and the direct micro-kernels
// build on it.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TRANSFORMS_CPU_ROWACCUMULATOR_H
#define ATTN_TRANSFORMS_CPU_ROWACCUMULATOR_H

#include "lib/Transforms/Cpu/KernelEmitter.h"

#include <functional>

namespace mlir {
namespace attn {
namespace cpu {

class RowAccumulator : public KernelEmitter {
public:
  using KernelEmitter::KernelEmitter;

protected:
  /// Keys [from, to) of a block (block-local, as probs and probPairs
  /// index them) that one loop of P·V takes: by the bf16 dot product on
  /// the key pairs of valuePairs (`pairs`: `from` even, the pairs from row
  /// `pairRow` of valuePairs), or by f32 FMAs; `guarded` where a row may
  /// exclude some of the keys (an excluded key's V then stays out, even a
  /// NaN): f32 FMAs that drop them, unless valuesFinite says the block's V
  /// holds no inf or NaN (0 · V is then 0, and the run is taken as
  /// unguarded).
  struct KeyRun {
    Value from, to;
    bool pairs, guarded;
    Value pairRow;
    /// With `pairs`, where set: the pairs are made as V is loaded instead
    /// of read from valuePairs; rawValues(j, g) is columns [2g lanes,
    /// 2(g + 1) lanes) of block-local key j's V row as stored (see
    /// accumulateByBf16Dot).
    std::function<Value(Value, int64_t)> rawValues = nullptr;
  };

  /// acc[r] = alpha[r] * acc[r] + sum_j probs[r][j] * V[j] for the rows,
  /// which share each V vector they load, over the keys of `runs`; in the
  /// f32 runs `value(j, c)` gives chunk c of key j's V row. The
  /// accumulators stay in registers: wide rows (Dv = 256 in pairs of rows)
  /// go over the keys once per group of at most maxAccumulators(lanes) /
  /// rows chunks.
  void accumulateRows(Value batch, ArrayRef<AccRow> rows,
                      ArrayRef<Value> alphas, ArrayRef<KeyRun> runs,
                      function_ref<Value(Value, int64_t)> value);
  /// One run over all `blockKeys` keys of the block.
  void accumulateRows(
      Value batch, ArrayRef<AccRow> rows, ArrayRef<Value> alphas,
      Value blockKeys, bool pairs, function_ref<Value(Value, int64_t)> value,
      const std::function<Value(Value, int64_t)> &rawValues = nullptr);

  /// accumulateRows for chunks [first, first + chunks) of the rows.
  void accumulateChunks(Value batch, ArrayRef<AccRow> rows,
                        ArrayRef<Value> alphas, ArrayRef<KeyRun> runs,
                        function_ref<Value(Value, int64_t)> value,
                        int64_t first, int64_t chunks);

  /// The f32 FMA loop of `run` for chunks [first, first + chunks) from the
  /// accumulators `inits`; `guarded`: a key of weight 0 adds nothing.
  SmallVector<Value> accumulateByFma(const KeyRun &run, ValueRange inits,
                                     function_ref<Value(Value, int64_t)> value,
                                     int64_t numRows, int64_t first,
                                     int64_t chunks, bool guarded);

  /// acc[r] += Σ_j p[r][j] V[j] two keys per step by vdpbf16ps over the
  /// keys of `run`, for V's chunks [first, first + chunks).
  ///
  /// With run.rawValues the pairs come from the two V rows as loaded: the
  /// unpacks of their low and high 16-bit halves within 128-bit lanes
  /// (vpunpcklwd/vpunpckhwd) pair 4-column blocks 0, 2, 4, 6 and 1, 3, 5,
  /// 7 of each 2 x lanes columns, and the accumulators hold the columns in
  /// that order (accumulateChunks puts them there and back). No pass over
  /// the block makes valuePairs first: bf16 MQA decoding, whose pairing
  /// pass streamed the block from L2 while no dot product ran, 1.16-1.18x
  /// on Zen 4 (with kQuadRows rows a pass).
  SmallVector<Value> accumulateByBf16Dot(int64_t numRows, const KeyRun &run,
                                         ArrayRef<Value> inits, int64_t first,
                                         int64_t chunks);

  /// Set while a key block whose keys a row may exclude (keysMayBeExcluded)
  /// is emitted with its V packed: whether the packed rows hold only finite
  /// values (an i1, valuesAllFinite's). Null elsewhere.
  Value valuesFinite;
  /// Whether the block's packed V (valuePairs where bf16Values, else
  /// values), `blockKeys` keys, holds only finite elements (an i1): the sum
  /// of its elements times 0 is not NaN. A pass over the block in L1, an
  /// FMA a vector (two for bf16 pairs), against the P·V of every row of the
  /// tile.
  Value valuesAllFinite(Value blockKeys);

  /// Chunk c of packed V row j (f32).
  Value packedValue(Value j, int64_t c);
  /// Chunk c of V row j in f32, from the key pairs of valuePairs: the
  /// 32-bit lanes of its pair row hold keys j & ~1 (low half) and j | 1.
  Value pairedValue(Value j, int64_t c);

  /// VP2[j/2][2e + j%2] = V[blockStart + j][e] for the block, by vector
  /// interleaves of two V rows (the layout accumulateByBf16Dot reads); an
  /// odd count's last pair ends in zeros.
  void pairValuesDirect(Value batch, Value kvHead, Value blockStart,
                        Value blockKeys, Value valueRows);
};

} // namespace cpu
} // namespace attn
} // namespace mlir

#endif // ATTN_TRANSFORMS_CPU_ROWACCUMULATOR_H
