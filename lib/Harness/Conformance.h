//===- Conformance.h - The spec's matrix of cases, runnable anywhere C++ -===//
//
// The conformance matrix of docs/spec.md as data, and the
// check of one case: fresh random inputs, NaN-poisoned outputs, a call
// through the runtime (on the CPU or, for a GPU kernel, on device copies),
// the float64 reference, then a second call that must give bit-identical
// results. Used by the GoogleTest suite and by attn-check, which needs no
// MLIR (so that it runs on a GPU machine without the compiler).
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_HARNESS_CONFORMANCE_H
#define ATTN_HARNESS_CONFORMANCE_H

#include "attn/runtime.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace attn {

/// A NaN written into one input before the call: element `column` of row
/// `row` (a query row for 'q', a key for 'k' and 'v') of every head of
/// batch `batch`.
struct NanInput {
  char tensor; // 'q', 'k' or 'v'
  int64_t batch, row, column;
};

struct ProblemData;
/// Writes `nans` into data's query, key and value ([B, H, S, D]).
void placeNans(ProblemData &data, const std::vector<NanInput> &nans);

struct ConformanceCase {
  std::string label; // also the kernel's name
  std::string spec;  // "name=<label>,..."
  int64_t batch, headsQ, headsKv, seqQ, seqK;
  bool bshd = false;
  double inputScale = 1.0;
  /// Only require finite outputs and a loose tolerance (huge logits).
  bool finiteOnly = false;
  /// NaNs placed in the inputs: the reference says which rows they reach.
  std::vector<NanInput> nans = {};
};

std::vector<ConformanceCase> conformanceCases();

/// Linear attention's cases for its GPU kernel (attn.linear; the CPU's are
/// test/Integration's linear tests and python/tests).
std::vector<ConformanceCase> linearGpuConformanceCases();

/// Additive attention's cases for its GPU kernel (attn.additive).
std::vector<ConformanceCase> additiveGpuConformanceCases();

/// The backward's cases for its GPU kernel (attn.attention_backward): a
/// part of conformanceCases, each named "backward_" and its label, its spec
/// backwardSpec's (runConformanceCase runs it as runBackwardConformanceCase).
std::vector<ConformanceCase> backwardGpuConformanceCases();

/// The cases the GPU lowering takes: every one of conformanceCases, then
/// linearGpuConformanceCases, additiveGpuConformanceCases and
/// backwardGpuConformanceCases.
std::vector<ConformanceCase> gpuConformanceCases();

/// The cases the CPU's AMX micro-kernel takes, each as bf16 ("amx_" and
/// its label): every prefill case (no static Sq of at most 4) whose head
/// dims suit the tiles (D a multiple of 32, Dv of 16), once per spec.
std::vector<ConformanceCase> amxConformanceCases();

struct CaseOutcome {
  bool passed = false;
  std::string message; // the problem, the errors, or what failed
};

/// Runs `c` with `kernel` (on `pool`, or this thread when null) and checks
/// it as the header describes (a linear attention case: O and the final
/// state, then bit-identical again; a backward case's spec: the
/// gradients, as runBackwardConformanceCase).
/// `keySplits` is attn_run_split's (0: the runtime chooses).
CaseOutcome runConformanceCase(const ConformanceCase &c,
                               const attn_kernel_desc *kernel,
                               attn_thread_pool *pool, int64_t keySplits = 0);

struct LinearData;
struct AdditiveData;
/// A linear attention case whose kernel `run` calls (twice: `first`, then
/// on one thread): O and the final state against the float64 reference,
/// then bit-identical on the second run. runConformanceCase's for linear
/// cases; a test may run the kernel its own way.
CaseOutcome runLinearConformanceCase(
    const ConformanceCase &c,
    const std::function<attn_status(ProblemData &, LinearData &, bool first)>
        &run);

/// An additive attention case likewise: O (and the weights) against the
/// float64 reference, then bit-identical on the second run.
CaseOutcome runAdditiveConformanceCase(
    const ConformanceCase &c,
    const std::function<attn_status(AdditiveData &, bool first)> &run);

/// The backward of `c` (`kernel` compiled from c.spec plus "backward"; with
/// c.spec's lse it takes dLSE): the forward's O and LSE from the float64
/// reference, random dO (and dLSE), NaN-poisoned gradients, dQ, dK and dV
/// against the reference gradient, then bit-identical gradients on one
/// thread.
CaseOutcome runBackwardConformanceCase(const ConformanceCase &c,
                                       const attn_kernel_desc *kernel,
                                       attn_thread_pool *pool);

struct BackwardData;
/// The backward of `c` whose kernel `run` calls (twice: `first`, then
/// again): the checks above, the kernel run its own way.
CaseOutcome runBackwardConformanceCase(
    const ConformanceCase &c,
    const std::function<attn_status(ProblemData &, BackwardData &, bool first)>
        &run);

/// c.spec's backward kernel spec (c.spec itself where it is one).
std::string backwardSpec(const ConformanceCase &c);

/// The weights of `c` (`kernel` compiled from weightsSpec(c); with c.spec's
/// lse it reads the forward's LSE, from the float64 reference): W against
/// the reference weights, every element written (NaN-poisoned before).
CaseOutcome runWeightsConformanceCase(const ConformanceCase &c,
                                      const attn_kernel_desc *kernel,
                                      attn_thread_pool *pool);

/// c.spec's weights kernel spec (its dv dropped: a weights kernel reads no
/// V).
std::string weightsSpec(const ConformanceCase &c);

} // namespace attn

#endif // ATTN_HARNESS_CONFORMANCE_H
