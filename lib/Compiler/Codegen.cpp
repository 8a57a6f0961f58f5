//===- Codegen.cpp - Lower kernel functions to objects and libraries ------===//
//
// Runs attn-to-llvm-cpu on the kernel functions, translates them to LLVM IR
// and adds what a caller without MLIR needs (runtime/include/attn/
// kernel_abi.h). For a GPU target the kernels are a PTX or cubin image
// (GpuCodegen.cpp) and the host library holds only the image and the
// descriptors. A CPU library exports:
//
//   void    <name>_run(const attn_kernel_args *, int64_t begin, int64_t end)
//   int64_t <name>_work_items(const attn_kernel_args *)
//           (a backward kernel's take an attn_backward_args)
//   const attn_kernel_desc <name>_desc      what the kernel computes
//   const attn_library attn_library_v1      the table the runtime looks up
//
// The entry points unpack the argument struct into the memref descriptors
// of the MLIR functions (allocated and aligned pointer, offset 0, sizes,
// strides), which then inline into them. LLVM's O3 and the target's code
// generator, for the host CPU unless told otherwise, make the object file;
// `cc -shared` links a shared library from it.
//
//===----------------------------------------------------------------------===//
#include "lib/Compiler/Compiler.h"
#include "lib/Compiler/CompilerInternal.h"
#include "lib/Support/Limits.h"

#include "lib/Pipelines/Pipelines.h"
#include "lib/Pipelines/Registration.h"
#include "lib/Transforms/Passes.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"

#include <cmath>

using namespace mlir;

namespace {

constexpr uint32_t kAbiVersion = 1;
constexpr uint64_t kLibraryMagic = 0x4c4e524b4e545441ull;

} // namespace

namespace attn {
std::string compilerVersion() {
  return std::string("attn 0.1.0 (LLVM/MLIR ") + LLVM_VERSION_STRING + ")";
}

/// The features LLVM's target for `triple` implies for `cpu`, as "+name"
/// items; false when the target does not know the CPU.
static bool featuresOfCpu(const std::string &triple, const std::string &cpu,
                          SmallVectorImpl<std::string> &features) {
  mlir::attn::initializeNativeTarget();
  std::string error;
  const llvm::Target *t =
      llvm::TargetRegistry::lookupTarget(llvm::Triple(triple), error);
  if (!t)
    return false;
  std::unique_ptr<llvm::MCSubtargetInfo> info(
      t->createMCSubtargetInfo(triple, cpu, ""));
  if (!info || !info->isCPUStringValid(cpu))
    return false;
  for (const llvm::SubtargetFeatureKV &feature :
       info->getAllProcessorFeatures())
    if (info->getFeatureBits().test(feature.Value))
      features.push_back(std::string("+") + feature.Key);
  return true;
}

bool ResolvedTarget::has(const std::string &name) const {
  return llvm::is_contained(llvm::split(features, ','), "+" + name);
}

bool resolveTarget(const CompileOptions &options, ResolvedTarget &target,
                   std::string &error) {
  target.triple = llvm::sys::getProcessTriple();
  target.cpu = options.targetCpu.empty() ? llvm::sys::getHostCPUName().str()
                                         : options.targetCpu;
  // What the kernel may use: the host's features by default; for a named
  // CPU, the features LLVM knows it has (so that the kernel records them
  // and the runtime can refuse it on a CPU without them), then the explicit
  // --target-features, which add ("+x") or remove ("-x") features.
  SmallVector<std::string> features;
  if (options.targetCpu.empty()) {
    for (const auto &feature : llvm::sys::getHostCPUFeatures())
      if (feature.second) // record what the kernel may use, not what it may not
        features.push_back("+" + feature.first().str());
  } else if (!options.targetCpu.empty() &&
             !featuresOfCpu(target.triple, target.cpu, features)) {
    error = "unknown --target-cpu '" + target.cpu + "' for " + target.triple +
            " (llc -mcpu=help lists the CPUs LLVM knows)";
    return false;
  }
  for (llvm::StringRef item : llvm::split(options.targetFeatures, ',')) {
    item = item.trim();
    if (item.empty())
      continue;
    // LLVM reads a feature without a sign as enabled.
    bool sign = item.front() == '+' || item.front() == '-';
    llvm::StringRef name = sign ? item.drop_front() : item;
    llvm::erase_if(features, [&](const std::string &f) {
      return llvm::StringRef(f).drop_front() == name;
    });
    features.push_back(sign ? item.str() : "+" + name.str());
  }
  target.features = llvm::join(features, ",");
  // An x86 CPU without 64-bit mode (pentium, i686, ...): LLVM would abort
  // with "64-bit code requested on a subtarget that doesn't support it".
  if (llvm::Triple(target.triple).getArch() == llvm::Triple::x86_64 &&
      ((!options.targetCpu.empty() && !target.has("64bit")) ||
       llvm::is_contained(features, "-64bit"))) {
    error = llvm::is_contained(features, "-64bit")
                ? std::string("--target-features removes 64bit, but attn's "
                              "CPU kernels are x86-64 code")
                : "--target-cpu '" + target.cpu +
                      "' cannot run x86-64 code, which attn's CPU kernels "
                      "are: name a 64-bit CPU (x86-64, x86-64-v3, "
                      "x86-64-v4, znver4, sapphirerapids, ...; llc "
                      "-mcpu=help lists them)";
    return false;
  }
  if (options.vectorWidth > 0)
    target.vectorWidth = options.vectorWidth;
  else if (target.has("avx512f"))
    target.vectorWidth = 16;
  else if (target.has("avx"))
    target.vectorWidth = 8;
  else
    target.vectorWidth = 4;
  return true;
}
} // namespace attn

namespace {

//===----------------------------------------------------------------------===//
// The C ABI glue in LLVM IR
//===----------------------------------------------------------------------===//

struct AbiTypes {
  llvm::StructType *args, *backwardArgs, *linearArgs, *linearBackwardArgs,
      *additiveArgs, *additiveBackwardArgs, *mhaArgs, *desc, *library,
      *gpuKernel;
  llvm::StructType *capture, *captureDesc;
  llvm::Type *i32, *i64, *f32, *ptr;

