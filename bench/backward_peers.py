"""The backward side by side on the CPU: attn's backward kernel against
PyTorch's CPU backward of torch.nn.functional.scaled_dot_product_attention
(issue 28, point 7).

Every case runs, in this one process, interleaved and on the same inputs and
threads: attn's forward (with the LSE the backward needs), attn's backward
(``torch.ops.attn.sdpa_backward``, what ``loss.backward()`` runs), PyTorch's
forward and PyTorch's backward (``torch.autograd.grad`` on a retained graph:
the backward alone, as ATen's CPU flash-attention kernel computes it). Each
figure is the median of --repeat samples. Before timing, attn's gradients
are checked against PyTorch's in float64 on the same inputs. "bwd/fwd per
round" is attn's backward time over its forward time from the two samples
of each round, median and range (the host's drift between rounds cancels).

FLOPs are the spec's (docs/spec.md): 2*(D + Dv) per allowed (query, key)
pair for the forward, 2*(3D + 2Dv) for the backward (five products), so a
causal case counts about half. The machine's fp32 FMA peak comes from
``attn-bench`` in the same run.

    python bench/backward_peers.py [--quick] [--only TEXT] [--repeat N]
                                   [--threads N] [--dropout P]

With --dropout P: attn's forward and backward with dropout next to without
(what the generator costs), and a whole training step (forward + backward)
with dropout in attn and in PyTorch (whose CPU backward with dropout takes
its math path).

With --bias: a training step with a learned additive bias [1, H, S, S]
(requires grad) in attn (its backward then also writes dS) and in PyTorch,
next to attn's step with the same bias frozen (what the bias's gradient
costs).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

import peers  # noqa: E402  (fma_peak, cpu_model, seconds_per_call)


def cases(quick: bool):
    shapes = [(1024, 64), (2048, 64), (4096, 64), (1024, 128), (2048, 128)]
    if quick:
        shapes = [(512, 64)]
    out = []
    for dtype in ("f32", "bf16"):
        for seq, dim in shapes:
            for causal in (False, True):
                out.append((dtype, seq, dim, causal))
    return out


def label(case):
    dtype, seq, dim, causal = case
    return f"{dtype} B=1 H=8 S={seq} D={dim}{' causal' if causal else ''}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default="")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--dropout", type=float, default=0.0,
                        help="dropout probability: then attn with and without "
                             "dropout, and PyTorch with it")
    parser.add_argument("--bias", action="store_true",
                        help="a training step with a learned bias, in attn and "
                             "PyTorch")
    args = parser.parse_args(argv)
    if args.dropout > 0.0:
        return dropout_table(args)
    if args.bias:
        return bias_table(args)
    os.environ["ATTN_NUM_THREADS"] = str(args.threads)

    import torch
    import torch.nn.functional as F

    import attn

    torch.set_num_threads(args.threads)
    peak, _ = peers.fma_peak(args.threads)
    print(f"# {peers.cpu_model()}, {args.threads} threads; fp32 FMA peak "
          f"{peak:.0f} GFLOP/s (attn-bench, same run)")
    print("# GFLOP/s (spec FLOPs); ratios of times: torch/attn for the "
          "backward, attn backward/attn forward")
    print("| case | attn fwd | attn bwd | torch fwd | torch bwd | bwd speedup "
          "| bwd/fwd | bwd/fwd per round | bwd % of peak |")
    print("|---|---|---|---|---|---|---|---|---|")
    dtypes = {"f32": torch.float32, "bf16": torch.bfloat16}
    for case in cases(args.quick):
        if args.only and args.only not in label(case):
            continue
        dtype, seq, dim, causal = case
        generator = torch.Generator().manual_seed(0)
        make = lambda: torch.randn(1, 8, seq, dim, generator=generator).to(dtypes[dtype])  # noqa: E731
        q, k, v, grad = make(), make(), make(), make()
        pairs = seq * (seq + 1) / 2 if causal else seq * seq
        fwd_flops = 8 * pairs * 2 * (2 * dim)
        bwd_flops = 8 * pairs * 2 * (5 * dim)

        out, lse = attn.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                     return_lse=True)
        options = (causal, None, False, "top_left", None, None, None)

        def ours_forward():
            return attn.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                     return_lse=True)

        def ours_backward():
            return torch.ops.attn.sdpa_backward(q, k, v, None, out, lse, grad, None,
                                                *options)

        qt, kt, vt = (t.clone().requires_grad_() for t in (q, k, v))
        graph_out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)

        def torch_forward():
            with torch.no_grad():
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        def torch_backward():
            return torch.autograd.grad(graph_out, (qt, kt, vt), grad, retain_graph=True)

        # attn's gradients against PyTorch's float64 ones first.
        ours = ours_backward()
        q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
        ref = torch.autograd.grad(
            F.scaled_dot_product_attention(q64, k64, v64, is_causal=causal),
            (q64, k64, v64), grad.double())
        worst = max(((a.double() - b).abs().max() / b.abs().max()).item()
                    for a, b in zip(ours, ref))
        bound = 1e-4 if dtype == "f32" else 2e-2
        if worst > bound:
            print(f"| {label(case)} | gradients off: relative error {worst:.2g} |")
            continue

        runs = {"attn fwd": ours_forward, "attn bwd": ours_backward,
                "torch fwd": torch_forward, "torch bwd": torch_backward}
        samples = {name: [] for name in runs}
        for _ in range(args.repeat):
            for name, run in runs.items():
                time.sleep(peers.SETTLE_SECONDS)
                samples[name].append(peers.seconds_per_call(run, 1))
        t = {name: statistics.median(s) for name, s in samples.items()}
        # The same ratio from the two samples of each round (taken one after
        # the other), median and range: the host's drift between rounds
        # cancels in it.
        rounds = sorted(b / f for f, b in zip(samples["attn fwd"], samples["attn bwd"]))
        gf = lambda flops, seconds: flops / seconds / 1e9  # noqa: E731
        print(f"| {label(case)} | {gf(fwd_flops, t['attn fwd']):.0f} "
              f"| {gf(bwd_flops, t['attn bwd']):.0f} "
              f"| {gf(fwd_flops, t['torch fwd']):.0f} "
              f"| {gf(bwd_flops, t['torch bwd']):.0f} "
              f"| {t['torch bwd'] / t['attn bwd']:.2f}x "
              f"| {t['attn bwd'] / t['attn fwd']:.2f} "
              f"| {statistics.median(rounds):.2f} ({rounds[0]:.2f}–{rounds[-1]:.2f}) "
              f"| {100 * gf(bwd_flops, t['attn bwd']) / peak:.0f} % |", flush=True)


def dropout_table(args):
    """attn's forward and backward with dropout next to without it (the
    generator's cost), and PyTorch's with it (its CPU backward then takes
    the math path)."""
    import torch
    import torch.nn.functional as F

    import attn

    torch.set_num_threads(args.threads)
    p = args.dropout
    print(f"# {peers.cpu_model()}, {args.threads} threads; dropout p={p}")
    print("# milliseconds (median); attn's cost of dropout as time ratios")
    print("| case | attn fwd | attn fwd+dropout | attn bwd | attn bwd+dropout "
          "| fwd ratio | bwd ratio | torch fwd+bwd+dropout | attn fwd+bwd+dropout |")
    print("|---|---|---|---|---|---|---|---|---|")
    dtypes = {"f32": torch.float32, "bf16": torch.bfloat16}
    for case in cases(args.quick):
        if args.only and args.only not in label(case):
            continue
        dtype, seq, dim, causal = case
        generator = torch.Generator().manual_seed(0)
        make = lambda: torch.randn(1, 8, seq, dim, generator=generator).to(dtypes[dtype])  # noqa: E731
        q, k, v, grad = make(), make(), make(), make()
        base = (causal, None, False, "top_left", None, None, None)

        def forward(drop):
            return torch.ops.attn.sdpa(q, k, v, None, *base, True, drop, 7)

        saved = {drop: forward(drop) for drop in (0.0, p)}

        def backward(drop):
            out, lse = saved[drop]
            return torch.ops.attn.sdpa_backward(q, k, v, None, out, lse, grad, None,
                                                *base, drop, 7)

        def ours_step():
            qs, ks, vs = (t.detach().requires_grad_() for t in (q, k, v))
            o = attn.scaled_dot_product_attention(qs, ks, vs, is_causal=causal,
                                                  dropout_p=p, dropout_seed=7)
            o.backward(grad)

        def torch_step():
            qs, ks, vs = (t.detach().requires_grad_() for t in (q, k, v))
            o = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal, dropout_p=p)
            o.backward(grad)

        runs = {"fwd": lambda: forward(0.0), "fwd+d": lambda: forward(p),
                "bwd": lambda: backward(0.0), "bwd+d": lambda: backward(p),
                "torch": torch_step, "ours": ours_step}
        samples = {name: [] for name in runs}
        for _ in range(args.repeat):
            for name, run in runs.items():
                time.sleep(peers.SETTLE_SECONDS)
                samples[name].append(peers.seconds_per_call(run, 1))
        t = {name: 1e3 * statistics.median(s) for name, s in samples.items()}
        print(f"| {label(case)} | {t['fwd']:.1f} | {t['fwd+d']:.1f} | {t['bwd']:.1f} "
              f"| {t['bwd+d']:.1f} | {t['fwd+d'] / t['fwd']:.2f} "
              f"| {t['bwd+d'] / t['bwd']:.2f} | {t['torch']:.1f} | {t['ours']:.1f} |",
              flush=True)


def bias_table(args):
    """A training step (forward + backward) with a learned additive bias
    [1, H, S, S]: attn with the bias's gradient, attn with the bias frozen,
    and PyTorch with its gradient (checked equal to attn's first)."""
    import torch
    import torch.nn.functional as F

    import attn

    os.environ["ATTN_NUM_THREADS"] = str(args.threads)
    torch.set_num_threads(args.threads)
    print(f"# {peers.cpu_model()}, {args.threads} threads; a bias [1, 8, S, S] "
          "that requires grad")
    print("# milliseconds (median) of forward + backward")
    print("| case | attn, bias frozen | attn, bias learned | torch, bias learned "
          "| dbias cost | speed-up vs torch |")
    print("|---|---|---|---|---|---|")
    dtypes = {"f32": torch.float32, "bf16": torch.bfloat16}
    for case in cases(args.quick):
        if args.only and args.only not in label(case):
            continue
        dtype, seq, dim, causal = case
        generator = torch.Generator().manual_seed(0)
        make = lambda: torch.randn(1, 8, seq, dim, generator=generator).to(dtypes[dtype])  # noqa: E731
        q, k, v, grad = make(), make(), make(), make()
        bias = torch.randn(1, 8, seq, seq, generator=generator).to(dtypes[dtype])
        if causal:  # PyTorch takes no is_causal with a mask: fold it in
            band = torch.ones(seq, seq, dtype=torch.bool).triu(1)
            bias = bias.masked_fill(band, float("-inf"))

        def step(fn, learn):
            qs, ks, vs = (t.detach().requires_grad_() for t in (q, k, v))
            b = bias.detach().requires_grad_(learn)
            o = fn(qs, ks, vs, attn_mask=b)
            o.backward(grad)
            return b.grad

        ours_grad = step(attn.scaled_dot_product_attention, True)
        torch_grad = step(F.scaled_dot_product_attention, True)
        scale = torch_grad.float().abs().max().item()
        error = (ours_grad.float() - torch_grad.float()).abs().max().item() / scale
        assert error <= (1e-3 if dtype == "f32" else 5e-2), (label(case), error)
        runs = {"frozen": lambda: step(attn.scaled_dot_product_attention, False),
                "ours": lambda: step(attn.scaled_dot_product_attention, True),
                "torch": lambda: step(F.scaled_dot_product_attention, True)}
        samples = {name: [] for name in runs}
        order = list(runs.items())
        for round_ in range(args.repeat):
            for name, run in order if round_ % 2 == 0 else reversed(order):
                time.sleep(peers.SETTLE_SECONDS)
                samples[name].append(peers.seconds_per_call(run, 1))
        t = {name: 1e3 * statistics.median(s) for name, s in samples.items()}
        print(f"| {label(case)} | {t['frozen']:.1f} | {t['ours']:.1f} | {t['torch']:.1f} "
              f"| {t['ours'] / t['frozen']:.2f}× | {t['torch'] / t['ours']:.2f}× |",
              flush=True)


if __name__ == "__main__":
    main()
