#!/usr/bin/env bash
# Compares what two builds of attn generate, to show that a refactoring left
# the generated code alone (or to list exactly what it changed):
#
#  - the LLVM IR of every kernel of the conformance matrix (attn-check
#    --specs), compiled for a fixed CPU so that the host does not matter,
#    and the PTX of each for sm_80 and sm_90;
#  - the output of every lit test's attn-opt RUN lines (each pass on its own
#    test inputs), with the test file as input.
#
#   scripts/compare-ir.sh OLD_BUILD NEW_BUILD [OUT_DIR]
#   scripts/compare-ir.sh --base REV [NEW_BUILD] [OUT_DIR]
#
# --base REV builds REV in a git worktree (/tmp/attn-compare-REV, kept for
# the next run) and compares it with NEW_BUILD (default: build). Writes
# OUT_DIR/{old,new}/... (default: /tmp/attn-compare-out) and prints one line
# per differing file, then a summary; exits 1 when anything differs.
# ATTN_COMPARE_CPUS (default "znver4 sapphirerapids") and ATTN_COMPARE_GPU
# (default "sm_80 sm_90"; empty to skip) choose the targets.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if [ "${1:-}" = "--base" ]; then
  rev="${2:?--base needs a revision}"
  new="${3:-$root/build}"
  out="${4:-/tmp/attn-compare-out}"
  tree="/tmp/attn-compare-$(git -C "$root" rev-parse --short "$rev")"
  if [ ! -d "$tree" ]; then
    git -C "$root" worktree add --detach "$tree" "$rev" >/dev/null
  fi
  old="$tree/build"
  if [ ! -f "$old/build.ninja" ]; then
    cmake -G Ninja -S "$tree" -B "$old" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
      -DATTN_ENABLE_TESTS=ON >/dev/null
  fi
  ninja -C "$old" attn-opt attn-compile attn-check | tail -n 1
else
  old="${1:?usage: compare-ir.sh OLD_BUILD NEW_BUILD [OUT_DIR] | --base REV [NEW_BUILD] [OUT_DIR]}"
  new="${2:?usage: compare-ir.sh OLD_BUILD NEW_BUILD [OUT_DIR]}"
  out="${3:-/tmp/attn-compare-out}"
fi
old="$(cd "$old" && pwd)"
new="$(cd "$new" && pwd)"
cpus="${ATTN_COMPARE_CPUS-znver4 sapphirerapids}"
gpus="${ATTN_COMPARE_GPU-sm_80 sm_90}"
rm -rf "$out"
mkdir -p "$out/old" "$out/new"

# The matrix's kernels: the new build's list, compiled by both.
mapfile -t specs < <("$new/tools/attn-check" --specs)
compile() { # compile SIDE BUILD SPEC NAME TARGET-ARGS...
  local side="$1" build="$2" spec="$3" name="$4"
  shift 4
  "$build/tools/attn-compile" --spec "$spec" "$@" -o "$out/$side/$name" \
    >/dev/null 2>"$out/$side/$name.err" || true
  # The output names the compiler; keep only the code.
  [ -f "$out/$side/$name" ] && sed -i '/attn 0\.1\.0\|^; ModuleID\|source_filename/d' "$out/$side/$name"
  [ -s "$out/$side/$name.err" ] || rm -f "$out/$side/$name.err"
}
for spec in "${specs[@]}"; do
  name="${spec#name=}"
  name="${name%%,*}"
  for cpu in $cpus; do
    for side in old new; do
      build=$old
      [ $side = new ] && build=$new
      compile $side "$build" "$spec" "$name.$cpu.ll" --emit llvm --target-cpu "$cpu"
    done
  done
  for gpu in $gpus; do
    for side in old new; do
      build=$old
      [ $side = new ] && build=$new
      compile $side "$build" "$spec" "$name.$gpu.ptx" --emit ptx --target "$gpu" --header /dev/null
    done
  done
done

# The lit tests' attn-opt RUN lines, on their own inputs.
while IFS= read -r test; do
  rel="${test#$root/test/}"
  n=0
  while IFS= read -r run; do
    n=$((n + 1))
    command="${run%%|*}"
    command="${command//%s/$test}"
    for side in old new; do
      build=$old
      [ $side = new ] && build=$new
      file="$out/$side/lit/${rel//\//_}.$n.mlir"
      mkdir -p "$(dirname "$file")"
      # shellcheck disable=SC2086 # the RUN line's words
      (cd "$root/test" && eval "$build/tools/$command" >"$file" 2>&1) || true
      sed -i "s|$build|BUILD|g" "$file" # messages that name the tool
    done
  done < <(sed -n 's|^// RUN: \(attn-opt .*\)|\1|p' "$test" | grep -v -- '-verify-diagnostics')
done < <(find "$root/test" -name '*.mlir' -not -path '*/fuzz/*' -not -path '*/Inputs/*' | sort)

differ=0
total=0
while IFS= read -r file; do
  total=$((total + 1))
  rel="${file#$out/new/}"
  if ! cmp -s "$file" "$out/old/$rel"; then
    differ=$((differ + 1))
    echo "differs: $rel ($(diff "$out/old/$rel" "$file" | grep -c '^[<>]') lines)"
  fi
done < <(find "$out/new" -type f | sort)
echo "compare-ir: $differ of $total outputs differ (old: $old, new: $new; files in $out)"
[ "$differ" -eq 0 ]
