#!/usr/bin/env bash
# Packs what a GPU machine WITHOUT the compiler needs to run the GPU
# conformance matrix: the conformance kernels compiled here for one
# architecture (PTX, which the driver compiles for the GPU), the runtime, and
# attn-check (no MLIR, no LLVM; glibc 2.34 or newer). For machines that
# have the toolchain, scripts/gpu.sh does everything in place instead.
#
#   scripts/gpu-bundle.sh [ARCH] [DIR]   default sm_90 and gpu-bundle/
#   DIR/run.sh                           on the GPU machine: exit 0 = all pass
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
arch="${1:-sm_90}"
out="${2:-$root/gpu-bundle}"
build="$root/build"

"$root/scripts/setup.sh" "$build"
mkdir -p "$out"
specs=()
while read -r spec; do specs+=(--spec "$spec"); done \
  < <("$build/tools/attn-check" --specs)
"$build/tools/attn-compile" --target "$arch" "${specs[@]}" \
  -o "$out/conformance_$arch.so" --header /dev/null
cp "$build/tools/attn-check" "$build/runtime/libattn_runtime.so" "$out/"
cat >"$out/run.sh" <<RUN
#!/usr/bin/env bash
# The GPU conformance matrix for $arch through the runtime (no compiler).
here="\$(cd "\$(dirname "\${BASH_SOURCE[0]}")" && pwd)"
LD_LIBRARY_PATH="\$here\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" \\
  exec "\$here/attn-check" "\$here/conformance_$arch.so"
RUN
chmod +x "$out/run.sh"
du -sh "$out"
echo "gpu-bundle: $out/run.sh runs the matrix on a GPU machine"
