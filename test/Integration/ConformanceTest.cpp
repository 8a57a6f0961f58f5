//===- ConformanceTest.cpp - Every kernel against the float64 reference ---===//
//
// The conformance matrix of ../shared/spec/attention.md, through the whole
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
#include "lib/Compiler/Compiler.h"
#include "lib/Harness/Harness.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <iostream>
#include <regex>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <ostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace attn;

namespace {

struct Case {
  std::string label; // also the kernel's name
  std::string spec;
  int64_t batch, headsQ, headsKv, seqQ, seqK;
  bool bshd = false;
  double inputScale = 1.0;
  /// Only require finite outputs and a loose tolerance (huge logits).
  bool finiteOnly = false;
};

void PrintTo(const Case &c, std::ostream *os) { *os << c.label << ": " << c.spec; }

std::vector<Case> conformanceCases() {
  std::vector<Case> cases = {
      // Sizes that are not multiples of the tiles (64 query rows, 128 keys).
      {"plain", "d=64", 2, 4, 4, 100, 200},
      {"decode_sq1", "d=64,lse", 1, 8, 8, 1, 300},
      {"sq_lt_sk", "d=64,lse", 1, 2, 2, 50, 300},
      {"sq_gt_sk", "d=64,lse", 1, 2, 2, 300, 50},
      {"sk_1", "d=32,lse", 1, 2, 2, 17, 1},
      // Causal, both alignments, both Sq < Sk and Sq > Sk.
      {"causal_tl_square", "d=64,causal,lse", 1, 4, 4, 200, 200},
      {"causal_tl_sq_lt_sk", "d=64,causal,lse", 1, 2, 2, 70, 260},
      {"causal_tl_sq_gt_sk", "d=64,causal,lse", 1, 2, 2, 260, 70},
      {"causal_br_sq_lt_sk", "d=64,causal=bottom_right,lse", 1, 2, 2, 70, 260},
      // Bottom-right with Sq > Sk: the first Sq - Sk rows see nothing
      // (O = 0, LSE = -inf).
      {"causal_br_sq_gt_sk", "d=64,causal=bottom_right,lse", 1, 2, 2, 260, 70},
      {"causal_br_decode", "d=128,causal=bottom_right,lse,gqa=4", 1, 8, 2, 1,
       333},
      // Sliding windows.
      {"window_left", "d=64,causal,window=40:0,lse", 1, 2, 2, 300, 300},
      {"window_both", "d=64,window=30:20,lse", 1, 2, 2, 150, 260},
      {"window_right", "d=32,align=bottom_right,window=inf:5", 1, 2, 2, 90,
       140},
      {"window_br", "d=64,causal=bottom_right,window=64:0", 1, 2, 2, 100,
       400},
      // Boolean masks in every broadcast form, additive biases with -inf.
      {"mask_full", "d=64,mask=bool,lse", 2, 2, 2, 70, 150},
      {"mask_b1", "d=64,mask=bool:b1", 2, 2, 2, 70, 150},
      {"mask_h1", "d=64,mask=bool:h1", 2, 2, 2, 70, 150},
      {"mask_q1", "d=64,mask=bool:q1", 2, 2, 2, 70, 150},
      {"mask_b1h1", "d=64,mask=bool:b1h1,causal,lse", 2, 2, 2, 70, 150},
      {"mask_b1h1q1", "d=64,mask=bool:b1h1q1", 2, 2, 2, 70, 150},
      {"bias_full", "d=64,mask=bias,lse", 2, 2, 2, 70, 150},
      {"bias_b1h1", "d=64,mask=bias:b1h1,causal=bottom_right", 2, 2, 2, 70,
       150},
      // Grouped-query and multi-query attention.
      {"gqa4", "d=64,gqa=4,causal,lse", 2, 8, 2, 130, 130},
      {"mqa", "d=64,lse", 1, 8, 1, 130, 200},
      // D != Dv, as in the seed tutorials, and the head dims the spec lists.
      {"d2_dv4", "d=2,dv=4,lse", 1, 2, 2, 9, 13},
      {"d16", "d=16,causal", 1, 2, 2, 150, 150},
      {"d80", "d=80,dv=80,causal,lse", 1, 2, 2, 150, 150},
      {"d128", "d=128,dv=128,lse", 1, 2, 2, 150, 150},
      {"d256", "d=256,dv=256,causal", 1, 2, 2, 100, 100},
      {"dv_tail", "d=48,dv=20,lse", 1, 2, 2, 33, 77},
      // Scale and soft-capping attributes.
      {"scale", "d=64,scale=0.3", 1, 2, 2, 64, 64},
      {"softcap", "d=64,softcap=5,causal,lse", 1, 2, 2, 100, 100},
      // Element types.
      {"bf16", "dtype=bf16,d=64,causal,lse", 1, 4, 2, 100, 170},
      {"f16", "dtype=f16,d=64,mask=bool:b1h1,lse", 1, 4, 2, 100, 170},
      {"bf16_d128_bias", "dtype=bf16,d=128,mask=bias:b1", 2, 2, 2, 65, 129},
      {"f16_window", "dtype=f16,d=80,causal=bottom_right,window=50:0", 1, 2,
       2, 80, 200},
      // Empty problems: Sk = 0 (every row fully masked), Sq = 0.
      {"sk_0", "d=16,lse", 1, 2, 2, 5, 0},
      {"sq_0", "d=16,lse", 1, 2, 2, 0, 9},
  };
  // Strided [B, S, H, D] buffers.
  cases.push_back({"bshd", "d=64,causal,gqa=2,lse", 2, 4, 2, 90, 90, true});
  cases.push_back(
      {"bshd_bf16", "dtype=bf16,d=64,mask=bool:h1", 1, 4, 4, 70, 70, true});
  // Logits of magnitude ~1e4: finite, no NaN.
  for (const char *dtype : {"f32", "bf16", "f16"}) {
    Case c{std::string("logits_1e4_") + dtype,
           std::string("dtype=") + dtype + ",d=64,causal,lse",
           1, 2, 2, 100, 100};
    c.inputScale = 100.0;
    c.finiteOnly = true;
    cases.push_back(c);
  }
  for (Case &c : cases)
    c.spec = "name=" + c.label + "," + c.spec;
  return cases;
}

/// Compiles every case's kernel into one library, once for the suite.
class Conformance : public ::testing::TestWithParam<Case> {
public:
  static void SetUpTestSuite() {
    std::vector<KernelSpec> specs;
    for (const Case &c : conformanceCases()) {
      std::string error;
      std::optional<KernelSpec> spec = parseKernelSpec(c.spec, error);
      ASSERT_TRUE(spec) << c.spec << ": " << error;
      specs.push_back(*spec);
    }
    llvm::SmallString<128> dir;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("attn-conformance", dir));
    directory = dir.str().str();
    library = directory + "/conformance.so";
    std::string error;
    ASSERT_TRUE(compileKernels(specs, CompileOptions(),
                               OutputKind::SharedLibrary, library, error))
        << error;
    ASSERT_EQ(attn_module_load(library.c_str(), &module), ATTN_OK)
        << attn_last_error();
    ASSERT_EQ(attn_thread_pool_create(2, &pool), ATTN_OK);
  }
  static void TearDownTestSuite() {
    attn_thread_pool_destroy(pool);
    attn_module_unload(module);
    llvm::sys::fs::remove(library);
    llvm::sys::fs::remove(directory);
  }

