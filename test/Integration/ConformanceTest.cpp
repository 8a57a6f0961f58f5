//===- ConformanceTest.cpp - Every kernel against the float64 reference ---===//
//
// The conformance matrix of docs/spec.md, through the whole
// stack: each case's spec is compiled by the attn-to-llvm-cpu pipeline (all
// of them into one shared library), loaded by the runtime, run on a thread
// pool on fresh random inputs with NaN-poisoned outputs (an element the
// kernel does not write fails the check), and compared with the naive
// float64 reference within the spec's tolerance.
//
// The same matrix for the GPU: every case compiles to PTX that ptxas
// assembles for sm_80 and sm_90 without register spills (needs the CUDA
// toolkit, not a GPU), and runs on GPU 0 through the runtime's CUDA backend
// where one is present (skipped, with the reason, where none is).
//
//===----------------------------------------------------------------------===//
#include "lib/Harness/Conformance.h"
#include "lib/Compiler/Compiler.h"
#include "lib/Harness/Harness.h"
#include "lib/Transforms/KernelChoice.h"
#include "test/Integration/Ptxas.h"
#include "test/Integration/SelectedCases.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <iostream>
#include <regex>
#include <set>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

using namespace attn;

// gtest finds it by argument-dependent lookup.
namespace attn {
void PrintTo(const ConformanceCase &c, std::ostream *os) {
  *os << c.label << ": " << c.spec;
}
} // namespace attn

namespace {

using Case = ConformanceCase;

/// A parameterized test's name: its case's label.
std::string caseName(const ::testing::TestParamInfo<Case> &info) {
  return info.param.label;
}

/// A library compiled from one spec per case, loaded, with a 2-thread pool:
/// the state of a suite that checks every case.
struct CaseLibrary {
  std::string directory, library;
  attn_module *module = nullptr;
  attn_thread_pool *pool = nullptr;

  /// Compiles `spec(c)` of every case of `cases` in `labels` into
  /// `<name>.so` in a new directory, with `options`; nothing when `labels`
  /// is empty.
  void build(const char *name, std::string (*spec)(const Case &),
             const std::set<std::string> &labels,
             const std::vector<Case> &cases = conformanceCases(),
             const CompileOptions &options = CompileOptions()) {
    std::vector<KernelSpec> specs;
    for (const Case &c : cases) {
      if (!labels.count(c.label))
        continue;
      std::string error;
      std::optional<KernelSpec> parsed = parseKernelSpec(spec(c), error);
      ASSERT_TRUE(parsed) << c.spec << ": " << error;
      specs.push_back(*parsed);
    }
    if (specs.empty())
      return;
    llvm::SmallString<128> dir;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory(name, dir));
    directory = dir.str().str();
    library = directory + "/" + name + ".so";
    std::string error;
    ASSERT_TRUE(compileKernels(specs, options, OutputKind::SharedLibrary,
                               library, error))
        << error;
    ASSERT_EQ(attn_module_load(library.c_str(), &module), ATTN_OK)
        << attn_last_error();
    ASSERT_EQ(attn_thread_pool_create(2, &pool), ATTN_OK);
  }
  void release() {
    attn_thread_pool_destroy(pool);
    attn_module_unload(module);
    if (!library.empty()) {
      llvm::sys::fs::remove(library);
      llvm::sys::fs::remove(directory);
    }
    *this = CaseLibrary();
  }
};

std::string forwardSpec(const Case &c) { return c.spec; }

/// Compiles the kernel of every case that will run into one library, once
/// for the suite (the suite's plain tests use "plain" and "mask_full").
class Conformance : public ::testing::TestWithParam<Case> {
public:
  static void SetUpTestSuite() {
    bool plainTests = false;
    std::set<std::string> labels = selectedCases("", &plainTests);
    if (plainTests)
      labels.insert({"plain", "mask_full"});
    state.build("attn-conformance", forwardSpec, labels);
    module = state.module;
    pool = state.pool;
  }
  static void TearDownTestSuite() { state.release(); }

  static CaseLibrary state;
  static attn_module *module;
  static attn_thread_pool *pool;
};

CaseLibrary Conformance::state;
attn_module *Conformance::module = nullptr;
attn_thread_pool *Conformance::pool = nullptr;

