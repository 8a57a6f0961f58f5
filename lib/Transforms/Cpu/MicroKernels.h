//===- MicroKernels.h - The CPU micro-kernels of attn-lower-to-vector -*- C++
//-*-===//
//
// attn-lower-to-vector lowers each bufferized attn.online_attention to one
// of three micro-kernels, each in its own file:
//
//   packed     (PackedKernel.cpp)   per key block, K and V packed into
//                                   stack buffers; blocks of query rows
//                                   share each packed vector they load;
//   lane-rows  (LaneRowsKernel.cpp) query rows in vector lanes: every step
//                                   vertical, no horizontal reductions;
//   direct     (DirectKernel.cpp)   few rows (decoding) read K and V rows in
//                                   place, the rows of a GQA group at once;
//
// the packed path's AMX variant (AmxKernel.cpp) computes a block's Q·Kᵀ
// and P·V on AMX tiles. And each bufferized attn.attention_backward to the
// backward micro-kernel (BackwardKernel.cpp).
//
// What they share is below them: VectorEmitter (vector builders and the x86
// details), KernelEmitter (one op's operands, options and band, the score
// function and a row's online update) and RowAccumulator (P·V of a block of
// rows, f32 FMAs or the bf16 dot product). The pass (LowerToVector.cpp)
// sizes the scratch buffers the chosen kernels need and dispatches.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TRANSFORMS_CPU_MICROKERNELS_H
#define ATTN_TRANSFORMS_CPU_MICROKERNELS_H

#include "dialect/AttnOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <limits>
#include <optional>

