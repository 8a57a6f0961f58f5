#!/usr/bin/env python3
"""Generated GPU kernels next to PyTorch's FlashAttention on the same GPU.

Runs `attn-bench --device cuda --csv` (our kernels, timed on buffers already
in device memory, each checked against the float64 reference on a small
problem), then times PyTorch's `scaled_dot_product_attention` restricted to
its flash backend on the same shapes and element types in this process, and
prints one markdown table: ms and TFLOP/s of each, their ratio, and our
kernel's error. FLOPs are the spec's (attn-bench's count; causal about
half), the same for both.

    python3 bench/gpu_peers.py [--attn-bench build/tools/attn-bench] [--quick]

Without PyTorch (or without CUDA in it) the peer columns say so; without a
GPU attn-bench's message is printed and the exit status is 1.
"""
import argparse
import csv
import io
import statistics
import subprocess
import sys


def run_ours(attn_bench, quick, repeat):
    """Rows of attn-bench --device cuda --csv, as dicts."""
    cmd = [attn_bench, "--device", "cuda", "--csv", "--repeat", str(repeat)]
    if quick:
        cmd.append("--quick")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode not in (0, 1):  # 1: a kernel failed its check
        sys.stderr.write(proc.stdout + proc.stderr)
        sys.exit(1)
    header = proc.stdout.find("label,")
    if header < 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        sys.exit(1)
    print(proc.stdout[:header].strip())
    return list(csv.DictReader(io.StringIO(proc.stdout[header:])))


def torch_flash():
    """(torch, the flash-only context manager) or (None, why not)."""
    try:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as error:
        return None, f"PyTorch not installed ({error})"
    if not torch.cuda.is_available():
        return None, "PyTorch sees no CUDA device"
    return (torch, lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)), None


def time_flash(torch, flash, row, repeat):
    """Median milliseconds of PyTorch's flash SDPA on the row's shape."""
    dtype = {"f16": torch.float16, "bf16": torch.bfloat16}[row["dtype"]]
    b, h, s, d = (int(row[k]) for k in ("B", "H", "S", "D"))
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=dtype)
               for _ in range(3))
    causal = row["causal"] == "1"
    sdpa = torch.nn.functional.scaled_dot_product_attention
    with flash():
        for _ in range(3):
            sdpa(q, k, v, is_causal=causal)
        times = []
        for _ in range(repeat):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            sdpa(q, k, v, is_causal=causal)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--attn-bench", default="build/tools/attn-bench")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    rows = run_ours(args.attn_bench, args.quick, args.repeat)
    peer, why = torch_flash()
    if peer:
        import torch
        print(f"PyTorch {torch.__version__} flash SDPA on "
              f"{torch.cuda.get_device_name()}")
    else:
        print(f"peer skipped: {why}")
    print()
    print("| shape | ours ms | ours TFLOP/s | flash ms | flash TFLOP/s "
          "| ours / flash | ours error |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        ms = float(row["ms"])
        flops = float(row["GFLOP/s"]) * 1e9 * ms * 1e-3
        ours = f"{ms:.3f} | {flops / ms * 1e-9:.1f}"
        if peer:
            flash_ms = time_flash(*peer, row, args.repeat)
            theirs = (f"{flash_ms:.3f} | {flops / flash_ms * 1e-9:.1f} | "
                      f"{flash_ms / ms:.2f}x")
        else:
            theirs = "- | - | -"
        print(f"| {row['label']} | {ours} | {theirs} | {row['error']} |")


if __name__ == "__main__":
    main()
