"""Attention with an attn_mask on the CPU: attn.scaled_dot_product_attention
against PyTorch's F.scaled_dot_product_attention on the same tensors, f32
(or --dtype bf16: inputs and float masks), B=1 H=8 S=2048 D=128 (--dim), in
the mask forms users pass: a bool or float mask of
every head and row, one bool [S, S] mask for all heads, and a padding mask
(bool or float, [B, 1, 1, S]: the last 300 keys masked).

Each figure is the median of --repeat samples, the two implementations
interleaved; outputs are checked against each other before timing.

    python bench/mask_peers.py [--repeat N] [--threads N] [--dtype bf16] [--dim D]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

import peers  # noqa: E402  (seconds_per_call, cpu_model)


def masks(torch, batch, heads, seq, dtype):
    """The mask forms, by label (float masks in `dtype`)."""
    padding = torch.ones(batch, seq, dtype=torch.bool)
    padding[:, -300:] = False
    padding = padding[:, None, None, :]
    return {
        "bool [B, H, S, S]": torch.rand(batch, heads, seq, seq) > 0.1,
        "float [B, H, S, S]": torch.randn(batch, heads, seq, seq).to(dtype),
        "bool [S, S]": torch.rand(seq, seq) > 0.1,
        "padding bool [B, 1, 1, S]": padding,
        "padding float [B, 1, 1, S]": torch.zeros(batch, 1, 1, seq).masked_fill(
            ~padding, float("-inf")).to(dtype),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    parser.add_argument("--dim", type=int, default=128)
    args = parser.parse_args()

    import torch
    import torch.nn.functional as F

    import attn

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    batch, heads, seq, dim = 1, 8, 2048, args.dim
    q, k, v = (torch.randn(batch, heads, seq, dim).to(dtype) for _ in range(3))
    print(f"machine: {peers.cpu_model()}, {args.threads} threads; "
          f"B={batch} H={heads} S={seq} D={dim} {args.dtype}, median of {args.repeat}")
    print("| mask | attn ms | PyTorch ms | PyTorch time / attn time | max abs diff |")
    print("|---|---:|---:|---:|---:|")
    # Outputs against each other: f32's rounding, or bf16's (one ulp of
    # outputs near 1, the two summing in different orders).
    bound = 1e-4 if dtype == torch.float32 else 2e-2
    for label, mask in masks(torch, batch, heads, seq, dtype).items():
        ours = lambda: attn.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # noqa: E731
        theirs = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # noqa: E731
        diff = (ours().float() - theirs().float()).abs().max().item()
        if not diff < bound:
            print(f"| {label} | outputs differ by {diff:.3g} | | | |")
            return 1
        times = {"ours": [], "theirs": []}
        for _ in range(args.repeat):
            times["ours"].append(peers.seconds_per_call(ours, 1))
            times["theirs"].append(peers.seconds_per_call(theirs, 1))
        a, t = (statistics.median(times[n]) for n in ("ours", "theirs"))
        print(f"| {label} | {a * 1e3:.1f} | {t * 1e3:.1f} | {t / a:.2f}× | {diff:.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