  static std::string directory, library;
  static attn_module *module;
  static attn_thread_pool *pool;
};

std::string Conformance::directory, Conformance::library;
attn_module *Conformance::module = nullptr;
attn_thread_pool *Conformance::pool = nullptr;

/// Runs case `c` with `kernel` on fresh inputs and checks it against the
/// reference; then once more (on one thread on the CPU) for bit-identical
/// results.
void checkCase(const Case &c, const attn_kernel_desc *kernel,
               attn_thread_pool *pool) {
  std::string error;
  Problem problem;
  problem.spec = *parseKernelSpec(c.spec, error);
  problem.batch = c.batch;
  problem.headsQ = c.headsQ;
  problem.headsKv = c.headsKv;
  problem.seqQ = c.seqQ;
  problem.seqK = c.seqK;
  problem.bshd = c.bshd;
  problem.inputScale = c.inputScale;
  problem.seed = std::hash<std::string>()(c.label);

  ProblemData data;
  makeProblemData(problem, data);
  ASSERT_EQ(runProblem(kernel, data, pool), ATTN_OK) << attn_last_error();
  CheckReport report = checkAgainstReference(problem, data);
  SCOPED_TRACE(problem.describe() + ": " + report.message);
  if (c.finiteOnly) {
    for (double value : outputValues(data))
      ASSERT_TRUE(std::isfinite(value)) << "non-finite output";
    EXPECT_FALSE(report.output.mismatched());
    EXPECT_LE(report.output.relative, 5e-2);
    return;
  }
  EXPECT_TRUE(report.passed);

  std::vector<double> first = outputValues(data);
  poisonOutputs(data);
  ASSERT_EQ(runProblem(kernel, data, nullptr), ATTN_OK) << attn_last_error();
  std::vector<double> second = outputValues(data);
  ASSERT_EQ(first.size(), second.size());
  for (size_t i = 0; i < second.size(); ++i)
    ASSERT_TRUE(std::memcmp(&second[i], &first[i], sizeof(double)) == 0)
        << "element " << i << " differs between two runs (2 threads, then 1 "
           "on the CPU)";
}

TEST_P(Conformance, MatchesReference) {
  const Case &c = GetParam();
  ASSERT_NE(module, nullptr);
  const attn_kernel_desc *kernel = nullptr;
  ASSERT_EQ(attn_module_find(module, c.label.c_str(), &kernel), ATTN_OK);
  checkCase(c, kernel, pool);
}

INSTANTIATE_TEST_SUITE_P(Matrix, Conformance,
                         ::testing::ValuesIn(conformanceCases()),
                         [](const ::testing::TestParamInfo<Case> &info) {
                           return info.param.label;
                         });

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

