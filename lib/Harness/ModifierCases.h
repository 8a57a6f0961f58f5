//===- ModifierCases.h - Modifiers to run and check ------*- C++ -*-===//
//
// The examples of docs/spec.md's "Score and mask modifiers", each as the
// MLIR regions a kernel is compiled with and the same functions in C++ for
// the float64 reference: what the conformance tests check and what
// attn-run --modifiers NAME runs, checks and times.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_HARNESS_MODIFIERCASES_H
#define ATTN_HARNESS_MODIFIERCASES_H

#include "lib/Harness/Harness.h"

#include <memory>
#include <string>
#include <vector>

namespace attn {

using ModifierPtr = std::shared_ptr<const ModifierCase>;

/// The named examples (modifierNames) and their descriptions.
struct NamedModifier {
  const char *name, *description;
  ModifierPtr (*make)();
};
const std::vector<NamedModifier> &namedModifiers();

/// The example named `name`, or null.
ModifierPtr modifierCase(const std::string &name);

/// The block table of `mask` (docs/spec.md, "Score and mask modifiers" 7)
/// for a call of B, Hq, Sq, Sk with `captures`: i32 [tableBatch (1 or B),
/// tableHeads (1 or Hq), max(1, ceil(Sq/rows)), max(1, ceil(Sk/keys))],
/// each entry 0 where the mask keeps no position of its block for any batch
/// and head the entry covers, 2 where it keeps all rows x keys of them
/// (blocks cut by Sq or Sk never), else 1.
CaptureValues blockTableOf(const ModifierCase &mask,
                           const std::vector<CaptureValues> &captures,
                           int64_t batch, int64_t heads, int64_t tableBatch,
                           int64_t tableHeads, int64_t seqQ, int64_t seqK,
                           int64_t rows, int64_t keys);

} // namespace attn

#endif // ATTN_HARNESS_MODIFIERCASES_H
