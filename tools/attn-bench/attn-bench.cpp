//===- attn-bench.cpp - GFLOP/s of generated kernels against the peak -----===//
//
// Compiles a fixed set of attention shapes (causal and not, f32 and bf16),
// runs each through the runtime on all cores, and prints GFLOP/s (FLOPs as
// the spec counts them) and the fraction of this machine's fp32 FMA peak,
// measured in the same run. Correctness is the conformance suite's job; each
// kernel is still checked once here on a small problem before it is timed,
// and its error against the float64 reference is shown.
//
// With --device cuda the kernels are compiled for GPU 0 and timed on
// buffers already in device memory (f16 and bf16, batch 4, as GPU kernels
// are used); --csv prints machine-readable rows (scripts/gpu.sh reads them).
//
//===----------------------------------------------------------------------===//
#include "attn/runtime.h"
#include "lib/Compiler/Compiler.h"
#include "lib/Harness/Harness.h"
#include "tools/attn-bench/Peak.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace cl = llvm::cl;

static cl::OptionCategory category("attn-bench options");
static cl::opt<int> numThreads("num-threads",
                               cl::desc("Threads (0: one per core)"),
                               cl::init(0), cl::cat(category));
static cl::opt<int> repeat("repeat", cl::desc("Timed runs per shape"),
                           cl::init(7), cl::cat(category));
static cl::opt<bool> quick("quick",
                           cl::desc("Small shapes only (a smoke test)"),
                           cl::init(false), cl::cat(category));
static cl::opt<std::string> only("only",
                                 cl::desc("Run only shapes whose label "
                                          "contains this"),
                                 cl::init(""), cl::cat(category));
static cl::opt<std::string> device("device", cl::desc("cpu or cuda"),
                                   cl::init("cpu"), cl::cat(category));
static cl::opt<bool> csv("csv",
                         cl::desc("Print label,dtype,B,H,S,D,causal,ms,"
                                  "GFLOP/s,error rows"),
                         cl::init(false), cl::cat(category));

