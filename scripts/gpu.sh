#!/usr/bin/env bash
# The GPU check in one command, for a machine with an NVIDIA GPU (sm_80 or
# newer) and its driver: build (scripts/setup.sh, which installs LLVM/MLIR
# 22 where missing; ptxas from the CUDA toolkit in /usr/local/cuda or
# $CUDA_HOME), run the tests — the conformance matrix then runs on the GPU
# instead of being skipped — and benchmark the generated kernels next to
# PyTorch's FlashAttention (bench/gpu_peers.py, which needs PyTorch).
#
#   scripts/gpu.sh            build, test, benchmark
#   scripts/gpu.sh --quick    small benchmark shapes
#
# On a machine without a GPU it stops after the build with the runtime's
# message saying what is missing, and exits 1.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build"

"$root/scripts/setup.sh" "$build"
if ! "$build/tools/attn-run" --device cuda --spec "dtype=f16,d=64" \
    --seq-q 256 --seq-k 256 --repeat 1; then
  echo "gpu.sh: no usable GPU here (message above); nothing GPU-specific to run" >&2
  exit 1
fi
(cd "$build" && ctest --output-on-failure -j "$(nproc)")
# The GPU cases must have run, not been skipped.
gpu_cases="$("$build/test/Integration/attn-conformance-tests" \
  --gtest_filter='*GpuConformance*' 2>&1)" || { echo "$gpu_cases"; exit 1; }
echo "$gpu_cases" | grep -E "GPU conformance on|PASSED|SKIPPED"
if grep -q SKIPPED <<<"$gpu_cases"; then
  echo "gpu.sh: GPU conformance cases were skipped" >&2
  exit 1
fi
# The benchmark kernels for this GPU's architecture, then ours next to
# PyTorch's flash attention in one process.
cap="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1)"
arch="sm_${cap/./}"
bench=()
while read -r spec; do bench+=(--spec "$spec"); done \
  < <(python3 "$root/bench/gpu_peers.py" --specs)
"$build/tools/attn-compile" --target "$arch" "${bench[@]}" \
  -o "$build/bench_$arch.so" --header /dev/null
# 32 query rows a warp (not yet the default), with 64- and 32-key tiles.
"$build/tools/attn-compile" --target "$arch" "${bench[@]}" \
  --gpu-rows-per-warp 32 -o "$build/bench_rows32_$arch.so" --header /dev/null
"$build/tools/attn-compile" --target "$arch" "${bench[@]}" \
  --gpu-rows-per-warp 32 --key-tile-size 32 \
  -o "$build/bench_rows32_k32_$arch.so" --header /dev/null
python3 "$root/bench/gpu_peers.py" --library "$build/bench_$arch.so" \
  --variant rows32="$build/bench_rows32_$arch.so" \
  --variant rows32_k32="$build/bench_rows32_k32_$arch.so" \
  --runtime "$build/runtime/libattn_runtime.so" "$@"
# The gradients: our backward kernels next to PyTorch's flash backward.
python3 "$root/bench/gpu_peers.py" --library "$build/bench_$arch.so" \
  --runtime "$build/runtime/libattn_runtime.so" --backward "$@"
# What dropout costs ours and PyTorch's flash attention.
python3 "$root/bench/gpu_peers.py" --library "$build/bench_$arch.so" \
  --runtime "$build/runtime/libattn_runtime.so" --dropout 0.1 "$@"
