//===- attn-compile.cpp - Emit fused attention kernels for other projects -===//
//
// Reads kernel specs from the command line (--spec) or attn.attention ops
// from an .mlir file and writes a shared library or an object file with
// their C entry points, plus a C header. With --target sm_NN it makes CUDA
// kernels instead: PTX or cubin plus a header with their launch shapes, or
// a library embedding them that the runtime launches. See
// lib/Compiler/Compiler.h.
//
//===----------------------------------------------------------------------===//
#include "lib/Compiler/Compiler.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <fstream>

namespace cl = llvm::cl;

static cl::OptionCategory category("attn-compile options");
static cl::opt<std::string> inputFile(cl::Positional,
                                      cl::desc("[<kernels.mlir>]"),
                                      cl::init(""), cl::cat(category));
static cl::list<std::string>
    specs("spec",
          cl::desc("A kernel spec, e.g. "
                   "\"name=attn_causal,dtype=bf16,d=128,causal,lse\" "
                   "(repeatable; see README)"),
          cl::cat(category));
static cl::opt<std::string> modifiersFile(
    "modifiers",
    cl::desc("An .mlir file whose one attn.attention has a score_mod and/or "
             "mask_mod (and their captures): every --spec kernel gets them"),
    cl::value_desc("file"), cl::cat(category));
static cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                       cl::value_desc("file"), cl::Required,
                                       cl::cat(category));
static cl::opt<std::string>
    headerFile("header",
               cl::desc("C header to write (default: the output's name with "
                        ".h, for shared libraries and objects)"),
               cl::init(""), cl::cat(category));
static cl::opt<std::string>
    emit("emit",
         cl::desc("shared | object | mlir | llvm | ptx | cubin (default: "
                  "from the output's extension, shared otherwise)"),
         cl::init(""), cl::cat(category));
static cl::opt<std::string>
    target("target",
           cl::desc("cpu (default) or a CUDA architecture: sm_80, sm_90, "
                    "sm_90a..."),
           cl::init("cpu"), cl::cat(category));
static cl::opt<std::string>
    cudaToolkit("cuda-toolkit",
                cl::desc("CUDA toolkit whose ptxas makes cubins (default: "
                         "$CUDA_HOME, else the one found at build time)"),
                cl::init(""), cl::cat(category));
static cl::opt<std::string>
    targetCpu("target-cpu",
              cl::desc("LLVM CPU, e.g. znver4 (default: host); the kernel "
                       "records the features LLVM knows it has"),
              cl::init(""), cl::cat(category));
static cl::opt<std::string> targetFeatures(
    "target-features",
    cl::desc("LLVM features to add (+x) or remove (-x), e.g. +avx2,+fma "
             "(default: the host's, or the --target-cpu's)"),
    cl::init(""), cl::cat(category));
static const attn::CompileOptions kDefaults;
static cl::opt<int64_t> queryTile("query-tile-size",
                                  cl::desc("Query rows per work item (CPU)"),
                                  cl::init(kDefaults.queryTileSize),
                                  cl::cat(category));
static cl::opt<int64_t> bandedQueryTile(
    "banded-query-tile-size",
    cl::desc("Query rows per work item of causal and windowed kernels (CPU; "
             "default: the smaller of --query-tile-size and 128, or 256 for "
             "bf16 with AVX-512 BF16)"),
    cl::init(kDefaults.bandedQueryTileSize), cl::cat(category));
static cl::opt<int64_t>
    keyTile("key-tile-size",
            cl::desc("Keys per tile of the key loop (default: chosen per "
                     "kernel; CPU: 64 for f32 prefill on AVX-512 and for "
                     "bf16 prefill with AVX-512 BF16 and D + Dv > 192 (on "
                     "Zen 5 at any D), else 128; "
                     "GPU: 64, 32 for f32 with D > 128)"),
            cl::init(kDefaults.keyTileSize), cl::cat(category));
