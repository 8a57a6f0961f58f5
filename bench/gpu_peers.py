#!/usr/bin/env python3
"""Generated GPU kernels next to PyTorch's FlashAttention and cuDNN on the same GPU.

Our kernels come from a library that attn-compile made for the GPU's
architecture; they run through the runtime's C API (libattn_runtime.so, by
ctypes) on PyTorch's device buffers, so that this script needs neither MLIR
nor LLVM on the GPU machine. For each shape, in this one process and on the
same inputs: our kernel's output (poisoned with NaN first) and PyTorch's
flash SDPA output are compared with a float64 reference of the whole
problem, then all are timed in alternating rounds (ours, flash, cuDNN,
ours, ...) with CUDA events, median of the rounds. cuDNN is PyTorch's
CUDNN_ATTENTION backend; where PyTorch refuses it for a shape its columns
say n/a. FLOPs are the spec's:
4*S*S*D per head, about half of that when causal.

    python3 bench/gpu_peers.py --specs          # the kernels to compile
    attn-compile --target sm_90 --spec ... -o bench.so --header /dev/null
    python3 bench/gpu_peers.py --library bench.so --runtime libattn_runtime.so
    ... --variant rows32=bench_rows32.so          # other builds, same rounds
    ... --backward                                 # the gradients instead
    ... --dropout 0.1                              # what dropout costs

With --backward the same library's backward kernels (--specs lists them
too) compute dQ, dK, dV from the forward's O and LSE (PyTorch's, float32
statistics) for a random dO, checked against PyTorch's flash backward on
the same inputs and timed next to it (its backward alone, in alternating
rounds); FLOPs 2.5 times the forward's.

A --variant is the same kernels compiled with other choices (for example
attn-compile --gpu-rows-per-warp 32): each is checked like ours and timed in
the same alternating rounds, its columns after cuDNN's.

attn_run is synchronous (it waits for the kernel), so our time also holds
the runtime's argument checks and one launch, about 10-20 us; PyTorch's is
the kernel alone. Exit status 1 if a kernel fails its check.
"""
import argparse
import ctypes
import statistics
import sys

BATCH, HEADS = 4, 8
SHAPES = [(1024, 64), (4096, 64), (16384, 64), (2048, 128), (8192, 128),
          (16384, 128)]
QUICK_SHAPES = [(256, 64)]
DTYPES = ("f16", "bf16")
# Relative error (Frobenius norm) allowed against the float64 reference:
# a few units of the output type's rounding.
TOLERANCE = {"f16": 4e-3, "bf16": 2e-2}


def shapes(quick):
    """(label, dtype, S, D, causal) of every benchmarked kernel."""
    rows = []
    for dtype in DTYPES:
        for s, d in QUICK_SHAPES if quick else SHAPES:
            for causal in (False, True):
                label = f"{dtype}_S{s}_D{d}" + ("_causal" if causal else "")
                rows.append((label, dtype, s, d, causal))
    return rows


def kernel_name(dtype, d, causal):
    """One kernel serves every S (the sequence lengths are run-time sizes)."""
    return f"{dtype}_D{d}" + ("_causal" if causal else "")


def specs():
    """attn-compile specs of the kernels that shapes() (quick or not) use,
    forward and backward."""
    names = {}
    for _, dtype, _, d, causal in shapes(False) + shapes(True):
        name = kernel_name(dtype, d, causal)
        spec = f"dtype={dtype},d={d},dv={d}" + (",causal" if causal else "")
        names[name] = f"name={name}," + spec
        names["backward_" + name] = f"name=backward_{name},{spec},backward"
        names["dropout_" + name] = f"name=dropout_{name},{spec},lse,dropout"
        names["backward_dropout_" + name] = (
            f"name=backward_dropout_{name},{spec},backward,dropout")
    return list(names.values())


class Tensor(ctypes.Structure):
    """attn_tensor of runtime.h."""
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int),
                ("rank", ctypes.c_int32), ("shape", ctypes.c_int64 * 4),
                ("strides", ctypes.c_int64 * 4)]


