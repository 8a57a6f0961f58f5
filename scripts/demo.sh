#!/usr/bin/env bash
# The main job: build attn, then compile a causal GQA attention kernel
# (B=1, Hq=8, Hkv=2, Sq=Sk=1024, D=Dv=64, f32) with attn-run, run it on all
# cores through the runtime and check it against the float64 reference.
# Extra arguments go to attn-run (try --help).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh" "$root/build"
exec "$root/build/tools/attn-run" \
  --spec "name=attn_demo,dtype=f32,d=64,dv=64,causal,lse" \
  --batch 1 --heads-q 8 --heads-kv 2 --seq-q 1024 --seq-k 1024 "$@"
