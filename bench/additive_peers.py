"""Additive (Bahdanau) attention on the CPU (issue 31): attn.nn.AdditiveAttention
against the tutorials' PyTorch module (which materializes the [B, Sq, Sk, A]
tensor of tanh inputs), f32, eval mode, the same weights in both.

The tutorials' exercise -- additive versus scaled dot-product attention on
the same task -- is the last rows: the same queries, keys and values through
attn's and PyTorch's scaled dot-product attention (one head).

Each figure is the median of --repeat samples, interleaved. Peak memory is
the growth of the process's maximum resident set over one call, each
implementation measured in a fresh subprocess. Outputs are checked against
each other (relative error). --train times a training step instead
(forward and backward of (context · W).sum(), parameters and query).

    python bench/additive_peers.py [--repeat N] [--threads N] [--no-memory] [--train]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

import peers  # noqa: E402  (seconds_per_call, cpu_model)

SHAPES = [  # B, Sq, Sk, Dq = Dk = Dv, A
    (4, 512, 512, 256, 128),
    (4, 1, 512, 256, 128),  # one decoder step: a query per batch
    (1, 2048, 2048, 128, 64),
]


def tutorial_module(torch):
    class AdditiveAttention(torch.nn.Module):
        def __init__(self, query_dim, key_dim, attn_dim):
            super().__init__()
            self.W_q = torch.nn.Linear(query_dim, attn_dim, bias=False)
            self.W_k = torch.nn.Linear(key_dim, attn_dim, bias=False)
            self.v = torch.nn.Linear(attn_dim, 1, bias=False)

        def forward(self, query, keys, values, mask=None):
            scores = self.v(torch.tanh(self.W_q(query).unsqueeze(2) +
                                       self.W_k(keys).unsqueeze(1))).squeeze(-1)
            if mask is not None:
                scores = scores.masked_fill(mask == 0, -1e9)
            weights = torch.softmax(scores, dim=-1)
            return weights @ values, weights

    return AdditiveAttention


def build(torch, shape, which):
    import attn

    batch, seq_q, seq_k, dim, a = shape
    torch.manual_seed(0)
    theirs = tutorial_module(torch)(dim, dim, a).eval()
    ours = attn.nn.AdditiveAttention(dim, dim, a).eval()
    ours.load_state_dict(theirs.state_dict())
    g = torch.Generator().manual_seed(1)
    q = torch.randn(batch, seq_q, dim, generator=g)
    k = torch.randn(batch, seq_k, dim, generator=g)
    v = torch.randn(batch, seq_k, dim, generator=g)
    runners = {
        "tutorial": lambda: theirs(q, k, v)[0],
        "attn": lambda: ours(q, k, v, need_weights=False)[0],
        "attn+weights": lambda: ours(q, k, v)[0],
        "attn sdpa": lambda: attn.scaled_dot_product_attention(
            q[:, None], k[:, None], v[:, None])[:, 0],
        "torch sdpa": lambda: torch.nn.functional.scaled_dot_product_attention(
            q[:, None], k[:, None], v[:, None])[:, 0],
    }
    return runners if which is None else runners[which]


def high_water_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def peak_memory(shape, which, threads) -> float:
    """MiB the maximum resident set (VmHWM: ru_maxrss would carry over this
    process's through fork and exec) grows by over one call, in a fresh
    process, after a warm-up call on one query and one key with the same
    dims (which compiles and loads the same kernel)."""
    tiny = (1, 1, 1) + tuple(shape[3:])
    code = f"""
import sys, torch
sys.path.insert(0, {str(ROOT)!r})
torch.set_num_threads({threads})
import additive_peers
warm = additive_peers.build(torch, {tiny!r}, {which!r})
run = additive_peers.build(torch, {shape!r}, {which!r})
with torch.no_grad():
    warm()
    before = additive_peers.high_water_kib()
    run()
    after = additive_peers.high_water_kib()
print((after - before) / 1024)
"""
    env = dict(os.environ, ATTN_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def training(torch, args) -> None:
    """--train: a training step (forward and backward of (context · W).sum(),
    every parameter's and the query's gradient) of attn.nn.AdditiveAttention
    against the tutorials' module holding the same parameters, the query's
    gradients checked against each other first."""
    import attn

    print("| B Sq Sk D A | tutorial step ms | attn step ms | tutorial / attn | "
          "max rel. diff of dQ |")
    print("|---|---:|---:|---:|---:|")
    for shape in SHAPES:
        batch, seq_q, seq_k, dim, a = shape
        torch.manual_seed(0)
        theirs = tutorial_module(torch)(dim, dim, a)
        ours = attn.nn.AdditiveAttention(dim, dim, a)
        ours.load_state_dict(theirs.state_dict())
        g = torch.Generator().manual_seed(1)
        q, k, v, w = (torch.randn(batch, n, dim, generator=g)
                      for n in (seq_q, seq_k, seq_k, seq_q))

        def step(module, **options):
            def run():
                module.zero_grad()
                leaf = q.clone().requires_grad_()
                (module(leaf, k, v, **options)[0] * w).sum().backward()
                return leaf.grad
            return run

        runners = {"tutorial": step(theirs), "attn": step(ours, need_weights=False)}
        ours_grad, theirs_grad = runners["attn"](), runners["tutorial"]()
        diff = ((ours_grad - theirs_grad).abs().max() / theirs_grad.abs().max()).item()
        samples = {name: [] for name in runners}
        # A decoder step takes milliseconds: 20 calls a sample.
        calls = 20 if seq_q <= 16 else 1
        for _ in range(args.repeat):
            for name, run in runners.items():
                samples[name].append(peers.seconds_per_call(run, calls))
        t = {name: statistics.median(s) * 1e3 for name, s in samples.items()}
        print(f"| {' '.join(map(str, shape))} | {t['tutorial']:.1f} | {t['attn']:.1f} | "
              f"{t['tutorial'] / t['attn']:.2f}x | {diff:.1e} |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    peers.add_run_arguments(parser, repeat=5)
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--train", action="store_true",
                        help="time a training step (forward + backward) instead")
    args = parser.parse_args(argv)
    os.environ["ATTN_NUM_THREADS"] = str(args.threads)
    import torch

    torch.set_num_threads(args.threads)
    print(f"# {peers.cpu_model()}, {args.threads} threads, torch {torch.__version__}")
    if args.train:
        training(torch, args)
        return 0
    print("| B Sq Sk D A | tutorial ms | attn ms | tutorial / attn | attn+weights ms | "
          "attn sdpa ms | torch sdpa ms | peak MiB tutorial / attn | max rel. diff |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for shape in SHAPES:
        runners = build(torch, shape, None)
        with torch.no_grad():
            ours, theirs = runners["attn"](), runners["tutorial"]()
            diff = ((ours - theirs).abs().max() / theirs.abs().max()).item()
            samples = {name: [] for name in runners}
            for _ in range(args.repeat):
                for name, run in runners.items():
                    samples[name].append(peers.seconds_per_call(run, 1))
        t = {name: statistics.median(s) * 1e3 for name, s in samples.items()}
        memory = "-"
        if not args.no_memory:
            memory = (f"{peak_memory(shape, 'tutorial', args.threads):.0f} / "
                      f"{peak_memory(shape, 'attn', args.threads):.0f}")
        print(f"| {' '.join(map(str, shape))} | {t['tutorial']:.2f} | {t['attn']:.2f} | "
              f"{t['tutorial'] / t['attn']:.1f}x | {t['attn+weights']:.2f} | "
              f"{t['attn sdpa']:.2f} | {t['torch sdpa']:.2f} | {memory} | {diff:.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
