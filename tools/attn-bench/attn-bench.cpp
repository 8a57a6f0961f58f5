//===- attn-bench.cpp - GFLOP/s of generated kernels against the peak -----===//
//
// Compiles a fixed set of attention shapes (causal and not, f32 and bf16),
// runs each through the runtime on all cores, and prints GFLOP/s (FLOPs as
// the spec counts them) and the fraction of this machine's fp32 FMA peak,
// measured in the same run. Correctness is the conformance suite's job; each
// kernel is still checked once here on a small problem before it is timed,
// and its error against the float64 reference is shown.
//
// With --compare a.so,b.so it times kernels already compiled (by two
// builds of attn-compile, or one with different options) against each
// other instead: the same inputs, calls alternating a, b, a, b... so that
// the machine's drift hits both alike, and prints each one's median and
// its ratio to the first. This is how a change to the code generator is
// judged on a noisy machine (docs/benchmarks.md). Backward kernels (a spec
// with `backward`) are compared the same way, on the float64 forward's O
// and LSE and a random dO.
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
#include <cstdio>
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

static cl::list<std::string>
    compare("compare",
            cl::desc("Time these attn-compile libraries' first kernels "
                     "against each other (comma-separated .so paths)"),
            cl::CommaSeparated, cl::cat(category));
static cl::opt<std::string>
    sizes("sizes",
          cl::desc("B:Hq:Hkv:Sq:Sk of the --compare problem (default "
                   "1:32:8:1:8192, a GQA decoding step)"),
          cl::init("1:32:8:1:8192"), cl::cat(category));

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
int fail(const std::string &message) {
  llvm::errs() << "attn-bench: error: " << message << "\n";
  return 2;
}

/// The inputs of one --compare problem: a forward's, and a backward
/// kernel's O, LSE and dO besides.
struct CompareData {
  attn::ProblemData data;
  attn::BackwardData backward;
};

/// Fresh random inputs for `problem`; false with `error` where the
/// reference cannot make a backward kernel's forward.
bool makeCompareData(const attn::Problem &problem, CompareData &in,
                     std::string &error) {
  attn::makeProblemData(problem, in.data);
  return !problem.spec.backward ||
         attn::makeBackwardData(problem, in.data, in.backward, error);
}

attn_status runCompared(const attn_kernel_desc *kernel,
                        const attn::Problem &problem, CompareData &in,
                        attn_thread_pool *pool) {
  return problem.spec.backward
             ? attn::runBackwardProblem(kernel, in.data, in.backward, pool)
             : attn::runProblem(kernel, in.data, pool);
}

/// Runs `kernel` once on `problem` (fresh random inputs) and compares it
/// (its gradients for a backward kernel) with the float64 reference;
/// `relative` is the error (the worst gradient's).
bool checkProblem(const attn::Problem &problem, const attn_kernel_desc *kernel,
                  attn_thread_pool *pool, double &relative) {
  CompareData in;
  std::string error;
  relative = 0;
  if (!makeCompareData(problem, in, error) ||
      runCompared(kernel, problem, in, pool) != ATTN_OK)
    return false;
  if (!problem.spec.backward) {
    attn::CheckReport report = attn::checkAgainstReference(problem, in.data);
    relative = report.output.relative;
    return report.passed;
  }
  attn::BackwardReport report =
      attn::checkBackwardAgainstReference(problem, in.data, in.backward);
  relative = std::max(
      {report.query.relative, report.key.relative, report.value.relative});
  return report.passed;
}

/// Runs `kernel` once on a small problem (B=1, H=2, S=130, or the sizes
/// the kernel was compiled for) and compares it with the float64 reference.
bool checkKernel(const attn::KernelSpec &spec, const attn_kernel_desc *kernel,
                 attn_thread_pool *pool, double &relative) {
  attn::Problem check;
  check.spec = spec;
  check.batch = 1;
  check.headsQ = check.headsKv = 2;
  check.seqQ = check.seqK = 130;
  int64_t *dims[5] = {&check.batch, &check.headsQ, &check.headsKv, &check.seqQ,
                      &check.seqK};
  for (int i = 0; i < 5; ++i)
    if (spec.staticSizes[i] >= 0)
      *dims[i] = spec.staticSizes[i];
  if (spec.staticSizes[1] < 0)
    check.headsQ = check.headsKv;
  else if (spec.staticSizes[2] < 0 && check.headsQ % check.headsKv)
    check.headsKv = check.headsQ;
  return checkProblem(check, kernel, pool, relative);
}

