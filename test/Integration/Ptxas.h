//===- Ptxas.h - What ptxas says of the GPU kernels' PTX ---------*- C++ -*-===//
//
// The GPU tests without a GPU: the kernels' PTX assembled by ptxas (found
// at configure time, ATTN_PTXAS) with its -v report read back, so that a
// test can require that every kernel assembles and name those that spill.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEST_INTEGRATION_PTXAS_H
#define ATTN_TEST_INTEGRATION_PTXAS_H

#ifdef ATTN_PTXAS
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"

#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <utility>

namespace attn {

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

} // namespace attn

#endif // ATTN_PTXAS
#endif // ATTN_TEST_INTEGRATION_PTXAS_H
