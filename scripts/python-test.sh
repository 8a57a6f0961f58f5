#!/usr/bin/env bash
# Builds the Python package (python/, `pip install .`) in a virtual
# environment and runs its pytest suite (python/tests) against PyTorch's SDPA.
#
# Installs only what is missing: attn-compile (scripts/setup.sh, when
# build/tools/attn-compile is not there), a venv (build-py/venv, or
# $ATTN_PY_VENV), and numpy, pytest, pytest-xdist, nanobind,
# scikit-build-core, torch and matplotlib (the heatmaps' tests) from PyPI.
# Kernels compiled by the tests are kept in build-py/kernel-cache (or
# $ATTN_CACHE_DIR); their cache key includes the compiler, so a rebuilt
# attn-compile never reuses stale ones. The tests run in one worker process
# per core (pytest-xdist's `-n auto`: on 2 cores and a cold kernel cache,
# 295 s instead of 577, the compiles being single-threaded); `-n 0` among
# the extra arguments, which go to pytest, runs them in this process.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${ATTN_PY_VENV:-$root/build-py/venv}"
python="${PYTHON:-python3}"
stage() { # stage NAME COMMAND...: runs it and says how long it took
  local name="$1" start=$SECONDS
  shift
  "$@"
  echo "python-test: $name took $((SECONDS - start)) s"
}

compiler="${ATTN_COMPILE:-$root/build/tools/attn-compile}"
[ -x "$compiler" ] || stage "build attn-compile" "$root/scripts/setup.sh" "$root/build"
export ATTN_COMPILE="$compiler"

dependencies() {
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  # find_spec, not import: importing torch alone takes seconds.
  local missing
  missing=($("$venv/bin/python" - <<'PY'
import importlib.util
for pkg in ("numpy", "pytest", "pytest-xdist", "nanobind", "scikit-build-core", "torch",
            "matplotlib"):
    module = {"pytest-xdist": "xdist"}.get(pkg, pkg.replace("-", "_"))
    if importlib.util.find_spec(module) is None:
        print(pkg)
PY
  ))
  if ((${#missing[@]})); then
    echo "python-test: installing ${missing[*]}"
    # PyPI's torch brings its CUDA libraries: about 5 GB once installed. Say
    # so before pip fails half-way with "No space left on device".
    local free_kb
    free_kb=$(df -Pk "$venv" | awk 'NR == 2 { print $4 }')
    if ((free_kb < 6 * 1024 * 1024)); then
      echo "python-test: warning: only $((free_kb / 1024)) MiB free under $venv;" \
        "installing torch needs about 6 GiB (set ATTN_PY_VENV to a venv" \
        "elsewhere, or free space)" >&2
    fi
    "$venv/bin/python" -m pip install -q --no-cache-dir \
      --disable-pip-version-check "${missing[@]}"
  fi
}
stage "venv and dependencies" dependencies

# No build isolation: the venv has the build requirements, and the build
# folder (build-py/cmake) persists, so an unchanged package rebuilds nothing.
stage "pip install ." "$venv/bin/python" -m pip install -q --disable-pip-version-check \
  --no-build-isolation --no-deps "$root"

export ATTN_CACHE_DIR="${ATTN_CACHE_DIR:-$root/build-py/kernel-cache}"
cd "$root"
stage "pytest" "$venv/bin/python" -m pytest -q -n auto python/tests "$@"