  explicit AbiTypes(llvm::LLVMContext &ctx) {
    i32 = llvm::Type::getInt32Ty(ctx);
    i64 = llvm::Type::getInt64Ty(ctx);
    f32 = llvm::Type::getFloatTy(ctx);
    ptr = llvm::PointerType::getUnqual(ctx);
    auto arr = [&](llvm::Type *t, unsigned n) {
      return llvm::ArrayType::get(t, n);
    };
    // attn_capture: the data, 4 sizes, 4 strides.
    capture = llvm::StructType::create(ctx, {ptr, arr(i64, 4), arr(i64, 4)},
                                       "attn_capture");
    // attn_capture_desc: dtype, rank, 4 static sizes.
    captureDesc = llvm::StructType::create(ctx, {i32, i32, arr(i64, 4)},
                                           "attn_capture_desc");
    // attn_kernel_args: 6 pointers, 5 sizes, strides of Q, K, V, mask, O
    // (4 each) and LSE (3), dropout's probability and seed, the sinks and
    // their stride, the captures.
    args = llvm::StructType::create(
        ctx, {ptr,         ptr,         ptr,         ptr,         ptr,
              ptr,         i64,         i64,         i64,         i64,
              i64,         arr(i64, 4), arr(i64, 4), arr(i64, 4), arr(i64, 4),
              arr(i64, 4), arr(i64, 3), f32,         i64,         ptr,
              arr(i64, 1), arr(capture, ::attn::kMaxCaptures)},
        "attn_kernel_args");
    // attn_backward_args: the forward's args, 5 pointers, strides of dO (4),
    // dLSE (3), dQ, dK, dV (4 each), then dM and its strides (4), then the
    // captures' gradients and their row strides.
    backwardArgs = llvm::StructType::create(
        ctx,
        {args, ptr, ptr, ptr, ptr, ptr, arr(i64, 4), arr(i64, 3), arr(i64, 4),
         arr(i64, 4), arr(i64, 4), ptr, arr(i64, 4),
         arr(ptr, ::attn::kMaxCaptures), arr(i64, ::attn::kMaxCaptures)},
        "attn_backward_args");
    // attn_linear_args: Q, K, V, O, S0, z0, S1, z1, 5 sizes, strides of Q,
    // K, V, O (4 each), S0 (4), z0 (3), S1 (4), z1 (3).
    linearArgs = llvm::StructType::create(
        ctx, {ptr,         ptr,         ptr,         ptr,         ptr,
              ptr,         ptr,         ptr,         i64,         i64,
              i64,         i64,         i64,         arr(i64, 4), arr(i64, 4),
              arr(i64, 4), arr(i64, 4), arr(i64, 4), arr(i64, 3), arr(i64, 4),
              arr(i64, 3)},
        "attn_linear_args");
    // attn_linear_backward_args: Q, K, V, O, dO, S, z, dS1, dz1, dQ, dK, dV,
    // dS0, dz0, 5 sizes, then each tensor's strides.
    linearBackwardArgs = llvm::StructType::create(
        ctx, {ptr,         ptr,         ptr,         ptr,         ptr,
              ptr,         ptr,         ptr,         ptr,         ptr,
              ptr,         ptr,         ptr,         ptr,         i64,
              i64,         i64,         i64,         i64,         arr(i64, 4),
              arr(i64, 4), arr(i64, 4), arr(i64, 4), arr(i64, 4), arr(i64, 4),
              arr(i64, 3), arr(i64, 4), arr(i64, 3), arr(i64, 4), arr(i64, 4),
              arr(i64, 4), arr(i64, 4), arr(i64, 3)},
        "attn_linear_backward_args");
    // attn_additive_args: 9 pointers, 3 sizes, then each tensor's strides.
    additiveArgs = llvm::StructType::create(
        ctx, {ptr,         ptr,         ptr,         ptr,         ptr,
              ptr,         ptr,         ptr,         ptr,         i64,
              i64,         i64,         arr(i64, 3), arr(i64, 3), arr(i64, 3),
              arr(i64, 2), arr(i64, 2), arr(i64, 1), arr(i64, 3), arr(i64, 3),
              arr(i64, 3)},
        "attn_additive_args");
    // attn_additive_backward_args: 12 pointers, 4 sizes, then each tensor's
    // strides.
    additiveBackwardArgs = llvm::StructType::create(
        ctx, {ptr,         ptr,         ptr,         ptr,         ptr,
              ptr,         ptr,         ptr,         ptr,         ptr,
              ptr,         ptr,         i64,         i64,         i64,
              i64,         arr(i64, 3), arr(i64, 3), arr(i64, 3), arr(i64, 2),
              arr(i64, 2), arr(i64, 1), arr(i64, 3), arr(i64, 3), arr(i64, 3),
              arr(i64, 4), arr(i64, 4), arr(i64, 3)},
        "attn_additive_backward_args");
    // attn_mha_args: 11 pointers, 3 sizes, then each tensor's strides.
    mhaArgs = llvm::StructType::create(
        ctx, {ptr,         ptr,         ptr,         ptr,         ptr,
              ptr,         ptr,         ptr,         ptr,         ptr,
              ptr,         i64,         i64,         i64,         arr(i64, 3),
              arr(i64, 3), arr(i64, 3), arr(i64, 2), arr(i64, 2), arr(i64, 2),
              arr(i64, 1), arr(i64, 2), arr(i64, 1), arr(i64, 4), arr(i64, 3)},
        "attn_mha_args");
    desc = llvm::StructType::create(
        ctx,
        {i32, i32, ptr,         i32, i32, arr(i32, 3), i32, i32, i32, i64, i64,
         i64, i64, arr(i64, 5), i64, f32, f32,         ptr, ptr, ptr, ptr, i32,
         ptr, ptr, ptr,         ptr, ptr, i32,         i32, ptr, ptr, i32, i32,
         i32, i32, ptr,         ptr, ptr, i32,         i32, f32, i32, ptr, ptr,
         i64, i64, i32,         ptr, ptr, i64,         i64, i64, i64, i32, i32,
         ptr, ptr, i64,         i64, i32, i32,         ptr, ptr, ptr, ptr},
        "attn_kernel_desc");
    gpuKernel = llvm::StructType::create(
        ctx, {ptr, i32, ptr, i64, ptr, i32, i32, i32}, "attn_gpu_kernel");
    library = llvm::StructType::create(ctx, {i64, i32, i32, ptr, ptr},
                                       "attn_library");
  }
};

enum ArgField : unsigned {
  kQuery = 0,
  kKey,
  kValue,
  kMask,
  kOutput,
  kLse,
  kBatch,
  kHeadsQ,
  kHeadsKv,
  kSeqQ,
  kSeqK,
  kQueryStrides,
  kKeyStrides,
  kValueStrides,
  kMaskStrides,
  kOutputStrides,
  kLseStrides,
  kDropoutP,
  kDropoutSeed,
  kSinks,
  kSinksStrides,
  kCaptures
};

enum BackwardArgField : unsigned {
  kForward = 0,
  kGradOutput,
  kGradLse,
  kGradQuery,
  kGradKey,
  kGradValue,
  kGradOutputStrides,
  kGradLseStrides,
  kGradQueryStrides,
  kGradKeyStrides,
  kGradValueStrides,
  kGradMask,
  kGradMaskStrides,
  kGradCaptures,
  kGradCaptureRowStrides
};

/// The memref descriptors of the captured tensors in `args` (an
/// attn_kernel_args), each with its rank's sizes and strides.
void captureMemrefs(
    llvm::IRBuilder<> &b, const AbiTypes &types, llvm::Value *args,
    const ::attn::KernelSpec &spec,
    llvm::function_ref<void(llvm::Value *, llvm::Value *,
                            ArrayRef<llvm::Value *>, ArrayRef<llvm::Value *>)>
        descriptor) {
  llvm::Value *captures = b.CreateStructGEP(types.args, args, kCaptures);
  llvm::Type *array = types.args->getElementType(kCaptures);
  for (auto [index, capture] : llvm::enumerate(spec.captures)) {
    llvm::Value *at = b.CreateConstInBoundsGEP2_32(array, captures, 0, index);
    auto field = [&](unsigned f, unsigned d) {
      llvm::Value *fieldAt = b.CreateStructGEP(types.capture, at, f);
      return b.CreateLoad(types.i64,
                          b.CreateConstInBoundsGEP2_32(
                              types.capture->getElementType(f), fieldAt, 0, d));
    };
    SmallVector<llvm::Value *> sizes, strides;
    for (int d = 0; d < capture.rank; ++d) {
      sizes.push_back(field(1, d));
      strides.push_back(field(2, d));
    }
    llvm::Value *data =
        b.CreateLoad(types.ptr, b.CreateStructGEP(types.capture, at, 0));
    descriptor(data, b.getInt64(0), sizes, strides);
  }
}

/// The end of every entry point: calls `impl` on `callArgs` (a run's also
/// on its range, the entry point's last two parameters), returning what a
/// work-items count returns, and makes `impl` internal.
llvm::Function *callAndReturn(llvm::IRBuilder<> &b, llvm::Function *fn,
                              llvm::Function *impl,
                              SmallVectorImpl<llvm::Value *> &callArgs,
                              bool isRun) {
  if (isRun) {
    callArgs.push_back(fn->getArg(fn->arg_size() - 2));
    callArgs.push_back(fn->getArg(fn->arg_size() - 1));
    b.CreateCall(impl, callArgs);
    b.CreateRetVoid();
  } else {
    b.CreateRet(b.CreateCall(impl, callArgs));
  }
  impl->setLinkage(llvm::GlobalValue::InternalLinkage);
  return fn;
}

/// Which entry point: the kernel's own, one phase of its key split
/// (attn-split-keys), which also takes the split count and the workspace,
/// or the filling of its block table (attn-block-table), which takes Q, K
/// and the captures of the kernel's arguments.
enum class Phase { Whole, Partial, Merge, BlockTable };

/// Emits `<name>[_partial|_merge]_run` or `..._work_items`: unpack the
/// argument struct into memref descriptors and call the MLIR function
/// `impl`. The split phases take `(args, splits[, workspace, begin, end])`.
/// A kernel with a key split (`split`) is its partial phase: its own entry
/// points run it with one range and a scratch row for the workspace, and
/// its partial entry points with a scratch row for O and LSE (strides 0:
/// every tile writes the same row, on the calling thread's stack).
llvm::Function *emitEntryPoint(llvm::Module &module, const AbiTypes &types,
                               const ::attn::KernelSpec &spec,
                               llvm::Function *impl, bool isRun, bool split,
                               Phase phase = Phase::Whole) {
  llvm::LLVMContext &ctx = module.getContext();
  bool phased = phase == Phase::Partial || phase == Phase::Merge;
  SmallVector<llvm::Type *> params = {types.ptr};
  if (phased)
    params.push_back(types.i64);
  if (phased && isRun)
    params.push_back(types.ptr);
  if (isRun)
    params.append({types.i64, types.i64});
  llvm::FunctionType *type = llvm::FunctionType::get(
      isRun ? llvm::Type::getVoidTy(ctx) : types.i64, params, false);
  const char *prefix = phase == Phase::Partial      ? "_partial"
                       : phase == Phase::Merge      ? "_merge"
                       : phase == Phase::BlockTable ? "_block_table"
                                                    : "";
  auto *fn = llvm::Function::Create(
      type, llvm::Function::ExternalLinkage,
      spec.name + prefix + (isRun ? "_run" : "_work_items"), module);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  llvm::Value *args = fn->getArg(0);

  auto load = [&](unsigned field, llvm::Type *t) {
    return b.CreateLoad(t, b.CreateStructGEP(types.args, args, field));
  };
  auto loadStride = [&](unsigned field, unsigned index) {
    llvm::Value *array = b.CreateStructGEP(types.args, args, field);
    return b.CreateLoad(
        types.i64, b.CreateConstInBoundsGEP2_32(
                       types.args->getElementType(field), array, 0, index));
  };
  llvm::Value *batch = load(kBatch, types.i64),
              *headsQ = load(kHeadsQ, types.i64),
              *headsKv = load(kHeadsKv, types.i64),
              *seqQ = load(kSeqQ, types.i64), *seqK = load(kSeqK, types.i64);
  llvm::Value *d = b.getInt64(spec.headDim), *dv = b.getInt64(spec.valueDim);
  llvm::Value *zero = b.getInt64(0), *one = b.getInt64(1);

  // One scratch row: Dv + 1 floats stand for O and LSE (Dv elements of at
  // most 4 bytes, then one f32), Dv + 2 for the workspace's acc, max, sum.
  llvm::Value *scratch = nullptr;
  if (split && isRun && (phase == Phase::Whole || phase == Phase::Partial)) {
    auto *alloca =
        b.CreateAlloca(llvm::ArrayType::get(types.f32, spec.valueDim + 2));
    alloca->setAlignment(llvm::Align(64));
    scratch = alloca;
  }

  SmallVector<llvm::Value *> callArgs;
  auto descriptor = [&](llvm::Value *pointer, llvm::Value *offset,
                        ArrayRef<llvm::Value *> sizes,
                        ArrayRef<llvm::Value *> strides) {
    callArgs.push_back(pointer); // allocated
    callArgs.push_back(pointer); // aligned
    callArgs.push_back(offset);
    callArgs.append(sizes.begin(), sizes.end());
    callArgs.append(strides.begin(), strides.end());
  };
  /// A tensor of the call; on the scratch row (`row` = the offset of its
  /// first element there) for the outputs of a partial phase's split run.
  auto memref = [&](unsigned pointerField, unsigned strideField,
                    ArrayRef<llvm::Value *> sizes, int64_t row = -1) {
    SmallVector<llvm::Value *> strides;
    if (phase == Phase::Partial && scratch && row >= 0) {
      strides.assign(sizes.size(), zero);
      if (sizes.size() == 4)
        strides.back() = one;
      descriptor(scratch, b.getInt64(row), sizes, strides);
      return;
    }
    for (unsigned i = 0; i < sizes.size(); ++i)
      strides.push_back(loadStride(strideField, i));
    descriptor(load(pointerField, types.ptr), zero, sizes, strides);
  };
  memref(kQuery, kQueryStrides, {batch, headsQ, seqQ, d});
  memref(kKey, kKeyStrides, {batch, headsKv, seqK, d});
  if (phase == Phase::BlockTable) {
    // @<f>_block_table(Q, K, captures...): attn-block-table.
    captureMemrefs(b, types, args, spec, descriptor);
    return callAndReturn(b, fn, impl, callArgs, isRun);
  }
  if (!spec.weights)
    memref(kValue, kValueStrides, {batch, headsKv, seqK, dv});
  if (spec.mask != ::attn::MaskKind::None)
    memref(kMask, kMaskStrides, {batch, headsQ, seqQ, seqK});
  captureMemrefs(b, types, args, spec, descriptor);
  if (spec.sinks)
    memref(kSinks, kSinksStrides, {headsQ});
  if (spec.weights) {
    // The LSE it reads, then W [B, Hq, Sq, Sk] f32 in `output`.
    if (spec.lse)
      memref(kLse, kLseStrides, {batch, headsQ, seqQ});
    memref(kOutput, kOutputStrides, {batch, headsQ, seqQ, seqK});
  } else {
    // O's elements are at most 4 bytes: Dv floats' room holds its row.
    memref(kOutput, kOutputStrides, {batch, headsQ, seqQ, dv}, 0);
    if (spec.lse)
      memref(kLse, kLseStrides, {batch, headsQ, seqQ}, spec.valueDim);
  }
  if (split) {
    // The workspace (kernel_abi.h): acc [B, Hq, Sq, splits, Dv], then max
    // and sum [B, Hq, Sq, splits], f32, dense. The kernel's own entry
    // points take one range and the scratch row; counting work items
    // reads no tensor and passes no workspace.
    llvm::Value *nullWorkspace = llvm::ConstantPointerNull::get(
        llvm::cast<llvm::PointerType>(types.ptr));
    llvm::Value *splits = phased ? fn->getArg(1) : one;
    if (!phased) {
      llvm::Value *row = scratch ? scratch : nullWorkspace;
      descriptor(row, zero, {batch, headsQ, seqQ, one, dv},
                 {zero, zero, zero, zero, one});
      for (int64_t offset : {spec.valueDim, spec.valueDim + 1})
        descriptor(row, b.getInt64(offset), {batch, headsQ, seqQ, one},
                   {zero, zero, zero, zero});
    } else {
      llvm::Value *workspace =
          isRun ? static_cast<llvm::Value *>(fn->getArg(2)) : nullWorkspace;
      llvm::Value *rowSplits = b.CreateMul(seqQ, splits);
      llvm::Value *headSplits = b.CreateMul(headsQ, rowSplits);
      llvm::Value *states = b.CreateMul(batch, headSplits);
      descriptor(workspace, zero, {batch, headsQ, seqQ, splits, dv},
                 {b.CreateMul(headSplits, dv), b.CreateMul(rowSplits, dv),
                  b.CreateMul(splits, dv), dv, one});
      llvm::Value *maxOffset = b.CreateMul(states, dv);
      for (llvm::Value *offset : {maxOffset, b.CreateAdd(maxOffset, states)})
        descriptor(workspace, offset, {batch, headsQ, seqQ, splits},
                   {headSplits, rowSplits, splits, one});
    }
    callArgs.push_back(splits);
  }
  if (spec.dropout) {
    callArgs.push_back(load(kDropoutP, types.f32));
    callArgs.push_back(load(kDropoutSeed, types.i64));
  }
  return callAndReturn(b, fn, impl, callArgs, isRun);
}

/// Emits a backward kernel's `<name>_run` or `<name>_work_items`: unpack
/// the attn_backward_args into memref descriptors in the order of its
/// function (Q, K, V, [mask], O, LSE, dO, [dLSE], dQ, dK, dV) and call
/// `impl`.
llvm::Function *emitBackwardEntryPoint(llvm::Module &module,
                                       const AbiTypes &types,
                                       const ::attn::KernelSpec &spec,
                                       llvm::Function *impl, bool isRun) {
  llvm::LLVMContext &ctx = module.getContext();
  SmallVector<llvm::Type *> params = {types.ptr};
  if (isRun)
    params.append({types.i64, types.i64});
  llvm::FunctionType *type = llvm::FunctionType::get(
      isRun ? llvm::Type::getVoidTy(ctx) : types.i64, params, false);
  auto *fn = llvm::Function::Create(
      type, llvm::Function::ExternalLinkage,
      spec.name + (isRun ? "_run" : "_work_items"), module);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  llvm::Value *args = fn->getArg(0);
  llvm::Value *forward = b.CreateStructGEP(types.backwardArgs, args, kForward);

  // A field of the forward's args (`inForward`) or of the backward's own.
  auto fieldAddress = [&](unsigned field, bool inForward) {
    return inForward ? b.CreateStructGEP(types.args, forward, field)
                     : b.CreateStructGEP(types.backwardArgs, args, field);
  };
  auto fieldType = [&](unsigned field, bool inForward) {
    return inForward ? types.args->getElementType(field)
                     : types.backwardArgs->getElementType(field);
  };
  auto load = [&](unsigned field, llvm::Type *t, bool inForward) {
    return b.CreateLoad(t, fieldAddress(field, inForward));
  };
  llvm::Value *batch = load(kBatch, types.i64, true),
              *headsQ = load(kHeadsQ, types.i64, true),
              *headsKv = load(kHeadsKv, types.i64, true),
              *seqQ = load(kSeqQ, types.i64, true),
              *seqK = load(kSeqK, types.i64, true);
  llvm::Value *d = b.getInt64(spec.headDim), *dv = b.getInt64(spec.valueDim);
  llvm::Value *zero = b.getInt64(0);

  SmallVector<llvm::Value *> callArgs;
  auto memref = [&](unsigned pointerField, unsigned strideField, bool inForward,
                    ArrayRef<llvm::Value *> sizes) {
    llvm::Value *pointer = load(pointerField, types.ptr, inForward);
    callArgs.append({pointer, pointer, zero});
    callArgs.append(sizes.begin(), sizes.end());
    llvm::Value *strides = fieldAddress(strideField, inForward);
    for (unsigned i = 0; i < sizes.size(); ++i)
      callArgs.push_back(b.CreateLoad(
          types.i64, b.CreateConstInBoundsGEP2_32(
                         fieldType(strideField, inForward), strides, 0, i)));
  };
  SmallVector<llvm::Value *> queryShape = {batch, headsQ, seqQ, d};
  SmallVector<llvm::Value *> keyShape = {batch, headsKv, seqK, d};
  SmallVector<llvm::Value *> valueShape = {batch, headsKv, seqK, dv};
  SmallVector<llvm::Value *> outputShape = {batch, headsQ, seqQ, dv};
  SmallVector<llvm::Value *> rowShape = {batch, headsQ, seqQ};
  memref(kQuery, kQueryStrides, true, queryShape);
  memref(kKey, kKeyStrides, true, keyShape);
  memref(kValue, kValueStrides, true, valueShape);
  if (spec.mask != ::attn::MaskKind::None)
    memref(kMask, kMaskStrides, true, {batch, headsQ, seqQ, seqK});
  captureMemrefs(b, types, forward, spec,
                 [&](llvm::Value *pointer, llvm::Value *offset,
                     ArrayRef<llvm::Value *> sizes,
                     ArrayRef<llvm::Value *> strides) {
                   callArgs.append({pointer, pointer, offset});
                   callArgs.append(sizes.begin(), sizes.end());
                   callArgs.append(strides.begin(), strides.end());
                 });
  memref(kOutput, kOutputStrides, true, outputShape);
  memref(kLse, kLseStrides, true, rowShape);
  memref(kGradOutput, kGradOutputStrides, false, outputShape);
  if (spec.lse)
    memref(kGradLse, kGradLseStrides, false, rowShape);
  memref(kGradQuery, kGradQueryStrides, false, queryShape);
  memref(kGradKey, kGradKeyStrides, false, keyShape);
  memref(kGradValue, kGradValueStrides, false, valueShape);
  if (spec.gradMask)
    memref(kGradMask, kGradMaskStrides, false, {batch, headsQ, seqQ, seqK});
  // Capture n's gradient: rows of its elements per work item, viewed as
  // [B, Hkv, <the capture's sizes>] (the capture's own sizes, row-major in
  // a row).
  for (auto [number, capture] : llvm::enumerate(spec.captures)) {
    if (!(spec.gradCaptures & (1u << number)))
      continue;
    auto element = [&](unsigned field, unsigned index) {
      return b.CreateConstInBoundsGEP2_32(
          types.backwardArgs->getElementType(field), fieldAddress(field, false),
          0, index);
    };
    llvm::Value *captureAt =
        b.CreateConstInBoundsGEP2_32(types.args->getElementType(kCaptures),
                                     fieldAddress(kCaptures, true), 0, number);
    llvm::Value *captureSizes = b.CreateStructGEP(types.capture, captureAt, 1);
    SmallVector<llvm::Value *> sizes = {batch, headsKv};
    for (int d = 0; d < capture.rank; ++d)
      sizes.push_back(b.CreateLoad(
          types.i64,
          b.CreateConstInBoundsGEP2_32(types.capture->getElementType(1),
                                       captureSizes, 0, d)));
    SmallVector<llvm::Value *> strides(sizes.size());
    llvm::Value *step = b.getInt64(1);
    for (size_t d = sizes.size(); d-- > 2;) {
      strides[d] = step;
      step = b.CreateMul(step, sizes[d]);
    }
    llvm::Value *row =
        b.CreateLoad(types.i64, element(kGradCaptureRowStrides, number));
    strides[1] = row;
    strides[0] = b.CreateMul(row, headsKv);
    llvm::Value *pointer =
        b.CreateLoad(types.ptr, element(kGradCaptures, number));
    callArgs.append({pointer, pointer, zero});
    callArgs.append(sizes.begin(), sizes.end());
    callArgs.append(strides.begin(), strides.end());
  }
  if (spec.dropout) {
    callArgs.push_back(load(kDropoutP, types.f32, true));
    callArgs.push_back(load(kDropoutSeed, types.i64, true));
  }
  return callAndReturn(b, fn, impl, callArgs, isRun);
}

/// The tensors of an argument struct laid out as pointers, then sizes, then
/// each tensor's strides (attn_linear_args, attn_additive_args): tensor `t`
/// (the pointer in field t) has its strides in field `strideBase + t`.
struct StructTensors {
  llvm::StructType *type;
  unsigned sizeBase, strideBase;
};

/// Emits `<name>_run` (`isRun`) or `<name>_work_items` taking a pointer to a
/// StructTensors struct: `unpack(size, memref)` calls memref(t, sizes) for
/// each tensor of `impl` in order, with the call's sizes (`size(i)`: size
/// field `sizeBase + i`); the tensors become memref descriptors.
llvm::Function *emitStructEntryPoint(
    llvm::Module &module, const AbiTypes &types, const StructTensors &layout,
    const std::string &name, llvm::Function *impl, bool isRun,
    function_ref<void(function_ref<llvm::Value *(unsigned)>,
                      function_ref<void(unsigned, ArrayRef<llvm::Value *>)>)>
        unpack) {
  llvm::LLVMContext &ctx = module.getContext();
  SmallVector<llvm::Type *> params = {types.ptr};
  if (isRun)
    params.append({types.i64, types.i64});
  llvm::FunctionType *type = llvm::FunctionType::get(
      isRun ? llvm::Type::getVoidTy(ctx) : types.i64, params, false);
  auto *fn =
      llvm::Function::Create(type, llvm::Function::ExternalLinkage,
                             name + (isRun ? "_run" : "_work_items"), module);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  llvm::Value *args = fn->getArg(0);
  auto load = [&](unsigned field, llvm::Type *t) {
    return b.CreateLoad(t, b.CreateStructGEP(layout.type, args, field));
  };
  SmallVector<llvm::Value *> callArgs;
  auto size = [&](unsigned i) { return load(layout.sizeBase + i, types.i64); };
  auto memref = [&](unsigned t, ArrayRef<llvm::Value *> sizes) {
    llvm::Value *pointer = load(t, types.ptr);
    callArgs.append({pointer, pointer, b.getInt64(0)});
    callArgs.append(sizes.begin(), sizes.end());
    unsigned field = layout.strideBase + t;
    llvm::Value *strides = b.CreateStructGEP(layout.type, args, field);
    for (unsigned i = 0; i < sizes.size(); ++i)
      callArgs.push_back(b.CreateLoad(
          types.i64, b.CreateConstInBoundsGEP2_32(
                         layout.type->getElementType(field), strides, 0, i)));
  };
  // The sizes are loaded once, before the tensors.
  SmallVector<llvm::Value *> sizes;
  unpack(
      [&](unsigned i) -> llvm::Value * {
        while (sizes.size() <= i)
          sizes.push_back(size(sizes.size()));
        return sizes[i];
      },
      memref);
  return callAndReturn(b, fn, impl, callArgs, isRun);
}

/// A linear attention kernel's entry point: attn_linear_args unpacked in
/// the order of its function (Q, K, V, [S0, z0], O, [S1, z1]).
llvm::Function *emitLinearEntryPoint(llvm::Module &module,
                                     const AbiTypes &types,
                                     const ::attn::KernelSpec &spec,
                                     llvm::Function *impl, bool isRun) {
  enum : unsigned { kQ, kK, kV, kO, kS0, kZ0, kS1, kZ1 };
  return emitStructEntryPoint(
      module, types, {types.linearArgs, 8, 13}, spec.name, impl, isRun,
      [&](function_ref<llvm::Value *(unsigned)> size,
          function_ref<void(unsigned, ArrayRef<llvm::Value *>)> memref) {
        llvm::Value *batch = size(0), *headsQ = size(1), *headsKv = size(2),
                    *seqQ = size(3), *seqK = size(4);
        llvm::Value *d = llvm::ConstantInt::get(types.i64, spec.headDim);
        llvm::Value *dv = llvm::ConstantInt::get(types.i64, spec.valueDim);
        memref(kQ, {batch, headsQ, seqQ, d});
        memref(kK, {batch, headsKv, seqK, d});
        memref(kV, {batch, headsKv, seqK, dv});
        if (spec.linearState) {
          memref(kS0, {batch, headsKv, d, dv});
          memref(kZ0, {batch, headsKv, d});
        }
        memref(kO, {batch, headsQ, seqQ, dv});
        if (spec.linearState) {
          memref(kS1, {batch, headsKv, d, dv});
          memref(kZ1, {batch, headsKv, d});
        }
      });
}

/// A linear attention backward kernel's entry point:
/// attn_linear_backward_args unpacked in the order of its function (Q, K,
/// V, O, dO, S, z, [dS1, dz1], dQ, dK, dV, [dS0, dz0]).
llvm::Function *emitLinearBackwardEntryPoint(llvm::Module &module,
                                             const AbiTypes &types,
                                             const ::attn::KernelSpec &spec,
                                             llvm::Function *impl, bool isRun) {
  enum : unsigned {
    kQ,
    kK,
    kV,
    kO,
    kDo,
    kS,
    kZ,
    kDs1,
    kDz1,
    kDq,
    kDk,
    kDv,
    kDs0,
    kDz0
  };
  return emitStructEntryPoint(
      module, types, {types.linearBackwardArgs, 14, 19}, spec.name, impl, isRun,
      [&](function_ref<llvm::Value *(unsigned)> size,
          function_ref<void(unsigned, ArrayRef<llvm::Value *>)> memref) {
        llvm::Value *batch = size(0), *headsQ = size(1), *headsKv = size(2),
                    *seqQ = size(3), *seqK = size(4);
        llvm::Value *d = llvm::ConstantInt::get(types.i64, spec.headDim);
        llvm::Value *dv = llvm::ConstantInt::get(types.i64, spec.valueDim);
        SmallVector<llvm::Value *> rowsD = {batch, headsQ, seqQ, d},
                                   rowsDv = {batch, headsQ, seqQ, dv},
                                   keysD = {batch, headsKv, seqK, d},
                                   keysDv = {batch, headsKv, seqK, dv},
                                   state = {batch, headsKv, d, dv},
                                   normalizer = {batch, headsKv, d};
        memref(kQ, rowsD);
        memref(kK, keysD);
        memref(kV, keysDv);
        memref(kO, rowsDv);
        memref(kDo, rowsDv);
        memref(kS, state);
        memref(kZ, normalizer);
        if (spec.linearState) {
          memref(kDs1, state);
          memref(kDz1, normalizer);
        }
        memref(kDq, rowsD);
        memref(kDk, keysD);
        memref(kDv, keysDv);
        if (spec.linearState) {
          memref(kDs0, state);
          memref(kDz0, normalizer);
        }
      });
}

/// An additive attention kernel's entry point: attn_additive_args unpacked
/// in the order of its function (Q, K, V, W_q, W_k, v, [mask], O, [W]).
llvm::Function *emitAdditiveEntryPoint(llvm::Module &module,
                                       const AbiTypes &types,
                                       const ::attn::KernelSpec &spec,
                                       llvm::Function *impl, bool isRun) {
  enum : unsigned { kQ, kK, kV, kWq, kWk, kVa, kMask, kO, kW };
  return emitStructEntryPoint(
      module, types, {types.additiveArgs, 9, 12}, spec.name, impl, isRun,
      [&](function_ref<llvm::Value *(unsigned)> size,
          function_ref<void(unsigned, ArrayRef<llvm::Value *>)> memref) {
        llvm::Value *batch = size(0), *rows = size(1), *keys = size(2);
        auto c = [&](int64_t v) {
          return llvm::ConstantInt::get(types.i64, v);
        };
        memref(kQ, {batch, rows, c(spec.queryDim)});
        memref(kK, {batch, keys, c(spec.headDim)});
        memref(kV, {batch, keys, c(spec.valueDim)});
        memref(kWq, {c(spec.attnDim), c(spec.queryDim)});
        memref(kWk, {c(spec.attnDim), c(spec.headDim)});
        memref(kVa, {c(spec.attnDim)});
        if (spec.mask != ::attn::MaskKind::None)
          memref(kMask, {batch, rows, keys});
        memref(kO, {batch, rows, c(spec.valueDim)});
        if (spec.additiveWeights)
          memref(kW, {batch, rows, keys});
      });
}

/// An additive attention backward kernel's entry point:
/// attn_additive_backward_args unpacked in the order of its function (Q,
/// K, V, W_q, W_k, v, dO, [mask], grad_qp, grad_kp, grad_values, grad_v).
llvm::Function *emitAdditiveBackwardEntryPoint(llvm::Module &module,
                                               const AbiTypes &types,
                                               const ::attn::KernelSpec &spec,
                                               llvm::Function *impl,
                                               bool isRun) {
  enum : unsigned {
    kQ,
    kK,
    kV,
    kWq,
    kWk,
    kVa,
    kDo,
    kMask,
    kDqp,
    kDkp,
    kDv,
    kDva
  };
  return emitStructEntryPoint(
      module, types, {types.additiveBackwardArgs, 12, 16}, spec.name, impl,
      isRun,
      [&](function_ref<llvm::Value *(unsigned)> size,
          function_ref<void(unsigned, ArrayRef<llvm::Value *>)> memref) {
        llvm::Value *batch = size(0), *rows = size(1), *keys = size(2),
                    *parts = size(3);
        auto c = [&](int64_t v) {
          return llvm::ConstantInt::get(types.i64, v);
        };
        memref(kQ, {batch, rows, c(spec.queryDim)});
        memref(kK, {batch, keys, c(spec.headDim)});
        memref(kV, {batch, keys, c(spec.valueDim)});
        memref(kWq, {c(spec.attnDim), c(spec.queryDim)});
        memref(kWk, {c(spec.attnDim), c(spec.headDim)});
        memref(kVa, {c(spec.attnDim)});
        memref(kDo, {batch, rows, c(spec.valueDim)});
        if (spec.mask != ::attn::MaskKind::None)
          memref(kMask, {batch, rows, keys});
        memref(kDqp, {batch, rows, c(spec.attnDim)});
        memref(kDkp, {batch, parts, keys, c(spec.attnDim)});
        memref(kDv, {batch, parts, keys, c(spec.valueDim)});
        memref(kDva, {batch, parts, c(spec.attnDim)});
      });
}

/// A multi-head attention layer's entry point: attn_mha_args unpacked in
/// the order of its function (query, key, value, W_q, W_k, W_v, [in_bias],
/// W_o, [out_bias], [mask], output).
llvm::Function *emitMhaEntryPoint(llvm::Module &module, const AbiTypes &types,
                                  const ::attn::KernelSpec &spec,
                                  llvm::Function *impl, bool isRun) {
  enum : unsigned { kQ, kK, kV, kWq, kWk, kWv, kBin, kWo, kBo, kMask, kY };
  return emitStructEntryPoint(
      module, types, {types.mhaArgs, 11, 14}, spec.name, impl, isRun,
      [&](function_ref<llvm::Value *(unsigned)> size,
          function_ref<void(unsigned, ArrayRef<llvm::Value *>)> memref) {
        llvm::Value *batch = size(0), *rows = size(1), *keys = size(2);
        auto c = [&](int64_t v) {
          return llvm::ConstantInt::get(types.i64, v);
        };
        int64_t e = spec.embedDim;
        memref(kQ, {batch, rows, c(e)});
        memref(kK, {batch, keys, c(spec.keyEmbedDim)});
        memref(kV, {batch, keys, c(spec.valueEmbedDim)});
        memref(kWq, {c(e), c(e)});
        memref(kWk, {c(e), c(spec.keyEmbedDim)});
        memref(kWv, {c(e), c(spec.valueEmbedDim)});
        if (spec.mhaBias)
          memref(kBin, {c(3 * e)});
        memref(kWo, {c(e), c(e)});
        if (spec.mhaBias)
          memref(kBo, {c(e)});
        // The mask's sizes as the kernel reads them: [B, H, Sq, Sk], a
        // broadcast dim having stride 0.
        if (spec.mask != ::attn::MaskKind::None)
          memref(kMask, {batch, c(spec.mhaHeads), rows, keys});
        memref(kY, {batch, rows, c(e)});
      });
}

llvm::Constant *cString(llvm::Module &module, llvm::StringRef text,
                        const llvm::Twine &name) {
  llvm::LLVMContext &ctx = module.getContext();
  llvm::Constant *data = llvm::ConstantDataArray::getString(ctx, text);
  auto *global =
      new llvm::GlobalVariable(module, data->getType(), true,
                               llvm::GlobalValue::PrivateLinkage, data, name);
  global->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
  return global;
}

/// Where a kernel runs: the CPU (its entry points) or a CUDA GPU (its
/// attn_gpu_kernel record).
struct KernelCode {
  llvm::Function *workItems = nullptr, *run = nullptr;
  /// The key split's phases (attn-split-keys), where the kernel has them.
  llvm::Function *partialWorkItems = nullptr, *partialRun = nullptr;
  llvm::Function *mergeWorkItems = nullptr, *mergeRun = nullptr;
  /// A backward kernel's entry points (then workItems and run are null).
  llvm::Function *backwardWorkItems = nullptr, *backwardRun = nullptr;
  /// A linear attention kernel's (then workItems and run are null).
  llvm::Function *linearWorkItems = nullptr, *linearRun = nullptr;
  /// A linear attention backward kernel's (likewise).
  llvm::Function *linearBackwardWorkItems = nullptr,
                 *linearBackwardRun = nullptr;
  /// An additive attention kernel's (likewise).
  llvm::Function *additiveWorkItems = nullptr, *additiveRun = nullptr;
  /// An additive attention backward kernel's (likewise).
  llvm::Function *additiveBackwardWorkItems = nullptr,
                 *additiveBackwardRun = nullptr;
  /// A multi-head attention layer's (likewise).
  llvm::Function *mhaWorkItems = nullptr, *mhaRun = nullptr;
  /// The filling of a forward kernel's block table (attn-block-table).
  llvm::Function *blockTableWorkItems = nullptr, *blockTableRun = nullptr;
  llvm::Constant *gpu = nullptr;
};

/// The kernel's attn_capture_desc array, or null without captures.
llvm::Constant *captureDescs(llvm::Module &module, const AbiTypes &types,
                             const ::attn::KernelSpec &spec) {
  if (spec.captures.empty())
    return llvm::ConstantPointerNull::get(
        llvm::cast<llvm::PointerType>(types.ptr));
  SmallVector<llvm::Constant *> descs;
  for (const ::attn::CaptureSpec &capture : spec.captures) {
    SmallVector<llvm::Constant *> sizes;
    for (int64_t size : capture.staticSizes)
      sizes.push_back(llvm::ConstantInt::get(types.i64, size));
    descs.push_back(llvm::ConstantStruct::get(
        types.captureDesc,
        {llvm::ConstantInt::get(types.i32, static_cast<int>(capture.type)),
         llvm::ConstantInt::get(types.i32, capture.rank),
         llvm::ConstantArray::get(llvm::ArrayType::get(types.i64, 4),
                                  sizes)}));
  }
  auto *arrayType = llvm::ArrayType::get(types.captureDesc, descs.size());
  return new llvm::GlobalVariable(
      module, arrayType, /*isConstant=*/true,
      llvm::GlobalValue::PrivateLinkage,
      llvm::ConstantArray::get(arrayType, descs), spec.name + ".captures");
}

llvm::GlobalVariable *emitDescriptor(llvm::Module &module,
                                     const AbiTypes &types,
                                     const ::attn::KernelSpec &spec,
                                     const ::attn::ResolvedTarget &target,
                                     int64_t blockQ, const KernelCode &code) {
  auto i32 = [&](int64_t v) { return llvm::ConstantInt::get(types.i32, v); };
  auto i64 = [&](int64_t v) { return llvm::ConstantInt::get(types.i64, v); };
  auto f32 = [&](float v) { return llvm::ConstantFP::get(types.f32, v); };
  auto arr = [&](llvm::Type *elem, ArrayRef<llvm::Constant *> values) {
    return llvm::ConstantArray::get(llvm::ArrayType::get(elem, values.size()),
                                    values);
  };
  auto orNull = [&](llvm::Constant *c) -> llvm::Constant * {
    return c ? c
             : llvm::ConstantPointerNull::get(
                   llvm::cast<llvm::PointerType>(types.ptr));
  };
  int alignment = 0;
  if (spec.usesDiagonal())
    alignment = spec.alignment == ::attn::Alignment::TopLeft ? 1 : 2;
  SmallVector<llvm::Constant *> sizes;
  for (int64_t size : spec.staticSizes)
    sizes.push_back(i64(size));
  llvm::Constant *fields[] = {
      i32(kAbiVersion),
      i32(module.getDataLayout().getTypeAllocSize(types.desc)),
      cString(module, spec.name, spec.name + ".name"),
      i32(static_cast<int>(spec.elementType)),
      i32(static_cast<int>(spec.mask)),
      arr(types.i32, {i32(spec.maskBroadcast[0]), i32(spec.maskBroadcast[1]),
                      i32(spec.maskBroadcast[2])}),
      i32(spec.causal),
      i32(alignment),
      i32(spec.lse || spec.backward),
      i64(spec.windowLeft ? *spec.windowLeft : -1),
      i64(spec.windowRight ? *spec.windowRight : -1),
      i64(spec.headDim),
      i64(spec.valueDim),
      arr(types.i64, sizes),
      i64(blockQ),
      f32(spec.effectiveScale()),
      f32(spec.softcap ? *spec.softcap : 0.0f),
      cString(module, target.cpu, spec.name + ".cpu"),
      cString(module, target.features, spec.name + ".features"),
      orNull(code.workItems),
      orNull(code.run),
      i32(code.gpu ? 1 : 0),
      orNull(code.gpu),
      orNull(code.partialWorkItems),
      orNull(code.partialRun),
      orNull(code.mergeWorkItems),
      orNull(code.mergeRun),
      i32(spec.linearBackward     ? 7
          : spec.additiveBackward ? 6
          : spec.backward         ? 1
          : spec.weights          ? 2
          : spec.linear           ? 3
          : spec.additive         ? 4
          : spec.mha              ? 5
                                  : 0),
      i32(spec.backward && spec.lse),
      orNull(code.backwardWorkItems),
      orNull(code.backwardRun),
      i32(spec.dropout ? 2 : 0), // 16 keep bits a position
      i32(spec.sinks ? 1 : 0),
      i32(spec.gradMask ? 1 : 0),
      i32(static_cast<int64_t>(spec.captures.size())),
      captureDescs(module, types, spec),
      orNull(code.linearWorkItems),
      orNull(code.linearRun),
      i32(spec.linearState ? 1 : 0),
      i32(static_cast<int>(spec.featureMap)),
      f32(spec.linear ? spec.eps : 0.0f),
      i32(spec.linear ? spec.chunk : 0),
      orNull(code.additiveWorkItems),
      orNull(code.additiveRun),
      i64(spec.additive ? spec.queryDim : 0),
      i64(spec.additive ? spec.attnDim : 0),
      i32(spec.additive && spec.additiveWeights ? 1 : 0),
      orNull(code.mhaWorkItems),
      orNull(code.mhaRun),
      i64(spec.mha ? spec.embedDim : 0),
      i64(spec.mha ? spec.keyEmbedDim : 0),
      i64(spec.mha ? spec.valueEmbedDim : 0),
      i64(spec.mha ? spec.mhaHeads : 0),
      i32(spec.mha && spec.mhaBias ? 1 : 0),
      i32(spec.linear && spec.unnormalized ? 1 : 0),
      orNull(code.blockTableWorkItems),
      orNull(code.blockTableRun),
      i64(code.blockTableRun ? spec.blockTable[1] : 0),
      i64(code.blockTableRun ? spec.blockTable[2] : 0),
      i32(code.blockTableRun ? spec.blockTable[0] : -1),
      i32(spec.backward ? spec.gradCaptures : 0),
      orNull(code.additiveBackwardWorkItems),
      orNull(code.additiveBackwardRun),
      orNull(code.linearBackwardWorkItems),
      orNull(code.linearBackwardRun)};
  return new llvm::GlobalVariable(module, types.desc, /*isConstant=*/true,
                                  llvm::GlobalValue::ExternalLinkage,
                                  llvm::ConstantStruct::get(types.desc, fields),
                                  spec.name + "_desc");
}

void emitLibrary(llvm::Module &module, const AbiTypes &types,
                 ArrayRef<llvm::GlobalVariable *> descs,
                 const std::string &symbol) {
  SmallVector<llvm::Constant *> pointers(descs.begin(), descs.end());
  auto *tableType = llvm::ArrayType::get(types.ptr, pointers.size());
  auto *table = new llvm::GlobalVariable(
      module, tableType, true, llvm::GlobalValue::PrivateLinkage,
      llvm::ConstantArray::get(tableType, pointers), "attn_kernel_table");
  llvm::Constant *fields[] = {
      llvm::ConstantInt::get(types.i64, kLibraryMagic),
      llvm::ConstantInt::get(types.i32, kAbiVersion),
      llvm::ConstantInt::get(types.i32, pointers.size()), table,
      cString(module, ::attn::compilerVersion(), "attn.compiler_version")};
  new llvm::GlobalVariable(
      module, types.library, true, llvm::GlobalValue::ExternalLinkage,
      llvm::ConstantStruct::get(types.library, fields), symbol);
}

/// Whether `host` has vdpbf16ps for the CPU pipeline (AVX-512 BF16 with
/// 16 lanes); the kernel choice takes it where it pays.
bool hasBf16Dot(const ::attn::ResolvedTarget &host) {
  return host.vectorWidth == 16 && host.has("avx512bf16");
}

/// Whether `host` runs the amx micro-kernel: AMX tile multiplies of bf16,
/// with AVX-512 BF16 (whose dot product its blocks that a band cuts take).
bool hasAmx(const ::attn::ResolvedTarget &host) {
  return hasBf16Dot(host) && host.has("amx-tile") && host.has("amx-bf16");
}

/// What the kernel choices (lib/Transforms/KernelChoice.h) read of `host`
/// (with --emulate-amx, AMX as if it had it).
mlir::attn::CpuTarget cpuTarget(const ::attn::ResolvedTarget &host,
                                const ::attn::CompileOptions &options) {
  mlir::attn::CpuTarget target = mlir::attn::cpuTargetOf(
      host.cpu, host.vectorWidth,
      [&](llvm::StringRef feature) { return host.has(feature.str()); });
  target.amx |= options.emulateAmx && hasBf16Dot(host);
  return target;
}

/// The choices `options` fix for the CPU (the others are chosen).
mlir::attn::CpuKernelOverrides
cpuOverrides(const ::attn::CompileOptions &options) {
  mlir::attn::CpuKernelOverrides overrides;
  overrides.queryTile = options.queryTileSize;
  overrides.bandedQueryTile = options.bandedQueryTileSize;
  overrides.keyBlock = options.keyTileSize;
  overrides.rowBlock = options.rowBlock;
  overrides.laneRows = options.laneRows;
  overrides.decodeRows = ::attn::kCpuDecodeRows;
  return overrides;
}

/// Sets the CPU pipeline's options for `host`: the options' tile sizes,
/// else the defaults for the target's vector width and features.
void setCpuPipelineOptions(mlir::attn::CpuPipelineOptions &pipeline,
                           const ::attn::CompileOptions &options,
                           const ::attn::ResolvedTarget &host) {
  pipeline.queryTileSize = options.queryTileSize;
  pipeline.bandedQueryTileSize = options.bandedTileRows();
  pipeline.keyTileSize = options.keyTileSize > 0 ? options.keyTileSize : 128;
  pipeline.vectorWidth = host.vectorWidth;
  pipeline.rowBlock = options.rowBlock > 0 ? options.rowBlock : 2;
  pipeline.bandKeyStep = options.bandKeyStep;
  pipeline.prefetchDistance = options.prefetchDistance;
  pipeline.decodeRows = ::attn::kCpuDecodeRows;
  // Ops the lane-rows micro-kernel may take stay whole (see
  // buildAttnTilingPipeline).
  pipeline.laneRows =
      mlir::attn::cpuLaneRows(cpuTarget(host, options), cpuOverrides(options));
  // vdpbf16ps where the target has AVX-512 BF16 (the kernel choice takes
  // it where it pays; a --kernel may ask for it anyway), and vscalefps for
  // the softmax's exp where it has AVX-512F.
  pipeline.bf16Dot = hasBf16Dot(host);
  // The backward and weights ops have no #attn.kernel: their dot product
  // where the forward's pays (bf16DotPays: off Intel's cores, which issue
  // vdpbf16ps zmm about once in three cycles).
  pipeline.recomputeBf16Dot = cpuTarget(host, options).bf16Dot;
  pipeline.amx = hasAmx(host);
  pipeline.emulateAmx = options.emulateAmx;
  pipeline.avx512Exp = host.vectorWidth == 16 && host.has("avx512f");
  // Rounding to bf16 without an instruction for it: integer operations
  // rather than LLVM's library call per element.
  pipeline.bf16ByIntegers =
      !host.has("avx512bf16") && !host.has("avxneconvert");
}

/// What `--emit=mlir` shows and attn-opt then lowers the same way: the
/// choices are in the IR.
} // namespace