void checkCase(const Case &c, const attn_kernel_desc *kernel,
               attn_thread_pool *pool) {
  CaseOutcome outcome = runConformanceCase(c, kernel, pool);
  EXPECT_TRUE(outcome.passed) << outcome.message;
}

TEST_P(Conformance, MatchesReference) {
  const Case &c = GetParam();
  ASSERT_NE(module, nullptr);
  const attn_kernel_desc *kernel = nullptr;
  ASSERT_EQ(attn_module_find(module, c.label.c_str(), &kernel), ATTN_OK);
  checkCase(c, kernel, pool);
}

INSTANTIATE_TEST_SUITE_P(Matrix, Conformance,
                         ::testing::ValuesIn(conformanceCases()), caseName);

/// A suite over every case whose kernels, compiled from SpecOf(case), make
/// one more library (built once for the suite).
template <std::string (*SpecOf)(const Case &)>
class CaseKernels : public ::testing::TestWithParam<Case> {
public:
  static void SetUpTestSuite() {
    state.build(SpecOf == backwardSpec ? "attn-backward" : "attn-weights",
                SpecOf, selectedCases());
    module = state.module;
    pool = state.pool;
  }
  static void TearDownTestSuite() { state.release(); }

  /// The case's kernel, of kind `kind`.
  static const attn_kernel_desc *kernelOf(const Case &c, attn_kernel_kind kind) {
    const attn_kernel_desc *kernel = nullptr;
    if (!module || attn_module_find(module, c.label.c_str(), &kernel) != ATTN_OK ||
        attn_kernel_kind_of(kernel) != kind)
      return nullptr;
    return kernel;
  }

  static inline CaseLibrary state;
  static inline attn_module *module = nullptr;
  static inline attn_thread_pool *pool = nullptr;
};

/// The backward of every case (its spec plus "backward"; where the case has
/// an LSE, the backward takes dLSE), against the float64 reference gradient.
using Backward = CaseKernels<backwardSpec>;

TEST_P(Backward, MatchesReferenceGradient) {
  const attn_kernel_desc *kernel = kernelOf(GetParam(), ATTN_KERNEL_BACKWARD);
  ASSERT_NE(kernel, nullptr);
  CaseOutcome outcome = runBackwardConformanceCase(GetParam(), kernel, pool);
  EXPECT_TRUE(outcome.passed) << outcome.message;
}

/// The attention weights of every case (its spec plus "weights"; where the
/// case has an LSE, the kernel reads the forward's), against the float64
/// reference weights.
using Weights = CaseKernels<weightsSpec>;

TEST_P(Weights, MatchesReferenceWeights) {
  const attn_kernel_desc *kernel = kernelOf(GetParam(), ATTN_KERNEL_WEIGHTS);
  ASSERT_NE(kernel, nullptr);
  CaseOutcome outcome = runWeightsConformanceCase(GetParam(), kernel, pool);
  EXPECT_TRUE(outcome.passed) << outcome.message;
}

INSTANTIATE_TEST_SUITE_P(Matrix, Backward,
                         ::testing::ValuesIn(conformanceCases()), caseName);
INSTANTIATE_TEST_SUITE_P(Matrix, Weights,
                         ::testing::ValuesIn(conformanceCases()), caseName);

/// Other micro-kernels and blockings than the host's choice, on the prefill
/// cases in bf16 (amxConformanceCases):
/// - AmxEmulated: the CPU's AMX micro-kernel chosen as on a CPU with AMX,
///   its tile operations run as loops (--emulate-amx), which checks its
///   code on any CPU with AVX-512 BF16;
/// - Amx: compiled for the host, whose choice is the AMX kernel where the
///   CPU has AMX; SKIPPED (not passed) where it has none;
/// - Bf16Blocks128: the dot product's 128-key blocks by 3 rows, which Zen 4
///   takes where 128 keys' panels fit its L1d and Zen 5 (smallBf16Blocks)
///   does not: checked on any CPU whose choice is the dot product.
enum class Prefill { AmxEmulated, Amx, Bf16Blocks128 };

