//===- ReliabilityTest.cpp - Concurrency, load and numerical edge cases ---===//
//
// Compiled kernels under stress, through the runtime:
//  - many host threads calling the same and different kernels at once on
//    shared inputs give results bit-identical to serial calls;
//  - unloading a library while its kernels run is refused, and loading and
//    unloading other libraries meanwhile is safe;
//  - thousands of calls do not grow the resident memory;
//  - the spec's numerical edge cases, for every element type: fully masked
//    rows, logits of ±1e4 and ±1e30, -inf biases, NaN in one key, denormal
//    inputs, Sq or Sk = 0, Sk = 1, D = 1.
//
//===----------------------------------------------------------------------===//
#include "lib/Compiler/Compiler.h"
#include "lib/Harness/Harness.h"

#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <thread>

// AddressSanitizer keeps freed heap blocks in its quarantine (up to 256 MiB)
// before reusing them, so a process's resident size grows with every
// malloc/free pair until that fills: no measure of leaks there (its
// LeakSanitizer is).
#if defined(__SANITIZE_ADDRESS__)
#define ATTN_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ATTN_UNDER_ASAN 1
#endif
#endif

using namespace attn;

namespace {

const char *const kTypes[] = {"f32", "f16", "bf16"};

std::vector<std::string> kernelSpecs() {
  std::vector<std::string> specs;
  for (const char *type : kTypes) {
    std::string t = type;
    specs.push_back("name=plain_" + t + ",dtype=" + t + ",d=16,lse");
    specs.push_back("name=causal_" + t + ",dtype=" + t + ",d=16,causal,lse");
    specs.push_back("name=window_" + t + ",dtype=" + t +
                    ",d=16,window=8:0,lse");
    specs.push_back("name=keep_" + t + ",dtype=" + t + ",d=16,mask=bool,lse");
    specs.push_back("name=bias_" + t + ",dtype=" + t + ",d=16,mask=bias,lse");
    specs.push_back("name=d1_" + t + ",dtype=" + t + ",d=1,dv=1,lse");
  }
  return specs;
}

class Reliability : public ::testing::Test {
public:
  static void SetUpTestSuite() {
    std::vector<KernelSpec> specs;
    std::string error;
    for (const std::string &text : kernelSpecs())
      specs.push_back(*parseKernelSpec(text, error));
    llvm::SmallString<128> dir;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("attn-reliability", dir));
    directory = dir.str().str();
    library = directory + "/kernels.so";
    secondLibrary = directory + "/second.so";
    ASSERT_TRUE(compileKernels(specs, CompileOptions(),
                               OutputKind::SharedLibrary, library, error))
        << error;
    ASSERT_TRUE(compileKernels({specs[0]}, CompileOptions(),
                               OutputKind::SharedLibrary, secondLibrary, error))
        << error;
    ASSERT_EQ(attn_module_load(library.c_str(), &module), ATTN_OK)
        << attn_last_error();
    ASSERT_EQ(attn_thread_pool_create(2, &pool), ATTN_OK);
  }
  static void TearDownTestSuite() {
    attn_thread_pool_destroy(pool);
    attn_module_unload(module);
    llvm::sys::fs::remove(library);
    llvm::sys::fs::remove(secondLibrary);
    llvm::sys::fs::remove(directory);
  }

  static const attn_kernel_desc *kernel(const std::string &name) {
    const attn_kernel_desc *desc = nullptr;
    EXPECT_EQ(attn_module_find(module, name.c_str(), &desc), ATTN_OK) << name;
    return desc;
  }

  static Problem problem(const std::string &name, int64_t sq, int64_t sk) {
    Problem p;
    std::string error;
    for (const std::string &text : kernelSpecs())
      if (text.find("name=" + name + ",") == 0)
        p.spec = *parseKernelSpec(text, error);
    p.batch = 1;
    p.headsQ = p.headsKv = 2;
    p.seqQ = sq;
    p.seqK = sk;
    return p;
  }