bool ::attn::chooseKernels(
    ModuleOp module, ArrayRef<::attn::KernelSpec> specs,
    const ::attn::CompileOptions &options,
    function_ref<mlir::attn::KernelAttr(mlir::attn::AttentionOp)> choose,
    std::string &error) {
  mlir::attn::KernelAttr given;
  if (!options.kernel.empty()) {
    std::string text = options.kernel;
    if (!llvm::StringRef(text).starts_with("#"))
      text = "#attn.kernel" + text;
    // The parser's or the attribute verifier's own words say what is wrong.
    std::string reason;
    {
      ScopedDiagnosticHandler collect(module.getContext(), [&](Diagnostic &d) {
        if (reason.empty())
          reason = d.str();
        return success();
      });
      given = llvm::dyn_cast_or_null<mlir::attn::KernelAttr>(
          parseAttribute(text, module.getContext()));
    }
    if (!given) {
      error = "--kernel '" + options.kernel +
              "' is not an #attn.kernel<micro_kernel, query_tile = N, "
              "key_block = N, ...> (see docs/Dialects/AttnDialect.md)";
      if (!reason.empty())
        error += ": " + reason;
      return false;
    }
  }
  // A mask_mod's causal band or window becomes the attributes first, so
  // that the choice (banded query tiles, the micro-kernel) sees them.
  // A multi-head layer's attn.attention is chosen like any other.
  PassManager bands(module.getContext());
  bands.addNestedPass<func::FuncOp>(mlir::attn::createAttnDecomposeMhaPass());
  bands.addPass(mlir::attn::createAttnBandFromMaskModPass());
  if (failed(bands.run(module))) {
    error = "internal error: attn-decompose-mha or attn-band-from-mask-mod "
            "failed";
    return false;
  }
  for (auto [spec, func] : llvm::zip(specs, module.getOps<func::FuncOp>())) {
    // Decoding kernels also get the key split's phases, for calls with
    // fewer GQA groups than threads.
    if (::attn::hasKeySplit(spec, options))
      func->setAttr(mlir::attn::kSplitKeysAttrName,
                    UnitAttr::get(module.getContext()));
    func.walk([&](mlir::attn::AttentionOp op) {
      op.setKernelAttr(given ? given : choose(op));
    });
  }
  return true;
}

