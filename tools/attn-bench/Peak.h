//===- Peak.h - This machine's fp32 FMA peak, measured ----------*- C++ -*-===//
#ifndef ATTN_TOOLS_ATTN_BENCH_PEAK_H
#define ATTN_TOOLS_ATTN_BENCH_PEAK_H

namespace attn {
/// FLOP/s of independent fp32 FMAs on `threads` threads in the CPU's widest
/// vectors (best of three); `lanes` receives the vector width used.
double measureFmaPeak(int threads, int *lanes = nullptr);
} // namespace attn

#endif // ATTN_TOOLS_ATTN_BENCH_PEAK_H