  /// Runs `p` on fresh inputs adjusted by `craft` and checks the reference.
  template <typename Craft>
  static CheckReport runCrafted(const Problem &p, ProblemData &data,
                                Craft craft) {
    makeProblemData(p, data);
    craft(data);
    EXPECT_EQ(runProblem(kernel(p.spec.name), data, pool), ATTN_OK)
        << attn_last_error();
    return checkAgainstReference(p, data);
  }

  static std::string directory, library, secondLibrary;
  static attn_module *module;
  static attn_thread_pool *pool;
};

std::string Reliability::directory, Reliability::library,
    Reliability::secondLibrary;
attn_module *Reliability::module = nullptr;
attn_thread_pool *Reliability::pool = nullptr;

std::vector<uint8_t> outputBytes(const ProblemData &data) {
  return {data.output.bytes.begin(), data.output.bytes.end()};
}

//===----------------------------------------------------------------------===//
// Concurrency and load
//===----------------------------------------------------------------------===//

TEST_F(Reliability, ManyThreadsSameAndDifferentKernelsAreBitIdentical) {
  const std::vector<std::string> names = {"plain_f32", "causal_bf16",
                                          "keep_f16", "bias_f32"};
  // Serial results first, one input set per kernel, shared by all threads.
  std::vector<Problem> problems;
  std::vector<ProblemData> inputs(names.size());
  std::vector<std::vector<uint8_t>> expected;
  std::vector<std::vector<float>> expectedLse;
  for (size_t k = 0; k < names.size(); ++k) {
    problems.push_back(problem(names[k], 77, 130));
    makeProblemData(problems[k], inputs[k]);
    ASSERT_EQ(runProblem(kernel(names[k]), inputs[k], nullptr), ATTN_OK);
    expected.push_back(outputBytes(inputs[k]));
    expectedLse.push_back(inputs[k].lse);
  }
  constexpr int kThreads = 8, kCallsPerThread = 25;
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int call = 0; call < kCallsPerThread; ++call) {
        size_t k = (t + call) % names.size();
        // Shared inputs, a private output and LSE.
        ProblemData mine;
        mine.query = inputs[k].query;
        mine.key = inputs[k].key;
        mine.value = inputs[k].value;
        mine.mask = inputs[k].mask;
        mine.hasMask = inputs[k].hasMask;
        mine.output = inputs[k].output;
        mine.query.view.data = inputs[k].query.bytes.data();
        mine.key.view.data = inputs[k].key.bytes.data();
        mine.value.view.data = inputs[k].value.bytes.data();
        mine.mask.view.data = inputs[k].mask.bytes.data();
        mine.output.view.data = mine.output.bytes.data();
        mine.lse = inputs[k].lse;
        mine.lseView = inputs[k].lseView;
        mine.lseView.data = mine.lse.data();
        poisonOutputs(mine);
        // Half the calls use the shared pool, half run on their thread.
        if (runProblem(kernel(names[k]), mine, call % 2 ? pool : nullptr) !=
            ATTN_OK)
          ++failures;
        if (outputBytes(mine) != expected[k] ||
            std::memcmp(mine.lse.data(), expectedLse[k].data(),
                        mine.lse.size() * sizeof(float)) != 0)
          ++mismatches;
      }
    });
  for (std::thread &t : threads)
    t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(mismatches, 0);
}

