//===- GpuCodegen.cpp - CUDA kernels: PTX or cubin from kernel specs ------===//
//
// Builds the kernel functions (one per spec, named after it: the entry
// name in the image), runs attn-to-nvvm for the chosen architecture and
// serializes the gpu.module with upstream's gpu-module-to-binary: PTX from
// LLVM's NVPTX back end, cubin through the toolkit's ptxas. The launch
// shape of each kernel is read from the attributes attn-lower-to-gpu left
// on it.
//
//===----------------------------------------------------------------------===//
#include "lib/Compiler/Compiler.h"
#include "lib/Compiler/CompilerInternal.h"

#include "lib/Pipelines/Pipelines.h"
#include "lib/Transforms/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cstdlib>

using namespace mlir;

namespace attn {

std::string defaultPtxFeatures(const std::string &arch) {
  // The PTX ISA each generation first appears in (sm_90a's wgmma: 8.0).
  unsigned number = 0;
  llvm::StringRef(arch).drop_front(3).consumeInteger(10, number);
  if (number >= 120)
    return "+ptx87";
  if (number >= 100)
    return "+ptx86";
  return "+ptx80";
}

std::string findCudaToolkit(const CompileOptions &options) {
  if (!options.cudaToolkit.empty())
    return options.cudaToolkit;
  if (const char *home = std::getenv("CUDA_HOME"))
    return home;
#ifdef ATTN_CUDA_TOOLKIT_DIR
  return ATTN_CUDA_TOOLKIT_DIR;
#else
  return "/usr/local/cuda";
#endif
}

bool validGpuArch(const std::string &arch) {
  llvm::StringRef rest(arch);
  unsigned number = 0;
  if (!rest.consume_front("sm_") || rest.consumeInteger(10, number))
    return false;
  return number >= 80 && (rest.empty() || rest == "a");
}

bool compileGpuImage(const std::vector<KernelSpec> &specs,
                     const CompileOptions &options, bool cubin, GpuImage &image,
                     std::string &error, TimingScope &timing) {
  if (!validGpuArch(options.gpuArch)) {
    error = "unknown GPU architecture '" + options.gpuArch +
            "': expected sm_<NN> with NN >= 80 (e.g. sm_80, sm_90, sm_90a); "
            "the kernels use sm_80's mma.sync";
    return false;
  }
  if (options.gpuWarps < 1 || options.gpuWarps > 16 ||
      options.keyTileSize % 16 != 0) {
    error = "GPU kernels need 1 to 16 warps and a key tile that is a "
            "multiple of 16 (the mma.sync k), found " +
            std::to_string(options.gpuWarps) + " warps and " +
            std::to_string(options.keyTileSize) + " keys";
    return false;
  }
  if (options.gpuRowsPerWarp != 16 && options.gpuRowsPerWarp != 32) {
    error = "a GPU warp takes 16 or 32 query rows (one or two mma.sync "
            "m16 blocks), found " +
            std::to_string(options.gpuRowsPerWarp);
    return false;
  }
  KernelModule kernels(specs);
  if (!kernels.module) {
    error = kernels.diagnostics;
    return false;
  }
  for (auto [spec, func] :
       llvm::zip(specs, kernels.module->getOps<func::FuncOp>()))
    func.setSymName(spec.name);
  if (!chooseKernels(
          *kernels.module, specs, options,
          [&](mlir::attn::AttentionOp op) {
            return mlir::attn::chooseGpuKernel(op, gpuOverrides(options));
          },
          error))
    return false;

  PassManager pm(&kernels.context);
  TimingScope lowering = timing.nest("MLIR: attn-to-nvvm");
  pm.enableTiming(lowering);
  mlir::attn::GpuPipelineOptions pipeline;
  pipeline.chip = options.gpuArch;
  pipeline.warps = options.gpuWarps;
  pipeline.rowsPerWarp = options.gpuRowsPerWarp;
  pipeline.features = options.targetFeatures.empty()
                          ? defaultPtxFeatures(options.gpuArch)
                          : options.targetFeatures;
  mlir::attn::buildAttnToNVVMPipeline(pm, pipeline);
  if (failed(pm.run(*kernels.module))) {
    error = "GPU lowering failed:\n" + kernels.diagnostics;
    return false;
  }
  lowering.stop();

  image.arch = options.gpuArch;
  image.cubin = cubin;
  image.kernels.clear();
  kernels.module->walk([&](LLVM::LLVMFuncOp fn) {
    auto rows = fn->getAttrOfType<IntegerAttr>("attn.block_rows");
    auto shared = fn->getAttrOfType<IntegerAttr>("attn.shared_memory_bytes");
    auto threads = fn->getAttrOfType<DenseI32ArrayAttr>("nvvm.maxntid");
    if (!rows || !shared || !threads)
      return;
    image.kernels.push_back(
        {fn.getName().str(), threads[0], rows.getInt(), shared.getInt()});
  });
  if (image.kernels.size() != specs.size()) {
    error = "internal error: the GPU lowering made " +
            std::to_string(image.kernels.size()) + " kernels for " +
            std::to_string(specs.size()) + " specs";
    return false;
  }

  std::string toolkit = findCudaToolkit(options);
  if (cubin && !llvm::sys::fs::can_execute(toolkit + "/bin/ptxas")) {
    error = "cubin output needs ptxas: no " + toolkit +
            "/bin/ptxas (set --cuda-toolkit or CUDA_HOME, or emit PTX)";
    return false;
  }
  TimingScope serializing = timing.nest(
      cubin ? "NVPTX code generation and ptxas" : "NVPTX code generation");
  PassManager serialize(&kernels.context);
  GpuModuleToBinaryPassOptions binary;
  binary.toolkitPath = toolkit;
  binary.compilationTarget = cubin ? "bin" : "isa";
  serialize.addPass(createGpuModuleToBinaryPass(binary));
  if (failed(serialize.run(*kernels.module))) {
    error = std::string(cubin ? "ptxas" : "PTX emission") + " failed:\n" +
            kernels.diagnostics;
    return false;
  }
  image.bytes.clear();
  kernels.module->walk([&](gpu::BinaryOp op) {
    for (Attribute object : op.getObjectsAttr())
      image.bytes = cast<gpu::ObjectAttr>(object).getObject().str();
  });
  if (image.bytes.empty()) {
    error = "internal error: the GPU module produced no binary";
    return false;
  }
  if (!cubin)
    image.bytes.push_back('\0'); // cuModuleLoadData reads PTX up to a NUL
  return true;
}

} // namespace attn
