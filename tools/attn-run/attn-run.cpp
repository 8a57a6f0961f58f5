//===- attn-run.cpp - Compile, run and check one attention kernel ---------===//
//
// The main job: compiles a kernel spec (or the first attn.attention of an
// .mlir file) through the attn-to-llvm-cpu pipeline, loads it through the
// runtime, runs it on random inputs (or .npy files) on all cores, checks it
// against the float64 reference and reports error, time and GFLOP/s.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime.h"
#include "lib/Compiler/Compiler.h"
#include "lib/Harness/Harness.h"
#include "lib/Support/Half.h"
#include "lib/Support/Npy.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace cl = llvm::cl;

static cl::OptionCategory category("attn-run options");
static cl::opt<std::string> inputFile(cl::Positional,
                                      cl::desc("[<kernel.mlir>]"), cl::init(""),
                                      cl::cat(category));
static cl::opt<std::string>
    specText("spec",
             cl::desc("Kernel spec (default: the demo, f32 causal "
                      "D=64 GQA)"),
             cl::init("name=attn_demo,dtype=f32,d=64,dv=64,causal,lse"),
             cl::cat(category));
static cl::opt<int64_t> batch("batch", cl::desc("B"), cl::init(-1),
                              cl::cat(category));
static cl::opt<int64_t> headsQ("heads-q", cl::desc("Hq"), cl::init(-1),
                               cl::cat(category));
static cl::opt<int64_t> headsKv("heads-kv", cl::desc("Hkv"), cl::init(-1),
                                cl::cat(category));
static cl::opt<int64_t> seqQ("seq-q", cl::desc("Sq"), cl::init(-1),
                             cl::cat(category));
static cl::opt<int64_t> seqK("seq-k", cl::desc("Sk"), cl::init(-1),
                             cl::cat(category));
static cl::opt<std::string> layout("layout", cl::desc("bhsd or bshd buffers"),
                                   cl::init("bhsd"), cl::cat(category));
static cl::opt<uint64_t> seed("seed", cl::desc("Random seed"), cl::init(1),
                              cl::cat(category));
static cl::opt<int> threads("num-threads",
                            cl::desc("Threads (0: one per core)"), cl::init(0),
                            cl::cat(category));
static cl::opt<int> repeat("repeat", cl::desc("Timed runs (median shown)"),
                           cl::init(5), cl::cat(category));
static cl::opt<std::string> device("device", cl::desc("cpu or cuda"),
                                   cl::init("cpu"), cl::cat(category));
static cl::opt<std::string> queryNpy("query", cl::desc("Q from an .npy file"),
                                     cl::init(""), cl::cat(category));
static cl::opt<std::string> keyNpy("key", cl::desc("K from an .npy file"),
                                   cl::init(""), cl::cat(category));
static cl::opt<std::string> valueNpy("value", cl::desc("V from an .npy file"),
                                     cl::init(""), cl::cat(category));
static cl::opt<std::string> maskNpy("mask", cl::desc("Mask from an .npy file"),
                                    cl::init(""), cl::cat(category));
static cl::opt<std::string> saveOutput("save-output",
                                       cl::desc("Write O to an .npy file"),
                                       cl::init(""), cl::cat(category));
static cl::opt<std::string> saveLse("save-lse",
                                    cl::desc("Write LSE to an .npy file"),
                                    cl::init(""), cl::cat(category));
static cl::opt<bool> noCheck("no-check",
                             cl::desc("Skip the reference comparison"),
                             cl::init(false), cl::cat(category));

