//===- attn-opt.cpp - Run attn passes and pipelines on MLIR ---------------===//
//
// mlir-opt for attn: the attn dialect, the upstream dialects its lowering
// uses, every attn pass and pipeline, and the upstream passes.
//
//===----------------------------------------------------------------------===//
#include "lib/Pipelines/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::attn::registerAttnDialects(registry);
  mlir::attn::registerAllAttnPasses();
  llvm::cl::AddExtraVersionPrinter([](llvm::raw_ostream &os) {
    os << "attn 0.1.0 (LLVM/MLIR " << LLVM_VERSION_STRING << ")\n";
  });
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "attn optimizer driver\n", registry));
}
