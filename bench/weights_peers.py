"""Attention weights and multi-head attention modules side by side on the CPU
(issue 30): attn's weights kernel against the tutorials' eager softmax, and
attn.nn.MultiheadAttention against torch.nn.MultiheadAttention.

Weights: W [B, H, S, S] f32 from attn.attention_weights (with the forward's
LSE, and computing its own; allocating W, as a user's call does, and into a
reused buffer, which saves the fresh pages' faults) and from
torch.softmax(q @ kᵀ · scale) (what the tutorials and torch's module do), in
GB/s of W written, next to the
machine's copy bandwidth measured in the same run (a PyTorch copy of 1 GiB,
read + write). The shapes make W larger than any L3 here (512 MiB).

Modules: the same weights in both (load_state_dict), eval mode, one forward
with need_weights False and True, and a decoding step (one query against a
cached sequence), plus a training step (forward + backward, need_weights
False). Then a decoding step with a KV cache (attn.nn.KVCache against
projected caches and F.scaled_dot_product_attention written in PyTorch:
torch's module has no cache). Each figure is the median of --repeat samples, interleaved.

    python bench/weights_peers.py [--repeat N] [--threads N] [--only TEXT]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

import peers  # noqa: E402  (seconds_per_call, copy_bandwidth, cpu_model)


def weights_rows(repeat: int, only: str):
    import torch
    import attn

    rows = []
    for batch, heads, seq, dim, causal in ((1, 8, 4096, 64, False), (1, 8, 4096, 64, True),
                                           (1, 32, 2048, 128, False)):
        name = f"W B={batch} H={heads} S={seq} D={dim}" + (" causal" if causal else "")
        if only and only not in name:
            continue
        g = torch.Generator().manual_seed(0)
        q = torch.randn(batch, heads, seq, dim, generator=g)
        k = torch.randn(batch, heads, seq, dim, generator=g)
        _, lse = attn.scaled_dot_product_attention(q, k, k, is_causal=causal, return_lse=True)
        scale = 1 / math.sqrt(dim)
        tril = torch.ones(seq, seq, dtype=torch.bool).tril()

        def eager():
            s = q @ k.transpose(-1, -2) * scale
            if causal:
                s = s.masked_fill(~tril, -math.inf)
            return torch.softmax(s, -1)

        ours = attn.attention_weights(q, k, is_causal=causal, lse=lse)
        error = (ours - eager()).abs().max().item()
        del ours
        buffer = torch.empty(batch, heads, seq, seq)
        runners = {
            "attn into a buffer": lambda: attn.attention_weights(
                q, k, is_causal=causal, lse=lse, out=buffer),
            "attn (LSE given)": lambda: attn.attention_weights(q, k, is_causal=causal, lse=lse),
            "attn (own LSE)": lambda: attn.attention_weights(q, k, is_causal=causal),
            "torch softmax(q·kᵀ)": eager,
        }
        times = peers.median_times(runners, repeat)
        size = batch * heads * seq * seq * 4
        rows.append((name, {n: size / t * 1e-9 for n, t in times.items()}, error))
    return rows


def module_rows(repeat: int, only: str):
    import torch
    from torch import nn
    import attn.nn

    rows = []
    embed, heads, batch, seq = 512, 8, 8, 512
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(embed, heads, batch_first=True).eval()
    ours = attn.nn.MultiheadAttention(embed, heads, batch_first=True).eval()
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(batch, seq, embed)
    step = torch.randn(batch, 1, embed)
    cases = [
        ("MHA B=8 S=512 E=512 H=8, need_weights=False",
         lambda m: (lambda: m(x, x, x, need_weights=False))),
        ("MHA B=8 S=512 E=512 H=8, need_weights=True",
         lambda m: (lambda: m(x, x, x, need_weights=True))),
        ("MHA decoding step: 1 query, 512 cached keys",
         lambda m: (lambda: m(step, x, x, need_weights=False))),
    ]
    with torch.no_grad():
        for name, make in cases:
            if only and only not in name:
                continue
            times = peers.median_times({"attn.nn": make(ours), "torch.nn": make(ref)}, repeat,
                                 calls=20 if "decoding" in name else 3)
            rows.append((name, times))
        name = "MHA decoding step with a KV cache: 1 new token, 512 cached"
        if not only or only in name:
            rows.append((name, peers.median_times(decoding_with_cache(ours, ref, x, step), repeat,
                                            calls=20)))
    name = "MHA training step (fwd + bwd) B=8 S=512 E=512 H=8"
    if not only or only in name:
        xs = x.clone().requires_grad_(True)

        def train(m):
            def run():
                m.zero_grad(set_to_none=True)
                m(xs, xs, xs, need_weights=False)[0].sum().backward()
            return run

        ours.train(), ref.train()
        rows.append((name, peers.median_times({"attn.nn": train(ours), "torch.nn": train(ref)},
                                        repeat, calls=3)))
    return rows


def decoding_with_cache(ours, ref, x, step):
    """One decoding step after a 512-token prompt, both sides keeping the
    projected keys and values: attn.nn with a KVCache, and what a PyTorch
    user writes (preallocated projected caches, F.scaled_dot_product_attention
    on their prefix). torch.nn.MultiheadAttention has no cache: it projects
    the whole cached sequence at every step (the row above)."""
    import torch
    import torch.nn.functional as F
    import attn.nn

    cache = attn.nn.KVCache(capacity=x.shape[1] + 1)
    ours(x, x, x, is_causal=True, need_weights=False, kv_cache=cache)
    prompt = len(cache)

    def attn_step():
        cache.crop(prompt)
        ours(step, step, step, need_weights=False, kv_cache=cache)

    batch, heads, embed = x.shape[0], ref.num_heads, ref.embed_dim
    split = lambda t: t.unflatten(-1, (heads, embed // heads)).transpose(1, 2)  # noqa: E731
    _, k, v = F.linear(x, ref.in_proj_weight, ref.in_proj_bias).chunk(3, dim=-1)
    keys = torch.empty(batch, heads, prompt + 1, embed // heads)
    values = torch.empty_like(keys)
    keys[:, :, :prompt], values[:, :, :prompt] = split(k), split(v)

    def torch_step():
        q, k, v = (split(t) for t in
                   F.linear(step, ref.in_proj_weight, ref.in_proj_bias).chunk(3, dim=-1))
        keys[:, :, prompt:], values[:, :, prompt:] = k, v
        out = F.scaled_dot_product_attention(q, keys, values)
        ref.out_proj(out.transpose(1, 2).flatten(2))

    return {"attn.nn": attn_step, "torch (cached projections + SDPA)": torch_step}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    peers.add_run_arguments(parser, repeat=5)
    parser.add_argument("--only", default="")
    args = parser.parse_args(argv)
    os.environ["ATTN_NUM_THREADS"] = str(args.threads)
    import torch

    torch.set_num_threads(args.threads)
    print(f"# {peers.cpu_model()}, {args.threads} threads, torch {torch.__version__}, "
          f"median of {args.repeat}")
    copy = peers.copy_bandwidth()
    print(f"copy bandwidth (1 GiB, read + write): {copy:.1f} GB/s; its write half "
          f"{copy / 2:.1f} GB/s\n")
    print("| weights | attn, LSE given | attn, own LSE | torch softmax(q·kᵀ) | "
          "attn vs torch | attn into a reused buffer | its share of the copy's write half "
          "| max error |")
    print("|---|---|---|---|---|---|---|---|")
    for name, gbs, error in weights_rows(args.repeat, args.only):
        given, own, eager = gbs["attn (LSE given)"], gbs["attn (own LSE)"], gbs["torch softmax(q·kᵀ)"]
        reused = gbs["attn into a buffer"]
        print(f"| {name} | {given:.1f} GB/s | {own:.1f} GB/s | {eager:.1f} GB/s | "
              f"{given / eager:.2f}× | {reused:.1f} GB/s | {reused / (copy / 2):.0%} | "
              f"{error:.1e} |")
    print("\n| module | attn.nn | peer | speed-up |")
    print("|---|---|---|---|")
    for name, times in module_rows(args.repeat, args.only):
        ours = times.pop("attn.nn")
        (peer, ref), = times.items()
        print(f"| {name} | {ours * 1e3:.2f} ms | {ref * 1e3:.2f} ms ({peer}) | "
              f"{ref / ours:.2f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