namespace {

/// chooseKernels for a CPU `host`.
bool chooseCpuKernels(ModuleOp module, ArrayRef<::attn::KernelSpec> specs,
                      const ::attn::CompileOptions &options,
                      const ::attn::ResolvedTarget &host, std::string &error) {
  if (options.emulateAmx && !hasBf16Dot(host)) {
    error = "--emulate-amx needs a target with AVX-512 BF16 (the AMX kernel's "
            "blocks that a band cuts take its dot product); target '" +
            host.cpu + "' has not";
    return false;
  }
  return ::attn::chooseKernels(
      module, specs, options,
      [&](mlir::attn::AttentionOp op) {
        return mlir::attn::chooseCpuKernel(op, cpuTarget(host, options),
                                           cpuOverrides(options));
      },
      error);
}

/// An error where a kernel of `module` takes the amx micro-kernel (a
/// --kernel may ask for it) but the target cannot run it: LLVM would abort
/// on the tile intrinsics.
bool checkAmxKernels(ModuleOp module, const ::attn::CompileOptions &options,
                     const ::attn::ResolvedTarget &host, std::string &error) {
  bool amx = false;
  module.walk([&](mlir::attn::AttentionOp op) {
    if (mlir::attn::KernelAttr kernel = op.getKernelAttr())
      amx |= kernel.getMicroKernel() == mlir::attn::MicroKernel::amx;
  });
  if (!amx || hasAmx(host) || (options.emulateAmx && hasBf16Dot(host)))
    return true;
  error = "the amx micro-kernel needs a target with AMX (amx-tile, amx-bf16 "
          "and AVX-512 BF16: --target-cpu=sapphirerapids, or a host that has "
          "them); target '" +
          host.cpu +
          "' has not. --emulate-amx runs its tile operations as loops (for "
          "tests; needs AVX-512 BF16)";
  return false;
}

/// Each kernel's query rows per work item (its #attn.kernel's query tile),
/// which its descriptor records, in the module's order; 0 for a backward
/// kernel (a work item takes all rows of a GQA group) and a weights kernel
/// (whose rows are not the forward's tiles).
SmallVector<int64_t> chosenTileRows(ModuleOp module) {
  SmallVector<int64_t> rows;
  for (auto func : module.getOps<func::FuncOp>()) {
    int64_t tile = 0;
    func.walk([&](mlir::attn::AttentionOp op) {
      tile = op.getKernelAttr().getQueryTile();
    });
    rows.push_back(tile);
  }
  return rows;
}

//===----------------------------------------------------------------------===//
// LLVM optimization and code generation
//===----------------------------------------------------------------------===//

std::unique_ptr<llvm::TargetMachine>
createTargetMachine(const ::attn::ResolvedTarget &target, std::string &error) {
  mlir::attn::initializeNativeTarget();
  llvm::Triple triple(target.triple);
  const llvm::Target *t = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!t)
    return nullptr;
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> machine(t->createTargetMachine(
      triple, target.cpu, target.features, options, llvm::Reloc::PIC_,
      std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  if (!machine)
    error = "cannot create a target machine for " + target.triple + " " +
            target.cpu;
  return machine;
}

/// LLVM's O3 pipeline, with loop unrolling only when `unroll` (see
/// CompileOptions::llvmUnroll).
void optimize(llvm::Module &module, llvm::TargetMachine &machine, bool unroll) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopUnrolling = unroll;
  llvm::PassBuilder pb(&machine, tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm =
      pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(module, mam);
}

bool emitObjectFile(llvm::Module &module, llvm::TargetMachine &machine,
                    const std::string &path, std::string &error) {
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec, llvm::sys::fs::OF_None);
  if (ec) {
    error = "cannot write " + path + ": " + ec.message();
    return false;
  }
  llvm::legacy::PassManager pm;
  if (machine.addPassesToEmitFile(pm, out, nullptr,
                                  llvm::CodeGenFileType::ObjectFile)) {
    error = "the target cannot emit object files";
    return false;
  }
  pm.run(module);
  out.flush();
  return true;
}

bool linkSharedLibrary(const std::string &object, const std::string &output,
                       std::string &error) {
  llvm::ErrorOr<std::string> cc = llvm::sys::findProgramByName("cc");
  if (!cc) {
    error = "no C compiler driver (cc) on PATH to link a shared library; "
            "emit an object file instead (--emit=object)";
    return false;
  }
  llvm::SmallVector<llvm::StringRef, 6> argv = {*cc, "-shared", "-o", output,
                                                object};
#ifdef ATTN_COMPILER_RT_BUILTINS
  // The helpers the kernels call where the target lacks an instruction
  // (__truncsfbf2 for f32 -> bf16 without AVX-512 BF16): only those the
  // object needs are taken from the archive, with hidden visibility.
  if (llvm::sys::fs::exists(ATTN_COMPILER_RT_BUILTINS))
    argv.push_back(ATTN_COMPILER_RT_BUILTINS);
#endif
  std::string message;
  int status =
      llvm::sys::ExecuteAndWait(*cc, argv, std::nullopt, {}, 0, 0, &message);
  if (status != 0) {
    error = "linking " + output + " failed" +
            (message.empty() ? "" : ": " + message);
    return false;
  }
  return true;
}

} // namespace