TEST_F(Reliability, UnloadWhileRunningIsRefusedAndLoadingOthersIsSafe) {
  attn_module *second = nullptr;
  ASSERT_EQ(attn_module_load(secondLibrary.c_str(), &second), ATTN_OK)
      << attn_last_error();
  const attn_kernel_desc *desc = nullptr;
  ASSERT_EQ(attn_module_find(second, "plain_f32", &desc), ATTN_OK);
  Problem p = problem("plain_f32", 2048, 2048);
  p.headsQ = p.headsKv = 8;
  ProblemData data;
  makeProblemData(p, data);

  std::atomic<bool> started{false}, done{false};
  std::thread runner([&] {
    started = true;
    EXPECT_EQ(runProblem(desc, data, nullptr), ATTN_OK);
    done = true;
  });
  while (!started)
    std::this_thread::yield();
  // While the long call runs: unloading its library is refused (unless the
  // call already finished), and other libraries load and unload freely.
  int refused = 0;
  for (int i = 0; i < 20 && !done; ++i) {
    attn_module *other = nullptr;
    ASSERT_EQ(attn_module_load(library.c_str(), &other), ATTN_OK);
    ASSERT_EQ(attn_module_unload(other), ATTN_OK);
    if (!done) {
      attn_status status = attn_module_unload(second);
      if (status == ATTN_OK) {
        ADD_FAILURE() << "unloaded a library whose kernel was running";
        break;
      }
      EXPECT_NE(std::string(attn_last_error()).find("running"),
                std::string::npos)
          << attn_last_error();
      ++refused;
    }
  }
  runner.join();
  EXPECT_GT(refused, 0) << "the call finished before any unload attempt";
  EXPECT_EQ(attn_module_unload(second), ATTN_OK) << attn_last_error();
}

long residentKiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::stol(line.substr(6));
  return -1;
}

TEST_F(Reliability, ThousandsOfCallsDoNotGrowMemory) {
  Problem p = problem("keep_bf16", 33, 65);
  ProblemData data;
  makeProblemData(p, data);
  const attn_kernel_desc *desc = kernel("keep_bf16");
  for (int i = 0; i < 200; ++i) // warm up allocators and the pool
    ASSERT_EQ(runProblem(desc, data, pool), ATTN_OK);
  long before = residentKiB();
  for (int i = 0; i < 5000; ++i)
    ASSERT_EQ(runProblem(desc, data, i % 2 ? pool : nullptr), ATTN_OK);
  long after = residentKiB();
  ASSERT_GT(before, 0);
#ifdef ATTN_UNDER_ASAN
  // (The kernel's per-call buffers, e.g. the widened chunks of 16-bit K
  // and V, pass through the quarantine.)
  GTEST_SKIP() << "resident size under AddressSanitizer includes its "
                  "quarantine; LeakSanitizer checks leaks in this build";
#endif
  EXPECT_LT(after - before, 1024) << "RSS grew from " << before << " KiB to "
                                  << after << " KiB over 5000 calls";
}

//===----------------------------------------------------------------------===//
// Numerical edge cases, for every element type
//===----------------------------------------------------------------------===//

class EdgeCases : public Reliability,
                  public ::testing::WithParamInterface<std::string> {
protected:
  /// Runs kernel `name` (D = 16, two heads, 40 rows and keys) with a NaN in
  /// column `column` of key 20's K row (`inKey`) or V row, in both heads;
  /// the output must still match the reference. Returns the output.
  static std::vector<double> runWithNaNAtKey20(const std::string &name,
                                               bool inKey, int64_t column) {
    Problem p = problem(name, 40, 40);
    ProblemData data;
    CheckReport report = runCrafted(p, data, [&](ProblemData &d) {
      HostTensor &tensor = inKey ? d.key : d.value;
      std::vector<double> values = tensor.values;
      for (int64_t h = 0; h < 2; ++h)
        values[(h * 40 + 20) * 16 + column] = NAN;
      setValues(tensor, values);
    });
    EXPECT_FALSE(report.output.mismatched()) << report.message;
    return outputValues(data);
  }
};

