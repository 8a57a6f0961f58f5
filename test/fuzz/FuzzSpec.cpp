//===- FuzzSpec.cpp - libFuzzer target: the kernel spec parser ------------===//
//
// attn-fuzz-spec: bytes -> parseKernelSpec, the `--spec` parser of
// attn-compile and attn-run. Any input must end in a spec or a message. A
// spec it accepts must print (printKernelSpec) to a string that parses
// again and prints identically: the printed form is canonical.
//
//===----------------------------------------------------------------------===//
#include "lib/Support/KernelSpec.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace {
void expect(bool condition) {
  if (!condition)
    __builtin_trap();
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 1024)
    return -1; // specs are one command-line word
  std::string text(reinterpret_cast<const char *>(data), size);
  std::string error;
  std::optional<attn::KernelSpec> spec = attn::parseKernelSpec(text, error);
  if (!spec) {
    expect(!error.empty());
    return 0;
  }
  (void)spec->effectiveScale();
  const std::string printed = attn::printKernelSpec(*spec);
  std::optional<attn::KernelSpec> again = attn::parseKernelSpec(printed, error);
  expect(again.has_value());
  expect(attn::printKernelSpec(*again) == printed);
  return 0;
}
