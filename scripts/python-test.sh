#!/usr/bin/env bash
# Builds the Python package (python/, `pip install .`) in a virtual
# environment and runs its pytest suite (python/tests) against PyTorch's SDPA.
#
# Installs only what is missing: attn-compile (scripts/setup.sh, when
# build/tools/attn-compile is not there), a venv (build-py/venv, or
# $ATTN_PY_VENV), and numpy, pytest, pytest-xdist, nanobind,
# scikit-build-core, torch and matplotlib (the heatmaps' tests) from PyPI.
# Those dependencies go in a venv of their own that every checkout of the
# user shares ($ATTN_PY_DEPS, by default ~/.cache/attn/python-deps-<tag>,
# <tag> the interpreter's, such as cpython-311), which the checkout's venv
# reads through a .pth file: PyPI's torch brings its CUDA libraries, 5.6 GB
# installed and 8.5 GB while pip unpacks them, and a second clone (CI's, a
# review's) should not need them again.
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

deps="${ATTN_PY_DEPS:-${XDG_CACHE_HOME:-$HOME/.cache}/attn/python-deps-$(
  "$python" -c 'import sys; print(sys.implementation.cache_tag)')}"

missing_packages() { # the dependencies that the checkout's venv cannot import
  # find_spec, not import: importing torch alone takes seconds.
  "$venv/bin/python" - <<'PY'
import importlib.util
for pkg in ("numpy", "pytest", "pytest-xdist", "nanobind", "scikit-build-core", "torch",
            "matplotlib"):
    module = {"pytest-xdist": "xdist"}.get(pkg, pkg.replace("-", "_"))
    if importlib.util.find_spec(module) is None:
        print(pkg)
PY
}

dependencies() {
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  local missing
  missing=($(missing_packages))
  ((${#missing[@]})) || return 0
  # The shared venv, and the .pth line that puts its site-packages on the
  # checkout's venv's path (after the venv's own, which take precedence).
  mkdir -p "$deps"
  (
    flock 9 # one install at a time when two checkouts test at once
    [ -x "$deps/bin/python" ] || "$python" -m venv "$deps"
    "$deps/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))' \
      >"$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/attn-python-deps.pth"
    missing=($(missing_packages))
    ((${#missing[@]})) || exit 0
    echo "python-test: installing ${missing[*]} into $deps"
    # Say how much torch needs before pip fails half-way with "No space left
    # on device".
    local free_kb
    free_kb=$(df -Pk "$deps" | awk 'NR == 2 { print $4 }')
    if ((free_kb < 9 * 1024 * 1024)); then
      echo "python-test: warning: only $((free_kb / 1024)) MiB free under $deps;" \
        "installing torch needs about 9 GiB while it unpacks (set ATTN_PY_DEPS" \
        "to a folder elsewhere, or free space)" >&2
    fi
    "$deps/bin/python" -m pip install -q --no-cache-dir \
      --disable-pip-version-check "${missing[@]}"
  ) 9>"$deps.lock"
}
stage "venv and dependencies" dependencies

# No build isolation: the venv has the build requirements, and the build
# folder (build-py/cmake) persists, so an unchanged package rebuilds nothing.
stage "pip install ." "$venv/bin/python" -m pip install -q --disable-pip-version-check \
  --no-build-isolation --no-deps "$root"

export ATTN_CACHE_DIR="${ATTN_CACHE_DIR:-$root/build-py/kernel-cache}"
cd "$root"
stage "pytest" "$venv/bin/python" -m pytest -q -n auto python/tests "$@"
