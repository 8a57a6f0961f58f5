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
#include "lib/Harness/ModifierCases.h"
#include "lib/Support/Npy.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <unistd.h>

namespace cl = llvm::cl;

static cl::OptionCategory category("attn-run options");
static cl::opt<std::string> inputFile(cl::Positional,
                                      cl::desc("[<kernel.mlir>]"), cl::init(""),
                                      cl::cat(category));
static cl::opt<std::string>
    specText("spec",
             cl::desc("Kernel spec (default: the demo's, "
                      "name=attn_demo,dtype=f32,d=64,dv=64,causal,lse)"),
             cl::init("name=attn_demo,dtype=f32,d=64,dv=64,causal,lse"),
             cl::cat(category));
// The sizes default to the .npy files' shapes, else the kernel's static
// sizes, else the demo's (kDemoSizes); a given size must agree with both.
static cl::opt<int64_t> batch("batch",
                              cl::desc("B (default: from the files, else 1)"),
                              cl::cat(category));
static cl::opt<int64_t> headsQ("heads-q",
                               cl::desc("Hq (default: from the files, else 8)"),
                               cl::cat(category));
static cl::opt<int64_t> headsKv(
    "heads-kv",
    cl::desc("Hkv (default: from the files, else Hq / gqa, else Hq if given, "
             "else 2)"),
    cl::cat(category));
static cl::opt<int64_t>
    seqQ("seq-q", cl::desc("Sq (default: from the files, else 1024)"),
         cl::cat(category));
static cl::opt<int64_t>
    seqK("seq-k", cl::desc("Sk (default: from the files, else 1024)"),
         cl::cat(category));
static cl::opt<std::string>
    layout("layout",
           cl::desc("bhsd or bshd: how Q, K, V and O are laid out in memory "
                    "and in the .npy files (default: bhsd)"),
           cl::init("bhsd"), cl::cat(category));
static cl::opt<uint64_t> seed("seed", cl::desc("Random seed (default: 1)"),
                              cl::init(1), cl::cat(category));
static cl::opt<int> threads("num-threads",
                            cl::desc("Threads (default: 0, one per core)"),
                            cl::init(0), cl::cat(category));
static cl::opt<int> repeat("repeat",
                           cl::desc("Timed runs, median shown (default: 5)"),
                           cl::init(5), cl::cat(category));
static cl::opt<std::string> device("device",
                                   cl::desc("cpu or cuda (default: cpu)"),
                                   cl::init("cpu"), cl::cat(category));
static cl::opt<std::string>
    queryNpy("query",
             cl::desc("Q from an .npy file, [B, Hq, Sq, D] ([B, Sq, Hq, D] "
                      "with --layout=bshd); gives the sizes (default: "
                      "random)"),
             cl::init(""), cl::cat(category));
static cl::opt<std::string>
    keyNpy("key",
           cl::desc("K from an .npy file, [B, Hkv, Sk, D] (default: random)"),
           cl::init(""), cl::cat(category));
static cl::opt<std::string>
    valueNpy("value",
             cl::desc("V from an .npy file, [B, Hkv, Sk, Dv] (default: "
                      "random)"),
             cl::init(""), cl::cat(category));
static cl::opt<std::string>
    maskNpy("mask",
            cl::desc("Mask from an .npy file, [Bm, Hm, Sqm, Sk] in any layout "
                     "(default: random)"),
            cl::init(""), cl::cat(category));
static cl::opt<std::string>
    sinksNpy("sinks",
             cl::desc("Sink logits from an .npy file, [Hq] f32, for a spec "
                      "with sinks (default: random)"),
             cl::init(""), cl::cat(category));
static cl::opt<std::string> modifiersName(
    "modifiers",
    cl::desc("Compile the spec with a named example of score and mask "
             "modifiers (docs/spec.md), with random captured tensors, and "
             "check it against the same modifiers in the reference: "
             "--modifiers=list names them"),
    cl::init(""), cl::cat(category));
static cl::opt<std::string> saveOutput(
    "save-output",
    cl::desc("Write O to an .npy file, in the layout (default: none)"),
    cl::init(""), cl::cat(category));
static cl::opt<std::string>
    saveLse("save-lse", cl::desc("Write LSE to an .npy file (default: none)"),
            cl::init(""), cl::cat(category));