class Runtime:
    """The few calls of libattn_runtime.so this script makes."""

    DTYPE = {"f32": 0, "f16": 1, "bf16": 2}

    def __init__(self, path):
        lib = ctypes.CDLL(path)
        lib.attn_last_error.restype = ctypes.c_char_p
        lib.attn_module_load.argtypes = [ctypes.c_char_p,
                                         ctypes.POINTER(ctypes.c_void_p)]
        lib.attn_module_find.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                         ctypes.POINTER(ctypes.c_void_p)]
        lib.attn_run.argtypes = [ctypes.c_void_p] + [ctypes.c_void_p] * 7
        lib.attn_run_backward.argtypes = (
            [ctypes.c_void_p] * 12 + [ctypes.c_float, ctypes.c_uint64,
                                      ctypes.c_void_p])
        lib.attn_run_dropout.argtypes = (
            [ctypes.c_void_p] * 7 + [ctypes.c_float, ctypes.c_uint64,
                                     ctypes.c_void_p])
        lib.attn_cuda_device.argtypes = [
            ctypes.c_char_p, ctypes.c_size_t,
            ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int32)]
        self.lib = lib

    def check(self, status, what):
        if status != 0:
            raise RuntimeError(
                f"{what}: {self.lib.attn_last_error().decode()}")

    def device(self):
        name = ctypes.create_string_buffer(256)
        major, minor = ctypes.c_int32(), ctypes.c_int32()
        self.check(self.lib.attn_cuda_device(name, 256, ctypes.byref(major),
                                             ctypes.byref(minor)),
                   "attn_cuda_device")
        return f"{name.value.decode()} (sm_{major.value}{minor.value})"

    def kernels(self, library):
        """Loads a library; returns its module for find()."""
        module = ctypes.c_void_p()
        self.check(self.lib.attn_module_load(library.encode(),
                                             ctypes.byref(module)),
                   f"loading {library}")
        return module

    def find(self, module, name):
        kernel = ctypes.c_void_p()
        self.check(self.lib.attn_module_find(module, name.encode(),
                                             ctypes.byref(kernel)),
                   f"kernel {name}")
        return kernel

    def tensor(self, t, dtype):
        view = Tensor(t.data_ptr(), self.DTYPE[dtype], t.dim())
        for i in range(t.dim()):
            view.shape[i] = t.shape[i]
            view.strides[i] = t.stride(i)
        return view

    def run(self, kernel, q, k, v, out, dtype):
        views = [self.tensor(t, dtype) for t in (q, k, v, out)]
        refs = [ctypes.byref(view) for view in views]
        self.check(self.lib.attn_run(kernel, refs[0], refs[1], refs[2], None,
                                     refs[3], None, None), "attn_run")

    def run_dropout(self, kernel, q, k, v, out, lse, dtype, p, seed):
        """attn_run_dropout: no mask, with the LSE (the backward's input)."""
        views = [self.tensor(t, dtype) for t in (q, k, v, out)]
        views.append(self.tensor(lse, "f32"))
        q_, k_, v_, o_, l_ = (ctypes.byref(view) for view in views)
        self.check(self.lib.attn_run_dropout(
            kernel, q_, k_, v_, None, o_, l_, ctypes.c_float(p),
            ctypes.c_uint64(seed), None), "attn_run_dropout")

    def run_backward(self, kernel, q, k, v, out, lse, dout, dq, dk, dv,
                     dtype, p=0.0, seed=0):
        """attn_run_backward: no mask, no dLSE; dropout where p > 0."""
        views = [self.tensor(t, dtype) for t in (q, k, v, out)]
        views.append(self.tensor(lse, "f32"))
        views += [self.tensor(t, dtype) for t in (dout, dq, dk, dv)]
        q_, k_, v_, o_, l_, do_, dq_, dk_, dv_ = (ctypes.byref(view)
                                                  for view in views)
        self.check(self.lib.attn_run_backward(
            kernel, q_, k_, v_, None, o_, l_, do_, None, dq_, dk_, dv_,
            ctypes.c_float(p), ctypes.c_uint64(seed), None),
            "attn_run_backward")


