"""A whole multi-head attention layer, inference: attn.mha (one compiled
kernel: projections, attention, output projection) against
torch.nn.MultiheadAttention and attn.nn.MultiheadAttention with the same
weights, on the CPU. Median milliseconds of --repeat calls each, the three
runners alternating; GFLOP/s with docs/spec.md's count (four projections plus
the attention's 2*B*H*Sq*Sk*(D+Dv), halved for causal).

    python bench/mha_layer_peers.py [--repeat 7] [--threads 2]
"""

import argparse
import statistics
import time

import torch

import attn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"| shape | torch module ms | attn.nn module ms | attn.mha ms | "
          f"attn.mha GFLOP/s | vs torch |")
    print("|---|---|---|---|---|---|")
    for batch, seq, embed, heads, causal in ((8, 512, 512, 8, False),
                                             (8, 512, 512, 8, True),
                                             (2, 2048, 1024, 16, True)):
        torch.manual_seed(0)
        ref = torch.nn.MultiheadAttention(embed, heads, batch_first=True)
        mine = attn.nn.MultiheadAttention(embed, heads, batch_first=True)
        mine.load_state_dict(ref.state_dict())
        x = torch.randn(batch, seq, embed)
        mask = torch.ones(seq, seq, dtype=torch.bool).triu(1) if causal else None
        runners = {
            "torch": lambda: ref(x, x, x, attn_mask=mask, need_weights=False,
                                 is_causal=causal),
            "attn.nn": lambda: mine(x, x, x, need_weights=False, is_causal=causal,
                                    attn_mask=mask),
            "attn.mha": lambda: attn.mha(x, x, x, heads, ref.in_proj_weight,
                                         ref.in_proj_bias, ref.out_proj.weight,
                                         ref.out_proj.bias, is_causal=causal),
        }
        times = {name: [] for name in runners}
        with torch.no_grad():
            for f in runners.values():
                f()
            for _ in range(args.repeat):
                for name, f in runners.items():
                    start = time.perf_counter()
                    f()
                    times[name].append(time.perf_counter() - start)
        ms = {name: statistics.median(t) * 1e3 for name, t in times.items()}
        flops = 2 * 4 * batch * seq * embed * embed + \
            2 * batch * heads * seq * seq * 2 * (embed // heads) * (0.5 if causal else 1)
        shape = f"B={batch} S={seq} E={embed} H={heads}{' causal' if causal else ''}"
        print(f"| {shape} | {ms['torch']:.1f} | {ms['attn.nn']:.1f} | "
              f"{ms['attn.mha']:.1f} | {flops / ms['attn.mha'] / 1e6:.0f} | "
              f"{ms['torch'] / ms['attn.mha']:.2f}x |")


if __name__ == "__main__":
    main()
