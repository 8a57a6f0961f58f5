#!/usr/bin/env bash
# Installs what attn needs (only what is missing), configures and builds.
# Idempotent and quick when nothing changed. Used by demo.sh and test.sh.
#
#   scripts/setup.sh [build-dir]      (default: build)
#   scripts/setup.sh --packages-only  (what sanitize.sh and fuzz.sh need)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
packages_only=0
[ "${1:-}" = "--packages-only" ] && packages_only=1

packages=(cmake ninja-build g++ python3 libgtest-dev
          llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools clang-22
          libclang-rt-22-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
((packages_only)) && exit 0

if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 >/dev/null
fi
ninja -C "$build" | tail -n 1