namespace mlir {
namespace attn {
namespace cpu {

constexpr float kInf = std::numeric_limits<float>::infinity();

/// Query rows that the direct path scores against each K row load.
constexpr int64_t kDirectRows = 16;
/// P·V accumulator vectors kept in registers at once (of AVX-512's 32; the
/// V vectors and the broadcast weights take most of the rest).
constexpr int64_t kMaxAccumulators = 16;
/// The same for `lanes` f32 lanes: 8 of AVX2's 16 registers (16 there
/// spilled in every step of the loop).
constexpr int64_t maxAccumulators(int64_t lanes) {
  return lanes >= 16 ? kMaxAccumulators : 8;
}
/// Key blocks of a chunk that the lane-rows path widens (16-bit K and V)
/// once for all the tiles of a head.
constexpr int64_t kWidenedChunkBlocks = 4;
/// Rows of one P·V pass of the direct path over f16 V.
constexpr int64_t kQuadRows = 4;

/// Scratch buffers of one function, shared by all its online ops (they run
/// one after another).
struct Scratch {
  Value keysT;      // [D][keyBlock]   K block transposed
  Value keyPairs;   // [D/2][2 keyBlock] bf16 K block as pairs (bf16-dot only)
  Value valuePairs; // [keyBlock/2][2 DvPad] bf16 V block as key pairs
  Value values;     // [keyBlock][DvPad] V block, pad columns zero
  Value rowBias;    // [keyBlock]      the mask row of the block, as f32 bias
  Value probs;      // [rowBlock][keyBlock] p of the current rows
  Value probPairs;  // [rowBlock][keyBlock] the same p in bf16 (with valuePairs)
  // Direct path: up to kDirectRows query rows of a GQA group at a time.
  Value queryRows;   // [kDirectRows][DPad] in f32, pad lanes zero
  Value groupScores; // [kDirectRows][keyBlock] their scores of a block
  Value queryPairs;  // [kDirectRows][DPad2] bf16 rows as stored (bf16-dot)
  // Lane-rows path: a tile of laneRows query rows in vector lanes.
  Value laneQuery;  // [D][laneRows]  scaled Q transposed
  Value laneAcc;    // [Dv][laneRows] the accumulator transposed
  Value laneScores; // [keyBlock][laneRows] scores, then weights, transposed
  Value laneStats;  // [2][laneRows]  running max and sum
  Value laneBias;   // [keyBlock][laneRows] the mask of the block, as f32 bias
  // Packed path: each row's running sum as a vector of per-lane partial
  // sums, reduced once per op rather than once per key block.
  Value rowSums; // [rowSumRows][lanes]
  int64_t rowSumRows = 0;
  // AMX path: a block of 16 query rows as tiles see it.
  Value amxQuery;  // [16][D]        bf16 Q rows (the left tiles of Q·Kᵀ)
  Value amxScores; // [16][keyBlock] f32 Q·Kᵀ as the score tiles store it
  Value amxOutput; // [16][DvPad]    f32 P·V of the block
};

/// The pass's blocking, as resolved for one function.
struct KernelOptions {
  int64_t lanes;            // f32 lanes per vector
  int64_t keyBlock;         // keys per block
  int64_t bandKeyStep;      // keys per step of a packed block the band cuts
  int64_t rowBlock;         // query rows that share each packed K/V load
  int64_t directRows;       // the direct path's row limit (0: no direct path)
  int64_t prefetchDistance; // bytes of K ahead to prefetch (0: none)
  int64_t laneRows;         // rows of a lane-rows tile (0: no lane-rows path)
};

/// Where a micro-kernel is emitted: the op, at the builder's insertion
/// point, with the function's scratch and options, the op's causal
/// diagonal (null when the op is neither causal nor windowed) and whether
/// it takes AVX-512 BF16's dot product.
struct KernelSite {
  ImplicitLocOpBuilder &b;
  OnlineAttentionOp op;
  const Scratch &scratch;
  const KernelOptions &options;
  Value diagonal;
  bool bf16Dot;
  /// Q·Kᵀ and P·V on AMX tiles (the packed path's blocks of 16 rows).
  bool amx = false;
  /// The lane-rows path's P·V prefetches the next key block (where
  /// options.prefetchDistance is not 0): #attn.kernel's block_prefetch.
  bool blockPrefetch = true;
};

/// The static bound on the query rows of `op`'s state (its sum is a slice
/// of a statically sized buffer, as attn-bufferize makes it), if any.
std::optional<int64_t> stateRowBound(OnlineAttentionOp op);

/// Whether the op's Q and K are bf16 (what the dot product takes).
bool usesBf16Dot(OnlineAttentionOp op);
/// Whether P·V can take the dot product too: bf16 V. Where a causal or
/// window band cuts a block, it takes it only on the keys that every row it
/// serves sees (the packed path's KeyRuns; the direct path's
/// pairedValues); where a mask or the modifiers may exclude keys, only in
/// blocks whose V holds no inf or NaN (RowAccumulator's valuesFinite; the
/// direct path not at all): an excluded key's 0 weight must drop a NaN V,
/// which the dot product would not.
bool usesBf16Values(OnlineAttentionOp op);
/// Whether K or V is 16-bit (the lane-rows path widens their blocks).
bool hasNarrowKeysOrValues(OnlineAttentionOp op);

/// The rows of an AMX tile (and of the AMX path's row blocks).
constexpr int64_t kAmxRows = 16;

/// The packed micro-kernel for all rows of query head `head`.
void emitPackedHead(const KernelSite &site, Value batch, Value head,
                    Value kvHead, Value rows, Value keys);
/// The packed micro-kernel's AMX variant for all rows of query head
/// `head` (AmxKernel.cpp).
void emitAmxHead(const KernelSite &site, Value batch, Value head, Value kvHead,
                 Value rows, Value keys);
/// The lane-rows micro-kernel for all rows of query head `head`.
void emitLaneRowsHead(const KernelSite &site, Value batch, Value head,
                      Value kvHead, Value rows, Value keys);
/// The direct micro-kernel for the rows of the `group` query heads from
/// `firstHead` (K and V seen with unit-stride rows as `keyRows`,
/// `valueRows`).
void emitDirectGroup(const KernelSite &site, Value batch, Value kvHead,
                     Value firstHead, Value group, Value rows, Value keys,
                     Value keyRows, Value valueRows);

/// The backward micro-kernel (BackwardKernel.cpp) in place of a bufferized
/// attn.attention_backward, with `lanes` f32 lanes per vector; with
/// `bf16Dot`, bf16 operands take AVX-512 BF16's dot product for Q·Kᵀ and
/// dO·Vᵀ.
void emitBackward(ImplicitLocOpBuilder &b, AttentionBackwardOp op,
                  int64_t lanes, bool bf16Dot);

/// The attention weights' kernel (WeightsKernel.cpp) in place of a
/// bufferized attn.attention_weights; with `bf16Dot`, bf16 Q and K take
/// AVX-512 BF16's dot product for Q·Kᵀ.
void emitWeights(ImplicitLocOpBuilder &b, AttentionWeightsOp op, int64_t lanes,
                 bool bf16Dot);

/// Linear attention's kernel (LinearKernel.cpp) in place of a bufferized
/// attn.linear.
void emitLinear(ImplicitLocOpBuilder &b, LinearOp op, int64_t lanes);
/// attn.linear_backward's kernel (LinearKernel.cpp): the non-causal
/// gradients of one work item.
void emitLinearBackward(ImplicitLocOpBuilder &b, LinearBackwardOp op,
                        int64_t lanes);

/// Additive attention's kernel (AdditiveKernel.cpp) in place of a
/// bufferized attn.additive.
void emitAdditive(ImplicitLocOpBuilder &b, AdditiveOp op, int64_t lanes);

/// Additive attention's backward kernel (AdditiveKernel.cpp) in place of a
/// bufferized attn.additive_backward.
void emitAdditiveBackward(ImplicitLocOpBuilder &b, AdditiveBackwardOp op,
                          int64_t lanes);

/// Whether `op` is a bufferized matmul that emitMatmul takes: B transposed
/// (linalg.matmul's transpose-B maps), C f32, static K and N.
bool isVectorMatmul(linalg::MatmulOp op);
/// A projection's matmul (MatmulKernel.cpp) in place of `op`.
void emitMatmul(ImplicitLocOpBuilder &b, linalg::MatmulOp op, int64_t lanes);

} // namespace cpu
} // namespace attn
} // namespace mlir

#endif // ATTN_TRANSFORMS_CPU_MICROKERNELS_H
