//===- GpuEmulationTest.cpp - GPU block kernels, run on the host ----------===//
//
// attn-lower-to-gpu's block kernels (linear and additive attention, the
// backward) built as their host emulations (attn-lower-to-gpu{host-emulation}:
// the same IR but for the ids, every block after the other on one thread)
// and run by MLIR's JIT on the cases the GPU runs
// (linearGpuConformanceCases, additiveGpuConformanceCases,
// backwardGpuConformanceCases), their parameters laid out by the runtime's
// attn_gpu_*_kernel_params: the kernels' indexing, tiles, masks, softmax,
// state and NaN rules are checked against the float64 reference on a
// machine without a GPU. What the emulation cannot check (barriers, 256
// threads sharing the tiles) the GPU run of the same cases does
// (GpuConformance, attn-check in the GPU bundle).
//
//===----------------------------------------------------------------------===//
#include "test/Integration/GpuEmulation.h"

#include <algorithm>

using namespace attn;
using attn::emulation::Emulation;

namespace {

/// The linear kernel's arguments for the host buffers of a problem.
attn_linear_args linearArgs(ProblemData &data, LinearData &linear) {
  attn_linear_args args{};
  auto strides = [](const attn_tensor &t, int64_t *out) {
    std::copy(t.strides, t.strides + t.rank, out);
  };
  args.query = data.query.view.data;
  args.key = data.key.view.data;
  args.value = data.value.view.data;
  args.output = data.output.view.data;
  strides(data.query.view, args.query_strides);
  strides(data.key.view, args.key_strides);
  strides(data.value.view, args.value_strides);
  strides(data.output.view, args.output_strides);
  args.batch = data.query.view.shape[0];
  args.heads_q = data.query.view.shape[1];
  args.seq_q = data.query.view.shape[2];
  args.heads_kv = data.key.view.shape[1];
  args.seq_k = data.key.view.shape[2];
  if (linear.hasState) {
    args.initial_state = linear.state0.data();
    args.initial_normalizer = linear.normalizer0.data();
    args.final_state = linear.state.data();
    args.final_normalizer = linear.normalizer.data();
    strides(linear.state0View, args.initial_state_strides);
    strides(linear.normalizer0View, args.initial_normalizer_strides);
    strides(linear.stateView, args.final_state_strides);
    strides(linear.normalizerView, args.final_normalizer_strides);
  }
  return args;
}

/// The additive kernel's arguments for the host buffers of a problem.
attn_additive_args additiveArgs(AdditiveData &data) {
  attn_additive_args args{};
  auto strides = [](const attn_tensor &t, int leading, int64_t *out) {
    std::copy(t.strides + leading, t.strides + t.rank, out);
  };
  args.query = data.query.view.data;
  args.keys = data.keys.view.data;
  args.values = data.values.view.data;
  args.query_weight = data.queryWeight.view.data;
  args.key_weight = data.keyWeight.view.data;
  args.score_vector = data.scoreVector.view.data;
  args.output = data.output.view.data;
  strides(data.query.view, 1, args.query_strides);
  strides(data.keys.view, 1, args.key_strides);
  strides(data.values.view, 1, args.value_strides);
  strides(data.queryWeight.view, 2, args.query_weight_strides);
  strides(data.keyWeight.view, 2, args.key_weight_strides);
  strides(data.scoreVector.view, 3, args.score_vector_strides);
  strides(data.output.view, 1, args.output_strides);
  args.batch = data.query.view.shape[1];
  args.seq_q = data.query.view.shape[2];
  args.seq_k = data.keys.view.shape[2];
  if (data.hasMask) {
    // The runtime's broadcast: stride 0 where the mask has one element.
    args.mask = data.mask.view.data;
    for (int d = 0; d < 3; ++d)
      args.mask_strides[d] =
          data.mask.view.shape[d + 1] == 1 ? 0 : data.mask.view.strides[d + 1];
  }
  if (data.hasWeights) {
    args.weights = data.weights.data();
    strides(data.weightsView, 0, args.weights_strides);
  }
  return args;
}

TEST(GpuEmulation, LinearKernelMatchesTheReferenceOnTheHost) {
  std::vector<ConformanceCase> cases = linearGpuConformanceCases();
  Emulation emulation(cases);
  ASSERT_TRUE(emulation.ok());
  for (auto [c, spec] : llvm::zip(cases, emulation.specs())) {
    const std::string &name = c.label; // a lambda may not capture c
    attn_kernel_desc desc{};
    desc.head_dim = spec.headDim;
    desc.value_dim = spec.valueDim;
    desc.has_state = spec.linearState;
    CaseOutcome outcome = runLinearConformanceCase(
        c, [&](ProblemData &data, LinearData &linear, bool) {
          attn_linear_args args = linearArgs(data, linear);
          uint64_t values[ATTN_GPU_MAX_PARAMS];
          void *pointers[ATTN_GPU_MAX_PARAMS];
          int n = attn_gpu_linear_kernel_params(&desc, &args, values, pointers);
          return emulation.invoke(name, pointers, n);
        });
    EXPECT_TRUE(outcome.passed) << c.label << ": " << outcome.message;
  }
}

TEST(GpuEmulation, AdditiveKernelMatchesTheReferenceOnTheHost) {
  std::vector<ConformanceCase> cases = additiveGpuConformanceCases();
  Emulation emulation(cases);
  ASSERT_TRUE(emulation.ok());
  for (auto [c, spec] : llvm::zip(cases, emulation.specs())) {
    const std::string &name = c.label; // a lambda may not capture c
    attn_kernel_desc desc{};
    desc.query_dim = spec.queryDim;
    desc.head_dim = spec.headDim;
    desc.value_dim = spec.valueDim;
    desc.additive_dim = spec.attnDim;
    desc.mask_kind =
        spec.mask == MaskKind::None ? ATTN_MASK_NONE : ATTN_MASK_BOOL;
    desc.has_weights = spec.additiveWeights;
    CaseOutcome outcome =
        runAdditiveConformanceCase(c, [&](AdditiveData &data, bool) {
          attn_additive_args args = additiveArgs(data);
          uint64_t values[ATTN_GPU_MAX_PARAMS];
          void *pointers[ATTN_GPU_MAX_PARAMS];
          int n =
              attn_gpu_additive_kernel_params(&desc, &args, values, pointers);
          return emulation.invoke(name, pointers, n);
        });
    EXPECT_TRUE(outcome.passed) << c.label << ": " << outcome.message;
  }
}

TEST(GpuEmulation, BackwardKernelMatchesTheReferenceOnTheHost) {
  std::vector<ConformanceCase> cases = backwardGpuConformanceCases();
  Emulation emulation(cases);
  ASSERT_TRUE(emulation.ok());
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string &name = cases[i].label;
    std::vector<attn_capture_desc> captures;
    attn_kernel_desc desc =
        emulation::backwardDesc(emulation.specs()[i], captures);
    CaseOutcome outcome = runBackwardConformanceCase(
        cases[i], [&](ProblemData &data, BackwardData &backward, bool) {
          attn_backward_args args = emulation::backwardArgs(data, backward);
          uint64_t values[ATTN_GPU_MAX_PARAMS];
          void *pointers[ATTN_GPU_MAX_PARAMS];
          int n =
              attn_gpu_backward_kernel_params(&desc, &args, values, pointers);
          return emulation.invoke(name, pointers, n);
        });
    EXPECT_TRUE(outcome.passed) << name << ": " << outcome.message;
  }
}

} // namespace