def timed(torch, call):
    """The milliseconds of call() on the GPU, by CUDA events."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    call()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def allowed(torch, q, causal):
    """The [S, S] positions a row sees: all, or the causal triangle."""
    s = q.shape[2]
    keep = torch.ones(s, s, dtype=torch.bool, device=q.device)
    return torch.tril(keep) if causal else keep


def reference(torch, q, k, v, causal):
    """float64 attention, one head at a time (the score matrix of a head
    fits; all of them at S=4096 would not be small)."""
    out = torch.empty(q.shape, dtype=torch.float64, device=q.device)
    scale = q.shape[-1] ** -0.5
    keep = allowed(torch, q, causal)
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            scores = (q[b, h].double() @ k[b, h].double().T) * scale
            scores = scores.masked_fill(~keep, float("-inf"))
            out[b, h] = torch.softmax(scores, dim=-1) @ v[b, h].double()
    return out


def statistics_f32(torch, q, k, causal):
    """The forward's LSE [B, H, S] in float32, one head at a time."""
    lse = torch.empty(q.shape[:3], dtype=torch.float32, device=q.device)
    scale = q.shape[-1] ** -0.5
    keep = allowed(torch, q, causal)
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            scores = (q[b, h].float() @ k[b, h].float().T) * scale
            lse[b, h] = torch.logsumexp(scores.masked_fill(~keep, float("-inf")),
                                        dim=-1)
    return lse


def backward_rows(args, runtime, module, torch, sdpa, flash_only,
                  torch_dtype):
    """The --backward table: ours against PyTorch's flash backward."""
    rows = [row for row in shapes(args.quick)
            if (args.only is None or args.only in row[0]) and row[2] <= 4096]
    repeat = min(args.repeat, 10)  # our FMA backward takes seconds a call
    table, failures = [], 0

    for label, dtype, s, d, causal in rows:
        q, k, v = (torch.randn(BATCH, HEADS, s, d, device="cuda",
                               dtype=torch_dtype[dtype]) for _ in range(3))
        dout = torch.randn_like(q)
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        with flash_only():
            out = sdpa(*leaves, is_causal=causal)
        lse = statistics_f32(torch, q, k, causal)
        kernel = runtime.find(module, "backward_" + kernel_name(dtype, d,
                                                                causal))
        grads = [torch.full_like(t, float("nan")) for t in (q, k, v)]

        def ours():
            runtime.run_backward(kernel, q, k, v, out.detach(), lse, dout,
                                 *grads, dtype)

        def flash():
            torch.autograd.grad(out, leaves, dout, retain_graph=True)

        ours()
        want = torch.autograd.grad(out, leaves, dout, retain_graph=True)
        errors = [relative_error(torch, g, w.double())
                  for g, w in zip(grads, want)]
        ok = all(e <= 3 * TOLERANCE[dtype] + 1e-2 for e in errors)
        failures += not ok
        times = {"ours": [], "flash": []}
        for _ in range(2):
            ours()
            flash()
        for _ in range(repeat):
            times["ours"].append(timed(torch, ours))
            times["flash"].append(timed(torch, flash))
        flops = 2.5 * 4.0 * BATCH * HEADS * s * s * d
        if causal:
            flops *= (s + 1) / (2 * s)
        ms = {name: statistics.median(t) for name, t in times.items()}
        table.append(
            f"| {label} | {ms['ours']:.3f} | {flops / ms['ours'] * 1e-9:.1f} "
            f"| {ms['flash']:.3f} | {flops / ms['flash'] * 1e-9:.1f} "
            f"| {ms['flash'] / ms['ours']:.2f}x | "
            + " ".join(f"{e:.1e}" for e in errors)
            + f" | {'ok' if ok else 'FAIL'} |")
        print(table[-1], flush=True)
    print()
    print("| shape | ours ms | ours TFLOP/s | flash bwd ms | flash TFLOP/s "
          "| ours / flash (speed) | dq dk dv vs flash (rel.) | check |")
    print("|---|---:|---:|---:|---:|---:|---|---|")
    print("\n".join(table))
    return 1 if failures else 0


