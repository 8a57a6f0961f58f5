"""One kernel, three call paths (issue 32: why attn-bench and the Python
package reported different GFLOP/s for the same shape).

For each case the same kernel spec is timed, interleaved round by round in
one run, through

- ``python/openmp``: ``attn.scaled_dot_product_attention`` on PyTorch tensors,
  its work items on the process's OpenMP team (the package's default when
  PyTorch is loaded);
- ``python/attn``: the same call with ``ATTN_POOL=attn`` (attn's own pool, as
  in attn-bench and the C runtime);
- ``attn-bench``: ``attn-bench --compare`` of a library that attn-compile
  builds from the same spec (attn-bench's own inputs, pool and timer), a
  subprocess per round.

Each figure is the median over the rounds (min in brackets: on a shared
machine the host slows every path in bursts, so a ratio of medians below the
spread of its own samples says the paths do not differ). The last column is
the page faults of a Python call: a new output tensor of 32 MiB or more is
fresh memory from the kernel (glibc maps such blocks anew, and the first
write to each page faults and zeroes it), which attn-bench, reusing its
output buffer, does not pay (PyTorch's own operators pay it alike).

    python bench/call_path.py [--only TEXT] [--repeat N] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

import peers  # noqa: E402  (Case, make_inputs, seconds_per_call, cpu_model)

#: A Python sample repeats the call until it lasts at least this long.
SAMPLE_SECONDS = 0.2


def cases() -> list[peers.Case]:
    return [
        peers.square("f32", 4096, 64),
        peers.square("f32", 4096, 64, causal=True),
        peers.square("f32", 2048, 128),
        peers.gqa("f32", 2048, 128, 32, 8),
        peers.square("f32", 8192, 128),
        peers.square("bf16", 4096, 64, causal=True),
    ]


def spec_of(case: peers.Case) -> str:
    return (f"name=compared,dtype={case.dtype},d={case.head_dim},dv={case.head_dim}"
            + (",causal" if case.causal else ""))


def bench_milliseconds(library: Path, case: peers.Case, threads: int) -> float:
    """attn-bench --compare's median of 3 rounds for `library` on `case`."""
    sizes = f"{case.batch}:{case.heads_q}:{case.heads_kv}:{case.seq_q}:{case.seq_k}"
    result = subprocess.run(
        [str(ROOT.parent / "build" / "tools" / "attn-bench"), f"--compare={library}",
         f"--sizes={sizes}", "--repeat=3", f"--num-threads={threads}"],
        capture_output=True, text=True, check=True)
    row = re.search(re.escape(str(library)) + r"\s+([\d.]+)\s", result.stdout)
    if row is None or " ok" not in result.stdout:
        raise RuntimeError(f"attn-bench did not time {library}:\n{result.stdout}{result.stderr}")
    return float(row.group(1))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="only cases whose label contains this")
    peers.add_run_arguments(parser, repeat=5)
    args = parser.parse_args(argv)
    chosen = [c for c in cases() if args.only in c.label]
    if not chosen:
        print(f"no case matches --only={args.only!r}", file=sys.stderr)
        return 2
    os.environ["ATTN_NUM_THREADS"] = str(args.threads)
    import torch
    import attn

    torch.set_num_threads(args.threads)
    print(f"machine: {peers.cpu_model()}, {args.threads} threads; median [min] ms of {args.repeat} "
          "interleaved rounds")
    print("| case | python/openmp | python/attn | attn-bench | openmp / attn-bench | attn / attn-bench "
          "| page faults a call |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        for index, case in enumerate(chosen):
            library = Path(folder) / f"case{index}.so"
            subprocess.run([str(attn.find_compiler()), f"--spec={spec_of(case)}", "-o", str(library)],
                           check=True)
            q, k, v = peers.make_inputs(case)
            options = dict(is_causal=case.causal, enable_gqa=case.heads_q != case.heads_kv)

            def call():
                return attn.scaled_dot_product_attention(q, k, v, **options)

            samples = {"openmp": [], "attn": [], "bench": []}
            calls, faults, timed = {}, 0, 0
            for pool in ("openmp", "attn"):
                os.environ["ATTN_POOL"] = pool
                call()
                calls[pool] = max(1, round(SAMPLE_SECONDS / peers.seconds_per_call(call, 1)))
            for _ in range(args.repeat):
                for pool in ("openmp", "attn"):
                    os.environ["ATTN_POOL"] = pool
                    time.sleep(peers.SETTLE_SECONDS)
                    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                    samples[pool].append(peers.seconds_per_call(call, calls[pool]) * 1e3)
                    faults += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
                    timed += calls[pool]
                samples["bench"].append(bench_milliseconds(library, case, args.threads))
            os.environ.pop("ATTN_POOL")
            median = {path: statistics.median(times) for path, times in samples.items()}
            cells = [f"{median[p]:.2f} [{min(samples[p]):.2f}]" for p in ("openmp", "attn", "bench")]
            cells += [f"{median[p] / median['bench']:.3f}" for p in ("openmp", "attn")]
            cells.append(str(round(faults / timed)))
            print(f"| {case.label} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
