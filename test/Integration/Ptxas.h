//===- Ptxas.h - What ptxas says of the GPU kernels' PTX ---------*- C++
//-*-===//
//
// The GPU tests without a GPU: the kernels' PTX assembled by ptxas (found
// at configure time, ATTN_PTXAS) with its -v report read back, so that a
// test can require that every kernel assembles and name those that spill
// (expectAssembles; skipped where there is no ptxas).
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEST_INTEGRATION_PTXAS_H
#define ATTN_TEST_INTEGRATION_PTXAS_H

#include "lib/Compiler/Compiler.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"

#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace attn {

#ifdef ATTN_PTXAS

/// ptxas -v's report on `ptx` for `arch`: each kernel's registers and
/// spilled bytes (stores + loads); false with `log` to read on failure.
struct PtxasReport {
  std::map<std::string, std::pair<int, int>> kernels; // registers, spills
};
inline bool assemble(const std::string &ptx, const std::string &log, const char *arch,
              PtxasReport &report) {
  std::string archFlag = std::string("-arch=") + arch;
  llvm::StringRef args[] = {ATTN_PTXAS, archFlag, "-v", ptx, "-o", "/dev/null"};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, log, log};
  if (llvm::sys::ExecuteAndWait(ATTN_PTXAS, args, std::nullopt, redirects) != 0)
    return false;
  auto text = llvm::MemoryBuffer::getFile(log);
  if (!text)
    return false;
  // "Compiling entry function 'name' for 'sm_80'" ... "N bytes spill
  // stores, M bytes spill loads" ... "Used R registers".
  std::regex entry("Compiling entry function '([A-Za-z0-9_]+)'");
  std::regex spills("([0-9]+) bytes spill stores, ([0-9]+) bytes spill "
                    "loads");
  std::regex registers("Used ([0-9]+) registers");
  std::string current;
  std::istringstream lines((*text)->getBuffer().str());
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, entry))
      current = m[1];
    else if (std::regex_search(line, m, spills))
      report.kernels[current].second = std::stoi(m[1]) + std::stoi(m[2]);
    else if (std::regex_search(line, m, registers))
      report.kernels[current].first = std::stoi(m[1]);
  }
  return true;
}

#endif // ATTN_PTXAS

/// Compiles `specs` to PTX with `options` (a GPU target) and assembles it
/// with ptxas for sm_80 and sm_90: every kernel must assemble, and none for
/// which `spillFree(name)` holds may spill to local memory. Prints each
/// kernel's registers (and spilled bytes) after `title`.
inline void
expectAssembles(const std::vector<KernelSpec> &specs,
                const CompileOptions &options,
                llvm::function_ref<bool(const std::string &)> spillFree,
                const std::string &title) {
#ifndef ATTN_PTXAS
  GTEST_SKIP() << "no CUDA toolkit (ptxas) at configure time";
#else
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("attn-gpu-compile", dir));
  std::string ptx = (dir + "/kernels.ptx").str();
  std::string log = (dir + "/ptxas.log").str();
  std::vector<GpuKernelInfo> kernels;
  std::string error;
  ASSERT_TRUE(
      compileKernels(specs, options, OutputKind::PTX, ptx, error, &kernels))
      << error;
  ASSERT_EQ(kernels.size(), specs.size());
  for (const char *arch : {"sm_80", "sm_90"}) {
    PtxasReport report;
    ASSERT_TRUE(assemble(ptx, log, arch, report))
        << "ptxas " << arch << " failed; see " << log;
    for (const KernelSpec &spec : specs) {
      auto it = report.kernels.find(spec.name);
      if (it == report.kernels.end()) {
        ADD_FAILURE() << spec.name << " missing from ptxas' report for "
                      << arch;
        continue;
      }
      if (spillFree(spec.name))
        EXPECT_EQ(it->second.second, 0)
            << spec.name << " spills " << it->second.second << " bytes on "
            << arch;
    }
    std::cout << arch << ", " << title << ": " << report.kernels.size()
              << " kernels assembled, registers per thread (spilled bytes):";
    for (auto &[name, use] : report.kernels)
      std::cout << " " << name << "=" << use.first
                << (use.second ? " (" + std::to_string(use.second) + ")"
                               : std::string());
    std::cout << "\n";
  }
  llvm::sys::fs::remove(ptx);
  llvm::sys::fs::remove(log);
  llvm::sys::fs::remove(dir);
#endif
}

} // namespace attn

#endif // ATTN_TEST_INTEGRATION_PTXAS_H
