#!/usr/bin/env bash
# Packs what a GPU machine WITHOUT the compiler needs to run the GPU
# conformance matrix and the benchmark against PyTorch's flash attention: the
# conformance and benchmark kernels compiled here for one architecture (PTX,
# which the driver compiles for the GPU), the runtime, attn-check and
# bench/gpu_peers.py (no MLIR, no LLVM; glibc 2.34 or newer; the benchmark
# needs PyTorch with CUDA there). For machines that have the toolchain,
# scripts/gpu.sh does everything in place instead.
#
#   scripts/gpu-bundle.sh [ARCH] [DIR]   default sm_90 and gpu-bundle/
#   DIR/run.sh [--quick]                 on the GPU machine: the matrix, then
#                                        the benchmark; exit 0 = all pass
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
cp "$build/tools/attn-check" "$build/runtime/libattn_runtime.so" \
  "$root/bench/gpu_peers.py" "$out/"
cat >"$out/run.sh" <<RUN
#!/usr/bin/env bash
# The GPU conformance matrix for $arch through the runtime (no compiler),
# then our kernels next to PyTorch's flash attention (--quick: small shapes).
here="\$(cd "\$(dirname "\${BASH_SOURCE[0]}")" && pwd)"
LD_LIBRARY_PATH="\$here\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" \\
  "\$here/attn-check" "\$here/conformance_$arch.so"
matrix=\$?
python3 "\$here/gpu_peers.py" --library "\$here/bench_$arch.so" \\
  --runtime "\$here/libattn_runtime.so" "\$@"
bench=\$?
exit \$((matrix || bench))
RUN
chmod +x "$out/run.sh"
du -sh "$out"
echo "gpu-bundle: $out/run.sh runs the matrix on a GPU machine"