static cl::opt<bool> backward(
    "backward",
    cl::desc("Run the spec's backward kernel (dQ, dK, dV for a random dO, "
             "and dLSE with lse) and check the gradients against the float64 "
             "reference (default: false; on the CPU or --device=cuda)"),
    cl::init(false), cl::cat(category));
static cl::opt<bool> weights(
    "weights",
    cl::desc("Run the spec's attention weights kernel (W [B, Hq, Sq, Sk] "
             "f32; with lse it reads the forward's LSE) and check W against "
             "the float64 reference (default: false; CPU)"),
    cl::init(false), cl::cat(category));
static cl::opt<std::string> saveWeights(
    "save-weights",
    cl::desc("With --weights, write W to an .npy file [B, Hq, Sq, Sk] f32 "
             "(default: none; python -m attn heatmap draws it)"),
    cl::init(""), cl::cat(category));
static cl::opt<bool>
    noCheck("no-check",
            cl::desc("Skip the reference comparison (default: false)"),
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

/// The sizes of a run: B, Hq, Hkv, Sq, Sk, each -1 until known.
struct RunSizes {
  int64_t value[5] = {-1, -1, -1, -1, -1};
  std::string source[5]; // what set each, for messages
};

const char *const kSizeNames[5] = {"B", "Hq", "Hkv", "Sq", "Sk"};
const char *const kSizeFlags[5] = {"--batch", "--heads-q", "--heads-kv",
                                   "--seq-q", "--seq-k"};
/// The demo's sizes, for those that nothing else gives.
const int64_t kDemoSizes[5] = {1, 8, 2, 1024, 1024};

/// Records that `source` gives size `i` the value `value`; an error if an
/// earlier source gave another.
bool agreeOnSize(RunSizes &sizes, int i, int64_t value,
                 const std::string &source, std::string &error) {
  if (sizes.value[i] >= 0 && sizes.value[i] != value) {
    error = source + " gives " + kSizeNames[i] + " = " + std::to_string(value) +
            " but " + sizes.source[i] + " gives " +
            std::to_string(sizes.value[i]);
    return false;
  }
  if (sizes.value[i] < 0) {
    sizes.value[i] = value;
    sizes.source[i] = source;
  }
  return true;
}

std::string shapeText(llvm::ArrayRef<int64_t> shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

/// One input read from an .npy file: the flag that named it, the file's
/// array, and which sizes its dims give ([B, H, S, D] order; -1: none).
struct NpyInput {
  const char *flag;
  std::string path;
  attn::NpyArray array;
  int sizeOfDim[4];
  const char *dimNames[4];
};

/// Reads `input` and takes the sizes its shape gives (its dims in the
/// buffers' layout), checking its rank and its head dimension against the
/// kernel's.
bool readNpyInput(NpyInput &input, bool bshd, int64_t headDim,
                  const char *headDimName, RunSizes &sizes,
                  std::string &error) {
  if (!attn::readNpy(input.path, input.array, error)) {
    error = std::string(input.flag) + ": " + error;
    return false;
  }
  const std::vector<int64_t> &shape = input.array.shape;
  std::string expected =
      bshd ? std::string("[") + input.dimNames[0] + ", " + input.dimNames[2] +
                 ", " + input.dimNames[1] + ", " + input.dimNames[3] + "]"
           : std::string("[") + input.dimNames[0] + ", " + input.dimNames[1] +
                 ", " + input.dimNames[2] + ", " + input.dimNames[3] + "]";
  if (shape.size() != 4) {
    error = std::string(input.flag) + ": " + input.path + " has shape " +
            shapeText(shape) + "; the kernel needs " + expected +
            " (--layout=" + (bshd ? "bshd" : "bhsd") + ")";
    return false;
  }
  int64_t logical[4] = {shape[0], shape[bshd ? 2 : 1], shape[bshd ? 1 : 2],
                        shape[3]};
  if (headDim >= 0 && logical[3] != headDim) {
    error = std::string(input.flag) + ": " + input.path + " has shape " +
            shapeText(shape) + ", whose last dim should be the kernel's " +
            headDimName + " = " + std::to_string(headDim) + "; it needs " +
            expected;
    return false;
  }
  for (int d = 0; d < 4; ++d)
    if (input.sizeOfDim[d] >= 0 &&
        !agreeOnSize(sizes, input.sizeOfDim[d], logical[d],
                     std::string(input.flag) + " (" + input.path + ")", error))
      return false;
  return true;
}

/// Replaces a generated input by the contents of an .npy file, whose
/// elements are in the order of the tensor's buffer ([B, H, S, D], or
/// [B, S, H, D] for bshd buffers).
bool loadNpyInto(const NpyInput &input, attn::HostTensor &tensor, bool bshd,
                 std::string &error) {
  const attn::NpyArray &array = input.array;
  bool isBool = tensor.view.dtype == ATTN_BOOL;
  std::string expected = isBool ? "bool"
                                : (tensor.view.dtype == ATTN_F32   ? "f32"
                                   : tensor.view.dtype == ATTN_F16 ? "f16"
                                                                   : "bf16");
  if (array.dtype != expected) {
    error = std::string(input.flag) + ": " + input.path + " holds " +
            array.dtype + ", the kernel needs " + expected;
    return false;
  }
  const int64_t *shape = tensor.view.shape;
  std::vector<int64_t> fileShape =
      bshd ? std::vector<int64_t>{shape[0], shape[2], shape[1], shape[3]}
           : std::vector<int64_t>(shape, shape + 4);
  if (array.shape != fileShape) {
    error = std::string(input.flag) + ": " + input.path + " has shape " +
            shapeText(array.shape) + "; the problem needs " +
            shapeText(fileShape);
    return false;
  }
  if (array.fortranOrder) {
    error = std::string(input.flag) + ": Fortran-order arrays are not "
                                      "supported";
    return false;
  }
  // The buffer was allocated in the file's order: take its bytes as they
  // are, and the exact values in the logical order for the reference.
  tensor.bytes.assign(array.data.begin(), array.data.end());
  tensor.view.data = tensor.bytes.data();
  tensor.values = attn::tensorValues(tensor);
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

  // LLVM lets a later occurrence override an earlier one: refuse that.
  // (A named array: an ArrayRef of a braced list would outlive the list.)
  const cl::Option *const onceOnly[] = {
      &specText, &batch,    &headsQ,  &headsKv,    &seqQ,   &seqK,
      &layout,   &seed,     &threads, &repeat,     &device, &queryNpy,
      &keyNpy,   &valueNpy, &maskNpy, &saveOutput, &saveLse,
      &backward, &weights,  &saveWeights};
  for (const cl::Option *option : onceOnly)
    if (option->getNumOccurrences() > 1)
      return fail("--" + option->ArgStr.str() + " is given " +
                  std::to_string(option->getNumOccurrences()) +
                  " times; give it once");

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
  if (!spec.modifiers.empty())
    return fail(inputFile + ": the kernel '" + spec.name +
                "' has a score_mod or mask_mod, whose captured tensors "
                "attn-run cannot make and whose reference it cannot compute "
                "from MLIR yet; compile it with attn-compile, or run a named "
                "example with --spec and --modifiers");
  if (spec.mha)
    return fail("the kernel '" + spec.name +
                "' is a multi-head attention layer, which attn-run does not "
                "run yet (it runs attention, linear and additive attention "
                "kernels): call it through Python (attn.mha) or the C "
                "runtime (attn_run_mha)");
  if (spec.linear || spec.additive) {
    // What the attention kernels take and these have no use for.
    const char *kind = spec.linear ? "linear attention" : "additive attention";
    const struct {
      bool given, linear, additive;
      const char *flag, *what;
    } unused[] = {
        {weights, true, true, "--weights",
         "attention weights kernel (an additive spec's with_weights key "
         "makes its kernel write them)"},
        {!sinksNpy.empty(), true, true, "--sinks", "sinks"},
        {!modifiersName.empty(), true, true, "--modifiers",
         "score or mask modifiers"},
        {!saveLse.empty(), true, true, "--save-lse", "LSE"},
        {!maskNpy.empty(), true, false, "--mask", "mask"},
        {headsQ.getNumOccurrences() > 0, false, true, "--heads-q", "heads"},
        {headsKv.getNumOccurrences() > 0, false, true, "--heads-kv", "heads"},
        {layout.getNumOccurrences() > 0, false, true, "--layout",
         "heads, so no layout of them"}};
    if (backward)
      return fail(std::string("--backward: the kernel '") + spec.name +
                  "' computes " + kind +
                  ", whose gradients' kernel is a spec of its own (the key "
                  "'backward': '" +
                  (spec.linear ? "linear" : "additive") + ",backward'" + ")");
    for (const auto &option : unused)
      if (option.given && (spec.linear ? option.linear : option.additive))
        return fail(std::string(option.flag) + ": the kernel '" + spec.name +
                    "' computes " + kind + ", which has no " + option.what);
    // Additive attention's inputs have their own shapes: attn-run makes them.
    const std::string *files[] = {&queryNpy, &keyNpy, &valueNpy, &maskNpy,
                                  &saveOutput};
    if (spec.additive)
      for (const std::string *file : files)
        if (!file->empty())
          return fail("the kernel '" + spec.name +
                      "' computes additive attention: attn-run makes its "
                      "random inputs and reads or writes no .npy files; run "
                      "it on your data through Python "
                      "(attn.additive_attention) or the C runtime "
                      "(attn_run_additive)");
  }
  attn::ModifierPtr modifiers;
  if (modifiersName == "list") {
    for (const attn::NamedModifier &m : attn::namedModifiers())
      llvm::outs() << llvm::formatv("{0,-16} {1}\n", m.name, m.description);
    return 0;
  }
  if (!modifiersName.empty()) {
    modifiers = attn::modifierCase(modifiersName);
    if (!modifiers)
      return fail("--modifiers: no example named '" + modifiersName +
                  "' (--modifiers=list names them)");
    if (!attn::setModifiers(spec, modifiers->regions, modifiers->captureTypes,
                            error))
      return fail("--modifiers=" + modifiersName + ": " + error);
  }

  if (backward) {
    if (!saveOutput.empty() || !saveLse.empty())
      return fail("--backward: --save-output and --save-lse write the "
                  "forward's results; run without --backward for them");
    spec.backward = true;
  }
  // The backward and weights kernels of a forward with sinks read them
  // through its LSE (the weights kernel then needs it): the problem keeps
  // them, the kernel takes none.
  bool forwardSinks = spec.sinks && (backward || weights);
  if (forwardSinks) {
    spec.sinks = false;
    spec.lse = spec.lse || weights;
  }

  if (!saveWeights.empty() && !weights)
    return fail("--save-weights writes the weights kernel's W: add --weights");
  if (weights) {
    if (backward)
      return fail("--weights and --backward run two kinds of kernel; give one");
    if (!deviceName.empty())
      return fail("--weights: weights kernels run on the CPU only so far (no "
                  "GPU lowering of attn.attention_weights yet)");
    if (!saveOutput.empty() || !saveLse.empty())
      return fail("--weights: --save-output and --save-lse write the "
                  "forward's results; --save-weights writes W");
    if (!valueNpy.empty())
      return fail("--weights: the weights do not depend on V; drop --value");
    spec.weights = true;
    spec.valueDim = spec.headDim;
  }

  if (layout != "bshd" && layout != "bhsd")
    return fail("--layout must be bhsd or bshd, found '" + layout + "'");
  bool bshd = layout == "bshd";

  // Sizes: the command line, the .npy files and the kernel's static sizes
  // must agree; what none of them gives is the demo's.
  RunSizes sizes;
  const cl::opt<int64_t> *sizeFlags[5] = {&batch, &headsQ, &headsKv, &seqQ,
                                          &seqK};
  for (int i = 0; i < 5; ++i) {
    if (!sizeFlags[i]->getNumOccurrences())
      continue;
    if (*sizeFlags[i] < 0)
      return fail(std::string(kSizeFlags[i]) + " must be 0 or more, found " +
                  std::to_string(*sizeFlags[i]));
    agreeOnSize(sizes, i, *sizeFlags[i], kSizeFlags[i], error);
  }
  // Dims of the files in [B, H, S, D] order: which size each gives.
  std::vector<NpyInput> inputs;
  if (!queryNpy.empty())
    inputs.push_back(
        {"--query", queryNpy, {}, {0, 1, 3, -1}, {"B", "Hq", "Sq", "D"}});
  if (!keyNpy.empty())
    inputs.push_back(
        {"--key", keyNpy, {}, {0, 2, 4, -1}, {"B", "Hkv", "Sk", "D"}});
  if (!valueNpy.empty())
    inputs.push_back(
        {"--value", valueNpy, {}, {0, 2, 4, -1}, {"B", "Hkv", "Sk", "Dv"}});
  for (NpyInput &input : inputs) {
    bool isValue = input.flag == std::string("--value");
    if (!readNpyInput(input, bshd, isValue ? spec.valueDim : spec.headDim,
                      isValue ? "Dv" : "D", sizes, error))
      return fail(error);
  }
  for (int i = 0; i < 5; ++i)
    if (spec.staticSizes[i] >= 0 &&
        !agreeOnSize(sizes, i, spec.staticSizes[i],
                     "the kernel's spec (sizes=)", error))
      return fail(error);
  // Hkv left open: Hq / gqa, else Hq when something gave Hq (multi-head
  // attention), else the demo's.
  bool headsQGiven = sizes.value[1] >= 0;
  for (int i = 0; i < 5; ++i) {
    if (sizes.value[i] >= 0)
      continue;
    sizes.value[i] = kDemoSizes[i];
    if (i == 2 && spec.group > 0)
      sizes.value[i] = std::max<int64_t>(1, sizes.value[1] / spec.group);
    else if (i == 2 && headsQGiven)
      sizes.value[i] = sizes.value[1];
  }

  // Additive attention has no heads.
  if (spec.additive)
    sizes.value[1] = sizes.value[2] = 1;
  if (spec.linear && spec.causal && sizes.value[3] != sizes.value[4])
    return fail("causal linear attention needs Sq = Sk (row i sees keys "
                "0..i), found Sq = " +
                std::to_string(sizes.value[3]) + " (" + sizes.source[3] +
                ") and Sk = " + std::to_string(sizes.value[4]) + " (" +
                sizes.source[4] + ")");

  attn::Problem problem;
  problem.spec = spec;
  problem.sinks = forwardSinks;
  problem.modifiers = modifiers;
  problem.seed = seed;
  problem.bshd = bshd;
  problem.batch = sizes.value[0];
  problem.headsQ = sizes.value[1];
  problem.headsKv = sizes.value[2];
  problem.seqQ = sizes.value[3];
  problem.seqK = sizes.value[4];
  // The harness holds every tensor twice (the kernel's elements and the
  // exact values) plus the reference's output: refuse what cannot fit.
  std::optional<uint64_t> needed = attn::hostBytesNeeded(problem);
  uint64_t available = llvm::sys::Process::getPageSizeEstimate() *
                       static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES));
  if (!needed || *needed > available) {
    std::string amount =
        needed ? llvm::formatv("{0:F1} GiB", *needed / double(1ull << 30)).str()
               : std::string("more than 2^64 bytes");
    return fail(
        "the problem (" + problem.describe() + ") needs " + amount +
        " of memory for its inputs, outputs and the float64 "
        "reference; this machine has " +
        llvm::formatv("{0:F1} GiB", available / double(1ull << 30)).str());
  }

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
  if (!spec.additive) // AdditiveData below holds its tensors
    attn::makeProblemData(problem, data);
  bool loaded = true;
  for (const NpyInput &input : inputs) {
    attn::HostTensor &tensor = input.flag == std::string("--query") ? data.query
                               : input.flag == std::string("--key")
                                   ? data.key
                                   : data.value;
    loaded = loaded && loadNpyInto(input, tensor, bshd, error);
  }
  if (loaded && !maskNpy.empty()) {
    // A mask is [Bm, Hm, Sqm, Sk] whatever the layout.
    NpyInput mask{"--mask", maskNpy, {}, {-1, -1, -1, -1}, {}};
    if (!data.hasMask)
      error = "--mask given but the kernel takes no mask", loaded = false;
    else if (!attn::readNpy(maskNpy, mask.array, error))
      error = "--mask: " + error, loaded = false;
    else
      loaded = loadNpyInto(mask, data.mask, /*bshd=*/false, error);
  }
  if (loaded && !sinksNpy.empty()) {
    attn::NpyArray array;
    std::vector<int64_t> heads = {problem.headsQ};
    if (data.sinks.empty())
      error = "--sinks given but the kernel takes no sinks (spec key "
              "'sinks')",
      loaded = false;
    else if (!attn::readNpy(sinksNpy, array, error))
      error = "--sinks: " + error, loaded = false;
    else if (array.dtype != "f32" || array.shape != heads)
      error = "--sinks: " + sinksNpy + " holds " + array.dtype + " " +
              shapeText(array.shape) + "; the problem needs f32 " +
              shapeText(heads),
      loaded = false;
    else
      std::memcpy(data.sinks.data(), array.data.data(), array.data.size());
  }
  // The backward's O and LSE come from the float64 forward of these inputs.
  attn::BackwardData gradients;
  if (loaded && backward &&
      !attn::makeBackwardData(problem, data, gradients, error))
    loaded = false;
  attn::LinearData linearData;
  if (spec.linear)
    attn::makeLinearData(problem, data, linearData);
  attn::AdditiveData additiveData;
  if (spec.additive)
    attn::makeAdditiveData(problem, additiveData);
  attn::WeightsData weightData;
  if (loaded && weights &&
      !attn::makeWeightsData(problem, data, weightData, error))
    loaded = false;
  if (!loaded) {
    attn_module_unload(module);
    cleanup();
    return fail(error);
  }

  attn_thread_pool *pool = nullptr;
  attn_thread_pool_create(threads, &pool);
  auto runOnce = [&] {
    return backward  ? attn::runBackwardProblem(kernel, data, gradients, pool)
           : weights ? attn::runWeightsProblem(kernel, data, weightData, pool)
           : spec.linear
               ? attn::runLinearProblem(kernel, data, linearData, pool)
           : spec.additive
               ? attn::runAdditiveProblem(kernel, additiveData, pool)
               : runProblem(kernel, data, pool);
  };

  llvm::outs() << "attn-run: " << problem.describe() << "\n";
  llvm::outs() << "  compiled in " << llvm::format("%.2f", compileSeconds)
               << " s for " << kernel->target_cpu << "; ";
  if (deviceName.empty())
    llvm::outs() << attn_thread_pool_size(pool) << " threads\n";
  else
    llvm::outs() << "on " << deviceName << "\n";
  if (runOnce() != ATTN_OK) {
    std::string message = attn_last_error();
    attn_thread_pool_destroy(pool);
    attn_module_unload(module);
    cleanup();
    return fail(message);
  }

  bool passed = true;
  if (!noCheck && backward) {
    attn::BackwardReport report =
        attn::checkBackwardAgainstReference(problem, data, gradients);
    llvm::outs() << "  check of the gradients against the float64 "
                    "reference: "
                 << report.message << "\n";
    passed = report.passed;
  } else if (!noCheck && (spec.linear || spec.additive)) {
    attn::CheckReport report =
        spec.linear
            ? attn::checkLinearAgainstReference(problem, data, linearData)
            : attn::checkAdditiveAgainstReference(problem, additiveData);
    llvm::outs() << "  check against the float64 reference: " << report.message
                 << "\n";
    passed = report.passed;
  } else if (!noCheck && weights) {
    attn::CheckReport report =
        attn::checkWeightsAgainstReference(problem, data, weightData);
    llvm::outs() << "  check of the weights against the float64 reference: "
                 << report.message << "\n";
    passed = report.passed;
  } else if (!noCheck) {
    attn::CheckReport report = attn::checkAgainstReference(problem, data);
    llvm::outs() << "  check against the float64 reference: " << report.message
                 << "\n";
    passed = report.passed;
  }

  // Timing: median of repeated runs (outputs re-poisoned is unnecessary);
  // on the GPU with the buffers already in device memory.
  attn::DeviceProblem deviceData;
  attn::DeviceLinearProblem deviceLinear;
  attn::DeviceAdditiveProblem deviceAdditive;
  attn::DeviceBackwardProblem deviceBackward;
  bool onDevice = !deviceName.empty();
  if (onDevice && (backward        ? deviceBackward.upload(data, gradients)
                   : spec.linear   ? deviceLinear.upload(data, linearData)
                   : spec.additive ? deviceAdditive.upload(additiveData)
                                   : deviceData.upload(data)) != ATTN_OK) {
    std::string message = attn_last_error();
    attn_thread_pool_destroy(pool);
    attn_module_unload(module);
    cleanup();
    return fail(message);
  }
  std::vector<double> seconds;
  for (int r = 0; r < std::max(1, static_cast<int>(repeat)); ++r) {
    auto start = std::chrono::steady_clock::now();
    if (!onDevice)
      runOnce();
    else if (backward)
      deviceBackward.run(kernel);
    else if (spec.linear)
      deviceLinear.run(kernel);
    else if (spec.additive)
      deviceAdditive.run(kernel);
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
  if (weights) {
    // W's bytes written, besides the product's flops.
    double bytes = 4.0 * double(problem.batch) * double(problem.headsQ) *
                   double(problem.seqQ) * double(problem.seqK);
    llvm::outs() << "  time " << llvm::format("%.3f", median * 1e3)
                 << " ms (median of " << seconds.size() << "), W written at "
                 << llvm::format("%.2f", bytes / median * 1e-9) << " GB/s, "
                 << llvm::format("%.1f", flops / median * 1e-9)
                 << " GFLOP/s (FLOPs = 2*D per allowed (i, j) per head: "
                 << llvm::format("%.3g", flops) << ")\n";
  } else
    llvm::outs() << "  time " << llvm::format("%.3f", median * 1e3)
                 << " ms (median of " << seconds.size() << "), "
                 << llvm::format("%.1f", flops / median * 1e-9)
                 << (backward ? " GFLOP/s (FLOPs = 2*(3D+2Dv) per allowed (i, "
                                "j) per head: "
                     : spec.linearBackward
                         ? " GFLOP/s (FLOPs = 4*(Sq+Sk)*D*Dv per head, plus "
                           "2*Sq*16*(4D+3Dv) causal: "
                     : spec.linear
                         ? " GFLOP/s (FLOPs = 2*(Sq+Sk)*D*Dv per head, plus "
                           "2*Sq*chunk*(D+Dv) causal: "
                     : spec.additiveBackward
                         ? " GFLOP/s (FLOPs = 2*Sq*Sk*(4A+2Dv) + "
                           "2*(Sq*Dq+Sk*Dk)*A per batch, the tanh not counted: "
                     : spec.additive
                         ? " GFLOP/s (FLOPs = 2*Sq*Sk*(A+Dv) + "
                           "2*(Sq*Dq+Sk*Dk)*A per batch, the tanh not counted: "
                         : " GFLOP/s (FLOPs = 2*(D+Dv) per allowed (i, j) "
                           "per head: ")
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
    // In the layout's order, like the inputs: [B, Sq, Hq, Dv] for bshd.
    const int64_t *shape = data.output.view.shape;
    out.shape.assign(shape, shape + 4);
    if (bshd)
      std::swap(out.shape[1], out.shape[2]);
    std::vector<double> values = attn::outputValues(data);
    out.data.resize(values.size() * 4);
    int64_t linear = 0;
    for (int64_t b = 0; b < shape[0]; ++b)
      for (int64_t h = 0; h < shape[1]; ++h)
        for (int64_t i = 0; i < shape[2]; ++i)
          for (int64_t d = 0; d < shape[3]; ++d, ++linear) {
            int64_t at =
                bshd ? ((b * shape[2] + i) * shape[1] + h) * shape[3] + d
                     : linear;
            float f = static_cast<float>(values[linear]);
            std::memcpy(&out.data[at * 4], &f, 4);
          }
    saved &= save(saveOutput, out);
  }
  if (!saveWeights.empty()) {
    attn::NpyArray out;
    out.dtype = "f32";
    out.shape = {problem.batch, problem.headsQ, problem.seqQ, problem.seqK};
    std::vector<double> values = attn::weightsValues(weightData);
    out.data.resize(values.size() * 4);
    for (size_t i = 0; i < values.size(); ++i) {
      float f = static_cast<float>(values[i]);
      std::memcpy(&out.data[i * 4], &f, 4);
    }
    saved &= save(saveWeights, out);
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
