#!/usr/bin/env bash
# The side-by-side CPU benchmark (issue 6): attn's generated kernels against
# PyTorch, OpenVINO and ONNX Runtime in one process, interleaved, same threads
# and inputs (bench/peers.py; its options: --quick, --only, --repeat,
# --threads, --peers).
#
#   scripts/bench-peers.sh            the full table, 2 threads
#   scripts/bench-peers.sh --quick    a smoke test
#
# Installs only what is missing, and says what it installs: the C++ build
# (scripts/setup.sh, which also rebuilds what changed, so the kernels measured
# are the checkout's), the venv with numpy, torch and the attn package
# (scripts/python-test.sh, its test run limited to collecting the tests), and
# the peers openvino and onnxruntime (with onnx, which builds ONNX Runtime's
# graph) from PyPI. A peer that cannot be installed is reported and skipped.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${ATTN_PY_VENV:-$root/build-py/venv}"
export ATTN_PY_VENV="$venv"
export ATTN_COMPILE="${ATTN_COMPILE:-$root/build/tools/attn-compile}"
export ATTN_CACHE_DIR="${ATTN_CACHE_DIR:-$root/build-py/kernel-cache}"

"$root/scripts/setup.sh" "$root/build"

log="$root/build-py/bench-peers-install.log"
mkdir -p "$(dirname "$log")"
if ! "$root/scripts/python-test.sh" --collect-only -q >"$log" 2>&1; then
  cat "$log"
  echo "bench-peers: making the venv and the attn package failed (log above)" >&2
  exit 1
fi
grep '^python-test: installing' "$log" || true

# find_spec, not import: importing the peers takes seconds.
mapfile -t missing < <("$venv/bin/python" - <<'PY'
import importlib.util
for pkg in ("openvino", "onnxruntime", "onnx"):
    if importlib.util.find_spec(pkg) is None:
        print(pkg)
PY
)
for pkg in "${missing[@]}"; do
  echo "bench-peers: installing $pkg"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "$pkg" \
    || echo "bench-peers: could not install $pkg; its peer will be skipped"
done

cd "$root"
exec "$venv/bin/python" "$root/bench/peers.py" "$@"
