#!/usr/bin/env bash
# Packs what a GPU machine WITHOUT the compiler needs to run the GPU
# conformance matrix, the benchmark against PyTorch's flash attention and
# cuDNN, and the Python package's GPU tests: the conformance and benchmark
# kernels compiled here for one architecture (PTX, which the driver compiles
# for the GPU), the runtime, attn-check, bench/gpu_peers.py, and a kernel
# cache for python/tests/test_cuda.py filled here (no MLIR, no LLVM there;
# glibc 2.34 or newer; the benchmark and the Python tests need PyTorch with
# CUDA there, and the package builds from the checkout with pip, nanobind
# and scikit-build-core, offline). For machines that have the toolchain,
# scripts/gpu.sh does everything in place instead.
#
#   scripts/gpu-bundle.sh [ARCH] [DIR]   default sm_90 and gpu-bundle/
#   DIR/run.sh [--quick]                 on the GPU machine, from the
#                                        checkout: the matrix, the benchmark,
#                                        the Python GPU tests; exit 0 = all
#                                        pass
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
arch="${1:-sm_90}"
out="${2:-$root/gpu-bundle}"
build="$root/build"

"$root/scripts/setup.sh" "$build"
mkdir -p "$out"
specs=()
while read -r spec; do specs+=(--spec "$spec"); done \
  < <("$build/tools/attn-check" --gpu-specs)
"$build/tools/attn-compile" --target "$arch" "${specs[@]}" \
  -o "$out/conformance_$arch.so" --header /dev/null
bench=()
while read -r spec; do bench+=(--spec "$spec"); done \
  < <(python3 "$root/bench/gpu_peers.py" --specs)
"$build/tools/attn-compile" --target "$arch" "${bench[@]}" \
  -o "$out/bench_$arch.so" --header /dev/null
# The experiment of issue 33 waiting for a GPU: 32 query rows a warp (two
# m16 blocks sharing each K/V operand) with 64- and 32-key tiles, checked
# on the whole matrix and timed beside the default in the same rounds.
"$build/tools/attn-compile" --target "$arch" "${specs[@]}" \
  --gpu-rows-per-warp 32 -o "$out/conformance_rows32_$arch.so" \
  --header /dev/null
"$build/tools/attn-compile" --target "$arch" "${bench[@]}" \
  --gpu-rows-per-warp 32 -o "$out/bench_rows32_$arch.so" --header /dev/null
"$build/tools/attn-compile" --target "$arch" "${bench[@]}" \
  --gpu-rows-per-warp 32 --key-tile-size 32 \
  -o "$out/bench_rows32_k32_$arch.so" --header /dev/null
cp "$build/tools/attn-check" "$build/runtime/libattn_runtime.so" \
  "$root/bench/gpu_peers.py" "$out/"

# The Python tests' GPU kernels, compiled here into a cache that travels.
# The package keys its cache by the compiler's --version, size and mtime:
# there, where attn-compile cannot run, a stand-in with this compiler's
# --version, the same bytes and a fixed mtime gives the same keys, and
# refuses to compile (a kernel missing from the cache is then an error).
version="$("$build/tools/attn-compile" --version)"
cat >"$out/attn-compile" <<STANDIN
#!/bin/sh
# attn-compile's stand-in on a machine without LLVM/MLIR (gpu-bundle.sh).
if [ "\$1" = "--version" ]; then
  cat <<'VERSION'
$version
VERSION
  exit 0
fi
if [ -n "\$ATTN_REAL_COMPILE" ]; then exec "\$ATTN_REAL_COMPILE" "\$@"; fi
echo "attn-compile is not on this machine, and this kernel is not in the cache that gpu-bundle.sh filled: \$*" >&2
exit 1
STANDIN
chmod +x "$out/attn-compile"
touch -m -d @1800000000 "$out/attn-compile"
rm -rf "$out/kernel-cache"
ATTN_COMPILE="$out/attn-compile" ATTN_REAL_COMPILE="$build/tools/attn-compile" \
  ATTN_CACHE_DIR="$out/kernel-cache" "$root/scripts/python-test.sh" -q \
  "$root/python/tests/test_cuda.py" -k compiles_through_the_package
cat >"$out/run.sh" <<RUN
#!/usr/bin/env bash
# The GPU conformance matrix for $arch through the runtime (no compiler),
# then our kernels next to PyTorch's flash attention (--quick: small shapes).
here="\$(cd "\$(dirname "\${BASH_SOURCE[0]}")" && pwd)"
LD_LIBRARY_PATH="\$here\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" \\
  "\$here/attn-check" "\$here/conformance_$arch.so"
matrix=\$?
LD_LIBRARY_PATH="\$here\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" \\
  "\$here/attn-check" "\$here/conformance_rows32_$arch.so"
matrix=\$((matrix || \$?))
python3 "\$here/gpu_peers.py" --library "\$here/bench_$arch.so" \\
  --variant rows32="\$here/bench_rows32_$arch.so" \\
  --variant rows32_k32="\$here/bench_rows32_k32_$arch.so" \\
  --runtime "\$here/libattn_runtime.so" "\$@"
bench=\$?
# The gradients: our backward kernels next to PyTorch's flash backward.
python3 "\$here/gpu_peers.py" --library "\$here/bench_$arch.so" \\
  --runtime "\$here/libattn_runtime.so" --backward "\$@"
bench=\$((bench || \$?))
# The Python package, built from the checkout, on CUDA tensors.
touch -m -d @1800000000 "\$here/attn-compile"
site="\$(mktemp -d)"
python3 -m pip install -q --no-build-isolation --no-deps --no-index \\
  --target "\$site" "\$here/.." && \\
  PYTHONPATH="\$site" ATTN_COMPILE="\$here/attn-compile" \\
  ATTN_CACHE_DIR="\$here/kernel-cache" python3 -m pytest -q -p no:cacheprovider \\
  -k "not cpu_kernel" "\$here/../python/tests/test_cuda.py"
python=\$?
# What dropout costs ours and PyTorch's flash attention (our dropped output
# checked with the package's attn.dropout_mask).
PYTHONPATH="\$site" python3 "\$here/gpu_peers.py" \\
  --library "\$here/bench_$arch.so" --runtime "\$here/libattn_runtime.so" \\
  --dropout 0.1 "\$@"
bench=\$((bench || \$?))
exit \$((matrix || bench || python))
RUN
chmod +x "$out/run.sh"
du -sh "$out"
echo "gpu-bundle: $out/run.sh runs the matrix on a GPU machine"
