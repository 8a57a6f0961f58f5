"""FlexAttention's interface on the CPU (issue 29, point 7): attn.flex_attention
against PyTorch's flex_attention under torch.compile (its CPU path: Inductor's
C++ template), the same inputs, modifiers and threads.

For each modifier, forward (and, where PyTorch has one, forward + backward):
  - attn.flex_attention with the score_mod / block mask;
  - torch.compile(torch.nn.attention.flex_attention.flex_attention) with the
    same functions and PyTorch's own create_block_mask (which it uses to skip
    empty blocks);
  - where an attribute says the same thing (causal), attn's attribute form
    and PyTorch's SDPA, as the floor;
  - attn.flex_attention with PyTorch's BlockMask (what a user who switched
    only flex_attention's import runs).
Both flex implementations are checked against each other first. Medians of
--repeat samples, interleaved in alternating orders; OMP_WAIT_POLICY=PASSIVE
(unless set) so that PyTorch's idle OpenMP threads do not spin on the cores
attn's next call runs on.

    python bench/flex_peers.py [--repeat N] [--threads N] [--only TEXT] [--seq S]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

import peers  # noqa: E402  (seconds_per_call, cpu_model)


def modifiers(torch, seq: int, heads: int, dtype):
    slopes = torch.exp2(-8.0 * torch.arange(1, heads + 1) / heads)
    # A per-position bias of the inputs' dtype (attn runs it as the
    # additive mask it is).
    bias = torch.randn(heads, seq, seq, generator=torch.Generator().manual_seed(2)).to(dtype)
    documents = (torch.arange(seq) * 4 // seq).to(torch.int32)  # 4 equal documents
    # Packed sequences of 20-199 tokens (fixed seed): unlike the 4 equal
    # documents, most blocks on the diagonal are partial, so the mask_mod
    # runs there.
    lengths = torch.randint(20, 200, (seq // 20 + 1,),
                            generator=torch.Generator().manual_seed(1))
    packed = torch.repeat_interleave(torch.arange(len(lengths)), lengths)[:seq]
    packed = packed.to(torch.int32)
    # A keep mask held as a bool tensor (causal, a tenth of the rest left
    # out at random): the kernels read its bytes, and skip the blocks above
    # the diagonal by the block mask.
    keep = torch.tril(torch.ones(seq, seq, dtype=torch.bool)) & (
        torch.rand(heads, seq, seq, generator=torch.Generator().manual_seed(3)) > 0.1)

    def alibi(score, b, h, q_idx, kv_idx):
        return score - slopes[h] * (q_idx - kv_idx).abs()

    def position_bias(score, b, h, q_idx, kv_idx):
        return score + bias[h, q_idx, kv_idx]

    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    def keep_tensor(b, h, q_idx, kv_idx):
        return keep[h, q_idx, kv_idx]

    def document(b, h, q_idx, kv_idx):
        return documents[q_idx] == documents[kv_idx]

    def document_causal(b, h, q_idx, kv_idx):
        return (documents[q_idx] == documents[kv_idx]) & (q_idx >= kv_idx)

    def packed_document(b, h, q_idx, kv_idx):
        return packed[q_idx] == packed[kv_idx]

    def prefix_lm(b, h, q_idx, kv_idx):
        return (kv_idx <= q_idx) | (kv_idx < 256)

    def window(b, h, q_idx, kv_idx):
        return (q_idx - kv_idx).abs() <= 256

    return {
        # name: (score_mod, mask_mod, attn attribute keywords or None)
        "none": (None, None, {}),
        "causal mask_mod": (None, causal, {"is_causal": True}),
        "alibi score_mod": (alibi, None, None),
        "alibi + causal": (alibi, causal, None),
        "per-position bias": (position_bias, None, {"attn_mask": bias[None]}),
        "bool tensor mask_mod": (None, keep_tensor, {"attn_mask": keep[None]}),
        "documents": (None, document, None),
        "documents + causal": (None, document_causal, None),
        "packed documents 20-199": (None, packed_document, None),
        "prefix-LM 256": (None, prefix_lm, None),
        "window 256 mask_mod": (None, window, {"window": (256, 256)}),
    }


def rows(repeat: int, only: str, seq: int, backward: bool):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention.flex_attention import create_block_mask as torch_block_mask
    from torch.nn.attention.flex_attention import flex_attention as torch_flex

    import attn

    heads, dim = 8, 64
    results = []
    for dtype in (torch.float32, torch.bfloat16):
        for name, (score_mod, mask_mod, attribute) in modifiers(torch, seq, heads,
                                                                 dtype).items():
            label = f"{name} {str(dtype).replace('torch.', '')}"
            if only and only not in label:
                continue
            # A fresh compile per row: once Dynamo has recompiled flex_attention
            # for other modifiers, calls fell back to PyTorch's unfused path
            # (10x slower), which is not what a user of one mask sees.
            torch._dynamo.reset()
            compiled = torch.compile(torch_flex, dynamic=False)
            g = torch.Generator().manual_seed(0)
            q, k, v = (torch.randn(1, heads, seq, dim, generator=g).to(dtype) for _ in range(3))
            ours_mask = theirs_mask = None
            if mask_mod is not None:
                ours_mask = attn.create_block_mask(mask_mod, None, None, seq, seq)
                theirs_mask = torch_block_mask(mask_mod, None, None, seq, seq, device="cpu")
            runners = {
                "attn flex": lambda: attn.flex_attention(q, k, v, score_mod=score_mod,
                                                         block_mask=ours_mask),
                "torch flex": lambda: compiled(q, k, v, score_mod=score_mod,
                                               block_mask=theirs_mask),
            }
            if theirs_mask is not None:
                runners["attn flex, torch mask"] = lambda: attn.flex_attention(
                    q, k, v, score_mod=score_mod, block_mask=theirs_mask)
            if attribute is not None:
                runners["attn attribute"] = lambda: attn.scaled_dot_product_attention(
                    q, k, v, **attribute)
                if "window" not in attribute:
                    runners["torch sdpa"] = lambda: F.scaled_dot_product_attention(
                        q, k, v, attn_mask=attribute.get("attn_mask"),
                        is_causal=attribute.get("is_causal", False))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ours, theirs = runners["attn flex"](), runners["torch flex"]()
                for key in runners:  # first calls (conversions, compiles) untimed
                    runners[key]()
            error = (ours.float() - theirs.float()).abs().max().item()
            assert error <= (1e-4 if dtype == torch.float32 else 3e-2), (label, error)
            samples = {key: [] for key in runners}
            order = list(runners.items())
            for round_ in range(repeat):
                for key, run in order if round_ % 2 == 0 else reversed(order):
                    samples[key].append(peers.seconds_per_call(run, 1))
            times = {key: statistics.median(t) for key, t in samples.items()}
            times["density"] = 1.0 - (ours_mask.sparsity() / 100 if ours_mask else 0.0)
            if backward:
                times.update(backward_times(torch, attn, compiled, q, k, v, score_mod,
                                            ours_mask, theirs_mask, repeat))
            results.append((label, times))
    return results


def backward_times(torch, attn, compiled, q, k, v, score_mod, ours_mask, theirs_mask,
                   repeat):
    """Forward + backward of out.sum(), where the implementation has one."""
    def step(fn):
        def run():
            tensors = [t.detach().requires_grad_() for t in (q, k, v)]
            fn(*tensors).sum().backward()
        return run

    runners = {"attn flex fwd+bwd": step(
        lambda a, b, c: attn.flex_attention(a, b, c, score_mod=score_mod,
                                            block_mask=ours_mask))}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            candidate = step(lambda a, b, c: compiled(a, b, c, score_mod=score_mod,
                                                      block_mask=theirs_mask))
            candidate()
        runners["torch flex fwd+bwd"] = candidate
    except Exception as error:  # PyTorch's CPU flex has no backward
        print(f"# torch flex backward: {type(error).__name__}: {str(error)[:120]}",
              file=sys.stderr)
    samples = {key: [] for key in runners}
    for _ in range(repeat):
        for key, run in runners.items():
            samples[key].append(peers.seconds_per_call(run, 1))
    return {key: statistics.median(t) for key, t in samples.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    peers.add_run_arguments(parser, repeat=7)
    parser.add_argument("--only", default="")
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--backward", action="store_true")
    args = parser.parse_args(argv)
    os.environ["ATTN_NUM_THREADS"] = str(args.threads)
    # PyTorch's OpenMP threads otherwise spin after each of its calls, on
    # the cores the next (attn's) call needs: documents f32 measured 16.0 ms
    # after torch's call, 12.8 ms with them passive (torch's own time the
    # same, 21.3 ms).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch

    torch.set_num_threads(args.threads)
    print(f"# {peers.cpu_model()}, {args.threads} threads, torch {torch.__version__}, "
          f"B=1 H=8 S={args.seq} D=64")
    print("| modifiers | block density | attn flex | vs attn's dense time | torch flex "
          "(compiled) | speed-up | attn flex, PyTorch's BlockMask | attn attribute | torch SDPA "
          "| attn fwd+bwd | torch fwd+bwd |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    dense = {}
    for label, t in rows(args.repeat, args.only, args.seq, args.backward):
        ms = lambda key: f"{t[key] * 1e3:.1f} ms" if key in t else "—"  # noqa: E731
        dtype = label.rsplit(" ", 1)[1]
        dense.setdefault(dtype, t["attn flex"])  # the first row: no modifiers
        print(f"| {label} | {t['density']:.2f} | {ms('attn flex')} | "
              f"{t['attn flex'] / dense[dtype]:.2f} | {ms('torch flex')} | "
              f"{t['torch flex'] / t['attn flex']:.2f}× | {ms('attn flex, torch mask')} | "
              f"{ms('attn attribute')} | "
              f"{ms('torch sdpa')} | {ms('attn flex fwd+bwd')} | {ms('torch flex fwd+bwd')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
