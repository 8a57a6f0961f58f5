//===- attn-check.cpp - Run the conformance matrix of a compiled library --===//
//
// Loads a kernel library made by attn-compile (for the CPU or a GPU) and
// runs every conformance case whose kernel it holds against the float64
// reference, through the runtime only: no MLIR, no LLVM. That is what a GPU
// machine without the compiler needs (scripts/gpu-bundle.sh compiles the
// library elsewhere and carries this program with it).
//
//   attn-check LIBRARY        run the cases; exit 1 if one fails
//   attn-check --specs        print every case's spec, one per line
//   attn-check --gpu-specs    the same for the cases the GPU lowering takes
//   attn-check --amx-specs    the same for the AMX micro-kernel's (bf16)
//
//===----------------------------------------------------------------------===//
#include "lib/Harness/Conformance.h"
#include "lib/Harness/Harness.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  auto flag = [&](const char *name) {
    return argc == 2 && std::strcmp(argv[1], name) == 0;
  };
  if (flag("--specs") || flag("--gpu-specs") || flag("--amx-specs")) {
    for (const attn::ConformanceCase &c :
         flag("--gpu-specs")   ? attn::gpuConformanceCases()
         : flag("--amx-specs") ? attn::amxConformanceCases()
                               : attn::conformanceCases())
      std::printf("%s\n", c.spec.c_str());
    return 0;
  }
  if (argc != 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: attn-check LIBRARY | attn-check --specs | "
                         "attn-check --gpu-specs | attn-check --amx-specs\n");
    return 2;
  }
  attn_module *module = nullptr;
  if (attn_module_load(argv[1], &module) != ATTN_OK) {
    std::fprintf(stderr, "attn-check: %s\n", attn_last_error());
    return 2;
  }
  std::string arch, device, error;
  bool gpu = attn::cudaTarget(arch, device, error);
  std::printf("attn-check: %s; GPU: %s\n", argv[1],
              gpu ? device.c_str() : error.c_str());
  attn_thread_pool *pool = nullptr;
  attn_thread_pool_create(0, &pool);
  int ran = 0, failed = 0, skipped = 0;
  std::vector<attn::ConformanceCase> cases = attn::conformanceCases();
  for (attn::ConformanceCase &c : attn::amxConformanceCases())
    cases.push_back(std::move(c));
  for (attn::ConformanceCase &c : attn::linearGpuConformanceCases())
    cases.push_back(std::move(c));
  for (attn::ConformanceCase &c : attn::additiveGpuConformanceCases())
    cases.push_back(std::move(c));
  for (attn::ConformanceCase &c : attn::backwardGpuConformanceCases())
    cases.push_back(std::move(c));
  for (const attn::ConformanceCase &c : cases) {
    const attn_kernel_desc *kernel = nullptr;
    if (attn_module_find(module, c.label.c_str(), &kernel) != ATTN_OK)
      continue;
    if (attn_kernel_device(kernel) == ATTN_DEVICE_CUDA && !gpu) {
      std::printf("SKIP %s (GPU kernel, no usable GPU)\n", c.label.c_str());
      ++skipped;
      continue;
    }
    attn::CaseOutcome outcome = attn::runConformanceCase(c, kernel, pool);
    std::printf("%s %s: %s\n", outcome.passed ? "PASS" : "FAIL",
                c.label.c_str(), outcome.message.c_str());
    ++ran;
    failed += !outcome.passed;
  }
  attn_thread_pool_destroy(pool);
  attn_module_unload(module);
  std::printf("attn-check: %d passed, %d failed, %d skipped\n", ran - failed,
              failed, skipped);
  if (ran + skipped == 0) {
    std::fprintf(stderr, "attn-check: the library holds no conformance "
                         "kernel (names as in attn-check --specs)\n");
    return 2;
  }
  return failed || skipped ? 1 : 0;
}