static cl::opt<int64_t>
    gpuWarps("gpu-warps", cl::desc("Warps per thread block (GPU; default 4)"),
             cl::init(kDefaults.gpuWarps), cl::cat(category));
static cl::opt<int64_t> gpuRowsPerWarp(
    "gpu-rows-per-warp",
    cl::desc("Query rows per warp (GPU): 16 (default) or 32, two mma.sync "
             "blocks sharing each K/V operand; 32 applies to f16/bf16 "
             "kernels with Dv <= 128, the others keep 16"),
    cl::init(kDefaults.gpuRowsPerWarp), cl::cat(category));
static cl::opt<int64_t>
    rowBlock("row-block",
             cl::desc("Query rows sharing each packed K/V load (CPU, 1-8; "
                      "default: chosen per kernel, 4 for f32 prefill on "
                      "AVX-512 and for bf16 prefill with AVX-512 BF16 and "
                      "D + Dv > 192 (on Zen 5 at any D), 3 for the latter "
                      "with Dv <= 80, else 2)"),
             cl::init(kDefaults.rowBlock), cl::cat(category));
static cl::opt<std::string> kernelChoice(
    "kernel",
    cl::desc("The micro-kernel and blocking of every kernel, as an "
             "#attn.kernel (e.g. \"<packed, query_tile = 128, key_block = "
             "64, row_block = 4>\"; default: chosen per kernel for the "
             "target, which --emit=mlir shows)"),
    cl::init(""), cl::cat(category));
static cl::opt<int64_t> bandKeyStep(
    "band-key-step",
    cl::desc("Keys per step in the packed key blocks that a causal or window "
             "band cuts (CPU; a multiple of the vector width dividing the key "
             "tile; 0: the largest such up to 64)"),
    cl::init(kDefaults.bandKeyStep), cl::cat(category));
static cl::opt<int64_t>
    laneRows("lane-rows",
             cl::desc("Query rows per tile of the lane-rows micro-kernel "
                      "(CPU; rows in vector lanes; 0: off; default: 64 on "
                      "AVX-512, 24 on AVX2, else off)"),
             cl::init(kDefaults.laneRows), cl::cat(category));
static cl::opt<int64_t> prefetchDistance(
    "prefetch-bytes",
    cl::desc("Bytes of K ahead that decoding kernels prefetch; unless 0, "
             "lane-rows kernels prefetch the next key block (CPU; 0: off)"),
    cl::init(kDefaults.prefetchDistance), cl::cat(category));
static cl::opt<bool> splitKeys(
    "split-keys",
    cl::desc("Give decoding kernels (static Sq <= 4) the key split's "
             "partial and merge entry points, which the runtime uses when a "
             "call has fewer GQA groups than threads (CPU; default on; "
             "--split-keys=false leaves them out)"),
    cl::init(kDefaults.splitKeys), cl::cat(category));
static cl::opt<bool> llvmUnroll(
    "llvm-unroll",
    cl::desc("Let LLVM's O3 unroll loops (CPU; default off: the micro-kernels "
             "are unrolled where it pays when they are generated)"),
    cl::init(kDefaults.llvmUnroll), cl::cat(category));
static cl::opt<bool> emulateAmx(
    "emulate-amx",
    cl::desc("Choose the AMX micro-kernel as on a CPU with AMX and run its "
             "tile operations as scalar loops (CPU; for tests on a CPU "
             "without AMX: slow)"),
    cl::init(kDefaults.emulateAmx), cl::cat(category));
static cl::opt<int64_t>
    vectorWidth("vector-width",
                cl::desc("f32 lanes per vector (default: from the target)"),
                cl::init(kDefaults.vectorWidth), cl::cat(category));
static cl::opt<std::string> librarySymbol(
    "library-symbol",
    cl::desc("Name of the kernel table symbol (default attn_library_v1, "
             "what the runtime loads; give objects linked into one program "
             "distinct names)"),
    cl::init(kDefaults.librarySymbol), cl::cat(category));