TEST_P(EdgeCases, AllRowsFullyMasked) {
  Problem p = problem("keep_" + GetParam(), 40, 70);
  ProblemData data;
  CheckReport report = runCrafted(p, data, [](ProblemData &d) {
    setValues(d.mask, std::vector<double>(d.mask.values.size(), 0.0));
  });
  EXPECT_TRUE(report.passed) << report.message;
  for (double v : outputValues(data))
    ASSERT_EQ(v, 0.0);
  for (float l : data.lse)
    ASSERT_EQ(l, -std::numeric_limits<float>::infinity());
}

TEST_P(EdgeCases, HugeLogitsStayFinite) {
  // Scores of magnitude ~1e4 and ~1e30 (f16 cannot hold inputs that large:
  // it gets its largest, ~1e9).
  for (double magnitude : {1e4, 1e30}) {
    double qk = std::sqrt(magnitude);
    if (GetParam() == "f16")
      qk = std::min(qk, 3e4);
    for (double sign : {1.0, -1.0}) {
      Problem p = problem("causal_" + GetParam(), 50, 50);
      ProblemData data;
      CheckReport report = runCrafted(p, data, [&](ProblemData &d) {
        std::vector<double> q = d.query.values, k = d.key.values;
        for (double &x : q)
          x = x > 0 ? sign * qk : -sign * qk;
        for (size_t i = 0; i < k.size(); ++i)
          k[i] = (i % 3 ? 1.0 : -1.0) * qk * (1 + 0.01 * (i % 7));
        setValues(d.query, q);
        setValues(d.key, k);
      });
      SCOPED_TRACE("magnitude " + std::to_string(magnitude));
      for (double v : outputValues(data))
        ASSERT_TRUE(std::isfinite(v));
      for (float l : data.lse)
        ASSERT_TRUE(std::isfinite(l));
      EXPECT_FALSE(report.output.mismatched()) << report.message;
      // At 1e4 the f32 scores still order the keys as float64 does. At
      // 1e30 one f32 ulp of a score is ~1e23: near-ties resolve differently
      // from float64, and only finiteness is the contract.
      if (magnitude < 1e5)
        EXPECT_LE(report.output.relative, 1e-2) << report.message;
    }
  }
}

TEST_P(EdgeCases, NegativeInfinityBiasesMixedWithFinite) {
  Problem p = problem("bias_" + GetParam(), 31, 47);
  ProblemData data;
  CheckReport report = runCrafted(p, data, [](ProblemData &d) {
    std::vector<double> bias = d.mask.values;
    for (size_t i = 0; i < bias.size(); ++i)
      if (i % 3 == 0)
        bias[i] = -INFINITY;
    // One row entirely -inf: O = 0, LSE = -inf.
    for (int64_t j = 0; j < 47; ++j)
      bias[5 * 47 + j] = -INFINITY;
    setValues(d.mask, bias);
  });
  EXPECT_TRUE(report.passed) << report.message;
  EXPECT_EQ(data.lse[5], -std::numeric_limits<float>::infinity());
}

TEST_P(EdgeCases, NaNInOneKeyReachesOnlyRowsThatSeeIt) {
  // Causal: rows i >= 20 see key 20, rows i < 20 do not.
  std::vector<double> out =
      runWithNaNAtKey20("causal_" + GetParam(), /*inKey=*/true, 3);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 40; ++i)
      for (int64_t e = 0; e < 16; ++e) {
        double v = out[(h * 40 + i) * 16 + e];
        if (i < 20)
          ASSERT_TRUE(std::isfinite(v)) << "row " << i << " got NaN";
        else
          ASSERT_TRUE(std::isnan(v)) << "row " << i << " lost the NaN";
      }
}

TEST_P(EdgeCases, NaNInOneValueReachesOnlyRowsThatSeeIt) {
  std::vector<double> out =
      runWithNaNAtKey20("causal_" + GetParam(), /*inKey=*/false, 5);
  for (int64_t i = 0; i < 40; ++i)
    ASSERT_EQ(std::isnan(out[i * 16 + 5]), i >= 20) << "row " << i;
}