namespace {
struct Shape {
  std::string label, dtype, spec;
  int64_t batch, headsQ, headsKv, seqQ, seqK, headDim;
  bool causal;
};

std::vector<Shape> shapes(bool gpu) {
  std::vector<Shape> list;
  int64_t batch = gpu ? 4 : 1;
  auto add = [&](const std::string &dtype, int64_t s, int64_t d, bool causal) {
    std::string label = dtype + "_S" + std::to_string(s) + "_D" +
                        std::to_string(d) + (causal ? "_causal" : "");
    std::string spec = "name=" + label + ",dtype=" + dtype +
                       ",d=" + std::to_string(d) + ",dv=" + std::to_string(d) +
                       (causal ? ",causal" : "");
    for (const Shape &existing : list)
      if (existing.label == label)
        return;
    list.push_back({label, dtype, spec, batch, 8, 8, s, s, d, causal});
  };
  std::vector<const char *> dtypes = {"f32", "bf16"};
  if (gpu)
    dtypes = {"f16", "bf16"};
  for (const char *dtype : dtypes)
    for (auto [s, d] :
         {std::pair<int64_t, int64_t>{1024, 64}, {4096, 64}, {2048, 128}})
      for (bool causal : {false, true})
        add(dtype, quick ? 128 : s, d, causal);
  return list;
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::SetVersionPrinter(
      [](llvm::raw_ostream &os) { os << attn::compilerVersion() << "\n"; });
  cl::ParseCommandLineOptions(argc, argv,
                              "attn-bench: GFLOP/s of generated attention "
                              "kernels against this machine's FMA peak\n");
  auto fail = [](const std::string &message) {
    llvm::errs() << "attn-bench: error: " << message << "\n";
    return 2;
  };
  bool gpu = device == "cuda";
  if (!gpu && device != "cpu")
    return fail("--device must be cpu or cuda, found '" + device + "'");
  attn::CompileOptions options;
  std::string deviceName, error;
  if (gpu && !attn::cudaTarget(options.gpuArch, deviceName, error))
    return fail("--device=cuda: " + error);

  std::vector<Shape> list;
  for (const Shape &s : shapes(gpu))
    if (only.empty() || s.label.find(only) != std::string::npos)
      list.push_back(s);
  if (list.empty())
    return fail("no shape matches --only=" + only);

  attn_thread_pool *pool = nullptr;
  attn_thread_pool_create(numThreads, &pool);
  int threads = attn_thread_pool_size(pool);
  double peak = 0;
  if (gpu) {
    llvm::outs() << "attn-bench: " << attn::compilerVersion() << ", GPU "
                 << deviceName << "\n";
  } else {
    int lanes = 0;
    peak = attn::measureFmaPeak(threads, &lanes);
    llvm::outs() << "attn-bench: " << attn::compilerVersion() << ", " << threads
                 << " threads, fp32 FMA peak measured "
                 << llvm::format("%.1f", peak * 1e-9) << " GFLOP/s (" << lanes
                 << "-lane FMA loop)\n";
  }

  std::vector<attn::KernelSpec> specs;
  for (const Shape &s : list)
    specs.push_back(*attn::parseKernelSpec(s.spec, error));
  llvm::SmallString<128> dir;
  if (llvm::sys::fs::createUniqueDirectory("attn-bench", dir))
    return fail("cannot create a temporary directory");
  std::string library = (dir + "/bench.so").str();
  if (!attn::compileKernels(specs, options, attn::OutputKind::SharedLibrary,
                            library, error))
    return fail(error);
  attn_module *module = nullptr;
  if (attn_module_load(library.c_str(), &module) != ATTN_OK)
    return fail(attn_last_error());
  const attn_kernel_desc *first = attn_module_kernel(module, 0);
  llvm::outs() << "target " << first->target_cpu << "; FLOPs = 2*(D+Dv) per "
               << "allowed (i, j) per head (causal: about half)\n\n";
  if (csv)
    llvm::outs() << "label,dtype,B,H,S,D,causal,ms,GFLOP/s,error\n";
  else
    llvm::outs() << llvm::format("%-24s %10s %10s %8s %10s %9s\n", "shape",
                                 "ms", "GFLOP/s", "of peak", "check", "error");

  int failures = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const Shape &s = list[i];
    const attn_kernel_desc *kernel = nullptr;
    attn_module_find(module, specs[i].name.c_str(), &kernel);

    // A small correctness check before timing.
    attn::Problem check;
    check.spec = specs[i];
    check.batch = 1;
    check.headsQ = check.headsKv = 2;
    check.seqQ = check.seqK = 130;
    attn::ProblemData checkData;
    attn::makeProblemData(check, checkData);
    attn::CheckReport report;
    bool ok = attn::runProblem(kernel, checkData, pool) == ATTN_OK &&
              (report = attn::checkAgainstReference(check, checkData)).passed;
    failures += !ok;

    attn::Problem problem;
    problem.spec = specs[i];
    problem.batch = s.batch;
    problem.headsQ = s.headsQ;
    problem.headsKv = s.headsKv;
    problem.seqQ = s.seqQ;
    problem.seqK = s.seqK;
    attn::ProblemData data;
    attn::makeProblemData(problem, data);
    // On the GPU the buffers stay in device memory across the timed runs.
    attn::DeviceProblem deviceData;
    if (gpu && deviceData.upload(data) != ATTN_OK)
      return fail(attn_last_error());
    auto runOnce = [&] {
      return gpu ? deviceData.run(kernel)
                 : attn::runProblem(kernel, data, pool);
    };
    if (runOnce() != ATTN_OK) // also the warm-up
      return fail(attn_last_error());
    std::vector<double> seconds;
    for (int r = 0; r < std::max(1, static_cast<int>(repeat)); ++r) {
      auto start = std::chrono::steady_clock::now();
      runOnce();
      seconds.push_back(std::chrono::duration<double>(
                            std::chrono::steady_clock::now() - start)
                            .count());
    }
    std::sort(seconds.begin(), seconds.end());
    double median = seconds[seconds.size() / 2];
    double flops = attn::flopCount(specs[i], problem.batch, problem.headsQ,
                                   problem.seqQ, problem.seqK);
    double rate = flops / median;
    if (csv)
      llvm::outs() << llvm::format(
          "%s,%s,%lld,%lld,%lld,%lld,%d,%.4f,%.1f,"
          "%.3g\n",
          s.label.c_str(), s.dtype.c_str(), (long long)s.batch,
          (long long)s.headsQ, (long long)s.seqQ, (long long)s.headDim,
          (int)s.causal, median * 1e3, rate * 1e-9, report.output.relative);
    else
      llvm::outs() << llvm::format(
          "%-24s %10.2f %10.1f %8s %10s %9.2g\n", s.label.c_str(), median * 1e3,
          rate * 1e-9,
          peak > 0 ? llvm::formatv("{0:F1}%", 100.0 * rate / peak).str().c_str()
                   : "-",
          ok ? "ok" : "FAIL", report.output.relative);
    llvm::outs().flush();
  }
  attn_module_unload(module);
  attn_thread_pool_destroy(pool);
  llvm::sys::fs::remove(library);
  llvm::sys::fs::remove(dir);
  return failures ? 1 : 0;
}
