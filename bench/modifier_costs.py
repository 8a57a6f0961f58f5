"""What a score_mod or mask_mod costs on the CPU (issue 29, point 7): the time
of attn.flex_attention with each modifier over the plain forward's, in one
process, interleaved (medians of --repeat rounds). The mask_mods run with
every block partial (create_block_mask(..., separate_full_blocks=False)), so
the kernel evaluates them at every score: their cost, not their sparsity.

With --compilers A,B (two attn-compile binaries) each runs in its own
processes (--processes each, alternating, their own kernel caches) and the
ratios are set side by side: a compiler change A/B on the same machine.

    python bench/modifier_costs.py [--seq S] [--repeat N] [--compilers A,B]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peers  # noqa: E402  (add_compiler_arguments, print_compiler_comparison)


def ratios(seq: int, repeat: int) -> dict:
    """{case dtype: time over the plain forward's} in this process."""
    import torch

    import attn

    heads = 8
    slopes = torch.exp2(-8.0 * torch.arange(1, heads + 1) / heads)
    table = torch.randn(heads, 32, generator=torch.Generator().manual_seed(0))
    one_document = torch.zeros(seq, dtype=torch.int32)

    def alibi(score, b, h, q_idx, kv_idx):
        return score - slopes[h] * (q_idx - kv_idx).abs()

    def relative_bias(score, b, h, q_idx, kv_idx):  # T5's 32 buckets' width
        return score + table[h, torch.clamp(kv_idx - q_idx, -16, 15) + 16]

    def chunked(b, h, q_idx, kv_idx):  # Llama 4's chunked attention, one chunk
        return q_idx // 8192 == kv_idx // 8192

    def same_document(b, h, q_idx, kv_idx):
        return one_document[q_idx] == one_document[kv_idx]

    results = {}
    for dtype in (torch.float32, torch.bfloat16):
        g = torch.Generator().manual_seed(1)
        q, k, v = (torch.randn(1, heads, seq, 64, generator=g).to(dtype) for _ in range(3))
        cases = {"plain": lambda: attn.flex_attention(q, k, v)}
        for score_mod in (alibi, relative_bias):
            cases[score_mod.__name__] = (
                lambda f=score_mod: attn.flex_attention(q, k, v, score_mod=f))
        for mask_mod in (chunked, same_document):
            mask = attn.create_block_mask(mask_mod, None, None, seq, seq,
                                          separate_full_blocks=False)
            cases[mask_mod.__name__] = (
                lambda m=mask: attn.flex_attention(q, k, v, block_mask=m))
        times = peers.median_times(cases, repeat)
        for name in cases:
            if name != "plain":
                results[f"{name} {str(dtype).replace('torch.', '')}"] = (
                    times[name] / times["plain"])
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--repeat", type=int, default=9)
    peers.add_compiler_arguments(parser)
    args = parser.parse_args(argv)
    if args.one_process or not args.compilers:
        found = ratios(args.seq, args.repeat)
        if args.one_process:
            print(repr(found))
            return 0
        print(f"# S={args.seq} B=1 H=8 D=64, time over the plain forward's")
        for name, ratio in found.items():
            print(f"{name:24s} {ratio:.3f}")
        return 0
    peers.print_compiler_comparison(
        parser, args, __file__, ["--seq", str(args.seq), "--repeat", str(args.repeat)],
        f"S={args.seq} B=1 H=8 D=64, time over the plain forward's", "modifier", 3)
    return 0


if __name__ == "__main__":
    sys.exit(main())