std::vector<KernelSpec> conformanceSpecs() {
  std::vector<KernelSpec> specs;
  for (const Case &c : conformanceCases()) {
    std::string error;
    specs.push_back(*parseKernelSpec(c.spec, error));
  }
  return specs;
}

/// Every case's kernel, as PTX for sm_80, assembles with ptxas for sm_80 and
/// sm_90 with no spill to local memory (ptxas -v's report of each kernel).
TEST(GpuCompile, EveryCaseAssemblesForSm80AndSm90WithoutSpills) {
#ifndef ATTN_PTXAS
  GTEST_SKIP() << "no CUDA toolkit (ptxas) at configure time";
#else
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("attn-gpu-compile", dir));
  std::string ptx = (dir + "/conformance.ptx").str();
  std::string log = (dir + "/ptxas.log").str();
  CompileOptions options;
  options.gpuArch = "sm_80";
  std::vector<KernelSpec> specs = conformanceSpecs();
  std::vector<GpuKernelInfo> kernels;
  std::string error;
  ASSERT_TRUE(
      compileKernels(specs, options, OutputKind::PTX, ptx, error, &kernels))
      << error;
  ASSERT_EQ(kernels.size(), specs.size());
  for (const char *arch : {"sm_80", "sm_90"}) {
    std::string archFlag = std::string("-arch=") + arch;
    llvm::StringRef args[] = {ATTN_PTXAS, archFlag, "-v", ptx, "-o",
                              "/dev/null"};
    std::optional<llvm::StringRef> redirects[] = {std::nullopt, log, log};
    ASSERT_EQ(llvm::sys::ExecuteAndWait(ATTN_PTXAS, args, std::nullopt,
                                        redirects),
              0)
        << "ptxas " << arch << " failed; see " << log;
    auto text = llvm::MemoryBuffer::getFile(log);
    ASSERT_TRUE(text);
    // "Compiling entry function 'name' for 'sm_80'" ... "N bytes spill
    // stores, M bytes spill loads" ... "Used R registers".
    std::string report = (*text)->getBuffer().str();
    std::regex entry("Compiling entry function '([A-Za-z0-9_]+)'");
    std::regex spills("([0-9]+) bytes spill stores, ([0-9]+) bytes spill "
                      "loads");
    std::regex registers("Used ([0-9]+) registers");
    std::map<std::string, std::string> seen;
    std::string current;
    std::istringstream lines(report);
    for (std::string line; std::getline(lines, line);) {
      std::smatch m;
      if (std::regex_search(line, m, entry))
        current = m[1];
      else if (std::regex_search(line, m, spills))
        EXPECT_TRUE(m[1] == "0" && m[2] == "0")
            << current << " spills on " << arch << ": " << line;
      else if (std::regex_search(line, m, registers))
        seen[current] = m[1];
    }
    for (const KernelSpec &spec : specs)
      EXPECT_TRUE(seen.count(spec.name))
          << spec.name << " missing from ptxas' report for " << arch;
    std::cout << arch << ": " << seen.size() << " kernels assembled, "
              << "registers per thread:";
    for (auto &[name, count] : seen)
      std::cout << " " << name << "=" << count;
    std::cout << "\n";
  }
  llvm::sys::fs::remove(ptx);
  llvm::sys::fs::remove(log);
  llvm::sys::fs::remove(dir);
#endif
}

/// The matrix on GPU 0: compiled for its architecture into one library the
/// runtime loads; every case is skipped (not passed) without a GPU.
class GpuConformance : public ::testing::TestWithParam<Case> {
public:
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
    std::string error;
    ASSERT_TRUE(compileKernels(conformanceSpecs(), options,
                               OutputKind::SharedLibrary, library, error))
        << error;
    ASSERT_EQ(attn_module_load(library.c_str(), &module), ATTN_OK)
        << attn_last_error();
    std::cout << "GPU conformance on " << description << "\n";
  }
  static void TearDownTestSuite() {
    attn_module_unload(module);
    if (!library.empty()) {
      llvm::sys::fs::remove(library);
      llvm::sys::fs::remove(directory);
    }
  }
  static std::string skipReason, directory, library;
  static attn_module *module;
};

std::string GpuConformance::skipReason, GpuConformance::directory,
    GpuConformance::library;
attn_module *GpuConformance::module = nullptr;

TEST_P(GpuConformance, MatchesReference) {
  if (!skipReason.empty())
    GTEST_SKIP() << skipReason;
  const Case &c = GetParam();
  ASSERT_NE(module, nullptr);
  const attn_kernel_desc *kernel = nullptr;
  ASSERT_EQ(attn_module_find(module, c.label.c_str(), &kernel), ATTN_OK);
  ASSERT_EQ(attn_kernel_device(kernel), ATTN_DEVICE_CUDA);
  checkCase(c, kernel, nullptr);
}

INSTANTIATE_TEST_SUITE_P(Matrix, GpuConformance,
                         ::testing::ValuesIn(conformanceCases()),
                         [](const ::testing::TestParamInfo<Case> &info) {
                           return info.param.label;
                         });

} // namespace