/// Seconds of one call, as measured by the steady clock.
template <typename Call> double timeOnce(Call call) {
  auto start = std::chrono::steady_clock::now();
  call();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

/// --compare: the libraries' first kernels on one problem, interleaved.
int compareLibraries(attn_thread_pool *pool, double peak) {
  int64_t size[5];
  if (std::sscanf(sizes.c_str(), "%lld:%lld:%lld:%lld:%lld",
                  reinterpret_cast<long long *>(&size[0]),
                  reinterpret_cast<long long *>(&size[1]),
                  reinterpret_cast<long long *>(&size[2]),
                  reinterpret_cast<long long *>(&size[3]),
                  reinterpret_cast<long long *>(&size[4])) != 5 ||
      *std::min_element(size, size + 5) < 1 || size[1] % size[2] != 0)
    return fail("--sizes must be B:Hq:Hkv:Sq:Sk, positive, Hq a multiple of "
                "Hkv; found '" +
                sizes + "'");
  struct Entry {
    std::string path;
    attn_module *module = nullptr;
    const attn_kernel_desc *kernel = nullptr;
    std::vector<double> seconds;
    bool ok = false;
    double error = 0;
  };
  std::vector<Entry> entries(compare.size());
  attn::KernelSpec spec;
  for (size_t i = 0; i < compare.size(); ++i) {
    Entry &e = entries[i];
    e.path = compare[i];
    if (attn_module_load(e.path.c_str(), &e.module) != ATTN_OK)
      return fail(attn_last_error());
    e.kernel = attn_module_kernel(e.module, 0);
    if (!e.kernel || attn_kernel_device(e.kernel) != ATTN_DEVICE_CPU)
      return fail(e.path + ": its first kernel is not a CPU kernel");
    attn_kernel_kind kind = attn_kernel_kind_of(e.kernel);
    if (kind != ATTN_KERNEL_FORWARD && kind != ATTN_KERNEL_BACKWARD)
      return fail(e.path +
                  ": --compare times forward and backward kernels; its "
                  "first kernel is another kind");
    attn::KernelSpec own = attn::specOfKernel(e.kernel);
    own.name = "compared";
    e.ok = checkKernel(own, e.kernel, pool, e.error);
    // And on the compared problem's heads and query rows (sequences cut so
    // that the float64 reference stays quick): its GQA groups and tiles
    // take paths that the small problem above may not reach.
    attn::Problem compared;
    compared.spec = own;
    compared.batch = 1;
    compared.headsQ = size[1];
    compared.headsKv = size[2];
    // (a static length is kept: the kernel takes no other)
    compared.seqQ =
        own.staticSizes[3] >= 0 ? size[3] : std::min<int64_t>(size[3], 67);
    compared.seqK =
        own.staticSizes[4] >= 0 ? size[4] : std::min<int64_t>(size[4], 1029);
    e.ok = e.ok && checkProblem(compared, e.kernel, pool, e.error);
    // Kernels for other static sizes compute the same (the runtime
    // refuses the problem if --sizes does not fit one of them).
    std::fill(std::begin(own.staticSizes), std::end(own.staticSizes), -1);
    if (i == 0)
      spec = own;
    else if (attn::printKernelSpec(own) != attn::printKernelSpec(spec))
      return fail(e.path + " computes '" + attn::printKernelSpec(own) +
                  "', not '" + attn::printKernelSpec(spec) +
                  "' as the first library does");
  }

  attn::Problem problem;
  problem.spec = spec;
  problem.batch = size[0];
  problem.headsQ = size[1];
  problem.headsKv = size[2];
  problem.seqQ = size[3];
  problem.seqK = size[4];
  CompareData in;
  std::string error;
  if (!makeCompareData(problem, in, error))
    return fail(error);
  const attn::ProblemData &data = in.data;
  for (Entry &e : entries) // warm-up
    if (runCompared(e.kernel, problem, in, pool) != ATTN_OK)
      return fail(e.path + ": " + attn_last_error());
  // Decoding reads K and V once and is bound by memory: a plain read of
  // the same buffers on the same threads, timed in every round, is its
  // roof (the machine's bandwidth drifts from minute to minute, so a roof
  // measured at another time says little).
  bool decoding = problem.seqQ <= 4;
  std::vector<std::pair<const void *, size_t>> kv = {
      {data.key.bytes.data(), data.key.bytes.size()},
      {data.value.bytes.data(), data.value.bytes.size()}};
  std::vector<double> readSeconds;
  uint64_t checksum = 0;
  int rounds = std::max(1, static_cast<int>(repeat));
  for (int r = 0; r < rounds; ++r) {
    for (Entry &e : entries)
      e.seconds.push_back(
          timeOnce([&] { runCompared(e.kernel, problem, in, pool); }));
    if (decoding)
      readSeconds.push_back(
          timeOnce([&] { checksum ^= attn::readBuffers(pool, kv); }));
  }

  double flops = attn::flopCount(spec, problem.batch, problem.headsQ,
                                 problem.seqQ, problem.seqK);
  double kvBytes =
      static_cast<double>(data.key.bytes.size() + data.value.bytes.size());
  llvm::outs() << attn::printKernelSpec(spec) << ", sizes " << sizes << ", "
               << rounds << " alternating rounds\n";
  llvm::outs() << llvm::format("%-32s %9s %9s %9s %8s %9s %8s %8s %6s\n",
                               "library", "median ms", "min ms", "GFLOP/s",
                               "of peak", "K+V GB/s", "of read", "vs first",
                               "check");
  double first = median(entries.front().seconds);
  double readRate = decoding ? kvBytes / median(readSeconds) : 0;
  int failures = 0;
  for (const Entry &e : entries) {
    double m = median(e.seconds);
    failures += !e.ok;
    std::string ofRead =
        decoding ? llvm::formatv("{0:F1}%", 100.0 * kvBytes / m / readRate)
                 : std::string("-");
    llvm::outs() << llvm::format(
        "%-32s %9.3f %9.3f %9.1f %7.1f%% %9.1f %8s %7.3fx %6s\n",
        e.path.c_str(), m * 1e3,
        *std::min_element(e.seconds.begin(), e.seconds.end()) * 1e3,
        flops / m * 1e-9, 100.0 * flops / m / peak, kvBytes / m * 1e-9,
        ofRead.c_str(), first / m, e.ok ? "ok" : "FAIL");
  }
  if (decoding)
    llvm::outs() << llvm::format(
        "%-32s %9.3f %9.3f %9s %8s %9.1f %8s %8s %6s\n",
        "(read K and V, same threads)", median(readSeconds) * 1e3,
        *std::min_element(readSeconds.begin(), readSeconds.end()) * 1e3, "-",
        "-", readRate * 1e-9, "100.0%", "-", "");
  volatile uint64_t keep = checksum; // the reads happened
  (void)keep;
  for (Entry &e : entries)
    attn_module_unload(e.module);
  return failures ? 1 : 0;
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
  bool gpu = device == "cuda";
  if (!gpu && device != "cpu")
    return fail("--device must be cpu or cuda, found '" + device + "'");
  attn::CompileOptions options;
  std::string deviceName, error;
  if (gpu && !attn::cudaTarget(options.gpuArch, deviceName, error))
    return fail("--device=cuda: " + error);

  if (!compare.empty() && gpu)
    return fail("--compare times CPU kernels only");

  std::vector<Shape> list;
  for (const Shape &s : shapes(gpu))
    if (only.empty() || s.label.find(only) != std::string::npos)
      list.push_back(s);
  if (list.empty() && compare.empty())
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

  if (!compare.empty()) {
    int status = compareLibraries(pool, peak);
    attn_thread_pool_destroy(pool);
    return status;
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

    double error = 0;
    bool ok = checkKernel(specs[i], kernel, pool, error);
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
    for (int r = 0; r < std::max(1, static_cast<int>(repeat)); ++r)
      seconds.push_back(timeOnce(runOnce));
    double seconds50 = median(seconds);
    double flops = attn::flopCount(specs[i], problem.batch, problem.headsQ,
                                   problem.seqQ, problem.seqK);
    double rate = flops / seconds50;
    if (csv)
      llvm::outs() << llvm::format(
          "%s,%s,%lld,%lld,%lld,%lld,%d,%.4f,%.1f,"
          "%.3g\n",
          s.label.c_str(), s.dtype.c_str(), (long long)s.batch,
          (long long)s.headsQ, (long long)s.seqQ, (long long)s.headDim,
          (int)s.causal, seconds50 * 1e3, rate * 1e-9, error);
    else
      llvm::outs() << llvm::format(
          "%-24s %10.2f %10.1f %8s %10s %9.2g\n", s.label.c_str(),
          seconds50 * 1e3, rate * 1e-9,
          peak > 0 ? llvm::formatv("{0:F1}%", 100.0 * rate / peak).str().c_str()
                   : "-",
          ok ? "ok" : "FAIL", error);
    llvm::outs().flush();
  }
  attn_module_unload(module);
  attn_thread_pool_destroy(pool);
  llvm::sys::fs::remove(library);
  llvm::sys::fs::remove(dir);
  return failures ? 1 : 0;
}