TEST_P(EdgeCases, NaNInOneValueReachesOnlyRowsWhoseWindowHoldsIt) {
  // Window (8, 0): rows 20-28 see key 20; the rows before and after do not,
  // while the rows next to them, which share micro-kernel blocks with
  // them, see the keys on both sides of it.
  std::vector<double> out =
      runWithNaNAtKey20("window_" + GetParam(), /*inKey=*/false, 5);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 40; ++i)
      ASSERT_EQ(std::isnan(out[(h * 40 + i) * 16 + 5]), i >= 20 && i <= 28)
          << "head " << h << " row " << i;
}

TEST_P(EdgeCases, DenormalInputs) {
  Problem p = problem("plain_" + GetParam(), 20, 30);
  double tiny = GetParam() == "f16" ? 3e-6 : 1e-40;
  ProblemData data;
  // Denormal queries and keys, and every other value denormal. (An output
  // that is itself denormal could not meet a relative tolerance: its own
  // rounding loses digits.)
  CheckReport report = runCrafted(p, data, [&](ProblemData &d) {
    std::vector<double> q = d.query.values, k = d.key.values,
                        v = d.value.values;
    for (double &x : q)
      x *= tiny;
    for (double &x : k)
      x *= tiny;
    for (size_t i = 0; i < v.size(); i += 2)
      v[i] *= tiny;
    setValues(d.query, q);
    setValues(d.key, k);
    setValues(d.value, v);
  });
  EXPECT_TRUE(report.passed) << report.message;
}

TEST_P(EdgeCases, EmptyAndSingleSizes) {
  for (auto [sq, sk] :
       {std::pair<int64_t, int64_t>{0, 10}, {10, 0}, {0, 0}, {10, 1}, {1, 1}}) {
    Problem p = problem("plain_" + GetParam(), sq, sk);
    ProblemData data;
    CheckReport report = runCrafted(p, data, [](ProblemData &) {});
    EXPECT_TRUE(report.passed)
        << "Sq=" << sq << " Sk=" << sk << ": " << report.message;
  }
}

TEST_P(EdgeCases, HeadDimOne) {
  Problem p = problem("d1_" + GetParam(), 25, 37);
  ProblemData data;
  CheckReport report = runCrafted(p, data, [](ProblemData &) {});
  EXPECT_TRUE(report.passed) << report.message;
}

TEST_P(EdgeCases, OutputWithInnerStrideTwoMatchesDense) {
  // O written with a guard element after each of its elements (every
  // stride doubled, innermost 2): the epilogue's vectors need unit stride,
  // so it takes the scalar loop there; same values, guards untouched.
  for (const std::string &name : {"plain_", "causal_"}) {
    Problem p = problem(name + GetParam(), 37, 45);
    ProblemData data;
    makeProblemData(p, data);
    ASSERT_EQ(runProblem(kernel(p.spec.name), data, pool), ATTN_OK)
        << attn_last_error();
    std::vector<uint8_t> dense = outputBytes(data);
    size_t elements = data.output.values.size();
    size_t width = dense.size() / elements;
    constexpr uint8_t kGuard = 0xA5;
    std::vector<uint8_t> interleaved(2 * dense.size(), kGuard);
    data.output.view.data = interleaved.data();
    for (int64_t &stride : data.output.view.strides)
      stride *= 2;
    ASSERT_EQ(runProblem(kernel(p.spec.name), data, pool), ATTN_OK)
        << attn_last_error();
    for (size_t i = 0; i < elements; ++i)
      for (size_t byte = 0; byte < width; ++byte) {
        ASSERT_EQ(interleaved[2 * i * width + byte], dense[i * width + byte])
            << name << " element " << i;
        ASSERT_EQ(interleaved[(2 * i + 1) * width + byte], kGuard)
            << name << " guard after element " << i;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(ElementTypes, EdgeCases,
                         ::testing::Values("f32", "f16", "bf16"));

} // namespace
