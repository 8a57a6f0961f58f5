"""python -m attn: what the package would use, for bug reports and setup.

    python -m attn              # version, compiler, cache, threads
    python -m attn --compile "dtype=bf16,d=128,causal"   # fill the cache
    python -m attn --version
"""

import argparse
import sys

import attn
from attn import _cache


def main(argv=None) -> int:
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
    print(f"threads: {attn.num_threads()}")
    for spec in args.compile:
        kernel = attn.kernel(spec)
        print(f"compiled: {spec} -> {kernel.name} for {kernel.target_cpu or 'this CPU'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
