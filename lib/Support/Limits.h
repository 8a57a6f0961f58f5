//===- Limits.h - Sizes every entry point refuses past ---------*- C++ -*-===//
//
// The largest head dimension (D and Dv) that the dialect's verifier and the
// kernel spec parser accept: the micro-kernels hold a query row, its score
// tiles and a P·V accumulator row per head dim in registers and stack
// buffers, and past this the lowering's time and memory grow without a use
// (the largest head dims in use are 256-576). Header-only and MLIR-free, so
// that the spec parser and the verifier share one number.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_SUPPORT_LIMITS_H
#define ATTN_SUPPORT_LIMITS_H

#include <cstddef>
#include <cstdint>

namespace attn {

constexpr int64_t kMaxHeadDim = 1024;
/// The widest embedding of attn.mha (its E, Ek and Ev): a projection's
/// transposed weight is packed per work item.
constexpr int64_t kMaxEmbedDim = 16384;
/// The most tensors a kernel's modifiers capture (ATTN_MAX_CAPTURES).
constexpr size_t kMaxCaptures = 8;
/// The most rows per chunk of causal linear attention (attn.linear's
/// `chunk`): a chunk's φ(Q), φ(K) and V blocks live in stack buffers.
constexpr int64_t kMaxLinearChunk = 256;
/// Its default: 16 rows (one vector of keys) measured 1.08-1.35x faster
/// than 32 and 64 from S = 1k to 16k on a Cascade Lake Xeon (the
/// intra-chunk products shrink with the chunk; the state's do not).
constexpr int64_t kDefaultLinearChunk = 16;
/// Rows per chunk of attn.linear_backward's kernel (its own: the forward's
/// chunk orders only the forward's sums).
constexpr int64_t kLinearBackwardChunk = 16;

} // namespace attn

#endif // ATTN_SUPPORT_LIMITS_H
