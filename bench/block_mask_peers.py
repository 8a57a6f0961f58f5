"""Making block masks on the CPU (issue 29, point 2): attn.create_block_mask
evaluating the mask_mod with PyTorch, the same with _compile=True (the
mask_mod traced and compiled into a kernel that fills the table,
attn_fill_block_table), and PyTorch's own create_block_mask, on the same
mask_mods, lengths and threads. The block lists are checked equal first;
each figure is the median of --repeat calls, interleaved (the compiled
kernel is compiled before the timing: once per mask_mod's structure, then
cached).

    python bench/block_mask_peers.py [--repeat N] [--threads N] [--seqs 4096,16384]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

import peers  # noqa: E402  (cpu_model, seconds_per_call)


def mask_mods(torch, seq: int):
    documents = torch.arange(seq) // 300  # documents of 300 tokens

    def document(b, h, q_idx, kv_idx):
        return documents[q_idx] == documents[kv_idx]

    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    def window(b, h, q_idx, kv_idx):
        return (q_idx - kv_idx).abs() <= 256

    return {"documents of 300 tokens": document, "causal": causal,
            "window ±256": window}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    peers.add_run_arguments(parser, repeat=5)
    parser.add_argument("--seqs", default="4096,16384")
    args = parser.parse_args(argv)
    import torch
    import attn

    torch.set_num_threads(args.threads)
    from torch.nn.attention.flex_attention import create_block_mask as torch_block_mask

    print(f"# {peers.cpu_model()}, {args.threads} threads, torch {torch.__version__}, "
          f"BLOCK_SIZE 128, median of {args.repeat}")
    print("| mask_mod | S | attn (PyTorch evaluation) | attn _compile=True | "
          "torch create_block_mask | compiled vs torch |")
    print("|---|---:|---:|---:|---:|---:|")
    for seq in (int(s) for s in args.seqs.split(",")):
        for name, mask_mod in mask_mods(torch, seq).items():
            makers = {
                "eager": lambda: attn.create_block_mask(mask_mod, None, None, seq, seq),
                "compiled": lambda: attn.create_block_mask(mask_mod, None, None, seq, seq,
                                                           _compile=True),
                "torch": lambda: torch_block_mask(mask_mod, None, None, seq, seq,
                                                  device="cpu"),
            }
            made = {key: make() for key, make in makers.items()}  # warm up, compile
            for key in ("compiled", "torch"):
                for field in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks",
                              "full_kv_indices"):
                    if not torch.equal(getattr(made[key], field), getattr(made["eager"], field)):
                        raise SystemExit(f"{name} S={seq}: {key}'s {field} differs")
            samples = {key: [] for key in makers}
            for _ in range(args.repeat):
                for key, make in makers.items():
                    samples[key].append(peers.seconds_per_call(make, 1))
            ms = {key: 1e3 * statistics.median(values) for key, values in samples.items()}
            print(f"| {name} | {seq} | {ms['eager']:.1f} ms | {ms['compiled']:.1f} ms | "
                  f"{ms['torch']:.1f} ms | {ms['torch'] / ms['compiled']:.1f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
