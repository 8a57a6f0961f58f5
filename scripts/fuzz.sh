#!/usr/bin/env bash
# Builds the libFuzzer targets (the `fuzz` build preset: the targets of the
# `asan` configuration, ASan + UBSan + coverage in build-asan/, which
# scripts/sanitize.sh has built already in CI) and runs each for a bounded
# time on a scratch copy of its seed corpus (test/fuzz/corpus/<target>), so
# that runs never write into the repository. Prints the executions of each
# target and exits non-zero if any target crashed, leaked, hung or ran out of
# memory; the input that did it is kept under build-asan/fuzz-runs/<target>/
# (reproduce: the target binary with the file as its argument).
#
#   scripts/fuzz.sh [seconds-per-target] [target...]
#       (defaults: 60 s; attn-fuzz-ir attn-fuzz-runtime attn-fuzz-npy
#        attn-fuzz-spec)
#   ATTN_FUZZ_NO_BUILD=1   run what is built, without building first
#   ATTN_FUZZ_KEEP_CORPUS=1  start from the corpus a previous run grew
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build-asan"
seconds="${1:-60}"
(($# > 0)) && shift
targets=("$@")
((${#targets[@]})) ||
  targets=(attn-fuzz-ir attn-fuzz-runtime attn-fuzz-npy attn-fuzz-spec)

cd "$root"
if [ -z "${ATTN_FUZZ_NO_BUILD:-}" ]; then
  scripts/setup.sh --packages-only
  [ -f "$build/build.ninja" ] || cmake --preset asan >/dev/null
  cmake --build --preset fuzz | tail -n 1
fi

# Per-target limits: input size (the IR target bounds itself at 4 KiB) and
# the time one input may take before it counts as a hang.
declare -A max_len=([attn-fuzz-ir]=4096 [attn-fuzz-runtime]=256
                    [attn-fuzz-npy]=1024 [attn-fuzz-spec]=256)
declare -A timeout=([attn-fuzz-ir]=30 [attn-fuzz-runtime]=10
                    [attn-fuzz-npy]=10 [attn-fuzz-spec]=10)

# The targets are built with AddressSanitizer over an uninstrumented
# libMLIR.so: see scripts/sanitize.sh for why user poisoning is off.
export ASAN_OPTIONS="${ASAN_OPTIONS:-allow_user_poisoning=0}"

failed=()
printf '%-18s %12s %8s %9s  %s\n' target executions seconds exec/s result
for target in "${targets[@]}"; do
  name="${target#attn-fuzz-}"
  binary="$build/test/fuzz/$target"
  run="$build/fuzz-runs/$target"
  [ -x "$binary" ] || { echo "fuzz: $binary is not built" >&2; exit 2; }
  if [ -z "${ATTN_FUZZ_KEEP_CORPUS:-}" ] || [ ! -d "$run/corpus" ]; then
    rm -rf "$run/corpus"
    mkdir -p "$run/corpus"
    cp "$root/test/fuzz/corpus/$name/"* "$run/corpus/"
  fi
  rm -rf "$run/artifacts" && mkdir -p "$run/artifacts"
  dict=()
  [ -f "$root/test/fuzz/$name.dict" ] && dict=(-dict="$root/test/fuzz/$name.dict")
  start=$SECONDS
  set +e
  "$binary" "$run/corpus" "${dict[@]}" -max_total_time="$seconds" \
    -max_len="${max_len[$target]:-4096}" -timeout="${timeout[$target]:-10}" \
    -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$run/artifacts/" \
    >"$run/log.txt" 2>&1
  rc=$?
  set -e
  elapsed=$((SECONDS - start))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$run/log.txt" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$run/log.txt" | tail -n 1)
  if ((rc == 0)); then
    result=ok
  else
    result="FAILED (exit $rc): $(ls "$run/artifacts" | tr '\n' ' ')"
    failed+=("$target")
  fi
  printf '%-18s %12s %8s %9s  %s\n' "$target" "${execs:-?}" "$elapsed" \
    "${rate:-?}" "$result"
  if ((rc != 0)); then
    grep -m1 -A30 -E '^==[0-9]+==ERROR|runtime error|deadly signal|ALARM|out-of-memory' \
      "$run/log.txt" || tail -n 40 "$run/log.txt"
    echo "fuzz: full log in $run/log.txt; inputs in $run/artifacts/"
  fi
done
if ((${#failed[@]})); then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: no crash in ${#targets[@]} target(s)"