def dropout_rows(args, runtime, module, torch, sdpa, flash_only,
                 torch_dtype):
    """The --dropout table: what dropout costs ours and PyTorch's flash
    attention, forward and backward (S <= 4096, at most 10 rounds), each
    with and without it in alternating rounds. Our dropped output (batch 0,
    heads 0 and 1) is checked against the float64 reference with
    attn.dropout_mask's keep bits where the attn package imports (else
    'unchecked'); PyTorch's mask is its own."""
    try:
        import attn
        keep_mask = attn.dropout_mask
    except ImportError:
        keep_mask = None
    p, seed = args.dropout, 0x5EED
    rows = [row for row in shapes(args.quick)
            if (args.only is None or args.only in row[0]) and row[2] <= 4096]
    repeat = min(args.repeat, 10)
    table, failures = [], 0
    for label, dtype, s, d, causal in rows:
        q, k, v = (torch.randn(BATCH, HEADS, s, d, device="cuda",
                               dtype=torch_dtype[dtype]) for _ in range(3))
        dout = torch.randn_like(q)
        name = kernel_name(dtype, d, causal)
        plain = runtime.find(module, name)
        dropped = runtime.find(module, "dropout_" + name)
        backward = runtime.find(module, "backward_" + name)
        backward_dropped = runtime.find(module, "backward_dropout_" + name)
        out = torch.full_like(q, float("nan"))
        out_dropped = torch.full_like(q, float("nan"))
        lse = torch.empty(q.shape[:3], dtype=torch.float32, device="cuda")
        grads = [torch.empty_like(t) for t in (q, k, v)]
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        with flash_only():
            flash_out = sdpa(*leaves, is_causal=causal)
            flash_dropped = sdpa(*leaves, is_causal=causal, dropout_p=p)

        def flash(dropout):
            def call():
                with flash_only():
                    sdpa(q, k, v, is_causal=causal,
                         dropout_p=p if dropout else 0.0)
            return call

        def flash_backward(result):
            return lambda: torch.autograd.grad(result, leaves, dout,
                                               retain_graph=True)

        calls = {
            "ours": lambda: runtime.run(plain, q, k, v, out, dtype),
            "ours dropout": lambda: runtime.run_dropout(
                dropped, q, k, v, out_dropped, lse, dtype, p, seed),
            "ours bwd": lambda: runtime.run_backward(
                backward, q, k, v, out, lse, dout, *grads, dtype),
            "ours bwd dropout": lambda: runtime.run_backward(
                backward_dropped, q, k, v, out_dropped, lse, dout, *grads,
                dtype, p, seed),
            "flash": flash(False), "flash dropout": flash(True),
            "flash bwd": flash_backward(flash_out),
            "flash bwd dropout": flash_backward(flash_dropped)}
        calls["ours dropout"]()
        check = "unchecked"
        if keep_mask is not None:
            # Batch 0, heads 0 and 1: the bits depend on the indices alone,
            # and the whole mask would take seconds of NumPy a shape.
            keep = torch.from_numpy(keep_mask(1, 2, s, s, p, seed))
            ref = reference_dropped(torch, q[:1, :2], k[:1, :2], v[:1, :2],
                                    causal, keep.cuda(), p)
            error = relative_error(torch, out_dropped[:1, :2], ref)
            ok = error <= TOLERANCE[dtype]
            failures += not ok
            check = f"{error:.1e} {'ok' if ok else 'FAIL'}"
            del ref, keep
        times = {name: [] for name in calls}
        for _ in range(2):
            for call in calls.values():
                call()
        for _ in range(repeat):
            for name, call in calls.items():
                times[name].append(timed(torch, call))
        ms = {name: statistics.median(t) for name, t in times.items()}
        cells = []
        for who in ("ours", "flash"):
            for step in ("", " bwd"):
                base, with_dropout = ms[who + step], ms[who + step + " dropout"]
                cells += [f"{base:.3f}", f"{with_dropout:.3f}",
                          f"{with_dropout / base:.2f}x"]
        table.append(f"| {label} | " + " | ".join(cells) + f" | {check} |")
        print(table[-1], flush=True)
    print()
    print(f"dropout_p = {p}; ms, median of {repeat} alternating rounds")
    print("| shape | ours fwd | ours fwd dropout | cost | ours bwd "
          "| ours bwd dropout | cost | flash fwd | flash fwd dropout | cost "
          "| flash bwd | flash bwd dropout | cost | ours dropped O vs "
          "reference |")
    print("|---|" + "---:|" * 12 + "---|")
    print("\n".join(table))
    return 1 if failures else 0


