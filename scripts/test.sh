#!/usr/bin/env bash
# Builds attn and runs every test: the lit suite (dialect, every pass, the
# pipelines, the tools end to end, a plain C consumer) and the GoogleTest
# suites (dialect API, runtime, support, the conformance matrix), then the
# Python package's pytest suite (scripts/python-test.sh). Then the
# reliability checks (docs/reliability.md): every test again under
# ASan+UBSan, the runtime's under TSan (scripts/sanitize.sh), and each fuzz
# target for 45 s (scripts/fuzz.sh). ATTN_TEST_QUICK=1 stops after the
# ordinary and Python tests.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
stage() { # stage NAME COMMAND...: runs it and says how long it took
  local name="$1" start=$SECONDS
  shift
  "$@"
  echo "test: $name took $((SECONDS - start)) s"
}
ordinary_tests() {
  "$root/scripts/setup.sh" "$root/build"
  (cd "$root/build" && ctest --output-on-failure -j2)
}
stage "build and tests" ordinary_tests
stage "python package" "$root/scripts/python-test.sh" -q
[ -n "${ATTN_TEST_QUICK:-}" ] && exit 0
stage "sanitizers (asan, tsan)" "$root/scripts/sanitize.sh"
# 45 s a target keeps CI inside its 45 minutes (the corpus in test/fuzz
# holds every earlier finding; longer runs: scripts/fuzz.sh 3600).
stage "fuzzing (45 s a target)" "$root/scripts/fuzz.sh" 45
