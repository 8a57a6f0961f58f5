"""Training a tensor that a score_mod captures (issue 29, point 5): a
relative-position bias table [H, 2·64+1] and per-head ALiBi slopes, trained
through attn.flex_attention, on the CPU.

Rows, forward + backward of (O · W).sum() for a fixed random W, f32,
B=1 H=8 D=64, median of --repeat interleaved samples:
  attn, frozen       the table/slopes without grad: the kernels' forward and
                     backward (dQ, dK, dV) only;
  attn, trained      the same plus the captured tensor's gradient, which the
                     backward kernel computes (grad_captures: the score_mod's
                     derivative in each element it reads, summed per work
                     item);
  in PyTorch         the same with the gradient computed as attn does where
                     those partial sums would not fit (the score_mod re-run
                     in PyTorch a block of query rows at a time);
  torch eager        the same function written with materialized scores
                     (q·kᵀ, the score_mod by broadcasting, softmax, ·V) and
                     autograd: what PyTorch offers on the CPU, whose
                     flex_attention has no CPU backward.
The trained gradient is checked against torch eager's first.

    python bench/capture_gradients.py [--repeat N] [--threads N] [--seq S ...]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

import peers  # noqa: E402  (seconds_per_call, cpu_model)

HEADS, DIM, RADIUS = 8, 64, 64


def score_mods(torch, params):
    def table(score, b, h, q_idx, kv_idx):
        return score + params["table"][h, torch.clamp(kv_idx - q_idx, -RADIUS, RADIUS) + RADIUS]

    def alibi(score, b, h, q_idx, kv_idx):
        return score - params["slopes"][h] * (q_idx - kv_idx).abs()

    return {"relative-position table": (table, "table"), "ALiBi slopes": (alibi, "slopes")}


def eager(torch, q, k, v, score_mod):
    seq = q.shape[2]
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    idx = torch.arange(seq)
    s = score_mod(s, torch.arange(1)[:, None, None, None],
                  torch.arange(HEADS)[None, :, None, None], idx[None, None, :, None],
                  idx[None, None, None, :])
    return torch.softmax(s, -1) @ v


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    peers.add_run_arguments(parser, repeat=5)
    parser.add_argument("--seq", type=int, nargs="+", default=[1024, 2048])
    args = parser.parse_args(argv)
    os.environ["ATTN_NUM_THREADS"] = str(args.threads)
    import torch

    import attn

    torch.set_num_threads(args.threads)
    print(f"# {peers.cpu_model()}, {args.threads} threads, torch {torch.__version__}, "
          f"B=1 H={HEADS} D={DIM} f32")
    import attn._flex as flex

    print("| score_mod | S | attn, frozen | attn, trained | gradient's cost | gradient in "
          "PyTorch | torch eager (trained) | attn vs eager | max rel. diff of the gradient |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    g = torch.Generator().manual_seed(0)
    params = {"table": 0.1 * torch.randn(HEADS, 2 * RADIUS + 1, generator=g),
              "slopes": torch.rand(HEADS, generator=g)}
    def in_pytorch(a, b, c, score_mod):
        saved = flex.CAPTURE_PARTIAL_BYTES
        flex.CAPTURE_PARTIAL_BYTES = 0  # no partial sums: PyTorch's path
        try:
            return attn.flex_attention(a, b, c, score_mod=score_mod)
        finally:
            flex.CAPTURE_PARTIAL_BYTES = saved

    for seq in args.seq:
        q, k, v, w = (torch.randn(1, HEADS, seq, DIM, generator=g) for _ in range(4))
        for name, (score_mod, key) in score_mods(torch, params).items():
            def step(forward, trained):
                def run():
                    params[key].requires_grad_(trained)
                    params[key].grad = None
                    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
                    (forward(*leaves) * w).sum().backward()
                    return params[key].grad
                return run

            runners = {
                "frozen": step(lambda a, b, c: attn.flex_attention(a, b, c,
                                                                   score_mod=score_mod), False),
                "trained": step(lambda a, b, c: attn.flex_attention(a, b, c,
                                                                    score_mod=score_mod), True),
                "in PyTorch": step(lambda a, b, c: in_pytorch(a, b, c, score_mod), True),
                "eager": step(lambda a, b, c: eager(torch, a, b, c, score_mod), True),
            }
            ours, theirs = runners["trained"](), runners["eager"]()
            diff = ((ours - theirs).abs().max() / theirs.abs().max()).item()
            t = peers.median_times(runners, args.repeat, warm_up=False)
            params[key].requires_grad_(False)
            print(f"| {name} | {seq} | {t['frozen'] * 1e3:.1f} ms | {t['trained'] * 1e3:.1f} ms "
                  f"| {t['trained'] / t['frozen']:.2f}× | {t['in PyTorch'] * 1e3:.1f} ms | "
                  f"{t['eager'] * 1e3:.1f} ms | {t['eager'] / t['trained']:.2f}× | {diff:.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
