#!/usr/bin/env python3
"""Runs attn.attention_backward through attn-to-llvm-cpu and mlir-runner on
fresh random inputs and checks dQ, dK and dV against a float64 reference.

The reference is written independently of the kernel: it materializes the
whole forward (S, P, O, LSE) and the textbook softmax gradient in float64,
and is itself checked against central finite differences of the loss
L = Σ dO·O + Σ dLSE·LSE. Output buffers start as NaN (poisoned), so an
element the kernel does not write fails. Pure Python: no numpy needed.

usage: backward_check.py [--seed N] [--keep DIR]   (prints one line per case)
"""
import argparse
import math
import os
import random
import struct
import subprocess
import sys
import tempfile

NEG_INF = float("-inf")


def round_to(x, dtype):
    """x rounded to the element type (round to nearest even)."""
    if math.isnan(x) or math.isinf(x):
        return x
    f = struct.unpack("f", struct.pack("f", x))[0]
    if dtype == "f32":
        return f
    if dtype == "f16":
        return struct.unpack("e", struct.pack("e", f))[0]
    bits = struct.unpack("I", struct.pack("f", f))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("f", struct.pack("I", bits))[0]


class Case:
    def __init__(self, name, dtype="f32", b=1, hq=2, hkv=1, sq=8, sk=8, d=16,
                 dv=16, causal=None, window=None, mask=None, softcap=None,
                 scale=None, grad_lse=False, nan_key=None):
        self.__dict__.update(locals())
        del self.__dict__["self"]

    # ---- the function of docs/spec.md, in float64 ------------------------
    def diagonal(self):
        align = self.causal or (self.window and self.window[2])
        if align is None:
            return 0
        return 0 if align == "top_left" else self.sk - self.sq

    def allowed(self, bi, h, i, j):
        off = self.diagonal()
        if self.causal and j > i + off:
            return False
        if self.window:
            left, right, _ = self.window
            if left is not None and j < i + off - left:
                return False
            if right is not None and j > i + off + right:
                return False
        if self.mask is not None:
            m = self.mask_at(bi, h, i, j)
            if self.mask_kind == "bool" and not m:
                return False
            if self.mask_kind == "bias" and m == NEG_INF:
                return False
        return True

    def mask_at(self, bi, h, i, j):
        shape = self.mask_shape
        return self.M[(bi if shape[0] > 1 else 0)][(h if shape[1] > 1 else 0)][
            (i if shape[2] > 1 else 0)][j]

    def score(self, bi, h, i, j, Q, K):
        g = self.hq // self.hkv
        s = self.eff_scale * sum(Q[bi][h][i][c] * K[bi][h // g][j][c]
                                 for c in range(self.d))
        raw = s
        if self.softcap:
            s = self.softcap * math.tanh(s / self.softcap)
        if self.mask is not None and self.mask_kind == "bias":
            s += self.mask_at(bi, h, i, j)
        return s, raw

    def forward(self, Q, K, V):
        """O, LSE and the weights P (float64)."""
        g = self.hq // self.hkv
        O, L, P = [], [], []
        for bi in range(self.b):
            Ob, Lb, Pb = [], [], []
            for h in range(self.hq):
                Oh, Lh, Ph = [], [], []
                for i in range(self.sq):
                    s = [self.score(bi, h, i, j, Q, K)[0]
                         if self.allowed(bi, h, i, j) else None
                         for j in range(self.sk)]
                    live = [x for x in s if x is not None]
                    if not live:
                        Oh.append([0.0] * self.dv)
                        Lh.append(NEG_INF)
                        Ph.append([None] * self.sk)
                        continue
                    m = max(live)
                    e = [math.exp(x - m) if x is not None else None for x in s]
                    total = sum(x for x in e if x is not None)
                    # None marks an excluded position: it contributes
                    # nothing, whatever V holds there.
                    p = [x / total if x is not None else None for x in e]
                    Oh.append([sum(p[j] * V[bi][h // g][j][c]
                                   for j in range(self.sk) if p[j] is not None)
                               for c in range(self.dv)])
                    Lh.append(m + math.log(total))
                    Ph.append(p)
                Ob.append(Oh), Lb.append(Lh), Pb.append(Ph)
            O.append(Ob), L.append(Lb), P.append(Pb)
        return O, L, P

    def gradients(self, Q, K, V, dO, dL):
        """dQ, dK, dV of L = Σ dO·O + Σ dL·LSE: the textbook softmax
        gradient on the materialized P (float64)."""
        g = self.hq // self.hkv
        O, _, P = self.forward(Q, K, V)
        dQ = zeros(self.b, self.hq, self.sq, self.d)
        dK = zeros(self.b, self.hkv, self.sk, self.d)
        dV = zeros(self.b, self.hkv, self.sk, self.dv)
        for bi in range(self.b):
            for h in range(self.hq):
                kv = h // g
                for i in range(self.sq):
                    p = P[bi][h][i]
                    live = [j for j in range(self.sk) if p[j] is not None]
                    dp = {j: sum(dO[bi][h][i][c] * V[bi][kv][j][c]
                                 for c in range(self.dv)) for j in live}
                    # dL/ds_j = p_j (dp_j − Σ_k p_k dp_k) + p_j dLSE
                    mean = sum(p[j] * dp[j] for j in live)
                    for j in live:
                        ds = p[j] * (dp[j] - mean) + p[j] * dL[bi][h][i]
                        s, raw = self.score(bi, h, i, j, Q, K)
                        if self.softcap:
                            t = math.tanh(raw / self.softcap)
                            ds *= 1 - t * t
                        for c in range(self.dv):
                            dV[bi][kv][j][c] += p[j] * dO[bi][h][i][c]
                        for c in range(self.d):
                            dQ[bi][h][i][c] += self.eff_scale * ds * K[bi][kv][j][c]
                            dK[bi][kv][j][c] += self.eff_scale * ds * Q[bi][h][i][c]
        return dQ, dK, dV

    def loss(self, Q, K, V, dO, dL):
        O, LSE, _ = self.forward(Q, K, V)
        total = 0.0
        for bi in range(self.b):
            for h in range(self.hq):
                for i in range(self.sq):
                    total += sum(dO[bi][h][i][c] * O[bi][h][i][c]
                                 for c in range(self.dv))
                    if LSE[bi][h][i] != NEG_INF:
                        total += dL[bi][h][i] * LSE[bi][h][i]
        return total


def zeros(*shape):
    if len(shape) == 1:
        return [0.0] * shape[0]
    return [zeros(*shape[1:]) for _ in range(shape[0])]


def rand(rng, dtype, *shape):
    if len(shape) == 1:
        return [round_to(rng.gauss(0, 1), dtype) for _ in range(shape[0])]
    return [rand(rng, dtype, *shape[1:]) for _ in range(shape[0])]


def flat(x):
    if isinstance(x, list):
        for y in x:
            yield from flat(y)
    else:
        yield x


def literal(x):
    if math.isnan(x):
        return "0x7FC00000"
    if math.isinf(x):
        return "0xFF800000" if x < 0 else "0x7F800000"
    return repr(float(x))


def tensor_type(shape, elem):
    return "tensor<" + "x".join(str(s) for s in shape) + "x" + elem + ">"


def dense(values, shape, elem):
    vals = list(flat(values))
    if elem != "f32" and any(math.isinf(v) or math.isnan(v) for v in vals):
        # Hex literals are per element type: spell ±inf for 16-bit types.
        bits = {"f16": ("0xFC00", "0x7C00", "0x7E00"),
                "bf16": ("0xFF80", "0x7F80", "0x7FC0")}[elem]
        def lit(v):
            if math.isnan(v):
                return bits[2]
            if math.isinf(v):
                return bits[0] if v < 0 else bits[1]
            return repr(float(v))
        body = ", ".join(lit(v) for v in vals)
    else:
        body = ", ".join(literal(v) for v in vals)
    return f"arith.constant dense<[{body}]> : {tensor_type([len(vals)], elem)}"


def mlir_program(case, Q, K, V, O, LSE, dO, dL):
    e = case.dtype
    shapes = {
        "q": ([case.b, case.hq, case.sq, case.d], e),
        "k": ([case.b, case.hkv, case.sk, case.d], e),
        "v": ([case.b, case.hkv, case.sk, case.dv], e),
        "o": ([case.b, case.hq, case.sq, case.dv], e),
        "lse": ([case.b, case.hq, case.sq], "f32"),
        "do": ([case.b, case.hq, case.sq, case.dv], e),
        "dlse": ([case.b, case.hq, case.sq], "f32"),
    }
    data = {"q": Q, "k": K, "v": V, "o": O, "lse": LSE, "do": dO, "dlse": dL}
    names = ["q", "k", "v"]
    if case.mask is not None:
        elem = "i1" if case.mask_kind == "bool" else e
        shapes["m"] = (case.mask_shape, elem)
        data["m"] = case.M
        names.append("m")
    names += ["o", "lse", "do"] + (["dlse"] if case.grad_lse else [])
    t = {n: tensor_type(*shapes[n]) for n in names}
    grads = [("dq", "q"), ("dk", "k"), ("dv", "v")]
    gt = [t[like] for _, like in grads]

    attrs = []
    if case.causal:
        attrs.append("causal")
    align = case.causal or (case.window and case.window[2])
    if align:
        attrs.append(f"align({align})")
    if case.window:
        left, right, _ = case.window
        parts = []
        if left is not None:
            parts.append(f"left = {left}")
        if right is not None:
            parts.append(f"right = {right}")
        attrs.append("window <" + ", ".join(parts) + ">")
    if case.scale is not None:
        attrs.append(f"scale({case.scale!r})")
    if case.softcap is not None:
        attrs.append(f"softcap({float(case.softcap)!r})")

    args = ", ".join(f"%{n}: {t[n]}" for n in names)
    outs = ", ".join(f"%{g}0: {t[like]}" for g, like in grads)
    mask = f"mask(%m : {t['m']})" if "m" in names else ""
    grad_lse = f"grad_lse(%dlse : {t['dlse']})" if case.grad_lse else ""
    lines = [f"func.func @bw({args}, {outs}) -> ({', '.join(gt)}) {{",
             f"  %r:3 = attn.attention_backward ins(%q, %k, %v : {t['q']}, {t['k']}, {t['v']}) {mask}",
             f"      forward(%o, %lse : {t['o']}, {t['lse']}) grads(%do : {t['do']}) {grad_lse}",
             f"      outs(%dq0, %dk0, %dv0 : {', '.join(gt)}) {' '.join(attrs)} -> {', '.join(gt)}",
             f"  return %r#0, %r#1, %r#2 : {', '.join(gt)}",
             "}",
             "func.func @main() {"]
    for n in names:
        shape, elem = shapes[n]
        vals = list(flat(data[n]))
        if elem == "i1":
            body = ", ".join("true" if v else "false" for v in vals)
            lines.append(f"  %{n}_flat = arith.constant dense<[{body}]> : {tensor_type([len(vals)], 'i1')}")
        else:
            lines.append(f"  %{n}_flat = {dense(vals, shape, elem)}")
        lines.append(f"  %{n} = tensor.reshape_shape_placeholder")
        lines[-1] = (f"  %{n} = tensor.expand_shape %{n}_flat [[{', '.join(str(i) for i in range(len(shape)))}]] "
                     f"output_shape [{', '.join(str(s) for s in shape)}] : {tensor_type([len(vals)], elem)} into {tensor_type(shape, elem)}")
    # Poisoned outputs: NaN everywhere.
    nan = {"f32": "0x7FC00000", "f16": "0x7E00", "bf16": "0x7FC0"}[e]
    for g, like in grads:
        lines.append(f"  %{g}0 = arith.constant dense<{nan}> : {t[like]}")
    call_args = ", ".join(f"%{n}" for n in names) + ", %dq0, %dk0, %dv0"
    lines.append(f"  %g:3 = call @bw({call_args}) : ({', '.join(t[n] for n in names)}, {', '.join(gt)}) -> ({', '.join(gt)})")
    for index, (g, like) in enumerate(grads):
        shape = shapes[like][0]
        lines.append(f"  vector.print str \"{g}\\n\"")
        ivs = [f"%{g}i{a}" for a in range(4)]
        for a in range(4):
            lines.append(f"  scf.for {ivs[a]} = %c0 to %c{shape[a]} step %c1 {{")
        lines.append(f"    %{g}x = tensor.extract %g#{index}[{', '.join(ivs)}] : {t[like]}")
        if e != "f32":
            lines.append(f"    %{g}y = arith.extf %{g}x : {e} to f32")
            lines.append(f"    vector.print %{g}y : f32")
        else:
            lines.append(f"    vector.print %{g}x : f32")
        lines.append("  " + "}" * 4)
    consts = sorted({0, 1} | {s for _, like in grads for s in shapes[like][0]})
    lines[7:7] = [f"  %c{c} = arith.constant {c} : index" for c in consts]
    lines.append("  return")
    lines.append("}")
    return "\n".join(lines) + "\n"


def run_kernel(case, program, keep):
    tools = os.environ.get("ATTN_TOOLS", "")
    opt = os.path.join(tools, "attn-opt") if tools else "attn-opt"
    lib = os.environ.get("MLIR_C_RUNNER_UTILS",
                         "/usr/lib/llvm-22/lib/libmlir_c_runner_utils.so")
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(keep or tmp, case.name + ".mlir")
        with open(src, "w") as f:
            f.write(program)
        lowered = subprocess.run([opt, src, "--attn-to-llvm-cpu"],
                                 capture_output=True, text=True)
        if lowered.returncode != 0:
            sys.exit(f"{case.name}: attn-opt failed:\n{lowered.stderr[:4000]}")
        ran = subprocess.run(["mlir-runner", "-e", "main",
                              "-entry-point-result=void",
                              f"-shared-libs={lib}"],
                             input=lowered.stdout, capture_output=True,
                             text=True)
        if ran.returncode != 0:
            sys.exit(f"{case.name}: mlir-runner failed:\n{ran.stderr[:4000]}")
    out, current = {}, None
    for line in ran.stdout.split():
        if line in ("dq", "dk", "dv"):
            current = line
            out[current] = []
        else:
            out[current].append(float(line))
    return out


def prepare(case, rng):
    case.eff_scale = case.scale if case.scale is not None else 1 / math.sqrt(case.d)
    e = case.dtype
    Q = rand(rng, e, case.b, case.hq, case.sq, case.d)
    K = rand(rng, e, case.b, case.hkv, case.sk, case.d)
    V = rand(rng, e, case.b, case.hkv, case.sk, case.dv)
    if case.mask is not None:
        case.mask_kind, case.mask_shape = case.mask
        shape = case.mask_shape
        if case.mask_kind == "bool":
            case.M = [[[[rng.random() < 0.7 for _ in range(shape[3])]
                        for _ in range(shape[2])] for _ in range(shape[1])]
                      for _ in range(shape[0])]
            if shape[2] > 2:
                # One row that no key is kept for.
                case.M[0][0][2] = [False] * shape[3]
        else:
            case.M = [[[[NEG_INF if rng.random() < 0.2 else round_to(rng.gauss(0, 1), e)
                         for _ in range(shape[3])] for _ in range(shape[2])]
                       for _ in range(shape[1])] for _ in range(shape[0])]
    if case.nan_key is not None:
        # NaN in K and V at a key some rows exclude.
        bi, kv, j = case.nan_key
        for plane in case.M:
            for head in plane:
                for row in head:
                    row[j] = False
        K[bi][kv][j] = [float("nan")] * case.d
        V[bi][kv][j] = [float("nan")] * case.dv
    dO = rand(rng, e, case.b, case.hq, case.sq, case.dv)
    dL = (rand(rng, "f32", case.b, case.hq, case.sq) if case.grad_lse
          else zeros(case.b, case.hq, case.sq))
    O, LSE, _ = case.forward(Q, K, V)
    O = [[[[round_to(x, e) for x in row] for row in h] for h in bb] for bb in O]
    LSE = [[[round_to(x, "f32") for x in h] for h in bb] for bb in LSE]
    return Q, K, V, O, LSE, dO, dL


def check_reference(case, rng):
    """The float64 reference against central differences of the loss."""
    Q, K, V, _, _, dO, dL = prepare(case, rng)
    dQ, dK, dV = case.gradients(Q, K, V, dO, dL)
    h = 1e-6
    worst = 0.0
    for tensor, grad in ((Q, dQ), (K, dK), (V, dV)):
        for _ in range(6):
            idx = [rng.randrange(len(tensor))]
            x = tensor[idx[0]]
            while isinstance(x[0], list):
                idx.append(rng.randrange(len(x)))
                x = x[idx[-1]]
            c = rng.randrange(len(x))
            saved = x[c]
            x[c] = saved + h
            up = case.loss(Q, K, V, dO, dL)
            x[c] = saved - h
            down = case.loss(Q, K, V, dO, dL)
            x[c] = saved
            g = grad
            for i in idx:
                g = g[i]
            worst = max(worst, abs((up - down) / (2 * h) - g[c]) / max(1.0, abs(g[c])))
    return worst


def structural_zeros(case, Q, K, V):
    """Flat indices of dQ of rows with no allowed key, and of dK/dV of keys
    that no row of their group sees."""
    _, _, P = case.forward(Q, K, V)
    g = case.hq // case.hkv
    out = {"dq": [], "dk": [], "dv": []}
    for bi in range(case.b):
        for h in range(case.hq):
            for i in range(case.sq):
                if not any(P[bi][h][i][j] for j in range(case.sk)
                           if P[bi][h][i][j] is not None):
                    base = ((bi * case.hq + h) * case.sq + i) * case.d
                    out["dq"] += range(base, base + case.d)
        for kv in range(case.hkv):
            for j in range(case.sk):
                if not any(P[bi][h][i][j] for h in range(kv * g, kv * g + g)
                           for i in range(case.sq)
                           if P[bi][h][i][j] is not None):
                    row = (bi * case.hkv + kv) * case.sk + j
                    out["dk"] += range(row * case.d, row * case.d + case.d)
                    out["dv"] += range(row * case.dv, row * case.dv + case.dv)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int,
                        default=int(os.environ.get("ATTN_SEED", "0")) or
                        random.SystemRandom().randrange(1 << 30))
    parser.add_argument("--keep", help="keep the generated .mlir files here")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print(f"seed {args.seed} (rerun with --seed {args.seed})")

    cases = [
        Case("gqa_odd_sizes", hq=4, hkv=2, sq=13, sk=37, d=24, dv=20),
        Case("causal_br_softcap_dlse", hq=2, hkv=1, sq=70, sk=90, d=16, dv=8,
             causal="bottom_right", softcap=5.0, grad_lse=True),
        Case("window_boolmask", b=2, hq=2, hkv=2, sq=21, sk=75, d=8, dv=16,
             window=(10, 3, "top_left"), mask=("bool", [1, 1, 21, 75])),
        Case("bf16_bias", dtype="bf16", b=2, hq=3, hkv=1, sq=9, sk=66, d=32,
             dv=16, mask=("bias", [2, 1, 1, 66]), scale=0.2),
        Case("f16_masked_rows", dtype="f16", hq=2, hkv=2, sq=20, sk=8, d=16,
             dv=16, causal="bottom_right"),
        Case("nan_excluded_key", hq=2, hkv=1, sq=12, sk=12, d=8, dv=8,
             causal="top_left", mask=("bool", [1, 1, 1, 12]),
             nan_key=(0, 0, 5)),
    ]
    fd = check_reference(Case("reference", hq=2, hkv=1, sq=5, sk=7, d=4, dv=3,
                              causal="bottom_right", softcap=3.0,
                              grad_lse=True, mask=("bias", [1, 2, 5, 7]),
                              scale=0.7), rng)
    print(f"reference vs finite differences: {'ok' if fd < 1e-6 else 'FAIL'} ({fd:.1e})")
    failed = fd >= 1e-6
    for case in cases:
        Q, K, V, O, LSE, dO, dL = prepare(case, rng)
        dQ, dK, dV = case.gradients(Q, K, V, dO, dL)
        zeros_of = structural_zeros(case, Q, K, V)
        got = run_kernel(case, mlir_program(case, Q, K, V, O, LSE, dO, dL),
                         args.keep)
        tol = 1e-4 if case.dtype == "f32" else 2e-2
        report = []
        for name, ref in (("dq", dQ), ("dk", dK), ("dv", dV)):
            want = list(flat(ref))
            have = got.get(name, [])
            if len(have) != len(want):
                report.append(f"{name}: {len(have)} values, expected {len(want)}")
                continue
            if any(math.isnan(x) for x in have):
                report.append(f"{name}: NaN")
                continue
            scale = max(max(abs(x) for x in want), 1e-30)
            err = max(abs(a - b) for a, b in zip(have, want)) / scale
            # Rows and keys whose reference is exactly 0 (fully masked rows,
            # keys no row sees) must be exactly 0.
            # Fully masked rows and keys that no row sees are exactly 0.
            exact = all(have[i] == 0.0 for i in zeros_of[name])
            if err > tol or not exact:
                report.append(f"{name}: error {err:.2e} (tolerance {tol:.0e})"
                              + ("" if exact else ", nonzero where the reference is 0"))
            else:
                report.append(f"{name} {err:.1e}")
        bad = any("error" in r or "NaN" in r or "values" in r for r in report)
        failed |= bad
        print(f"{case.name}: {'FAIL' if bad else 'ok'} ({'; '.join(report)})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
