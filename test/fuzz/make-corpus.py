#!/usr/bin/env python3
"""Regenerates the seed corpora of the fuzz targets (test/fuzz/corpus/).

Every seed comes from the project's own tests:
  ir       the .mlir tests of test/Dialect, test/Transforms, test/Pipelines
           and examples/mlir, split at `// -----`, comment lines dropped
  spec     the `--spec` strings of test/Integration/*.test and the
           conformance matrix (test/Integration/ConformanceTest.cpp)
  npy      small .npy files of every dtype, order and format version the
           reader accepts (test/unit/support/NpyTest.cpp's cases)
  runtime  inputs of FuzzRuntime.cpp's format: a valid call for each fake
           kernel and layout, and the refusals RuntimeTest.cpp exercises

  test/fuzz/make-corpus.py      (rewrites test/fuzz/corpus/ in place)
"""
import hashlib
import os
import re
import shutil
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "test", "fuzz", "corpus")
MAX_IR_BYTES = 4096


def write(target, name, data):
    path = os.path.join(CORPUS, target)
    os.makedirs(path, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(path, name), "wb") as f:
        f.write(data)


def ir_seeds():
    sources = []
    for folder in ("test/Dialect/Attn", "test/Transforms", "test/Pipelines",
                   "examples/mlir"):
        for name in sorted(os.listdir(os.path.join(ROOT, folder))):
            if name.endswith(".mlir"):
                sources.append(os.path.join(folder, name))
    count = 0
    for source in sources:
        text = open(os.path.join(ROOT, source)).read()
        stem = os.path.splitext(os.path.basename(source))[0]
        for i, chunk in enumerate(re.split(r"^// -----\s*$", text, flags=re.M)):
            lines = [l for l in chunk.splitlines()
                     if l.strip() and not l.lstrip().startswith("//")]
            seed = "\n".join(lines) + "\n"
            if len(lines) == 0 or len(seed) > MAX_IR_BYTES:
                continue
            write("ir", "%s-%02d.mlir" % (stem, i), seed)
            count += 1
    # Inputs that crashed the tools (issue 26): nesting past the limit that
    # they refuse before parsing, and just under it, within MAX_IR_BYTES.
    write("ir", "deep-nesting-parens.mlir",
          "func.func private @f() -> " + "(" * 1100 + "i32" + ")" * 1100
          + "\n")
    write("ir", "deep-nesting-under.mlir",
          "func.func private @f() -> " + "tuple<" * 500 + "i32" + ">" * 500
          + "\n")
    return count + 2


def spec_seeds():
    specs = set()
    integration = os.path.join(ROOT, "test", "Integration")
    for name in sorted(os.listdir(integration)):
        if name.endswith(".test"):
            text = open(os.path.join(integration, name)).read()
            specs.update(re.findall(r'--spec "([^"]*)"', text))
    conformance = open(os.path.join(integration, "ConformanceTest.cpp")).read()
    specs.update(re.findall(r'\{"[a-z0-9_]+", "([^"]+)"', conformance))
    readme = open(os.path.join(ROOT, "README.md")).read()
    specs.update(re.findall(r'--spec "([^"]*)"', readme))
    specs.update(["name=my_attn,dtype=bf16,d=128,causal=bottom_right,lse",
                  "d=64,sizes=1:8:2:?:?", "d=64,sizes=?:?:?:?:?,gqa=4",
                  "d=64,scale=1e-3,softcap=30.5", "mask=none", "causal=top_left"])
    for spec in sorted(specs):
        write("spec", hashlib.sha1(spec.encode()).hexdigest()[:12], spec)
    return len(specs)


def npy_bytes(descr, shape, payload, fortran=False, version=(1, 0)):
    shape_text = "(" + "".join("%d, " % d for d in shape).rstrip(" ")
    if len(shape) > 1:
        shape_text = shape_text.rstrip(",")
    shape_text += ")"
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
        descr, "True" if fortran else "False", shape_text)
    length_size = 2 if version[0] == 1 else 4
    prefix = 6 + 2 + length_size
    padded = len(header) + 1
    padded += (-(prefix + padded)) % 64
    header = header.ljust(padded - 1) + "\n"
    length = struct.pack("<H" if length_size == 2 else "<I", len(header))
    return (b"\x93NUMPY" + bytes(version) + length + header.encode("latin-1")
            + payload)