namespace {

int fail(const std::string &message) {
  llvm::errs() << "attn-run: error: " << message << "\n";
  return 2;
}

const char *npyDtype(attn::ElementType type) {
  return type == attn::ElementType::F32   ? "f32"
         : type == attn::ElementType::F16 ? "f16"
                                          : "bf16";
}

/// Replaces a generated input by the contents of an .npy file.
bool loadNpyInto(const std::string &path, attn::HostTensor &tensor,
                 const char *name, std::string &error) {
  attn::NpyArray array;
  if (!attn::readNpy(path, array, error)) {
    error = std::string(name) + ": " + error;
    return false;
  }
  bool isBool = tensor.view.dtype == ATTN_BOOL;
  std::string expected = isBool ? "bool"
                                : (tensor.view.dtype == ATTN_F32   ? "f32"
                                   : tensor.view.dtype == ATTN_F16 ? "f16"
                                                                   : "bf16");
  if (array.dtype != expected) {
    error = std::string(name) + ": " + path + " holds " + array.dtype +
            ", the kernel needs " + expected;
    return false;
  }
  if (array.shape.size() != 4 ||
      !std::equal(array.shape.begin(), array.shape.end(), tensor.view.shape)) {
    error = std::string(name) + ": " + path +
            " has the wrong shape for the problem's sizes (give --batch, "
            "--heads-q, --heads-kv, --seq-q, --seq-k)";
    return false;
  }
  if (array.fortranOrder) {
    error = std::string(name) + ": Fortran-order arrays are not supported";
    return false;
  }
  // Take the file's buffer as it is: dense [B, H, S, D].
  tensor.bytes = array.data;
  tensor.view.data = tensor.bytes.data();
  int64_t stride = 1;
  for (int d = 3; d >= 0; --d) {
    tensor.view.strides[d] = stride;
    stride *= tensor.view.shape[d];
  }
  std::vector<double> values(tensor.values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if (isBool)
      values[i] = tensor.bytes[i] != 0;
    else if (tensor.view.dtype == ATTN_F32) {
      float f;
      std::memcpy(&f, &tensor.bytes[i * 4], 4);
      values[i] = f;
    } else {
      uint16_t h;
      std::memcpy(&h, &tensor.bytes[i * 2], 2);
      values[i] = tensor.view.dtype == ATTN_F16 ? attn::halfToFloat(h)
                                                : attn::bf16ToFloat(h);
    }
  }
  tensor.values = values;
  return true;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::SetVersionPrinter(
      [](llvm::raw_ostream &os) { os << attn::compilerVersion() << "\n"; });
  cl::ParseCommandLineOptions(
      argc, argv,
      "attn-run: compile an attention kernel, run it and check it against "
      "the float64 reference\n");

  std::string error;
  attn::CompileOptions options;
  std::string deviceName;
  if (device == "cuda") {
    if (!attn::cudaTarget(options.gpuArch, deviceName, error))
      return fail("--device=cuda: " + error);
  } else if (device != "cpu") {
    return fail("--device must be cpu or cuda, found '" + device + "'");
  }

  attn::KernelSpec spec;
  if (!inputFile.empty()) {
    std::vector<attn::KernelSpec> specs;
    if (!attn::specsFromMLIRFile(inputFile, specs, error))
      return fail(error);
    spec = specs.front();
  } else {
    std::optional<attn::KernelSpec> parsed =
        attn::parseKernelSpec(specText, error);
    if (!parsed)
      return fail("--spec: " + error);
    spec = *parsed;
  }

  attn::Problem problem;
  problem.spec = spec;
  problem.seed = seed;
  problem.bshd = layout == "bshd";
  if (layout != "bshd" && layout != "bhsd")
    return fail("--layout must be bhsd or bshd");
  // Sizes: the command line, else the op's static sizes, else the demo's.
  int64_t defaults[5] = {1, 8, 2, 1024, 1024};
  int64_t given[5] = {batch, headsQ, headsKv, seqQ, seqK};
  int64_t sizes[5];
  for (int i = 0; i < 5; ++i)
    sizes[i] = given[i] >= 0              ? given[i]
               : spec.staticSizes[i] >= 0 ? spec.staticSizes[i]
                                          : defaults[i];
  if (given[2] < 0 && spec.staticSizes[2] < 0 && spec.group > 0)
    sizes[2] = std::max<int64_t>(1, sizes[1] / spec.group);
  problem.batch = sizes[0];
  problem.headsQ = sizes[1];
  problem.headsKv = sizes[2];
  problem.seqQ = sizes[3];
  problem.seqK = sizes[4];

  // Compile into a private directory and load through the runtime.
  llvm::SmallString<128> dir;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueDirectory("attn-run", dir))
    return fail("cannot create a temporary directory: " + ec.message());
  std::string library = (dir + "/kernel.so").str();
  auto cleanup = [&] {
    llvm::sys::fs::remove(library);
    llvm::sys::fs::remove(dir);
  };
  auto compileStart = std::chrono::steady_clock::now();
  if (!attn::compileKernels({spec}, options, attn::OutputKind::SharedLibrary,
                            library, error)) {
    cleanup();
    return fail(error);
  }
  double compileSeconds = std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - compileStart)
                              .count();
  attn_module *module = nullptr;
  const attn_kernel_desc *kernel = nullptr;
  if (attn_module_load(library.c_str(), &module) != ATTN_OK ||
      attn_module_find(module, spec.name.c_str(), &kernel) != ATTN_OK) {
    std::string message = attn_last_error();
    cleanup();
    return fail(message);
  }

  attn::ProblemData data;
  attn::makeProblemData(problem, data);
  if ((!queryNpy.empty() &&
       !loadNpyInto(queryNpy, data.query, "--query", error)) ||
      (!keyNpy.empty() && !loadNpyInto(keyNpy, data.key, "--key", error)) ||
      (!valueNpy.empty() &&
       !loadNpyInto(valueNpy, data.value, "--value", error)) ||
      (!maskNpy.empty() &&
       (!data.hasMask
            ? (error = "--mask given but the kernel takes no mask", true)
            : !loadNpyInto(maskNpy, data.mask, "--mask", error)))) {
    attn_module_unload(module);
    cleanup();
    return fail(error);
  }

  attn_thread_pool *pool = nullptr;
  attn_thread_pool_create(threads, &pool);

  llvm::outs() << "attn-run: " << problem.describe() << "\n";
  llvm::outs() << "  compiled in " << llvm::format("%.2f", compileSeconds)
               << " s for " << kernel->target_cpu << "; ";
  if (deviceName.empty())
    llvm::outs() << attn_thread_pool_size(pool) << " threads\n";
  else
    llvm::outs() << "on " << deviceName << "\n";
  if (runProblem(kernel, data, pool) != ATTN_OK) {
    std::string message = attn_last_error();
    attn_thread_pool_destroy(pool);
    attn_module_unload(module);
    cleanup();
    return fail(message);
  }

  bool passed = true;
  if (!noCheck) {
    attn::CheckReport report = attn::checkAgainstReference(problem, data);
    llvm::outs() << "  check against the float64 reference: " << report.message
                 << "\n";
    passed = report.passed;
  }

  // Timing: median of repeated runs (outputs re-poisoned is unnecessary);
  // on the GPU with the buffers already in device memory.
  attn::DeviceProblem deviceData;
  if (!deviceName.empty() && deviceData.upload(data) != ATTN_OK) {
    std::string message = attn_last_error();
    attn_thread_pool_destroy(pool);
    attn_module_unload(module);
    cleanup();
    return fail(message);
  }
  std::vector<double> seconds;
  for (int r = 0; r < std::max(1, static_cast<int>(repeat)); ++r) {
    auto start = std::chrono::steady_clock::now();
    if (deviceName.empty())
      runProblem(kernel, data, pool);
    else
      deviceData.run(kernel);
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::sort(seconds.begin(), seconds.end());
  double median = seconds[seconds.size() / 2];
  double flops = attn::flopCount(spec, problem.batch, problem.headsQ,
                                 problem.seqQ, problem.seqK);
  llvm::outs() << "  time " << llvm::format("%.3f", median * 1e3)
               << " ms (median of " << seconds.size() << "), "
               << llvm::format("%.1f", flops / median * 1e-9)
               << " GFLOP/s (FLOPs = 2*(D+Dv) per allowed (i, j) per "
                  "head: "
               << llvm::format("%.3g", flops) << ")\n";

  auto save = [&](const std::string &path, attn::NpyArray array) {
    if (path.empty())
      return true;
    if (!attn::writeNpy(path, array, error)) {
      llvm::errs() << "attn-run: error: " << error << "\n";
      return false;
    }
    return true;
  };
  bool saved = true;
  if (!saveOutput.empty()) {
    attn::NpyArray out;
    out.dtype = "f32";
    out.shape.assign(data.output.view.shape, data.output.view.shape + 4);
    std::vector<double> values = attn::outputValues(data);
    out.data.resize(values.size() * 4);
    for (size_t i = 0; i < values.size(); ++i) {
      float f = static_cast<float>(values[i]);
      std::memcpy(&out.data[i * 4], &f, 4);
    }
    saved &= save(saveOutput, out);
  }
  if (!saveLse.empty()) {
    if (!spec.lse) {
      llvm::errs() << "attn-run: error: --save-lse: the kernel has no LSE "
                      "(add lse to the spec)\n";
      saved = false;
    } else {
      attn::NpyArray out;
      out.dtype = "f32";
      out.shape = {problem.batch, problem.headsQ, problem.seqQ};
      out.data.resize(problem.batch * problem.headsQ * problem.seqQ * 4);
      std::memcpy(out.data.data(), data.lse.data(), out.data.size());
      saved &= save(saveLse, out);
    }
  }

  attn_thread_pool_destroy(pool);
  attn_module_unload(module);
  cleanup();
  if (noCheck) {
    llvm::outs() << "attn-run: ran (not checked)\n";
    return saved ? 0 : 2;
  }
  llvm::outs() << (passed ? "attn-run: PASS\n" : "attn-run: FAIL\n");
  return passed && saved ? 0 : 1;
}