template <Prefill Variant>
class PrefillKernels : public ::testing::TestWithParam<Case> {
public:
  static void SetUpTestSuite() {
    std::string error;
    ResolvedTarget host;
    ASSERT_TRUE(resolveTarget(CompileOptions(), host, error)) << error;
    bool bf16 = host.vectorWidth == 16 && host.has("avx512bf16");
    bool amx = bf16 && host.has("amx-tile") && host.has("amx-bf16");
    CompileOptions options;
    switch (Variant) {
    case Prefill::AmxEmulated:
      if (!bf16)
        skipReason = "the emulated AMX kernels take AVX-512 BF16, which this "
                     "CPU (" +
                     host.cpu + ") has not";
      options.emulateAmx = true;
      break;
    case Prefill::Amx:
      if (!amx)
        skipReason = "this CPU (" + host.cpu +
                     ") has no AMX (amx-tile, amx-bf16): its kernels would "
                     "not take the AMX micro-kernel";
      break;
    case Prefill::Bf16Blocks128:
      if (!bf16 || amx || !mlir::attn::bf16DotPays(host.cpu))
        skipReason = "this CPU (" + host.cpu +
                     ") does not take bf16's dot product (no AVX-512 BF16, "
                     "AMX tiles, or Intel's slow vdpbf16ps)";
      options.keyTileSize = 128;
      options.rowBlock = 3;
      break;
    }
    if (!skipReason.empty())
      return;
    static const char *names[] = {"attn-amx-emulated", "attn-amx",
                                  "attn-bf16-blocks-128"};
    state.build(names[static_cast<int>(Variant)], forwardSpec, selectedCases(),
                amxConformanceCases(), options);
    module = state.module;
    pool = state.pool;
  }
  static void TearDownTestSuite() { state.release(); }

  void check() {
    if (!skipReason.empty())
      GTEST_SKIP() << skipReason;
    const Case &c = GetParam();
    ASSERT_NE(module, nullptr);
    const attn_kernel_desc *kernel = nullptr;
    ASSERT_EQ(attn_module_find(module, c.label.c_str(), &kernel), ATTN_OK);
    checkCase(c, kernel, pool);
  }

  static inline CaseLibrary state;
  static inline attn_module *module = nullptr;
  static inline attn_thread_pool *pool = nullptr;
  static inline std::string skipReason;
};

using AmxEmulated = PrefillKernels<Prefill::AmxEmulated>;
using Amx = PrefillKernels<Prefill::Amx>;
using Bf16Blocks128 = PrefillKernels<Prefill::Bf16Blocks128>;

TEST_P(AmxEmulated, MatchesReference) { check(); }
TEST_P(Amx, MatchesReference) { check(); }
TEST_P(Bf16Blocks128, MatchesReference) { check(); }

INSTANTIATE_TEST_SUITE_P(Matrix, AmxEmulated,
                         ::testing::ValuesIn(amxConformanceCases()), caseName);
INSTANTIATE_TEST_SUITE_P(Matrix, Amx,
                         ::testing::ValuesIn(amxConformanceCases()), caseName);
INSTANTIATE_TEST_SUITE_P(Matrix, Bf16Blocks128,
                         ::testing::ValuesIn(amxConformanceCases()), caseName);

/// The decoding cases, whose kernels have the key split's phases.
std::vector<Case> keySplitCases() {
  std::vector<Case> cases;
  for (const Case &c : conformanceCases()) {
    std::string error;
    std::optional<KernelSpec> spec = parseKernelSpec(c.spec, error);
    if (spec && hasKeySplit(*spec, CompileOptions()))
      cases.push_back(c);
  }
  return cases;
}

/// Split-KV: each decoding case with its keys split into 2, 3 and 7 ranges
/// (of whole 128-key tiles: the last ones empty where Sk is short) and
/// merged, against the reference; attn_run_split refuses a split of a
/// kernel without the phases.
class KeySplit : public Conformance {};

TEST_P(KeySplit, MatchesReference) {
  const Case &c = GetParam();
  ASSERT_NE(module, nullptr);
  const attn_kernel_desc *kernel = nullptr;
  ASSERT_EQ(attn_module_find(module, c.label.c_str(), &kernel), ATTN_OK);
  ASSERT_TRUE(attn_kernel_has_key_split(kernel));
  for (int64_t splits : {2, 3, 7}) {
    CaseOutcome outcome = runConformanceCase(c, kernel, pool, splits);
    EXPECT_TRUE(outcome.passed) << splits << " ranges: " << outcome.message;
  }
}

