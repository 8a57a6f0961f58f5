"""Side by side on the CPU: attn's generated kernels against PyTorch, OpenVINO
and ONNX Runtime (issue 6, point 1).

Every case runs every implementation in this one process, interleaved (ours,
PyTorch, OpenVINO, ONNX Runtime, ours, ...), on the same input tensors and
the same number of threads, and reports the median of --repeat samples. Ours
is called as a user calls it: ``attn.scaled_dot_product_attention`` on
PyTorch tensors (kernels compiled by attn-compile on first use and cached).
Before timing, each implementation's output is checked against a float64
reference on a sample of query rows, so a wrong fast kernel cannot pass.

The peers, each skipped with a one-line message when it is not importable
or cannot express a case:

- PyTorch: ``torch.nn.functional.scaled_dot_product_attention``
  (bottom-right causal through ``torch.nn.attention.bias.causal_lower_right``);
- OpenVINO: a one-op model (opset13 ``scaled_dot_product_attention``)
  compiled for the CPU with INFERENCE_PRECISION_HINT f32, or bf16 for bf16
  inputs; grouped-query attention as a broadcast over a 5-D view;
- ONNX Runtime: a one-op model with the standard ``Attention`` op of ONNX
  opset 23 on the CPU execution provider.

FLOPs are the spec's (docs/spec.md): 2*(D + Dv) per allowed
(query, key) pair per query head, so causal attention counts about half of
full attention and a window only the pairs it attends. The machine's fp32
FMA peak comes from ``attn-bench`` (its 512-bit FMA loop, best of three),
its copy bandwidth from a 1 GiB PyTorch tensor copy (read + write bytes) and
its read bandwidth from a PyTorch sum over 1 GiB (decoding reads K and V and
writes almost nothing), all measured in the same run. A decoding case's
fractions of them use its own samples: a copy and a sum over 256 MiB (well
past the last-level cache) timed in every round, interleaved with the
implementations, since on a shared machine the bandwidth drifts from
minute to minute.

    python bench/peers.py [--quick] [--only TEXT] [--repeat N] [--threads N]
                          [--peers torch,openvino,onnxruntime]

scripts/bench-peers.sh installs what this needs and runs it.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Optional

ROOT = Path(__file__).resolve().parent.parent
PEER_NAMES = ("torch", "openvino", "onnxruntime")
#: Relative error max|O - ref| / max|ref| the spec allows.
TOLERANCE = {"f32": 1e-5, "bf16": 1e-2, "f16": 1e-2}
#: A timed sample repeats a call until it lasts at least this long.
MIN_SAMPLE_SECONDS = 0.05
#: A pause before each sample, so that the previous implementation's worker
#: threads (PyTorch's OpenMP team) stop spinning before the next one runs.
SETTLE_SECONDS = 0.01
#: Bytes a decoding case's copy and sum read each round (past the L3).
ROOF_BYTES = 256 * 2**20
#: Query rows on which every output is checked against the reference.
CHECKED_ROWS = 64


# ---------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Case:
    """One attention problem: [B, Hq, Sq, D] queries against [B, Hkv, Sk, D]
    keys and values."""

    shape: str
    dtype: str
    seq_q: int
    seq_k: int
    head_dim: int
    heads_q: int = 8
    heads_kv: int = 8
    causal: bool = False
    bottom_right: bool = False
    window: Optional[tuple[int, int]] = None
    batch: int = 1

    @property
    def label(self) -> str:
        return f"{self.dtype} {self.shape}"

    @property
    def decoding(self) -> bool:
        return self.seq_q == 1

    @property
    def diagonal_offset(self) -> int:
        return self.seq_k - self.seq_q if self.bottom_right else 0

    def key_range(self, row: int) -> tuple[int, int]:
        """The first and last key that query `row` attends (last < first: none)."""
        center = row + self.diagonal_offset
        first, last = 0, self.seq_k - 1
        if self.causal:
            last = min(last, center)
        if self.window is not None:
            first = max(first, center - self.window[0])
            last = min(last, center + self.window[1])
        return first, last

    def flops(self) -> float:
        pairs = sum(max(0, last - first + 1) for first, last in map(self.key_range, range(self.seq_q)))
        return 2.0 * self.batch * self.heads_q * pairs * (2 * self.head_dim)

    def kv_bytes(self) -> int:
        item = 4 if self.dtype == "f32" else 2
        return 2 * self.batch * self.heads_kv * self.seq_k * self.head_dim * item


def square(dtype: str, seq: int, dim: int, causal: bool = False, **extra) -> Case:
    shape = f"S={seq} D={dim}" + (" causal" if causal else "")
    return Case(shape, dtype, seq, seq, dim, causal=causal, **extra)


def gqa(dtype: str, seq: int, dim: int, heads_q: int, heads_kv: int) -> Case:
    return Case(f"GQA {heads_q}/{heads_kv} S={seq} D={dim}", dtype, seq, seq, dim,
                heads_q=heads_q, heads_kv=heads_kv)


def bottom_right(dtype: str, seq_q: int, seq_k: int, dim: int) -> Case:
    return Case(f"Sq={seq_q} Sk={seq_k} D={dim} causal bottom-right", dtype, seq_q, seq_k, dim,
                causal=True, bottom_right=True)


def sliding_window(dtype: str, seq: int, dim: int, left: int) -> Case:
    return Case(f"S={seq} D={dim} window ({left}, 0)", dtype, seq, seq, dim, window=(left, 0))


def decoding(dtype: str, seq_k: int, dim: int, heads_q: int, heads_kv: int) -> Case:
    return Case(f"decode Sq=1 Sk={seq_k} GQA {heads_q}/{heads_kv} D={dim}", dtype, 1, seq_k, dim,
                heads_q=heads_q, heads_kv=heads_kv)


def full_cases() -> list[Case]:
    main = [(1024, 64), (4096, 64), (2048, 128)]
    cases = [square("f32", s, d, causal) for s, d in main for causal in (False, True)]
    cases += [
        square("f32", 2048, 80),
        square("f32", 2048, 256),
        # Long context: K/V heads far larger than L2.
        square("f32", 8192, 128),
        square("f32", 8192, 128, True),
        gqa("f32", 2048, 128, 32, 8),
        bottom_right("f32", 512, 4096, 64),
        sliding_window("f32", 8192, 64, 512),
    ]
    cases += [square("bf16", s, d, causal) for s, d in main for causal in (False, True)]
    cases += [decoding(dtype, 8192, 128, 32, 8) for dtype in ("f32", "bf16", "f16")]
    # Multi-query decoding: one key/value head, fewer groups than threads
    # (our kernels split its keys across threads).
    cases += [decoding(dtype, 16384, 128, 8, 1) for dtype in ("f32", "bf16")]
    return cases


def quick_cases() -> list[Case]:
    return [
        square("f32", 256, 64),
        square("f32", 256, 64, causal=True),
        square("bf16", 256, 64, causal=True),
        gqa("f32", 256, 128, 8, 2),
        bottom_right("f32", 64, 512, 64),
        sliding_window("f32", 1024, 64, 64),
        decoding("f32", 1024, 128, 8, 2),
        decoding("f16", 1024, 128, 8, 2),
    ]


# ---------------------------------------------------------------------------
# Implementations: ours and the peers
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class Runner:
    """A prepared implementation of one case: `run` is the timed call and
    `output` turns its result into a [B, Hq, Sq, Dv] torch tensor."""

    run: Callable[[], object]
    output: Callable[[object], "torch.Tensor"]


class Ours:
    name = "ours"

    def describe(self) -> str:
        import attn

        compiler = subprocess.run([str(attn.find_compiler()), "--version"], capture_output=True,
                                  text=True, check=True).stdout.strip()
        return f"{compiler}, attn.scaled_dot_product_attention on PyTorch tensors"

    def unsupported(self, case: Case) -> Optional[str]:
        return None

    def prepare(self, case: Case, q, k, v) -> Runner:
        import attn

        options = dict(
            is_causal=case.causal,
            enable_gqa=case.heads_q != case.heads_kv,
            causal_alignment="bottom_right" if case.bottom_right else "top_left",
            window=case.window,
        )
        return Runner(lambda: attn.scaled_dot_product_attention(q, k, v, **options), lambda out: out)


class PyTorch:
    name = "PyTorch"

    def __init__(self):
        import torch
        from torch.nn.attention.bias import causal_lower_right

        self.sdpa = torch.nn.functional.scaled_dot_product_attention
        self.causal_lower_right = causal_lower_right
        self.version = torch.__version__

    def describe(self) -> str:
        return f"{self.version}, torch.nn.functional.scaled_dot_product_attention"

    def unsupported(self, case: Case) -> Optional[str]:
        if case.window is not None:
            return "F.scaled_dot_product_attention has no sliding window (only a dense mask)"
        return None

    def prepare(self, case: Case, q, k, v) -> Runner:
        mask = self.causal_lower_right(case.seq_q, case.seq_k) if case.bottom_right else None
        causal = case.causal and not case.bottom_right
        gqa = case.heads_q != case.heads_kv
        return Runner(lambda: self.sdpa(q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=gqa),
                      lambda out: out)


class OpenVino:
    name = "OpenVINO"

    def __init__(self, threads: int):
        import openvino
        import openvino.opset13

        self.ov = openvino
        self.opset = openvino.opset13
        self.core = openvino.Core()
        self.threads = threads

    def describe(self) -> str:
        return f"{self.ov.__version__}, opset13 scaled_dot_product_attention"

    def unsupported(self, case: Case) -> Optional[str]:
        if case.bottom_right:
            return "SDPA-13's causal mask is top-left only"
        if case.window is not None:
            return "SDPA-13 has no sliding window (only a dense mask)"
        return None

    def prepare(self, case: Case, q, k, v) -> Runner:
        import torch

        ov = self.ov
        element = {"f32": ov.Type.f32, "bf16": ov.Type.bf16, "f16": ov.Type.f16}[case.dtype]
        # Grouped-query attention as a broadcast: [B, Hkv, G, S, D] queries
        # against [B, Hkv, 1, S, D] keys and values.
        group = case.heads_q // case.heads_kv
        views = [
            q.view(case.batch, case.heads_kv, group, case.seq_q, case.head_dim),
            k.view(case.batch, case.heads_kv, 1, case.seq_k, case.head_dim),
            v.view(case.batch, case.heads_kv, 1, case.seq_k, case.head_dim),
        ]
        params = [self.opset.parameter(list(t.shape), element, name=n) for t, n in zip(views, "qkv")]
        model = ov.Model([self.opset.scaled_dot_product_attention(*params, causal=case.causal)], params)
        compiled = self.core.compile_model(model, "CPU", {
            "INFERENCE_NUM_THREADS": self.threads,
            "NUM_STREAMS": 1,
            "PERFORMANCE_HINT": "LATENCY",
            "INFERENCE_PRECISION_HINT": "bf16" if case.dtype == "bf16" else "f32",
        })
        request = compiled.create_infer_request()
        # NumPy has no bf16: hand OpenVINO the bits (shared, not copied).
        tensors = [ov.Tensor(t.view(torch.int16).numpy() if case.dtype == "bf16" else t.numpy(),
                             list(t.shape), element) for t in views]

        def output(_):
            data = request.get_output_tensor(0).data
            out = torch.from_numpy(data.copy())
            if case.dtype == "bf16":
                out = out.view(torch.int16).view(torch.bfloat16)
            return out.reshape(case.batch, case.heads_q, case.seq_q, -1)

        return Runner(lambda: request.infer(tensors, share_inputs=True, share_outputs=True), output)


class OnnxRuntime:
    name = "ONNX Runtime"

    def __init__(self, threads: int):
        import onnx
        import onnxruntime

        self.onnx = onnx
        self.ort = onnxruntime
        self.threads = threads

    def describe(self) -> str:
        return f"{self.ort.__version__}, ai.onnx Attention (opset 23), CPU execution provider"

    def unsupported(self, case: Case) -> Optional[str]:
        if case.dtype == "bf16":
            return "no bf16 Attention kernel on the CPU execution provider"
        if case.bottom_right:
            return "Attention's is_causal is top-left only"
        if case.window is not None:
            return "Attention has no sliding window (only a dense mask)"
        return None

    def prepare(self, case: Case, q, k, v) -> Runner:
        import torch

        helper, proto = self.onnx.helper, self.onnx.TensorProto
        element = {"f32": proto.FLOAT, "f16": proto.FLOAT16}[case.dtype]
        inputs = [helper.make_tensor_value_info(n, element, list(t.shape)) for n, t in zip("qkv", (q, k, v))]
        output = helper.make_tensor_value_info("o", element, None)
        node = helper.make_node("Attention", ["q", "k", "v"], ["o"], is_causal=int(case.causal))
        model = helper.make_model(helper.make_graph([node], "attention", inputs, [output]),
                                  opset_imports=[helper.make_opsetid("", 23)])
        model.ir_version = 10
        options = self.ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        # Idle workers that spin would slow whichever implementation runs next.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = self.ort.InferenceSession(model.SerializeToString(), options,
                                            providers=["CPUExecutionProvider"])
        feeds = {n: t.numpy() for n, t in zip("qkv", (q, k, v))}
        return Runner(lambda: session.run(None, feeds), lambda out: torch.from_numpy(out[0]))


def load_peers(names: list[str], threads: int) -> list:
    """The peers asked for that import; one line for each that does not."""
    makers = {"torch": PyTorch, "openvino": lambda: OpenVino(threads),
              "onnxruntime": lambda: OnnxRuntime(threads)}
    peers = []
    for name in names:
        try:
            peers.append(makers[name]())
        except ImportError as error:
            print(f"{name}: skipped, not importable ({error})")
    return peers


# ---------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------


def make_inputs(case: Case, seed: int = 0):
    import torch

    generator = torch.Generator().manual_seed(seed)
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[case.dtype]

    def tensor(heads, seq):
        return torch.randn(case.batch, heads, seq, case.head_dim, generator=generator).to(dtype)

    return tensor(case.heads_q, case.seq_q), tensor(case.heads_kv, case.seq_k), tensor(case.heads_kv, case.seq_k)


def checked_rows(case: Case) -> list[int]:
    count = min(CHECKED_ROWS, case.seq_q)
    return sorted({round(i * (case.seq_q - 1) / max(1, count - 1)) for i in range(count)})


def reference(case: Case, q, k, v, rows: list[int]):
    """The spec's attention in float64 for the given query rows."""
    import torch

    group = case.heads_q // case.heads_kv
    keys = k.double().repeat_interleave(group, dim=1)
    values = v.double().repeat_interleave(group, dim=1)
    scores = q[:, :, rows].double() @ keys.transpose(-1, -2) / math.sqrt(case.head_dim)
    allowed = torch.zeros(len(rows), case.seq_k, dtype=torch.bool)
    for index, row in enumerate(rows):
        first, last = case.key_range(row)
        allowed[index, max(first, 0):last + 1] = True
    weights = torch.softmax(scores.masked_fill(~allowed, -math.inf), dim=-1)
    return weights @ values


