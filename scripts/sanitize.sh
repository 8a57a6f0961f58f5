#!/usr/bin/env bash
# The sanitizer builds and their tests:
#   asan  (build-asan/) every test, with AddressSanitizer and
#         UndefinedBehaviorSanitizer in all of attn (lit suite, the dialect,
#         runtime and support suites, every other case of the conformance
#         matrix); the build has the fuzz targets too (scripts/fuzz.sh);
#   tsan  (build-tsan/) the runtime alone and its tests, with
#         ThreadSanitizer on the thread pool and concurrent calls.
# Any sanitizer report fails the test that made it.
#
#   scripts/sanitize.sh [asan|tsan]...    (default: both)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
presets=("$@")
((${#presets[@]})) || presets=(asan tsan)
cd "$root"
scripts/setup.sh --packages-only

# Reports go to stderr with a stack; the first one ends the process.
# allow_user_poisoning=0: LLVM's BumpPtrAllocator, inlined from its headers
# into our instrumented code (an attribute's storage, say), poisons a new
# slab that the uninstrumented libMLIR.so then allocates from without
# unpoisoning it: a false use-after-poison in memmove. ASan's own checks
# (heap, stack, globals, leaks) are unaffected.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1:allow_user_poisoning=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}"

for preset in "${presets[@]}"; do
  build="$root/build-$preset"
  echo "sanitize: $preset"
  [ -f "$build/build.ninja" ] || cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" | tail -n 1
  ctest --preset "$preset"
done
