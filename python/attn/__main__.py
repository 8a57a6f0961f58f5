"""python -m attn: what the package would use, for bug reports and setup.

    python -m attn              # version, compiler, cache, threads
    python -m attn --compile "dtype=bf16,d=128,causal"   # fill the cache
    python -m attn --version
    python -m attn heatmap weights.npy --x-labels "the cat sat" -o w.png
    python -m attn heatmap --query q.npy --key k.npy --causal -o w.svg
"""

import argparse
import sys

import attn
from attn import _cache


def heatmap(argv) -> int:
    """python -m attn heatmap: draws attention weights saved as .npy, or the
    weights of a query and key saved as .npy, into a PNG, SVG or PDF."""
    import numpy as np

    parser = argparse.ArgumentParser(
        prog="python -m attn heatmap",
        description="Draws attention weights as heatmaps (attn.plot_attention): "
        "from a weights .npy ([Sq, Sk], [H, Sq, Sk] or [B, H, Sq, Sk]), or computed "
        "by attn.attention_weights from --query and --key .npy files.",
    )
    parser.add_argument("weights", nargs="?", help="a .npy of attention weights")
    parser.add_argument("--query", help="a .npy query [B, Hq, Sq, D] (with --key)")
    parser.add_argument("--key", help="a .npy key [B, Hkv, Sk, D] (with --query)")
    parser.add_argument("--causal", action="store_true", help="causal masking (with --query)")
    parser.add_argument("--batch", type=int, default=0, help="the batch entry to draw")
    parser.add_argument("--heads", help="comma-separated heads to draw (default all)")
    parser.add_argument("--x-labels", help="the keys' tokens, separated by spaces")
    parser.add_argument("--y-labels", help="the queries' tokens, separated by spaces")
    parser.add_argument("--ncols", type=int, default=4, help="images per row")
    parser.add_argument("-o", "--output", required=True, help="the .png, .svg or .pdf to write")
    args = parser.parse_args(argv)
    try:
        if (args.weights is None) == (args.query is None):
            raise attn.Error("give a weights .npy, or --query and --key (not both)")
        if args.query is not None:
            if args.key is None:
                raise attn.Error("--query needs --key")
            weights = attn.attention_weights(np.load(args.query), np.load(args.key),
                                             is_causal=args.causal,
                                             enable_gqa=True)
        else:
            weights = np.load(args.weights)
        if weights.ndim == 4:
            if not 0 <= args.batch < weights.shape[0]:
                raise attn.Error(f"--batch {args.batch}: the weights have {weights.shape[0]} "
                                 "batch entries")
            weights = weights[args.batch]
        heads = None
        if args.heads:
            heads = [int(h) for h in args.heads.split(",")]
        attn.plot_attention(
            weights,
            args.x_labels.split() if args.x_labels else None,
            args.y_labels.split() if args.y_labels else None,
            path=args.output, heads=heads, ncols=args.ncols,
        )
    except (attn.Error, OSError, ValueError) as error:
        print(f"python -m attn heatmap: {error}", file=sys.stderr)
        return 1
    print(f"wrote {args.output}")
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "heatmap":
        return heatmap(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m attn",
        description="Shows which attn-compile, kernel cache and thread count the attn "
        "package uses; --compile compiles specs into the cache ahead of time.",
    )
    parser.add_argument("--version", action="version", version=f"attn {attn.__version__} (Python package)")
    parser.add_argument("--compile", metavar="SPEC", action="append", default=[],
                        help="an attn-compile spec to compile into the cache (repeatable)")
    args = parser.parse_args(argv)

    print(f"attn {attn.__version__} (Python package, {attn.__file__})")
    for i, (origin, path) in enumerate(attn.compiler_search_path(), 1):
        print(f"  compiler lookup {i}. {origin}: {path if path is not None else '(unset)'}")
    try:
        compiler = attn.find_compiler()
        version = _cache._identity(compiler).splitlines()[0]
        print(f"compiler: {compiler} ({version})")
    except attn.Error as error:
        print(f"compiler: none: {error}")
        return 1
    directory = attn.cache_dir()
    entries = sorted(directory.glob("*.so")) if directory.is_dir() else []
    print(f"kernel cache: {directory} ({len(entries)} kernels)")
    print(f"threads: {attn.num_threads()} ({attn._ext.pool_kind()} pool)")
    for spec in args.compile:
        kernel = attn.kernel(spec)
        print(f"compiled: {spec} -> {kernel.name} for {kernel.target_cpu or 'this CPU'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