def npy_seeds():
    seeds = {
        "f32_2x3": npy_bytes("<f4", (2, 3), struct.pack("<6f", *range(6))),
        "f16_4": npy_bytes("<f2", (4,), struct.pack("<4e", 1, -2, 0.5, 65504)),
        "f64_2x2": npy_bytes("<f8", (2, 2), struct.pack("<4d", 1, 2, 3, 4)),
        "bool_1x1x2x3": npy_bytes("|b1", (1, 1, 2, 3), bytes([1, 0, 1, 1, 0, 1])),
        "bf16_2": npy_bytes("bfloat16", (2,), b"\x80\x3f\x00\x40"),
        "fortran_2x3": npy_bytes("<f4", (2, 3), struct.pack("<6f", *range(6)),
                                 fortran=True),
        "v2_f32_3": npy_bytes("<f4", (3,), struct.pack("<3f", 1, 2, 3),
                              version=(2, 0)),
        "v3_f32_1": npy_bytes("<f4", (1,), struct.pack("<f", 1), version=(3, 0)),
        "scalar_f32": npy_bytes("<f4", (), struct.pack("<f", 7)),
        "empty_0x4": npy_bytes("<f4", (0, 4), b""),
        "bhsd_f32": npy_bytes("<f4", (1, 2, 2, 2), struct.pack("<8f", *range(8))),
    }
    for name, data in seeds.items():
        write("npy", name + ".npy", data)
    return len(seeds)


# FuzzRuntime.cpp's input: kernel, flags (1: [B,S,H,D], 2: thread pool,
# 4: reversed sequence), B, Hkv, G, Sq, Sk (each a byte taken modulo a
# small range), then edits of 3 bytes (op, tensor, dim) and a payload.
Q, K, V, MASK, O, LSE = range(6)
SHAPE, STRIDE, DTYPE, RANK, DATA, TOGGLE = 0, 2, 4, 5, 6, 7


def special(i):
    """The value byte that selects FuzzRuntime.cpp's special value i."""
    return next(s for s in range(128, 240) if s % 19 == i)


INT64_MAX, TWO_POW_61 = special(5), special(13)


def runtime_seeds():
    seeds = {}
    for kernel in range(6):
        for flags in (0, 1, 2, 5):
            seeds["valid_k%d_f%d" % (kernel, flags)] = bytes(
                [kernel, flags, 1, 1, 1, 3, 4])
    base = bytes([0, 0, 1, 1, 1, 3, 4])  # fake_plain
    masked = bytes([1, 0, 1, 1, 1, 3, 4])  # fake_causal_mask
    seeds.update({
        "null_kernel": bytes([255, 0, 1, 1, 1, 3, 4]),
        "no_query": base + bytes([TOGGLE, Q, 0]),
        "no_lse": base + bytes([TOGGLE, LSE, 0]),
        "extra_mask": base + bytes([TOGGLE, MASK, 0]),
        "null_data": base + bytes([DATA, K, 0, 0]),
        "output_aliases_query": base + bytes([DATA, O, 0, 1, Q, 0]),
        "key_aliases_query": base + bytes([DATA, K, 0, 1, Q, 0]),
        "lse_aliases_output": base + bytes([DATA, LSE, 0, 1, O, 2]),
        "wild_pointer_top": base + bytes([DATA, V, 0, 2, 2]),
        "bad_dtype": base + bytes([DTYPE, Q, 0, 5]),
        "huge_dtype": base + bytes([DTYPE, O, 0, 250]) + struct.pack("<q", 0x12345678),
        "bad_rank": base + bytes([RANK, K, 0, 3]),
        "negative_size": base + bytes([SHAPE, Q, 2, 0]),
        "huge_shape": base + bytes([SHAPE, Q, 2, INT64_MAX]),
        "overflowing_count": base + bytes([SHAPE, K, 2, TWO_POW_61, SHAPE, K, 1, TWO_POW_61]),
        "zero_stride_output": base + bytes([STRIDE, O, 2, 2]),
        "negative_stride": base + bytes([STRIDE, V, 2, 1]),
        "huge_stride": base + bytes([STRIDE, K, 2, 240]) + struct.pack("<q", 1 << 62),
        "empty_keys": base + bytes([SHAPE, K, 2, 2, SHAPE, V, 2, 2]),
        "empty_queries": base + bytes([SHAPE, Q, 2, 2, SHAPE, O, 2, 2, SHAPE, LSE, 2, 2]),
        "mask_broadcast": masked + bytes([SHAPE, MASK, 0, 3, SHAPE, MASK, 1, 3,
                                          STRIDE, MASK, 0, 5]),
        "mask_wrong_sk": masked + bytes([SHAPE, MASK, 3, 4]),
    })
    for name, data in seeds.items():
        write("runtime", name, data)
    return len(seeds)


def main():
    if os.path.isdir(CORPUS):
        shutil.rmtree(CORPUS)
    counts = {"ir": ir_seeds(), "spec": spec_seeds(), "npy": npy_seeds(),
              "runtime": runtime_seeds()}
    for target, count in counts.items():
        print("%-8s %3d seeds" % (target, count))
    return 0


if __name__ == "__main__":
    sys.exit(main())