def relative_error(out, ref, rows: list[int]) -> float:
    got = out[:, :, rows].double()
    return ((got - ref).abs().max() / ref.abs().max()).item()


def seconds_per_call(run: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        run()
    return (time.perf_counter() - start) / calls


def median_times(runners: dict, repeat: int, calls: int = 1, warm_up: bool = True) -> dict:
    """Seconds per call of each runner: the median of `repeat` samples of
    `calls` calls, the runners interleaved in each round (the machine's
    drift hits all alike); first one call of each (compile, allocate, fault
    in) unless `warm_up` is False."""
    if warm_up:
        for run in runners.values():
            run()
    samples = {name: [] for name in runners}
    for _ in range(repeat):
        for name, run in runners.items():
            samples[name].append(seconds_per_call(run, calls))
    return {name: statistics.median(times) for name, times in samples.items()}


@dataclasses.dataclass
class Result:
    case: Case
    seconds: dict[str, float]        # implementation -> median seconds per call
    error: float                     # ours, relative to the reference
    copy_gbs: Optional[float] = None  # decoding: copy bandwidth in the same rounds
    read_gbs: Optional[float] = None  # decoding: read bandwidth in the same rounds

    @property
    def passed(self) -> bool:
        return self.error <= TOLERANCE[self.case.dtype]


def measure(case: Case, implementations: list, repeat: int) -> Result:
    """Prepares, checks and times every implementation of `case`, interleaved."""
    q, k, v = make_inputs(case)
    rows = checked_rows(case)
    ref = reference(case, q, k, v, rows)
    runners, calls, errors = {}, {}, {}
    for impl in implementations:
        why = impl.unsupported(case)
        if why is None:
            try:
                runner = impl.prepare(case, q, k, v)
                runner.run()  # compiles, allocates, warms the caches
                errors[impl.name] = relative_error(runner.output(runner.run()), ref, rows)
                warm = seconds_per_call(runner.run, 1)
            except Exception as error:  # a peer that fails on a case is reported, not fatal
                if isinstance(impl, Ours):
                    raise
                first_line = str(error).strip().split("\n")[0][:160]
                why = f"failed: {type(error).__name__}: {first_line}"
        if why is not None:
            print(f"    {impl.name}: skipped, {why}")
            continue
        runners[impl.name] = runner
        calls[impl.name] = max(1, math.ceil(MIN_SAMPLE_SECONDS / warm))
    roofs = BandwidthSamples() if case.decoding else None
    samples = {name: [] for name in runners}
    for _ in range(repeat):
        for name, runner in runners.items():
            time.sleep(SETTLE_SECONDS)
            samples[name].append(seconds_per_call(runner.run, calls[name]))
        if roofs is not None:
            time.sleep(SETTLE_SECONDS)
            roofs.sample()
    seconds = {name: statistics.median(times) for name, times in samples.items()}
    print("    " + ", ".join(f"{name} {seconds[name] * 1e3:.2f} ms (err {errors[name]:.1e})"
                              for name in runners))
    result = Result(case, seconds, errors["ours"])
    if roofs is not None:
        result.copy_gbs, result.read_gbs = roofs.copy_gbs(), roofs.read_gbs()
        print(f"    same rounds: copy {result.copy_gbs:.1f} GB/s, read {result.read_gbs:.1f} GB/s")
    return result


class BandwidthSamples:
    """A copy (read + write bytes) and a sum over ROOF_BYTES of f32, timed
    once per round of a decoding case."""

    _source = None
    _target = None

    def __init__(self):
        import torch

        if BandwidthSamples._source is None:
            BandwidthSamples._source = torch.ones(ROOF_BYTES // 4)
            BandwidthSamples._target = torch.empty_like(BandwidthSamples._source)
        self.copies, self.reads = [], []

    def sample(self) -> None:
        source, target = BandwidthSamples._source, BandwidthSamples._target
        self.copies.append(seconds_per_call(lambda: target.copy_(source), 1))
        self.reads.append(seconds_per_call(lambda: source.sum(), 1))

    def copy_gbs(self) -> float:
        return 2 * ROOF_BYTES / statistics.median(self.copies) * 1e-9

    def read_gbs(self) -> float:
        return ROOF_BYTES / statistics.median(self.reads) * 1e-9


# ---------------------------------------------------------------------------
# The machine: FMA peak and copy bandwidth
# ---------------------------------------------------------------------------


def fma_peak(threads: int, tries: int = 3) -> tuple[float, str]:
    """GFLOP/s of attn-bench's fp32 FMA loop on `threads` threads: the best
    of `tries` runs (a peak; one run on this shared machine read half of it)."""
    bench = ROOT / "build" / "tools" / "attn-bench"
    best, lanes = 0.0, "?"
    for _ in range(tries):
        result = subprocess.run(
            [str(bench), "--quick", "--only=f32_S128_D128_causal", "--repeat=1", f"--num-threads={threads}"],
            capture_output=True, text=True, check=True)
        found = re.search(r"fp32 FMA peak measured ([\d.]+) GFLOP/s \((\d+)-lane", result.stdout)
        if found is None:
            raise RuntimeError(f"no peak in attn-bench's output:\n{result.stdout}")
        best, lanes = max(best, float(found.group(1))), found.group(2)
    return best, f"attn-bench's {lanes}-lane fp32 FMA loop, best of {tries}"


def copy_bandwidth(gib: float = 1.0, repeat: int = 5) -> float:
    """GB/s (read + write) of a PyTorch copy of a `gib` GiB f32 tensor."""
    import torch

    source = torch.ones(int(gib * 2**30) // 4)
    target = torch.empty_like(source)
    target.copy_(source)
    times = [seconds_per_call(lambda: target.copy_(source), 1) for _ in range(repeat)]
    return 2 * source.numel() * 4 / statistics.median(times) * 1e-9


def read_bandwidth(gib: float = 1.0, repeat: int = 5) -> float:
    """GB/s of a PyTorch sum over a `gib` GiB f32 tensor (what decoding does
    to K and V: read once, nothing written)."""
    import torch

    source = torch.ones(int(gib * 2**30) // 4)
    source.sum()
    times = [seconds_per_call(lambda: source.sum(), 1) for _ in range(repeat)]
    return source.numel() * 4 / statistics.median(times) * 1e-9


def compare_compilers(script: str, args: list, compilers: list, processes: int) -> dict:
    """A compiler change A/B on this machine: `script` run as `python script
    --one-process ARGS` (it prints a dict {case: number} as its last line)
    --processes times per attn-compile binary of `compilers`, alternating,
    each binary with its own kernel cache. Returns {case: ([A's], [B's],
    ...)}."""
    import tempfile

    samples: dict = {}
    with tempfile.TemporaryDirectory(prefix="attn-compare-") as scratch:
        for _ in range(processes):
            for n, compiler in enumerate(compilers):
                env = dict(os.environ, ATTN_COMPILE=os.path.abspath(compiler),
                           ATTN_CACHE_DIR=os.path.join(scratch, str(n)))
                out = subprocess.run([sys.executable, script, "--one-process", *args],
                                     env=env, check=True, capture_output=True, text=True)
                found = eval(out.stdout.strip().splitlines()[-1])
                for name, value in found.items():
                    samples.setdefault(name, tuple([] for _ in compilers))[n].append(value)
    return samples


def add_compiler_arguments(parser: argparse.ArgumentParser) -> None:
    """--compilers A,B and --processes N (print_compiler_comparison's)."""
    parser.add_argument("--compilers", default="",
                        help="A,B: two attn-compile binaries to compare")
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--one-process", action="store_true", help=argparse.SUPPRESS)


def print_compiler_comparison(parser, args, script: str, script_args: list, what: str,
                              first_column: str, digits: int) -> None:
    """compare_compilers of `script` for --compilers A,B, printed as a table
    of medians (`digits` decimals) and their ratio A / B."""
    compilers = args.compilers.split(",")
    if len(compilers) != 2:
        parser.error("--compilers takes two attn-compile paths, A,B")
    samples = compare_compilers(script, script_args, compilers, args.processes)
    print(f"# {what}, medians of {args.processes} processes: A={compilers[0]} "
          f"B={compilers[1]}")
    print(f"| {first_column} | A | B | A / B |")
    print("|---|---:|---:|---:|")
    for name, (a, b) in samples.items():
        a, b = statistics.median(a), statistics.median(b)
        print(f"| {name} | {a:.{digits}f} | {b:.{digits}f} | {a / b:.3f} |")


def cpu_model() -> str:
    with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown CPU"


# ---------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------


def table(results: list[Result], peers: list, peak: float, bandwidth: float,
          read: float) -> list[str]:
    names = [p.name for p in peers]
    header = (["case", "dtype", "ours ms", "ours GFLOP/s"] + [f"{n} GFLOP/s" for n in names]
              + ["ours / best peer", "ours of FMA peak", "ours K+V GB/s", "copy GB/s", "of copy bw", "of read bw", "ours error"])
    lines = ["| " + " | ".join(header) + " |", "|---|---|" + "---:|" * (len(header) - 2)]
    for result in results:
        case, seconds = result.case, result.seconds
        rate = {name: case.flops() / s * 1e-9 for name, s in seconds.items()}
        best = max((rate[n] for n in names if n in rate), default=None)
        ours = rate["ours"]
        gbs = case.kv_bytes() / seconds["ours"] * 1e-9 if case.decoding else None
        cells = [case.shape, case.dtype, f"{seconds['ours'] * 1e3:.2f}", f"{ours:.1f}"]
        cells += [f"{rate[n]:.1f}" if n in rate else "—" for n in names]
        cells += [
            f"{ours / best:.2f}×" if best else "—",
            f"{100 * ours / peak:.1f} %",
            f"{gbs:.1f}" if gbs else "",
            f"{result.copy_gbs:.1f}" if gbs and result.copy_gbs else "",
            f"{100 * gbs / (result.copy_gbs or bandwidth):.1f} %" if gbs else "",
            f"{100 * gbs / (result.read_gbs or read):.1f} %" if gbs else "",
            f"{result.error:.1e}" + ("" if result.passed else " FAIL"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def add_run_arguments(parser: argparse.ArgumentParser, repeat: int) -> None:
    """--repeat (timed samples per case, `repeat` by default) and --threads
    (ATTN_NUM_THREADS, else 2), as the side-by-side scripts take them."""
    parser.add_argument("--repeat", type=int, default=repeat,
                        help="timed samples per implementation and case (median)")
    parser.add_argument("--threads", type=int,
                        default=int(os.environ.get("ATTN_NUM_THREADS", 2)),
                        help="threads for every implementation (default: ATTN_NUM_THREADS, else 2)")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few small shapes (a smoke test)")
    parser.add_argument("--only", default="", help="only cases whose label ('f32 S=1024 D=64 causal') contains this")
    parser.add_argument("--repeat", type=int, default=7, help="timed samples per implementation and case (median)")
    parser.add_argument("--threads", type=int, default=2, help="threads for every implementation")
    parser.add_argument("--peers", default=",".join(PEER_NAMES),
                        help=f"comma-separated peers to run (of {', '.join(PEER_NAMES)})")
    args = parser.parse_args(argv)
    args.peers = [p for p in args.peers.split(",") if p]
    unknown = sorted(set(args.peers) - set(PEER_NAMES))
    if unknown:
        parser.error(f"unknown peers {', '.join(unknown)}; choose from {', '.join(PEER_NAMES)}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    cases = [c for c in (quick_cases() if args.quick else full_cases()) if args.only in c.label]
    if not cases:
        print(f"no case matches --only={args.only!r}", file=sys.stderr)
        return 2
    os.environ["ATTN_NUM_THREADS"] = str(args.threads)  # read when attn makes its pool
    import torch
    import attn

    torch.set_num_threads(args.threads)
    if attn.num_threads() != args.threads:
        raise RuntimeError(f"attn runs {attn.num_threads()} threads, not {args.threads}")

    peers = load_peers(args.peers, args.threads)
    peak, peak_source = fma_peak(args.threads)
    bandwidth = copy_bandwidth()
    read = read_bandwidth()
    print(f"machine: {cpu_model()}, {os.cpu_count()} CPUs; {args.threads} threads everywhere")
    print(f"fp32 FMA peak: {peak:.1f} GFLOP/s ({peak_source}); copy bandwidth: {bandwidth:.1f} GB/s "
          f"(read + write, 1 GiB PyTorch copy); read bandwidth: {read:.1f} GB/s (1 GiB PyTorch sum)")
    implementations = [Ours()] + peers
    for impl in implementations:
        print(f"{impl.name}: {impl.describe()}")
    print(f"median of {args.repeat} interleaved samples; FLOPs = 2*(D+Dv) per allowed (i, j) per head; "
          "error = max|O - ref| / max|ref| against float64 on sampled rows; decoding rows: copy GB/s "
          f"and the fractions of it and of the read bandwidth from {ROOF_BYTES >> 20} MiB copies and sums "
          "timed in the case's own rounds\n")

    results = []
    for case in cases:
        print(f"{case.label}")
        results.append(measure(case, implementations, args.repeat))
    print()
    print("\n".join(table(results, peers, peak, bandwidth, read)))
    failures = [r.case.label for r in results if not r.passed]
    if failures:
        print(f"\nFAIL: ours is wrong on {', '.join(failures)}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