INSTANTIATE_TEST_SUITE_P(Decoding, KeySplit,
                         ::testing::ValuesIn(keySplitCases()), caseName);

TEST_F(Conformance, KeySplitOfAPrefillKernelIsRefused) {
  ASSERT_NE(module, nullptr);
  const attn_kernel_desc *kernel = nullptr;
  ASSERT_EQ(attn_module_find(module, "plain", &kernel), ATTN_OK);
  EXPECT_FALSE(attn_kernel_has_key_split(kernel));
  std::vector<Case> cases = conformanceCases();
  auto plain =
      llvm::find_if(cases, [](const Case &c) { return c.label == "plain"; });
  ASSERT_NE(plain, cases.end());
  CaseOutcome outcome = runConformanceCase(*plain, kernel, pool, 2);
  EXPECT_FALSE(outcome.passed);
  EXPECT_NE(outcome.message.find("has no key split"), std::string::npos)
      << outcome.message;
}

/// Rows whose boolean mask is all false give O = 0 and LSE = -inf.
TEST_F(Conformance, AllFalseMaskRows) {
  std::string error;
  Problem problem;
  problem.spec = *parseKernelSpec("name=mask_full,d=64,mask=bool,lse", error);
  problem.batch = 2;
  problem.headsQ = problem.headsKv = 2;
  problem.seqQ = 70;
  problem.seqK = 150;
  const attn_kernel_desc *kernel = nullptr;
  ASSERT_EQ(attn_module_find(module, "mask_full", &kernel), ATTN_OK);
  ProblemData data;
  makeProblemData(problem, data);
  std::vector<double> mask = data.mask.values;
  // Rows 0, 13 and 69 of every (b, h) see nothing.
  for (int64_t bh = 0; bh < 4; ++bh)
    for (int64_t row : {0, 13, 69})
      for (int64_t j = 0; j < problem.seqK; ++j)
        mask[(bh * problem.seqQ + row) * problem.seqK + j] = 0;
  setValues(data.mask, mask);
  ASSERT_EQ(runProblem(kernel, data, pool), ATTN_OK) << attn_last_error();
  CheckReport report = checkAgainstReference(problem, data);
  EXPECT_TRUE(report.passed) << report.message;
  std::vector<double> out = outputValues(data);
  for (int64_t e = 0; e < 64; ++e)
    EXPECT_EQ(out[13 * 64 + e], 0.0);
  EXPECT_EQ(data.lse[13], -INFINITY);
}

//===----------------------------------------------------------------------===//
// GPU
//===----------------------------------------------------------------------===//

std::vector<KernelSpec> specsOf(const std::vector<Case> &cases) {
  std::vector<KernelSpec> specs;
  for (const Case &c : cases) {
    std::string error;
    specs.push_back(*parseKernelSpec(c.spec, error));
  }
  return specs;
}

/// The GPU cases whose kernels 32 rows a warp change (chooseGpuKernel: two
/// m16 blocks for tensor-core kernels, f16/bf16 with Dv <= 128).
std::vector<Case> thirtyTwoRowCases() {
  std::vector<Case> cases;
  for (const Case &c : gpuConformanceCases()) {
    std::string error;
    std::optional<KernelSpec> spec = parseKernelSpec(c.spec, error);
    if (spec && !spec->linear && spec->elementType != ElementType::F32 &&
        spec->valueDim <= 128)
      cases.push_back(c);
  }
  return cases;
}


/// The kernels of `cases`, as PTX for sm_80 with `rowsPerWarp` query rows
/// a warp, assembled with ptxas for sm_80 and sm_90; `spillFree(case)` says
/// which must not spill to local memory.
void assembleCases(const std::vector<Case> &cases, int64_t rowsPerWarp,
                   llvm::function_ref<bool(const Case &)> spillFree) {
  CompileOptions options;
  options.gpuArch = "sm_80";
  options.gpuRowsPerWarp = rowsPerWarp;
  std::map<std::string, const Case *> byLabel;
  for (const Case &c : cases)
    byLabel[c.label] = &c;
  expectAssembles(
      specsOf(cases), options,
      [&](const std::string &name) { return spillFree(*byLabel.at(name)); },
      std::to_string(rowsPerWarp) + " rows a warp");
}