def reference_dropped(torch, q, k, v, causal, keep, p):
    """float64 attention with the weights times keep / (1 - p), p rounded
    to f32 as the kernels take it (docs/spec.md, "Dropout")."""
    out = torch.empty(q.shape, dtype=torch.float64, device=q.device)
    scale = q.shape[-1] ** -0.5
    kept = 1.0 / (1.0 - float(torch.tensor(p, dtype=torch.float32)))
    allow = allowed(torch, q, causal)
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            scores = (q[b, h].double() @ k[b, h].double().T) * scale
            weights = torch.softmax(scores.masked_fill(~allow, float("-inf")),
                                    dim=-1)
            out[b, h] = (weights * keep[b, h] * kept) @ v[b, h].double()
    return out


def relative_error(torch, out, ref):
    diff = out.double() - ref
    if not torch.isfinite(out).all():
        return float("inf")
    return (diff.norm() / ref.norm()).item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--specs", action="store_true",
                        help="print the kernel specs to compile and exit")
    parser.add_argument("--library", help="attn-compile library for this GPU")
    parser.add_argument("--runtime", default="libattn_runtime.so")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--only", metavar="TEXT",
                        help="only the shapes whose label holds TEXT "
                             "(e.g. f16_S8192_D128)")
    parser.add_argument("--backward", action="store_true",
                        help="the gradients: our backward kernels next to "
                             "PyTorch's flash backward (S <= 4096, at most "
                             "10 rounds)")
    parser.add_argument("--dropout", type=float, metavar="P",
                        help="what dropout with probability P costs ours "
                             "and PyTorch's flash attention, forward and "
                             "backward (S <= 4096, at most 10 rounds)")
    parser.add_argument("--variant", action="append", default=[],
                        metavar="LABEL=LIBRARY",
                        help="another build of the same kernels, checked "
                             "and timed in the same rounds (repeatable)")
    args = parser.parse_args()
    variants = []
    for text in args.variant:
        label, sep, path = text.partition("=")
        if not sep or not label or not path or label in ("ours", "flash",
                                                         "cudnn"):
            parser.error(f"--variant takes LABEL=LIBRARY with a new label, "
                         f"found '{text}'")
        variants.append((label, path))

    rows = [row for row in shapes(args.quick)
            if args.only is None or args.only in row[0]]
    if args.specs:
        print("\n".join(specs()))
        return 0
    if not args.library:
        parser.error("--library is required (or --specs)")

    runtime = Runtime(args.runtime)
    print(f"attn runtime on {runtime.device()}")
    modules = {"ours": runtime.kernels(args.library)}
    for label, path in variants:
        modules[label] = runtime.kernels(path)
    try:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as error:
        print(f"PyTorch is needed to run this benchmark ({error})")
        return 1
    if not torch.cuda.is_available():
        print("PyTorch sees no CUDA device")
        return 1
    print(f"PyTorch {torch.__version__} flash and cuDNN SDPA on "
          f"{torch.cuda.get_device_name()}; B={BATCH} H={HEADS}, "
          f"median of {args.repeat} alternating rounds")
    sdpa = torch.nn.functional.scaled_dot_product_attention
    torch_dtype = {"f16": torch.float16, "bf16": torch.bfloat16}
    if args.dropout is not None:
        if not 0.0 < args.dropout < 1.0:
            parser.error("--dropout takes a probability in (0, 1)")
        return dropout_rows(
            args, runtime, modules["ours"], torch, sdpa,
            lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION), torch_dtype)
    if args.backward:
        return backward_rows(
            args, runtime, modules["ours"], torch, sdpa,
            lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION), torch_dtype)

    table = []
    failures = 0
    for label, dtype, s, d, causal in rows:
        q, k, v = (torch.randn(BATCH, HEADS, s, d, device="cuda",
                               dtype=torch_dtype[dtype]) for _ in range(3))

        def build(module):
            """Our kernel of this shape in `module`, writing a poisoned
            output of its own."""
            kernel = runtime.find(module, kernel_name(dtype, d, causal))
            out = torch.full_like(q, float("nan"))

            def call():
                runtime.run(kernel, q, k, v, out, dtype)
            return call, out

        builds = {name: build(module) for name, module in modules.items()}
        ours, out = builds["ours"]

        def peer(backend):
            def call():
                with sdpa_kernel(backend):
                    return sdpa(q, k, v, is_causal=causal)
            return call

        peers = {"flash": peer(SDPBackend.FLASH_ATTENTION),
                 "cudnn": peer(SDPBackend.CUDNN_ATTENTION)}
        for call, _ in builds.values():
            call()
        ref = reference(torch, q, k, v, causal)
        error = relative_error(torch, out, ref)
        variant_error = {name: relative_error(torch, builds[name][1], ref)
                         for name, _ in variants}
        peer_error = {}
        for name, call in list(peers.items()):
            try:
                peer_error[name] = relative_error(torch, call(), ref)
            except RuntimeError as refusal:  # a backend refusing the shape
                print(f"{label}: PyTorch's {name} backend: "
                      f"{str(refusal).splitlines()[0]}")
                del peers[name]
        del ref
        ok = all(e <= TOLERANCE[dtype]
                 for e in [error, *variant_error.values()])
        failures += not ok
        calls = {"ours": ours, **peers,
                 **{name: builds[name][0] for name, _ in variants}}
        times = {name: [] for name in calls}
        for _ in range(3):
            for call in calls.values():
                call()
        for _ in range(args.repeat):
            for name, call in calls.items():
                times[name].append(timed(torch, call))
        flops = 4.0 * BATCH * HEADS * s * s * d
        if causal:
            flops *= (s + 1) / (2 * s)
        ms = {name: statistics.median(t) for name, t in times.items()}
        cells = [f"{ms['ours']:.3f}", f"{flops / ms['ours'] * 1e-9:.1f}"]
        for name in ("flash", "cudnn"):
            if name in ms:
                cells += [f"{ms[name]:.3f}", f"{flops / ms[name] * 1e-9:.1f}",
                          f"{ms[name] / ms['ours']:.2f}x",
                          f"{peer_error[name]:.1e}"]
            else:
                cells += ["n/a"] * 4
        for name, _ in variants:
            cells += [f"{ms[name]:.3f}", f"{flops / ms[name] * 1e-9:.1f}",
                      f"{ms['ours'] / ms[name]:.2f}x",
                      (f"{ms['flash'] / ms[name]:.2f}x" if "flash" in ms
                       else "n/a"),
                      f"{variant_error[name]:.1e}"]
        table.append(f"| {label} | " + " | ".join(cells)
                     + f" | {error:.1e} | {'ok' if ok else 'FAIL'} |")
        print(table[-1], flush=True)

    print()
    extra = "".join(f"| {name} ms | {name} TFLOP/s | {name} / ours (speed) "
                    f"| {name} / flash (speed) | {name} rel. error "
                    for name, _ in variants)
    print("| shape | ours ms | ours TFLOP/s | flash ms | flash TFLOP/s "
          "| ours / flash (speed) | flash rel. error | cuDNN ms "
          "| cuDNN TFLOP/s | ours / cuDNN (speed) | cuDNN rel. error "
          + extra + "| ours rel. error | check |")
    print("|---|" + "---:|" * (11 + 5 * len(variants)) + "---|")
    print("\n".join(table))
    return 1 if failures else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, RuntimeError) as error:
        print(f"gpu_peers.py: {error}", file=sys.stderr)
        sys.exit(1)
