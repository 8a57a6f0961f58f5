"""What reading a mask or a captured tensor of [.., S, S] costs on the CPU:
attn's forward and backward (``loss.backward()``'s kernel alone, on a
retained graph) with an f32 or bf16 additive mask (frozen, or learned: the
backward then writes its gradient too), a bool mask, a
FlexAttention score_mod that adds ``bias[h, q_idx, kv_idx]`` (an f32 capture)
and a mask_mod that reads a bool tensor, next to the same call without them.
The masks hold 128 MiB (f32 at S = 2048, H = 8): more than this machine's
L3, read once per call from memory. In one process, interleaved; each
figure the median of --repeat calls, in ms.

--compilers A,B compares two attn-compile binaries, --processes runs of
each, alternating (peers.compare_compilers).

    python bench/mask_reads.py [--seq S] [--repeat N] [--compilers A,B]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peers  # noqa: E402  (add_compiler_arguments, cpu_model, ...)


def timings(seq: int, repeat: int) -> dict:
    """{"case dtype fwd|bwd": median ms} in this process."""
    import torch

    import attn

    heads, dim = 8, 64
    generator = torch.Generator().manual_seed(0)
    bias = torch.randn(heads, seq, seq, generator=generator)
    keep = torch.rand(1, heads, seq, seq, generator=generator) < 0.9

    def score_bias(score, b, h, q_idx, kv_idx):
        return score + 0.5 * bias[h, q_idx, kv_idx]

    def keep_mod(b, h, q_idx, kv_idx):
        return keep[b, h, q_idx, kv_idx]

    kept_blocks = attn.create_block_mask(keep_mod, 1, heads, seq, seq, _compile=True)

    def cases(q, k, v, additive, learned) -> dict:
        return {
            "none": lambda: attn.scaled_dot_product_attention(q, k, v),
            "additive mask [1, H, S, S]": lambda: attn.scaled_dot_product_attention(
                q, k, v, attn_mask=additive),
            "additive mask [1, H, S, S] learned": lambda: attn.scaled_dot_product_attention(
                q, k, v, attn_mask=learned),
            "bool mask [1, H, S, S]": lambda: attn.scaled_dot_product_attention(
                q, k, v, attn_mask=keep),
            "score + 0.5 bias[h, q, kv]": lambda: attn.flex_attention(
                q, k, v, score_mod=score_bias),
            "mask_mod keep[b, h, q, kv]": lambda: attn.flex_attention(
                q, k, v, block_mask=kept_blocks),
        }

    def timed(call, tensors, grad):
        """The forward without autograd, and the backward of one forward."""
        def forward():
            with torch.no_grad():
                call()

        out = call()

        def backward():
            out.backward(grad, retain_graph=True)
            for t in tensors:
                t.grad = None

        return forward, backward

    calls = {}
    for dtype, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        q, k, v = (torch.randn(1, heads, seq, dim, generator=generator).to(dtype)
                   .requires_grad_() for _ in range(3))
        grad = torch.randn(1, heads, seq, dim, generator=generator).to(dtype)
        additive = bias.unsqueeze(0).to(dtype)
        learned = additive.clone().requires_grad_()
        for case, call in cases(q, k, v, additive, learned).items():
            calls[f"{case} {name} fwd"], calls[f"{case} {name} bwd"] = timed(
                call, (q, k, v, learned), grad)
    return {name: seconds * 1e3
            for name, seconds in peers.median_times(calls, repeat).items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    peers.add_compiler_arguments(parser)
    args = parser.parse_args(argv)
    if args.one_process or not args.compilers:
        import torch

        torch.set_num_threads(args.threads)
        found = timings(args.seq, args.repeat)
        if args.one_process:
            print(repr(found))
            return 0
        print(f"# {peers.cpu_model()}, {args.threads} threads, S={args.seq} B=1 H=8 "
              f"D=64, ms, medians of {args.repeat}")
        for name, ms in found.items():
            print(f"{name:44s} {ms:7.2f}")
        return 0
    peers.print_compiler_comparison(
        parser, args, __file__,
        ["--seq", str(args.seq), "--repeat", str(args.repeat), "--threads", str(args.threads)],
        f"{peers.cpu_model()}, {args.threads} threads, S={args.seq} B=1 H=8 D=64, ms",
        "call", 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
