//===- ConformanceTest.cpp - Every kernel against the float64 reference ---===//
//
// The conformance matrix of ../shared/spec/attention.md, through the whole
// stack: each case's spec is compiled by the attn-to-llvm-cpu pipeline (all
// of them into one shared library), loaded by the runtime, run on a thread
// pool on fresh random inputs with NaN-poisoned outputs (an element the
// kernel does not write fails the check), and compared with the naive
// float64 reference within the spec's tolerance.
//
//===----------------------------------------------------------------------===//
#include "lib/Compiler/Compiler.h"
#include "lib/Harness/Harness.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <ostream>
#include <map>
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

TEST_P(Conformance, MatchesReference) {
  const Case &c = GetParam();
  ASSERT_NE(module, nullptr);
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

  const attn_kernel_desc *kernel = nullptr;
  ASSERT_EQ(attn_module_find(module, c.label.c_str(), &kernel), ATTN_OK);
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

  // The same call on one thread gives bit-identical results.
  std::vector<double> parallel = outputValues(data);
  poisonOutputs(data);
  ASSERT_EQ(runProblem(kernel, data, nullptr), ATTN_OK) << attn_last_error();
  std::vector<double> serial = outputValues(data);
  ASSERT_EQ(parallel.size(), serial.size());
  for (size_t i = 0; i < serial.size(); ++i)
    ASSERT_TRUE(std::memcmp(&serial[i], &parallel[i], sizeof(double)) == 0)
        << "element " << i << " differs between 1 and 2 threads";
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

} // namespace