/// The kernels as chosen by default (16 rows a warp): none spills.
TEST(GpuCompile, EveryCaseAssemblesForSm80AndSm90WithoutSpills) {
  assembleCases(gpuConformanceCases(), 16, [](const Case &) { return true; });
}

/// With 32 rows a warp, the kernels that change (the others are the 16-row
/// ones): every one assembles, and those of the benchmark's kind at D <= 64
/// (no mask operand, no dropout) do not spill. Masks, dropout's keep bits
/// and D = 128 reach the 255-register limit at 64-key tiles and spill
/// (ptxas' report, printed): the GPU run decides whether two blocks a warp
/// pay there.
TEST(GpuCompile, TensorCoreCasesAssembleWithThirtyTwoRowsAWarp) {
  assembleCases(thirtyTwoRowCases(), 32, [](const Case &c) {
    std::string error;
    std::optional<KernelSpec> spec = parseKernelSpec(c.spec, error);
    return spec && spec->mask == MaskKind::None && !spec->dropout &&
           std::max(spec->headDim, spec->valueDim) <= 64;
  });
}

/// The matrix on GPU 0: compiled for its architecture with `RowsPerWarp`
/// query rows a warp into one library the runtime loads; every case is
/// skipped (not passed) without a GPU.
template <int64_t RowsPerWarp>
class GpuConformanceAt : public ::testing::TestWithParam<Case> {
public:
  static std::vector<Case> cases() {
    return RowsPerWarp == 16 ? gpuConformanceCases() : thirtyTwoRowCases();
  }
  static void SetUpTestSuite() {
    std::string arch, description;
    if (!cudaTarget(arch, description, skipReason))
      return;
    llvm::SmallString<128> dir;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("attn-gpu", dir));
    directory = dir.str().str();
    library = directory + "/conformance_gpu.so";
    CompileOptions options;
    options.gpuArch = arch;
    options.gpuRowsPerWarp = RowsPerWarp;
    std::string error;
    ASSERT_TRUE(compileKernels(specsOf(cases()), options,
                               OutputKind::SharedLibrary, library, error))
        << error;
    ASSERT_EQ(attn_module_load(library.c_str(), &module), ATTN_OK)
        << attn_last_error();
    std::cout << "GPU conformance on " << description << ", " << RowsPerWarp
              << " rows a warp\n";
  }
  static void TearDownTestSuite() {
    attn_module_unload(module);
    if (!library.empty()) {
      llvm::sys::fs::remove(library);
      llvm::sys::fs::remove(directory);
    }
  }
  void check(const Case &c) {
    if (!skipReason.empty())
      GTEST_SKIP() << skipReason;
    ASSERT_NE(module, nullptr);
    const attn_kernel_desc *kernel = nullptr;
    ASSERT_EQ(attn_module_find(module, c.label.c_str(), &kernel), ATTN_OK);
    ASSERT_EQ(attn_kernel_device(kernel), ATTN_DEVICE_CUDA);
    checkCase(c, kernel, nullptr);
  }
  static std::string skipReason, directory, library;
  static attn_module *module;
};

template <int64_t R> std::string GpuConformanceAt<R>::skipReason;
template <int64_t R> std::string GpuConformanceAt<R>::directory;
template <int64_t R> std::string GpuConformanceAt<R>::library;
template <int64_t R> attn_module *GpuConformanceAt<R>::module = nullptr;

using GpuConformance = GpuConformanceAt<16>;
using GpuConformanceRows32 = GpuConformanceAt<32>;

TEST_P(GpuConformance, MatchesReference) { check(GetParam()); }
TEST_P(GpuConformanceRows32, MatchesReference) { check(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Matrix, GpuConformance,
                         ::testing::ValuesIn(GpuConformance::cases()),
                         caseName);
INSTANTIATE_TEST_SUITE_P(Matrix, GpuConformanceRows32,
                         ::testing::ValuesIn(GpuConformanceRows32::cases()),
                         caseName);

} // namespace
