"""Linear attention on the CPU (issue 31): attn.linear_attention against plain
PyTorch implementations of the same function, f32, elu + 1.

Peers:
  torch chunkwise   the causal form as flash-linear-attention's reference
                    writes it in PyTorch: per chunk of 64 rows the masked
                    intra-chunk product plus the inter-chunk state, the
                    states a cumulative sum over chunks, all batched matmuls;
  torch two-matmul  the non-causal form, (φ(K)ᵀV) then φ(Q)·state.

Rows sweep the sequence length (1k to 64k tokens at B=1, H=8, D=Dv=64):
time per token should stay flat (linear in S) and causal within 1.5x of
non-causal. GFLOP/s use docs/spec.md's count ("Linear attention"); the
machine's fp32 FMA peak is measured in the same run. Each figure is the
median of --repeat samples, interleaved. Outputs are checked against each
other (relative error, f32).

--backward times training instead: forward + backward of the sum of O
times a fixed random tensor, attn (the kernel, then docs/spec.md's gradient
chunkwise in PyTorch) against autograd through the same peers; the
difference column is the largest of dQ's, dK's and dV's.

    python bench/linear_peers.py [--repeat N] [--threads N] [--only TEXT]
                                 [--backward]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

import peers  # noqa: E402  (seconds_per_call, fma_peak, cpu_model)

CHUNK = 64


def phi(torch, x):
    return torch.nn.functional.elu(x) + 1.0


def torch_two_matmul(torch, q, k, v, eps=1e-6):
    fq, fk = phi(torch, q), phi(torch, k)
    state = fk.transpose(-1, -2) @ v
    normalizer = fk.sum(2, keepdim=True)
    return (fq @ state) / ((fq * normalizer).sum(-1, keepdim=True) + eps)


def torch_chunkwise(torch, q, k, v, eps=1e-6, chunk=CHUNK):
    """Causal linear attention, chunkwise, as plain batched PyTorch."""
    b, h, s, d = q.shape
    dv = v.shape[-1]
    pad = (-s) % chunk
    if pad:
        q, k, v = (torch.nn.functional.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
    n = (s + pad) // chunk
    fq = phi(torch, q).view(b, h, n, chunk, d)
    fk = phi(torch, k).view(b, h, n, chunk, d)
    if pad:  # padded keys contribute nothing
        fk = fk.clone()
        fk.view(b, h, n * chunk, d)[:, :, s:] = 0
    v = v.view(b, h, n, chunk, dv)
    mask = torch.ones(chunk, chunk, dtype=torch.bool).tril()
    scores = (fq @ fk.transpose(-1, -2)).masked_fill(~mask, 0.0)
    chunk_states = fk.transpose(-1, -2) @ v  # [b, h, n, d, dv]
    states = chunk_states.cumsum(2) - chunk_states  # before each chunk
    chunk_norms = fk.sum(3)  # [b, h, n, d]
    norms = chunk_norms.cumsum(2) - chunk_norms
    num = scores @ v + fq @ states
    den = scores.sum(-1) + (fq * norms[:, :, :, None]).sum(-1) + eps
    out = (num / den[..., None]).view(b, h, n * chunk, dv)
    return out[:, :, :s]


def flops(batch, heads, seq, d, dv, causal):
    """docs/spec.md's count: the state's two products, plus the causal
    form's intra-chunk products counted whole."""
    count = 2 * batch * heads * (seq + seq) * d * dv
    if causal:
        count += 2 * batch * heads * seq * CHUNK * (d + dv)
    return count


BATCH, HEADS, D, DV = 1, 8, 64, 64


def cases(torch, args, lengths):
    """(name, causal, S, generator, (q, k, v)) of each row --only keeps."""
    for causal in (False, True):
        for seq in lengths:
            name = f"S={seq} {'causal' if causal else 'non-causal'}"
            if args.only and args.only not in name:
                continue
            g = torch.Generator().manual_seed(seq)
            yield name, causal, seq, g, [torch.randn(BATCH, HEADS, seq, x, generator=g)
                                         for x in (D, D, DV)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    peers.add_run_arguments(parser, repeat=5)
    parser.add_argument("--only", default="")
    parser.add_argument("--backward", action="store_true")
    args = parser.parse_args(argv)
    os.environ["ATTN_NUM_THREADS"] = str(args.threads)
    import torch
    import attn

    torch.set_num_threads(args.threads)
    peak, peak_note = peers.fma_peak(args.threads)
    print(f"# {peers.cpu_model()}, {args.threads} threads, torch {torch.__version__}, "
          f"fp32 FMA peak {peak:.0f} GFLOP/s ({peak_note})")
    if args.backward:
        return backward_rows(torch, attn, args)
    print("| shape | attn ms | attn GFLOP/s | % peak | ns/token | torch ms | "
          "attn vs torch | max rel. diff |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, causal, seq, g, (q, k, v) in cases(torch, args, (1024, 4096, 16384,
                                                           65536)):
        peer = torch_chunkwise if causal else torch_two_matmul
        runners = {
            "attn": lambda: attn.linear_attention(q, k, v, causal=causal),
            "torch": lambda: peer(torch, q, k, v),
        }
        with torch.no_grad():
            ours, theirs = runners["attn"](), runners["torch"]()
            diff = ((ours - theirs).abs().max() / theirs.abs().max()).item()
            t = peers.median_times(runners, args.repeat, warm_up=False)
        rate = flops(BATCH, HEADS, seq, D, DV, causal) / t["attn"] / 1e9
        print(f"| B={BATCH} H={HEADS} D={D} {name} | {t['attn'] * 1e3:.2f} | "
              f"{rate:.0f} | {100 * rate / peak:.0f} % | "
              f"{t['attn'] / seq * 1e9:.0f} | {t['torch'] * 1e3:.2f} | "
              f"{t['torch'] / t['attn']:.2f}x | {diff:.1e} |")
    return 0


def backward_rows(torch, attn, args) -> int:
    print("| shape | attn fwd+bwd ms | ns/token | torch autograd ms | attn vs torch | "
          "max rel. diff (dQ, dK, dV) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, causal, seq, g, (q, k, v) in cases(torch, args, (1024, 4096, 16384)):
        weight = torch.randn(BATCH, HEADS, seq, DV, generator=g)
        peer = torch_chunkwise if causal else torch_two_matmul

        def train(forward):
            leaves = [t.clone().requires_grad_() for t in (q, k, v)]
            (forward(*leaves) * weight).sum().backward()
            return [t.grad for t in leaves]

        runners = {
            "attn": lambda: train(lambda *x: attn.linear_attention(*x,
                                                                  causal=causal)),
            "torch": lambda: train(lambda *x: peer(torch, *x)),
        }
        ours, theirs = runners["attn"](), runners["torch"]()
        diff = max(((a - b).abs().max() / b.abs().max()).item()
                   for a, b in zip(ours, theirs))
        t = peers.median_times(runners, args.repeat, warm_up=False)
        print(f"| B={BATCH} H={HEADS} D={D} {name} | {t['attn'] * 1e3:.2f} | "
              f"{t['attn'] / seq * 1e9:.0f} | {t['torch'] * 1e3:.2f} | "
              f"{t['torch'] / t['attn']:.2f}x | {diff:.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
