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

} // namespace attn

#endif // ATTN_HARNESS_MODIFIERCASES_H
