"""Attention sinks on the CPU (issue 29, point 3): what a per-head sink logit
costs attn, and what it costs PyTorch.

For each shape, the same inputs through:
  - attn.scaled_dot_product_attention without sinks, and with sinks= (the
    sink joins the normalization once: its cost should be noise);
  - PyTorch's SDPA without sinks (its fastest CPU kernel: a lower bound for
    any PyTorch way of adding them);
  - PyTorch eager with sinks as gpt-oss's reference and Hugging Face's eager
    path write it: scores, the sink as one more column, softmax, the column
    dropped, then P·V;
  - PyTorch SDPA + the LSE correction (O · sigmoid(LSE − sink)), the trick
    that needs an LSE: through torch.ops.aten._scaled_dot_product_flash_
    attention_for_cpu, which returns one.
Forward only, f32 and bf16, prefill (causal, Sq = Sk) and decoding (one
query row against a KV cache, GQA). Each figure is the median of --repeat
samples, interleaved (in alternating orders); speed-ups are of attn with
sinks.

    python bench/sinks_peers.py [--repeat N] [--threads N] [--only TEXT]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

import peers  # noqa: E402  (seconds_per_call, cpu_model, fma_peak)

SHAPES = (
    # name, B, Hq, Hkv, Sq, Sk, D, causal, calls per sample
    ("prefill B=1 H=8 S=2048 D=64 causal", 1, 8, 8, 2048, 2048, 64, True, 1),
    ("prefill B=1 H=32/8 S=1024 D=64 causal", 1, 32, 8, 1024, 1024, 64, True, 1),
    ("decode B=4 H=64/8 Sk=8192 D=64", 4, 64, 8, 1, 8192, 64, True, 20),
)


def eager_with_sinks(torch, q, k, v, sinks, causal):
    """gpt-oss's reference: the sink as one more column of the softmax."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        sq, sk = s.shape[-2:]
        band = torch.ones(sq, sk, dtype=torch.bool).triu(sk - sq + 1)
        s = s.masked_fill(band, float("-inf"))
    column = sinks.to(s.dtype).reshape(1, -1, 1, 1).expand(*s.shape[:-1], 1)
    p = torch.softmax(torch.cat([s, column], dim=-1), dim=-1)[..., :-1]
    return p @ v


def sdpa_lse_with_sinks(torch, q, k, v, sinks, causal):
    """PyTorch's flash kernel for the CPU (it returns the LSE), then the
    sink's share taken out: O · sigmoid(LSE − sink)."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    # Bottom-right causal for decoding is "no mask" with one query row.
    causal = causal and q.shape[2] > 1
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q, k, v, is_causal=causal)
    share = torch.sigmoid(lse - sinks.reshape(1, -1, 1))
    return out * share.unsqueeze(-1).to(out.dtype)


def rows(repeat: int, only: str):
    import torch
    import torch.nn.functional as F
    import attn

    results = []
    for dtype in (torch.float32, torch.bfloat16):
        for name, b, hq, hkv, sq, sk, d, causal, calls in SHAPES:
            label = f"{name} {str(dtype).replace('torch.', '')}"
            if only and only not in label:
                continue
            g = torch.Generator().manual_seed(0)
            q = torch.randn(b, hq, sq, d, generator=g).to(dtype)
            k = torch.randn(b, hkv, sk, d, generator=g).to(dtype)
            v = torch.randn(b, hkv, sk, d, generator=g).to(dtype)
            sinks = torch.randn(hq, generator=g)
            align = "bottom_right"
            # Each way computes the same function (checked once here).
            ours = attn.scaled_dot_product_attention(
                q, k, v, is_causal=causal, causal_alignment=align, enable_gqa=True,
                sinks=sinks)
            for other in (eager_with_sinks(torch, q, k, v, sinks, causal),
                          sdpa_lse_with_sinks(torch, q, k, v, sinks, causal)):
                error = (ours.float() - other.float()).abs().max().item()
                assert error <= (1e-4 if dtype == torch.float32 else 3e-2), (label, error)
            runners = {
                "attn": lambda: attn.scaled_dot_product_attention(
                    q, k, v, is_causal=causal, causal_alignment=align, enable_gqa=True),
                "attn sinks": lambda: attn.scaled_dot_product_attention(
                    q, k, v, is_causal=causal, causal_alignment=align, enable_gqa=True,
                    sinks=sinks),
                "torch sdpa": lambda: F.scaled_dot_product_attention(
                    q, k, v, is_causal=causal and sq > 1, enable_gqa=True),
                "torch eager sinks": lambda: eager_with_sinks(torch, q, k, v, sinks, causal),
                "torch sdpa+lse sinks": lambda: sdpa_lse_with_sinks(torch, q, k, v, sinks,
                                                                     causal),
            }
            samples = {key: [] for key in runners}
            for run in runners.values():
                run()
            # Forward then backward through the list, round by round: a
            # runner's neighbours (what warms or thrashes the caches before
            # it) change, and no one of them always follows eager's 300 ms.
            order = list(runners.items())
            for round_ in range(repeat):
                for key, run in order if round_ % 2 == 0 else reversed(order):
                    samples[key].append(peers.seconds_per_call(run, calls))
            results.append((label, {key: statistics.median(t) for key, t in samples.items()}))
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    peers.add_run_arguments(parser, repeat=7)
    parser.add_argument("--only", default="")
    args = parser.parse_args(argv)
    os.environ["ATTN_NUM_THREADS"] = str(args.threads)
    import torch

    torch.set_num_threads(args.threads)
    print(f"# {peers.cpu_model()}, {args.threads} threads, torch {torch.__version__}")
    print("| shape | attn | attn, sinks | sinks' cost | torch SDPA (no sinks) | "
          "torch eager, sinks | torch SDPA + LSE fix, sinks | speed-up vs the best "
          "torch with sinks |")
    print("|---|---|---|---|---|---|---|---|")
    for label, t in rows(args.repeat, args.only):
        best = min(t["torch eager sinks"], t["torch sdpa+lse sinks"])
        ms = {key: f"{value * 1e3:.3f} ms" for key, value in t.items()}
        print(f"| {label} | {ms['attn']} | {ms['attn sinks']} | "
              f"{t['attn sinks'] / t['attn']:.3f}× | {ms['torch sdpa']} | "
              f"{ms['torch eager sinks']} | {ms['torch sdpa+lse sinks']} | "
              f"{best / t['attn sinks']:.2f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
