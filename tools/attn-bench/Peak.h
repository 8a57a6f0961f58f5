//===- Peak.h - This machine's fp32 FMA peak, measured ----------*- C++ -*-===//
#ifndef ATTN_TOOLS_ATTN_BENCH_PEAK_H
#define ATTN_TOOLS_ATTN_BENCH_PEAK_H

#include "attn/runtime.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace attn {
/// FLOP/s of independent fp32 FMAs on `threads` threads in the CPU's widest
/// vectors (best of three); `lanes` receives the vector width used.
double measureFmaPeak(int threads, int *lanes = nullptr);

/// Reads every byte of `buffers` once on `pool`'s threads (64 KiB pieces,
/// in the widest vectors the CPU has) and returns a checksum, so that the
/// reads are not optimized away: decoding's roof, timed beside the kernels
/// on the same K and V.
uint64_t
readBuffers(attn_thread_pool *pool,
            const std::vector<std::pair<const void *, size_t>> &buffers);
} // namespace attn

#endif // ATTN_TOOLS_ATTN_BENCH_PEAK_H
