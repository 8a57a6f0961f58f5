#!/bin/sh
# Score and mask modifiers against the attribute and mask forms of the same
# attention, in one run (docs/benchmarks.md, "Score and mask modifiers"):
# B=1, H=8, S=2048, D=64, 2 threads, median of 10 calls each; each kernel
# is also checked against the float64 reference.
#   bench/modifiers.sh [build-dir]
build=${1:-build}
run() {
  label=$1; shift
  out=$("$build/tools/attn-run" --seq-q 2048 --seq-k 2048 --heads-q 8 \
        --heads-kv 8 --repeat 10 "$@" 2>&1)
  printf '%-22s %s %s\n' "$label" \
    "$(echo "$out" | grep -o 'time [0-9.]* ms' | head -1)" \
    "$(echo "$out" | grep -o 'PASS\|FAIL' | tail -1)"
}
for dt in f32 bf16; do
  echo "== $dt"
  run "plain" --spec "dtype=$dt,d=64"
  run "alibi score_mod" --spec "dtype=$dt,d=64" --modifiers alibi
  run "bias mask [1,H,S,S]" --spec "dtype=$dt,d=64,mask=bias:b1"
  run "causal attribute" --spec "dtype=$dt,d=64,causal"
  run "causal mask_mod" --spec "dtype=$dt,d=64" --modifiers causal
  run "documents mask_mod" --spec "dtype=$dt,d=64" --modifiers documents
  run "bool mask [1,1,S,S]" --spec "dtype=$dt,d=64,mask=bool:b1h1"
  run "relative_bias" --spec "dtype=$dt,d=64" --modifiers relative_bias
done