static cl::opt<bool>
    timing("timing",
           cl::desc("Print per-stage timings: MLIR passes, LLVM "
                    "optimization, code generation, link"),
           cl::init(false), cl::cat(category));

static bool outputKind(attn::OutputKind &kind, std::string &error) {
  llvm::StringRef ext = llvm::sys::path::extension(outputFile);
  std::string what = emit;
  if (what.empty())
    what = ext == ".o"       ? "object"
           : ext == ".mlir"  ? "mlir"
           : ext == ".ll"    ? "llvm"
           : ext == ".ptx"   ? "ptx"
           : ext == ".cubin" ? "cubin"
                             : "shared";
  if (what == "shared")
    kind = attn::OutputKind::SharedLibrary;
  else if (what == "object")
    kind = attn::OutputKind::Object;
  else if (what == "mlir")
    kind = attn::OutputKind::MLIR;
  else if (what == "llvm")
    kind = attn::OutputKind::LLVMIR;
  else if (what == "ptx")
    kind = attn::OutputKind::PTX;
  else if (what == "cubin")
    kind = attn::OutputKind::Cubin;
  else {
    error = "--emit must be shared, object, mlir, llvm, ptx or cubin, found '" +
            what + "'";
    return false;
  }
  return true;
}

static std::string headerGuard(llvm::StringRef path) {
  std::string guard = "ATTN_KERNELS_";
  for (char c : llvm::sys::path::filename(path))
    guard += std::isalnum(static_cast<unsigned char>(c))
                 ? static_cast<char>(std::toupper(c))
                 : '_';
  return guard;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::SetVersionPrinter(
      [](llvm::raw_ostream &os) { os << attn::compilerVersion() << "\n"; });
  cl::ParseCommandLineOptions(
      argc, argv,
      "attn-compile: emit fused attention kernels and a C header\n\n"
      "  attn-compile --spec \"d=64,causal\" -o kernels.so\n"
      "  attn-compile model.mlir -o kernels.o --header kernels.h\n"
      "  attn-compile --target sm_90 --spec \"dtype=bf16,d=128,causal\" "
      "-o k.ptx\n");

  auto fail = [](const std::string &message) {
    llvm::errs() << "attn-compile: error: " << message << "\n";
    return 1;
  };
  std::vector<attn::KernelSpec> kernels;
  std::string error;
  if (!inputFile.empty() && !attn::specsFromMLIRFile(inputFile, kernels, error))
    return fail(error);
  for (const std::string &text : specs) {
    std::optional<attn::KernelSpec> spec = attn::parseKernelSpec(text, error);
    if (!spec)
      return fail("--spec \"" + text + "\": " + error);
    kernels.push_back(*spec);
  }
  if (!modifiersFile.empty()) {
    if (specs.empty())
      return fail("--modifiers applies to --spec kernels; an .mlir file's "
                  "ops carry their own regions");
    std::vector<attn::KernelSpec> sources;
    if (!attn::specsFromMLIRFile(modifiersFile, sources, error))
      return fail("--modifiers " + modifiersFile + ": " + error);
    if (sources.size() != 1 || sources[0].modifiers.empty())
      return fail("--modifiers " + modifiersFile +
                  ": expected one attn.attention with a score_mod or "
                  "mask_mod, found " +
                  std::to_string(sources.size()) + " op(s)" +
                  (sources.size() == 1 ? " without modifiers" : ""));
    for (attn::KernelSpec &kernel : kernels) {
      kernel.modifiers = sources[0].modifiers;
      kernel.captures = sources[0].captures;
      kernel.scoreMod = sources[0].scoreMod;
      std::copy(std::begin(sources[0].blockTable),
                std::end(sources[0].blockTable), kernel.blockTable);
    }
  }
  if (kernels.empty())
    return fail("nothing to compile: give an .mlir file or --spec");
  for (size_t i = 0; i < kernels.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (kernels[i].name == kernels[j].name)
        return fail("two kernels are named '" + kernels[i].name +
                    "': give each spec a distinct name=");

  attn::OutputKind kind;
  if (!outputKind(kind, error))
    return fail(error);
  attn::CompileOptions options;
  options.targetCpu = targetCpu;
  options.targetFeatures = targetFeatures;
  options.queryTileSize = queryTile;
  options.bandedQueryTileSize = bandedQueryTile;
  options.keyTileSize = keyTile;
  options.vectorWidth = vectorWidth;
  options.rowBlock = rowBlock;
  options.bandKeyStep = bandKeyStep;
  options.laneRows = laneRows;
  options.kernel = kernelChoice;
  options.prefetchDistance = prefetchDistance;
  options.timing = timing;
  options.splitKeys = splitKeys;
  options.llvmUnroll = llvmUnroll;
  options.emulateAmx = emulateAmx;
  options.librarySymbol = librarySymbol;
  options.cudaToolkit = cudaToolkit;
  if (target != "cpu") {
    if (!targetCpu.empty())
      return fail("--target-cpu is for CPU targets, not --target " + target);
    options.gpuArch = target;
    options.gpuWarps = gpuWarps;
    options.gpuRowsPerWarp = gpuRowsPerWarp;
  } else if (gpuWarps.getNumOccurrences() > 0 ||
             gpuRowsPerWarp.getNumOccurrences() > 0) {
    return fail(std::string(gpuWarps.getNumOccurrences()
                                ? "--gpu-warps"
                                : "--gpu-rows-per-warp") +
                " is for GPU targets (--target sm_NN)");
  }
  {
    llvm::StringRef symbol = librarySymbol.getValue();
    bool valid = !symbol.empty() && !std::isdigit(symbol.front());
    for (char c : symbol)
      valid &= std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    if (!valid)
      return fail("--library-symbol must be a C identifier, found '" +
                  librarySymbol + "'");
  }
  if (options.queryTileSize < 1 || options.keyTileSize < 0 ||
      options.bandedQueryTileSize < 0 || options.rowBlock < 0 ||
      options.bandKeyStep < 0)
    return fail("tile sizes must be >= 1 (0: chosen per kernel where the "
                "option allows it)");
  if (options.prefetchDistance < 0)
    return fail("--prefetch-bytes must be >= 0");
  if (laneRows.getNumOccurrences() > 0 && options.laneRows < 0)
    return fail("--lane-rows must be >= 0 (0: off)");
  std::string header = headerFile;
  if (header.empty() &&
      (kind == attn::OutputKind::SharedLibrary ||
       kind == attn::OutputKind::Object || kind == attn::OutputKind::PTX ||
       kind == attn::OutputKind::Cubin)) {
    llvm::SmallString<256> path(outputFile.getValue());
    llvm::sys::path::replace_extension(path, ".h");
    header = path.str().str();
  }
  // Where the results go is checked before the work starts (the linker
  // used to report a missing folder after the whole compile).
  for (const std::string &path : {outputFile.getValue(), header}) {
    if (path.empty() || path == "-")
      continue;
    std::string folder = llvm::sys::path::parent_path(path).str();
    if (folder.empty())
      folder = ".";
    if (llvm::sys::fs::is_directory(path))
      return fail("cannot write '" + path + "': it is a folder");
    if (!llvm::sys::fs::is_directory(folder))
      return fail("cannot write '" + path + "': the folder '" + folder +
                  "' does not exist");
    if (llvm::sys::fs::access(folder, llvm::sys::fs::AccessMode::Write))
      return fail("cannot write '" + path + "': the folder '" + folder +
                  "' is not writable");
  }
  std::vector<attn::GpuKernelInfo> gpuKernels;
  if (!attn::compileKernels(kernels, options, kind, outputFile, error,
                            &gpuKernels))
    return fail(error);

  if (!header.empty()) {
    std::ofstream out(header);
    out << attn::kernelHeader(kernels, headerGuard(header), librarySymbol,
                              options.gpuArch.empty() ? nullptr : &gpuKernels,
                              &options);
    if (!out)
      return fail("cannot write " + header);
  }
  return 0;
}
