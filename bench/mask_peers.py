"""Attention with an attn_mask on the CPU: attn.scaled_dot_product_attention
against PyTorch's F.scaled_dot_product_attention on the same tensors, f32,
B=1 H=8 S=2048 D=128, in the mask forms users pass: a bool or float mask of
every head and row, one bool [S, S] mask for all heads, and a padding mask
(bool or float, [B, 1, 1, S]: the last 300 keys masked).

Each figure is the median of --repeat samples, the two implementations
interleaved; outputs are checked against each other before timing.

    python bench/mask_peers.py [--repeat N] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

import peers  # noqa: E402  (seconds_per_call, cpu_model)


def masks(torch, batch, heads, seq):
    """The mask forms, by label."""
    padding = torch.ones(batch, seq, dtype=torch.bool)
    padding[:, -300:] = False
    padding = padding[:, None, None, :]
    return {
        "bool [B, H, S, S]": torch.rand(batch, heads, seq, seq) > 0.1,
        "float [B, H, S, S]": torch.randn(batch, heads, seq, seq),
        "bool [S, S]": torch.rand(seq, seq) > 0.1,
        "padding bool [B, 1, 1, S]": padding,
        "padding float [B, 1, 1, S]": torch.zeros(batch, 1, 1, seq).masked_fill(
            ~padding, float("-inf")),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import torch
    import torch.nn.functional as F

    import attn

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    batch, heads, seq, dim = 1, 8, 2048, 128
    q, k, v = (torch.randn(batch, heads, seq, dim) for _ in range(3))
    print(f"machine: {peers.cpu_model()}, {args.threads} threads; "
          f"B={batch} H={heads} S={seq} D={dim} f32, median of {args.repeat}")
    print("| mask | attn ms | PyTorch ms | PyTorch time / attn time | max abs diff |")
    print("|---|---:|---:|---:|---:|")
    for label, mask in masks(torch, batch, heads, seq).items():
        ours = lambda: attn.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # noqa: E731
        theirs = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # noqa: E731
        diff = (ours() - theirs()).abs().max().item()
        if not diff < 1e-4:
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
