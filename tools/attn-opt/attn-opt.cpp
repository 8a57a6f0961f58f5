//===- attn-opt.cpp - Run attn passes and pipelines on MLIR ---------------===//
//
// mlir-opt for attn: the attn dialect, the upstream dialects its lowering
// uses, every attn pass and pipeline, and the upstream passes. The input is
// read here first and refused when it nests deeper than MLIR's recursive
// parser can take (lib/Support/Nesting.h); the rest is MlirOptMain's.
//
//===----------------------------------------------------------------------===//
#include "lib/Pipelines/Registration.h"
#include "lib/Support/Nesting.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

/// Hides (from --help; --help-hidden still lists them) the options that
/// LLVM's libraries register when they load -- hundreds of backend flags
/// (AMDGPU, AArch64, Polly, ...) that have nothing to do with attn. MLIR's
/// and attn's options are registered later, in main.
static void hideLibraryOptions() {
  for (auto &[name, option] : llvm::cl::getRegisteredOptions())
    if (name != "help" && name != "version")
      option->setHiddenFlag(llvm::cl::Hidden);
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  hideLibraryOptions();
  mlir::DialectRegistry registry;
  mlir::attn::registerAttnDialects(registry);
  mlir::attn::registerAllAttnPasses();
  llvm::cl::AddExtraVersionPrinter([](llvm::raw_ostream &os) {
    os << "attn 0.1.0 (LLVM/MLIR " << LLVM_VERSION_STRING << ")\n";
  });
  auto [inputFilename, outputFilename] = mlir::registerAndParseCLIOptions(
      argc, argv, "attn optimizer driver\n", registry);
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  // --show-dialects and --list-passes read no input.
  if (config.shouldShowDialects() || config.shouldListPasses())
    return mlir::asMainReturnCode(
        mlir::MlirOptMain(argc, argv, inputFilename, outputFilename, registry));

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      mlir::openInputFile(inputFilename, &error);
  if (!input) {
    llvm::errs() << "attn-opt: error: " << error << "\n";
    return 1;
  }
  std::string problem = attn::nestingProblem(input->getBuffer());
  if (!problem.empty()) {
    llvm::errs() << "attn-opt: error: " << inputFilename << ": " << problem
                 << "\n";
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << "attn-opt: error: " << error << "\n";
    return 1;
  }
  if (mlir::failed(
          mlir::MlirOptMain(output->os(), std::move(input), registry, config)))
    return 1;
  output->keep();
  return 0;
}