namespace attn {

static bool writeFile(const std::string &path, llvm::StringRef bytes,
                      std::string &error) {
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec, llvm::sys::fs::OF_None);
  if (ec) {
    error = "cannot write " + path + ": " + ec.message();
    return false;
  }
  out << bytes;
  return true;
}

/// The host module of a GPU library: the image as a constant and one
/// descriptor per kernel pointing to its attn_gpu_kernel record.
static std::unique_ptr<llvm::Module>
gpuHostModule(llvm::LLVMContext &llvmCtx, const std::vector<KernelSpec> &specs,
              const CompileOptions &options, const GpuImage &image) {
  auto module = std::make_unique<llvm::Module>("attn_kernels", llvmCtx);
  AbiTypes types(llvmCtx);
  llvm::Constant *data = llvm::ConstantDataArray::getRaw(
      image.bytes, image.bytes.size(), llvm::Type::getInt8Ty(llvmCtx));
  auto *blob = new llvm::GlobalVariable(*module, data->getType(), true,
                                        llvm::GlobalValue::PrivateLinkage, data,
                                        "attn.gpu_image");
  blob->setAlignment(llvm::Align(16));
  ResolvedTarget target;
  target.cpu = image.arch;
  target.features = options.targetFeatures.empty()
                        ? defaultPtxFeatures(image.arch)
                        : options.targetFeatures;
  SmallVector<llvm::GlobalVariable *> descs;
  for (auto [spec, info] : llvm::zip(specs, image.kernels)) {
    auto i32 = [&](int64_t v) { return llvm::ConstantInt::get(types.i32, v); };
    llvm::Constant *fields[] = {
        cString(*module, image.arch, spec.name + ".arch"),
        i32(image.cubin ? 1 : 0),
        blob,
        llvm::ConstantInt::get(types.i64, image.bytes.size()),
        cString(*module, info.name, spec.name + ".entry"),
        i32(info.blockThreads),
        i32(info.blockRows),
        i32(info.sharedBytes)};
    auto *gpu = new llvm::GlobalVariable(
        *module, types.gpuKernel, true, llvm::GlobalValue::PrivateLinkage,
        llvm::ConstantStruct::get(types.gpuKernel, fields), spec.name + ".gpu");
    KernelCode code;
    code.gpu = gpu;
    descs.push_back(
        emitDescriptor(*module, types, spec, target, info.blockRows, code));
  }
  emitLibrary(*module, types, descs, options.librarySymbol);
  return module;
}

