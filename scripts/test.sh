#!/usr/bin/env bash
# Builds attn and runs every test: the lit suite (dialect, every pass, the
# pipelines, the tools end to end, a plain C consumer) and the GoogleTest
# suites (dialect API, runtime, support, the conformance matrix).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh" "$root/build"
cd "$root/build"
ctest --output-on-failure -j2
