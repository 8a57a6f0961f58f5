//===- attn-opt.cpp - Run attn passes and pipelines on MLIR ---------------===//
//
// mlir-opt for attn: the attn dialect, the upstream dialects its lowering
// uses, every attn pass and pipeline, and the upstream passes.
//
//===----------------------------------------------------------------------===//
#include "lib/Pipelines/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::attn::registerAttnDialects(registry);
  mlir::attn::registerAllAttnPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "attn optimizer driver\n", registry));
}