bool compileKernels(const std::vector<KernelSpec> &specs,
                    const CompileOptions &options, OutputKind kind,
                    const std::string &outputPath, std::string &error,
                    std::vector<GpuKernelInfo> *gpuKernels) {
  if (specs.empty()) {
    error = "no kernel to compile";
    return false;
  }
  bool gpu = !options.gpuArch.empty();
  for (const KernelSpec &spec : specs)
    if (gpu && spec.backward && spec.gradCaptures) {
      error = "kernel '" + spec.name +
              "': backward kernels with the gradients of captured tensors "
              "(dcaptures) are made for the CPU only so far";
      return false;
    } else if (gpu && spec.weights) {
      error = "kernel '" + spec.name +
              "': weights kernels are made for the CPU only so far (no GPU "
              "lowering of attn.attention_weights yet)";
      return false;
    } else if (gpu && spec.linearBackward) {
      error = "kernel '" + spec.name +
              "': linear attention's backward kernels are made for the CPU "
              "only so far (no GPU lowering of attn.linear_backward yet)";
      return false;
    } else if (gpu && spec.additiveBackward) {
      error = "kernel '" + spec.name +
              "': additive attention's backward kernels are made for the CPU "
              "only so far (no GPU lowering of attn.additive_backward yet)";
      return false;
    } else if (gpu && spec.mha) {
      error = "kernel '" + spec.name +
              "': multi-head attention layers are made for the CPU only so "
              "far (no GPU lowering of attn.mha's projections yet)";
      return false;
    }
  if (!gpu && (kind == OutputKind::PTX || kind == OutputKind::Cubin)) {
    error = "PTX and cubin output need a GPU target (--target sm_80...)";
    return false;
  }
  if (gpu && kind == OutputKind::LLVMIR) {
    error = "LLVM IR output is for CPU targets; for a GPU emit ptx, cubin, "
            "mlir, a library or an object";
    return false;
  }
  if (kind == OutputKind::MLIR) {
    KernelModule kernels(specs);
    if (!kernels.module) {
      error = kernels.diagnostics;
      return false;
    }
    if (!gpu) {
      ResolvedTarget host;
      if (!resolveTarget(options, host, error))
        return false;
      if (!chooseCpuKernels(*kernels.module, specs, options, host, error))
        return false;
    } else if (!chooseKernels(
                   *kernels.module, specs, options,
                   [&](mlir::attn::AttentionOp op) {
                     return mlir::attn::chooseGpuKernel(op,
                                                        gpuOverrides(options));
                   },
                   error)) {
      return false;
    }
    std::string text;
    llvm::raw_string_ostream os(text);
    kernels.module->print(os);
    return writeFile(outputPath, text, error);
  }

  // --timing: one tree of stages, MLIR's passes nested under the lowering.
  DefaultTimingManager timingManager;
  timingManager.setEnabled(options.timing);
  timingManager.setDisplayMode(DefaultTimingManager::DisplayMode::Tree);
  TimingScope timing = timingManager.getRootScope();

  llvm::LLVMContext llvmCtx;
  std::unique_ptr<llvm::Module> llvmModule;
  ResolvedTarget host;
  if (gpu) {
    // The image: what PTX/cubin output writes. A library embeds PTX, which
    // the driver compiles for whatever GPU loads it (a cubin would run on
    // its own major architecture only).
    bool cubin = kind == OutputKind::Cubin;
    GpuImage image;
    if (!compileGpuImage(specs, options, cubin, image, error, timing))
      return false;
    if (gpuKernels)
      *gpuKernels = image.kernels;
    if (kind == OutputKind::PTX || kind == OutputKind::Cubin)
      return writeFile(outputPath,
                       kind == OutputKind::PTX
                           ? llvm::StringRef(image.bytes).drop_back()
                           : llvm::StringRef(image.bytes),
                       error);
    // The host side is plain data for the machine compiling it.
    CompileOptions hostOptions;
    if (!resolveTarget(hostOptions, host, error))
      return false;
    llvmModule = gpuHostModule(llvmCtx, specs, options, image);
  } else {
    if (!resolveTarget(options, host, error))
      return false;
    KernelModule kernels(specs);
    if (!kernels.module) {
      error = kernels.diagnostics;
      return false;
    }
    PassManager pm(&kernels.context);
    TimingScope lowering = timing.nest("MLIR: attn-to-llvm-cpu");
    pm.enableTiming(lowering);
    mlir::attn::CpuPipelineOptions pipeline;
    setCpuPipelineOptions(pipeline, options, host);
    if (!chooseCpuKernels(*kernels.module, specs, options, host, error) ||
        !checkAmxKernels(*kernels.module, options, host, error))
      return false;
    SmallVector<int64_t> tileRows = chosenTileRows(*kernels.module);
    mlir::attn::buildAttnToLLVMCpuPipeline(pm, pipeline);
    if (failed(pm.run(*kernels.module))) {
      error = "lowering failed:\n" + kernels.diagnostics;
      return false;
    }
    lowering.stop();
    TimingScope translating = timing.nest("translation to LLVM IR");
    llvmModule =
        translateModuleToLLVMIR(*kernels.module, llvmCtx, "attn_kernels");
    if (!llvmModule) {
      error = "translation to LLVM IR failed:\n" + kernels.diagnostics;
      return false;
    }
    AbiTypes types(llvmCtx);
    SmallVector<llvm::GlobalVariable *> descs;
    for (auto [spec, rows] : llvm::zip(specs, tileRows)) {
      llvm::Function *runImpl =
          llvmModule->getFunction(spec.name + "_impl_run");
      llvm::Function *countImpl =
          llvmModule->getFunction(spec.name + "_impl_work_items");
      if (!runImpl || !countImpl) {
        error = "internal error: the lowering made no work-item functions "
                "for " +
                spec.name;
        return false;
      }
      // A kernel with a key split (attn-split-keys) is its partial phase.
      llvm::Function *mergeRun =
          llvmModule->getFunction(spec.name + "_impl_merge_run");
      llvm::Function *mergeCount =
          llvmModule->getFunction(spec.name + "_impl_merge_work_items");
      bool split = mergeRun && mergeCount;
      KernelCode code;
      if (spec.linearBackward) {
        code.linearBackwardRun = emitLinearBackwardEntryPoint(
            *llvmModule, types, spec, runImpl, /*isRun=*/true);
        code.linearBackwardWorkItems = emitLinearBackwardEntryPoint(
            *llvmModule, types, spec, countImpl, /*isRun=*/false);
        descs.push_back(
            emitDescriptor(*llvmModule, types, spec, host, rows, code));
        continue;
      }
      if (spec.linear) {
        code.linearRun = emitLinearEntryPoint(*llvmModule, types, spec, runImpl,
                                              /*isRun=*/true);
        code.linearWorkItems = emitLinearEntryPoint(*llvmModule, types, spec,
                                                    countImpl, /*isRun=*/false);
        descs.push_back(
            emitDescriptor(*llvmModule, types, spec, host, rows, code));
        continue;
      }
      if (spec.additiveBackward) {
        code.additiveBackwardRun = emitAdditiveBackwardEntryPoint(
            *llvmModule, types, spec, runImpl, /*isRun=*/true);
        code.additiveBackwardWorkItems = emitAdditiveBackwardEntryPoint(
            *llvmModule, types, spec, countImpl, /*isRun=*/false);
        // Its work items are parts of the query rows.
        descs.push_back(
            emitDescriptor(*llvmModule, types, spec, host, 1, code));
        continue;
      }
      if (spec.additive) {
        code.additiveRun = emitAdditiveEntryPoint(*llvmModule, types, spec,
                                                  runImpl, /*isRun=*/true);
        code.additiveWorkItems = emitAdditiveEntryPoint(
            *llvmModule, types, spec, countImpl, /*isRun=*/false);
        // Its work items are tiles of the pipeline's query rows.
        descs.push_back(emitDescriptor(*llvmModule, types, spec, host,
                                       pipeline.queryTileSize, code));
        continue;
      }
      if (spec.mha) {
        code.mhaRun = emitMhaEntryPoint(*llvmModule, types, spec, runImpl,
                                        /*isRun=*/true);
        code.mhaWorkItems = emitMhaEntryPoint(*llvmModule, types, spec,
                                              countImpl, /*isRun=*/false);
        // Its work items are batches.
        descs.push_back(
            emitDescriptor(*llvmModule, types, spec, host, 0, code));
        continue;
      }
      if (spec.backward) {
        code.backwardRun = emitBackwardEntryPoint(*llvmModule, types, spec,
                                                  runImpl, /*isRun=*/true);
        code.backwardWorkItems = emitBackwardEntryPoint(
            *llvmModule, types, spec, countImpl, /*isRun=*/false);
        descs.push_back(
            emitDescriptor(*llvmModule, types, spec, host, rows, code));
        continue;
      }
      code.run = emitEntryPoint(*llvmModule, types, spec, runImpl,
                                /*isRun=*/true, split);
      code.workItems = emitEntryPoint(*llvmModule, types, spec, countImpl,
                                      /*isRun=*/false, split);
      if (split) {
        code.partialRun = emitEntryPoint(*llvmModule, types, spec, runImpl,
                                         true, split, Phase::Partial);
        code.partialWorkItems = emitEntryPoint(
            *llvmModule, types, spec, countImpl, false, split, Phase::Partial);
        code.mergeRun = emitEntryPoint(*llvmModule, types, spec, mergeRun, true,
                                       split, Phase::Merge);
        code.mergeWorkItems = emitEntryPoint(
            *llvmModule, types, spec, mergeCount, false, split, Phase::Merge);
      }
      llvm::Function *tableRun =
          llvmModule->getFunction(spec.name + "_impl_block_table_run");
      llvm::Function *tableCount =
          llvmModule->getFunction(spec.name + "_impl_block_table_work_items");
      if (tableRun && tableCount) {
        code.blockTableRun = emitEntryPoint(*llvmModule, types, spec, tableRun,
                                            true, split, Phase::BlockTable);
        code.blockTableWorkItems =
            emitEntryPoint(*llvmModule, types, spec, tableCount, false, split,
                           Phase::BlockTable);
      }
      descs.push_back(
          emitDescriptor(*llvmModule, types, spec, host, rows, code));
    }
    emitLibrary(*llvmModule, types, descs, options.librarySymbol);
  }

  std::unique_ptr<llvm::TargetMachine> machine =
      createTargetMachine(host, error);
  if (!machine)
    return false;
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(llvm::Triple(host.triple));
  for (llvm::Function &fn : *llvmModule) {
    if (fn.isDeclaration())
      continue;
    fn.addFnAttr("target-cpu", host.cpu);
    if (!host.features.empty())
      fn.addFnAttr("target-features", host.features);
  }
  std::string verifyMessage;
  llvm::raw_string_ostream verifyStream(verifyMessage);
  if (llvm::verifyModule(*llvmModule, &verifyStream)) {
    error = "internal error: invalid LLVM IR: " + verifyMessage;
    return false;
  }
  {
    TimingScope optimizing = timing.nest("LLVM: O3 optimization");
    optimize(*llvmModule, *machine, options.llvmUnroll);
  }

  if (kind == OutputKind::LLVMIR) {
    std::string text;
    llvm::raw_string_ostream os(text);
    llvmModule->print(os, nullptr);
    return writeFile(outputPath, text, error);
  }
  TimingScope generating = timing.nest("LLVM: machine code generation");
  if (kind == OutputKind::Object)
    return emitObjectFile(*llvmModule, *machine, outputPath, error);

  llvm::SmallString<128> object;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile("attn-kernel", "o", object)) {
    error = "cannot create a temporary file: " + ec.message();
    return false;
  }
  llvm::FileRemover removeObject(object);
  if (!emitObjectFile(*llvmModule, *machine, object.str().str(), error))
    return false;
  generating.stop();
  TimingScope linking = timing.nest("linking the shared library (cc)");
  return linkSharedLibrary(object.str().str(), outputPath, error);
}
} // namespace attn
