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
#include "lib/Pipelines/Registration.h"
#include "lib/Transforms/AttentionMath.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <algorithm>
#include <array>
#include <random>

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

/// The keep bits of the GPU forward's fragments (dropoutKeepPair: a lane's
/// two keys of a group from one Philox word) and of one key (dropoutKeep,
/// the path of tiles that start mid-group), JIT-compiled for the host, are
/// the reference's (Reference.cpp's Philox, written apart) for random
/// positions, seeds and probabilities: the forward kernel itself runs only
/// on a GPU, its keep bits are checked here.
TEST(GpuEmulation, DropoutKeepBitsOfTheFragmentsMatchTheReference) {
  mlir::DialectRegistry registry;
  mlir::attn::registerAttnDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  mlir::OpBuilder b(&context);
  mlir::Location loc = b.getUnknownLoc();
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(b, loc);
  b.setInsertionPointToEnd(module->getBody());
  mlir::Type i32 = b.getI32Type();
  // @keeps(seed, p, b, h, i, j) -> bits: 1 and 2 those of keys 2k and 2k + 1
  // of j's group by one Philox (k = (j mod 8) / 2), 4 that of key j alone.
  auto func = mlir::func::FuncOp::create(
      b, loc, "keeps",
      b.getFunctionType({b.getI64Type(), b.getF32Type(), i32, i32, i32, i32},
                        {i32}));
  mlir::Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  auto args = entry->getArguments();
  auto constant = [&](int32_t v) -> mlir::Value {
    return mlir::arith::ConstantIntOp::create(b, loc, v, 32);
  };
  mlir::Value threshold = mlir::attn::dropoutThreshold(b, loc, args[1]);
  mlir::Value groupKey =
      mlir::arith::AndIOp::create(b, loc, args[5], constant(~7));
  mlir::Value pair = mlir::arith::AndIOp::create(
      b, loc, mlir::arith::ShRUIOp::create(b, loc, args[5], constant(1)),
      constant(3));
  auto [even, odd] = mlir::attn::dropoutKeepPair(
      b, loc, args[0], threshold, args[2], args[3], args[4], groupKey, pair);
  mlir::Value single = mlir::attn::dropoutKeep(
      b, loc, args[0], threshold, args[2], args[3], args[4], args[5]);
  mlir::Value bits = constant(0);
  for (auto [bit, keep] : llvm::enumerate(std::array{even, odd, single}))
    bits = mlir::arith::OrIOp::create(
        b, loc, bits,
        mlir::arith::ShLIOp::create(
            b, loc, mlir::arith::ExtUIOp::create(b, loc, i32, keep),
            constant(static_cast<int32_t>(bit))));
  mlir::func::ReturnOp::create(b, loc, bits);
  mlir::PassManager pm(&context);
  pm.addPass(mlir::createConvertToLLVMPass());
  pm.addPass(mlir::createReconcileUnrealizedCastsPass());
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  mlir::registerBuiltinDialectTranslation(context);
  mlir::registerLLVMDialectTranslation(context);
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  auto engine = mlir::ExecutionEngine::create(*module);
  ASSERT_TRUE(static_cast<bool>(engine)) << llvm::toString(engine.takeError());

  std::mt19937_64 rng(7);
  int checked = 0;
  for (uint64_t seed :
       {uint64_t{0}, uint64_t{0x243F6A8885A308D3}, ~uint64_t{0}, uint64_t{5}})
    for (float p : {0.1f, 0.25f, 0.5f, 0.9f})
      for (int n = 0; n < 200; ++n, ++checked) {
        int32_t batch = rng() % 4, head = rng() % 64, row = rng() % 100000,
                key = rng() % 100000, result = -1;
        uint64_t seedArg = seed;
        float pArg = p;
        void *packed[] = {&seedArg, &pArg, &batch, &head, &row, &key, &result};
        ASSERT_FALSE(
            static_cast<bool>((*engine)->invokePacked("keeps", packed)));
        int32_t first = (key & ~7) + 2 * ((key >> 1) & 3);
        int32_t want = dropoutKeeps(p, seed, batch, head, row, first) |
                       dropoutKeeps(p, seed, batch, head, row, first + 1) << 1 |
                       dropoutKeeps(p, seed, batch, head, row, key) << 2;
        ASSERT_EQ(result, want)
            << "seed " << seed << " p " << p << " at (" << batch << ", " << head
            << ", " << row << ", " << key << ")";
      }
  EXPECT_EQ(checked, 3200);
}
