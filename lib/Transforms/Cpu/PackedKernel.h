//===- PackedKernel.h - The packed CPU micro-kernel -------------*- C++ -*-===//
//
// The packed path (PackedKernel.cpp): per key block, K and V packed into
// stack buffers, then blocks of `row_block` query rows that share each
// packed vector they load. Its AMX variant (AmxKernel.cpp) derives from it
// and replaces a block of rows' products (emitRows) by tile operations.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TRANSFORMS_CPU_PACKEDKERNEL_H
#define ATTN_TRANSFORMS_CPU_PACKEDKERNEL_H

#include "lib/Transforms/Cpu/RowAccumulator.h"

namespace mlir {
namespace attn {
namespace cpu {

class PackedKernel : public RowAccumulator {
public:
  using RowAccumulator::RowAccumulator;
  virtual ~PackedKernel() = default;

  /// The packed path: per key block, pack K and V, then blocks of rows. A
  /// causal or windowed op walks only the keys its rows see and applies
  /// the band only in the blocks that some row sees in part (an op left
  /// whole by attn-skip-masked-blocks, as for the lane-rows path); the
  /// others run without its compares, and bf16 V takes the dot product
  /// there.
  void emitPackedHead(Value batch, Value head, Value kvHead, Value rows,
                      Value keys);

protected:
  /// One key block of the packed path, K and V packed: the rows' updates.
  void emitPackedBlock(Value batch, Value head, Value rows, Value blockStart,
                       Value blockKeys);

  /// The block of rowBlock rows from `first` (the rows past `lastRow`
  /// repeating it) over the key block.
  void emitRowBlock(Value batch, Value head, Value first, Value lastRow,
                    Value blockStart, Value blockKeys);

  /// The rows of `block` over the keys of the block from `blockStart` that
  /// some of them see (`seen`), in steps of bandKeyStep keys; a last step
  /// of at most half a step scores half the vectors.
  void emitBandSteps(Value batch, ArrayRef<AccRow> block, Value blockStart,
                     const SeenKeys &seen);

  /// Scores, online update and P·V for a block of query rows that share
  /// every packed K and V vector they load.
  ///
  /// The keys are [blockStart, blockStart + blockKeys), at column `packed`
  /// of the packed block, scored `scoreVectors` vectors at a time (a step
  /// of a block the band cuts may take fewer than the block's).
  virtual void emitRows(Value batch, ArrayRef<AccRow> block, Value blockStart,
                        Value blockKeys, Value packed, int64_t scoreVectors);

  /// P·V of the block's rows from their weights (probs, and probPairs for
  /// bf16 V): acc[r] = alphas[r]·acc[r] + Σ_j p[r][j]·V[packed + j].
  void accumulateBlock(Value batch, ArrayRef<AccRow> block,
                       ArrayRef<Value> alphas, Value blockStart,
                       Value blockKeys, Value packed);

  /// Scores of the rows by vdpbf16ps: per pair of head dims, the rows'
  /// query pairs broadcast against the block's packed key pairs.
  SmallVector<Value> scoresByBf16Dot(Value batch, Value head,
                                     ArrayRef<Value> rows, Value packed,
                                     ArrayRef<Value> inits);

  /// KT[d][j] = K[j][d] (or the bf16 pairs KP) for the block's keys.
  /// 16-lane vectors take 16x16 register transposes where the rows have
  /// unit stride (LLVM otherwise makes scatters of the element loops).
  void packKeys(Value batch, Value kvHead, Value blockStart, Value blockKeys);

  /// packValueBlock, then (where keysMayBeExcluded) valuesFinite for it.
  virtual void packValues(Value batch, Value kvHead, Value blockStart,
                          Value blockKeys);

  /// VP[j][e] = V[j][e], or for bf16 V the key pairs VP2 that P·V's dot
  /// product reads, whole vectors where the rows have unit stride.
  void packValueBlock(Value batch, Value kvHead, Value blockStart,
                      Value blockKeys);

  /// KT[d][j] = K[key][d] for one key, element by element.
  void packKeyColumn(Value batch, Value kvHead, Value key, Value j);

  /// VP2[j/2][2e + j%2] = V[key][e] (bf16, not widened).
  void packValuePairs(Value batch, Value kvHead, Value key, Value j);

  /// KP[p][2j + i] = K[key][2p + i]; an odd D's last pair ends in 0.
  void packKeyPairs(Value batch, Value kvHead, Value key, Value j);
};

} // namespace cpu
} // namespace attn
} // namespace mlir

#endif // ATTN_TRANSFORMS_CPU_PACKEDKERNEL_H
