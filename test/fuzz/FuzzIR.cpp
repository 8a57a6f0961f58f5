//===- FuzzIR.cpp - libFuzzer target: IR through the CPU pipeline ---------===//
//
// attn-fuzz-ir: bytes -> parse (attn's dialects registered) -> verify ->
// attn-to-llvm-cpu -> LLVM IR. Every input must end in success or in
// diagnostics; a crash, an assertion, a sanitizer report or a hang is a bug.
// The verifier is what stands between a user's IR and the passes, so a pass
// that crashes on IR the verifier accepted is a verifier bug.
//
// Inputs are kept to what one run can afford and to what the pipeline is
// meant to consume:
//  - at most 4 KiB of text;
//  - only ops of the dialects a user hands the pipeline (builtin, func,
//    arith, tensor, attn); IR of other upstream dialects is out of scope
//    (upstream's own fuzzing covers those);
//  - no shaped type with a static dim above 1024 or more than 2^20 elements,
//    so that no input asks the vectorizer for a billion-lane vector.
// Diagnostics are collected into a string, never printed.
//
//===----------------------------------------------------------------------===//
#include "lib/Pipelines/Pipelines.h"
#include "lib/Pipelines/Registration.h"
#include "lib/Support/Nesting.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

#include <cstddef>
#include <cstdint>
#include <string>

using namespace mlir;

namespace {

constexpr size_t kMaxInputBytes = 4096;
constexpr int64_t kMaxStaticDim = 1024;
constexpr int64_t kMaxStaticElements = int64_t(1) << 20;

const DialectRegistry &registry() {
  static DialectRegistry *r = [] {
    auto *r = new DialectRegistry;
    mlir::attn::registerAttnDialects(*r);
    return r;
  }();
  return *r;
}

/// A type no input may use: a shaped type too large to lower quickly.
bool isTooLarge(Type type) {
  bool tooLarge = false;
  type.walk([&](ShapedType shaped) {
    if (!shaped.hasRank())
      return;
    int64_t elements = 1;
    for (int64_t dim : shaped.getShape()) {
      if (ShapedType::isDynamic(dim))
        continue;
      if (dim > kMaxStaticDim) {
        tooLarge = true;
        return;
      }
      elements *= dim > 0 ? dim : 1; // bounded: at most 1024^rank...
      if (elements > kMaxStaticElements) {
        tooLarge = true;
        return;
      }
    }
  });
  return tooLarge;
}

/// Whether the module holds only what the pipeline is meant to consume.
bool isInScope(ModuleOp module) {
  static const llvm::StringSet<> dialects = {"builtin", "func", "arith",
                                             "tensor", "attn"};
  WalkResult result = module->walk([&](Operation *op) {
    if (!dialects.contains(op->getName().getDialectNamespace()))
      return WalkResult::interrupt();
    for (Type t : op->getOperandTypes())
      if (isTooLarge(t))
        return WalkResult::interrupt();
    for (Type t : op->getResultTypes())
      if (isTooLarge(t))
        return WalkResult::interrupt();
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (Type t : block.getArgumentTypes())
          if (isTooLarge(t))
            return WalkResult::interrupt();
    bool badAttr = false;
    op->getAttrDictionary().walk([&](Type t) { badAttr |= isTooLarge(t); });
    return badAttr ? WalkResult::interrupt() : WalkResult::advance();
  });
  return !result.wasInterrupted();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > kMaxInputBytes)
    return -1; // not added to the corpus

  // A fresh context per input: nothing of one input (interned attributes,
  // loaded dialects) changes how the next one runs, so every crash
  // reproduces from its file alone.
  MLIRContext context(registry(), MLIRContext::Threading::DISABLED);
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    diagnostics += diag.str();
    diagnostics += '\n';
    return success();
  });

  // The lexer reads source buffers up to a terminating NUL, as every file
  // and string MLIR parses has one: give the bytes one.
  std::string text(reinterpret_cast<const char *>(data), size);
  // What the tools refuse before parsing (MLIR's parser would overflow the
  // stack); the check itself is fuzzed here.
  if (!::attn::nestingProblem(text).empty())
    return 0;
  ParserConfig config(&context, /*verifyAfterParse=*/true);
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(llvm::StringRef(text.c_str(), size), config);
  if (!module || !isInScope(*module))
    return 0;

  PassManager pm(&context);
  mlir::attn::CpuPipelineOptions options;
  mlir::attn::buildAttnToLLVMCpuPipeline(pm, options);
  if (failed(pm.run(*module)))
    return 0;

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(*module, llvmContext, "fuzz");
  (void)llvmModule; // null with diagnostics is an acceptable outcome
  return 0;
}
