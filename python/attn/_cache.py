"""Finding attn-compile, and the kernel caches (on disk and in memory).

A kernel is named by its spec string (lib/Support/KernelSpec.h). The first
call that needs a spec compiles it with the attn-compile executable into the
disk cache; later calls in the same process find it loaded in memory, and
later processes load it from disk. The disk key covers everything that changes
the machine code: the spec, the compiler (its ``--version`` output and the
size and modification time of the executable) and the target: this CPU (its
feature flags), since attn-compile targets the host CPU, or for a GPU kernel
the GPU's architecture (``sm_90``), which attn-compile is given.

Two processes may fill the cache at once: each compiles into a private
temporary folder inside the cache folder and moves the finished library into
place with ``os.replace`` (atomic within one file system), so a reader sees
either no file or a complete one.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from . import _ext

Error = _ext.Error

#: Environment variables read by this module.
COMPILER_ENV = "ATTN_COMPILE"
CACHE_DIR_ENV = "ATTN_CACHE_DIR"
#: "0" (or "false", "no", "off") silences the line a slow compile prints.
STATUS_ENV = "ATTN_COMPILE_STATUS"

#: A compile that takes longer than this prints a status line on stderr.
STATUS_DELAY_SECONDS = 0.5

_lock = threading.Lock()
_loaded: dict[object, _ext.Kernel] = {}
_compiler_identity: dict[str, str] = {}
_stats = {"compiles": 0, "disk_hits": 0, "memory_hits": 0}
_status_override: bool | None = None


# ---------------------------------------------------------------------------
# attn-compile
# ---------------------------------------------------------------------------


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def compiler_search_path() -> list[tuple[str, Path | None]]:
    """Where attn-compile is looked for, in order, as (origin, path) pairs.

    1. ``$ATTN_COMPILE``,
    2. next to the package: ``attn/bin/attn-compile``,
    3. ``attn-compile`` on ``$PATH``,
    4. ``build/tools/attn-compile`` of the checkout the package was built from.
    """
    places: list[tuple[str, Path | None]] = []
    env = os.environ.get(COMPILER_ENV)
    places.append(("$" + COMPILER_ENV, Path(env) if env else None))
    places.append(("the package", Path(__file__).parent / "bin" / "attn-compile"))
    on_path = shutil.which("attn-compile")
    places.append(("$PATH", Path(on_path) if on_path else None))
    try:
        from ._build_info import SOURCE_DIR
    except ImportError:  # pragma: no cover - a package built without CMake
        SOURCE_DIR = None
    places.append(
        (
            "the source checkout",
            Path(SOURCE_DIR) / "build" / "tools" / "attn-compile" if SOURCE_DIR else None,
        )
    )
    return places


def find_compiler() -> Path:
    """The attn-compile executable to use; attn.Error if there is none."""
    places = compiler_search_path()
    origin, env_path = places[0]
    if env_path is not None:
        # An explicit choice that is wrong is an error, not a reason to
        # silently use another compiler.
        if not _executable(env_path):
            raise Error(
                f"{origin} is '{env_path}', which is not an executable file; "
                "point it at an attn-compile executable or unset it"
            )
        return env_path
    for _, path in places[1:]:
        if path is not None and _executable(path):
            return path
    looked = "; ".join(
        f"{i}. {origin}: {path if path is not None else '(unset)'}"
        for i, (origin, path) in enumerate(places, 1)
    )
    raise Error(
        "attn-compile was not found, and attn needs it to compile kernels. "
        f"Looked in order at: {looked}. Build it (scripts/setup.sh builds "
        f"build/tools/attn-compile) and set ${COMPILER_ENV} to its path."
    )


def _identity(compiler: Path) -> str:
    """What distinguishes this compiler's output from another's."""
    key = str(compiler)
    stat = compiler.stat()
    stamp = f"{stat.st_size}:{stat.st_mtime_ns}"
    cached = _compiler_identity.get(key)
    if cached is not None and cached.endswith(stamp):
        return cached
    try:
        version = subprocess.run(
            [str(compiler), "--version"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as error:
        raise Error(f"'{compiler} --version' failed: {error}") from None
    identity = f"{version}\n{stamp}"
    _compiler_identity[key] = identity
    return identity


_cpu_features: str | None = None


def cpu_features() -> str:
    """This CPU's feature flags (/proc/cpuinfo), part of the cache key."""
    global _cpu_features
    if _cpu_features is None:
        flags = ""
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                for line in f:
                    name, _, value = line.partition(":")
                    if name.strip() in ("flags", "Features"):
                        flags = " ".join(sorted(value.split()))
                        break
        except OSError:
            pass
        _cpu_features = f"{platform.machine()} {platform.processor()} {flags}"
    return _cpu_features


# ---------------------------------------------------------------------------
# The caches
# ---------------------------------------------------------------------------


def cache_dir() -> Path:
    """``$ATTN_CACHE_DIR``, else ``$XDG_CACHE_HOME/attn``, else ~/.cache/attn."""
    env = os.environ.get(CACHE_DIR_ENV)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "attn"


def cache_key(spec: str, compiler: Path, modifiers: str | None = None,
              target: str | None = None) -> str:
    """The disk cache's name for a kernel; `target`: a GPU architecture
    (``sm_90``), else the kernel is this CPU's."""
    machine = f"gpu {target}" if target else cpu_features()
    parts = ["attn kernel cache v1", spec, _identity(compiler), machine]
    if modifiers:
        parts.append(modifiers)
    text = "\n".join(parts)
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def set_compile_status(enabled: bool | None) -> None:
    """Whether a compile that takes longer than a moment prints a status
    line on stderr (``attn: compiling <spec> ... done in 1.2 s``). None
    goes back to ``$ATTN_COMPILE_STATUS`` (on unless it is 0/false/no/off)."""
    global _status_override
    _status_override = None if enabled is None else bool(enabled)


def _status_wanted() -> bool:
    if _status_override is not None:
        return _status_override
    value = os.environ.get(STATUS_ENV, "1").strip().lower()
    return value not in ("0", "false", "no", "off")


class _CompileStatus:
    """Prints ``attn: compiling <spec> ...`` once a compile has run for
    STATUS_DELAY_SECONDS, and how it ended; nothing for a quick one."""

    def __init__(self, spec: str):
        self._spec = spec
        self._start = time.monotonic()
        self._shown = False
        self._timer = threading.Timer(STATUS_DELAY_SECONDS, self._show)
        self._timer.daemon = True
        self._started = _status_wanted()
        if self._started:
            self._timer.start()

    def _show(self) -> None:
        self._shown = True
        sys.stderr.write(f"attn: compiling kernel {self._spec} (once; cached for later calls) ...")
        sys.stderr.flush()

    def end(self, ok: bool) -> None:
        if not self._started:
            return
        self._timer.cancel()
        self._timer.join()
        if self._shown:
            seconds = time.monotonic() - self._start
            sys.stderr.write(f" done in {seconds:.1f} s\n" if ok else " failed\n")
            sys.stderr.flush()


def _describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    if returncode == 0:
        return "exited with status 0 but wrote no library"
    return f"exited with status {returncode}"


def _cache_error(folder: Path, error: OSError) -> Error:
    where = f"${CACHE_DIR_ENV}" if os.environ.get(CACHE_DIR_ENV) else "the default cache folder"
    return Error(
        f"cannot write compiled kernels to '{folder}' ({where}): "
        f"{error.strerror or error}; set ${CACHE_DIR_ENV} to a folder you can write"
    )


def _compile(spec: str, compiler: Path, target: Path, modifiers: str | None = None,
             gpu: str | None = None) -> None:
    """Compiles `spec` (with the score and mask modifiers of the .mlir text
    `modifiers`, if any; for GPU architecture `gpu` if given, else this
    CPU) into `target`, atomically."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        workspace = tempfile.TemporaryDirectory(prefix=".compiling-", dir=target.parent)
    except OSError as error:
        raise _cache_error(target.parent, error) from None
    status = _CompileStatus(spec)
    ok = False
    try:
        with workspace as tmp:
            library = Path(tmp) / "kernel.so"
            command = [str(compiler), "--spec", spec, "-o", str(library)]
            if gpu:
                command += ["--target", gpu]
            if modifiers:
                source = Path(tmp) / "modifiers.mlir"
                source.write_text(modifiers)
                command += ["--modifiers", str(source)]
            try:
                result = subprocess.run(
                    command,
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
            except (OSError, subprocess.SubprocessError) as error:
                raise Error(f"running {compiler} failed: {error}") from None
            if result.returncode != 0 or not library.is_file():
                message = (result.stderr or result.stdout).strip()
                if not message:
                    message = (
                        f"{compiler} {_describe_exit(result.returncode)} and printed nothing"
                    )
                raise Error(f"attn-compile could not compile spec '{spec}': {message}")
            # Same folder, same file system: the library appears whole or not
            # at all, whoever else is compiling the same spec right now.
            try:
                os.replace(library, target)
            except OSError as error:
                raise _cache_error(target.parent, error) from None
        ok = True
    finally:
        status.end(ok)
    _stats["compiles"] += 1


def _load(spec: str, modifiers: str | None, target: str | None) -> _ext.Kernel:
    compiler = find_compiler()
    path = cache_dir() / f"{cache_key(spec, compiler, modifiers, target)}.so"
    if path.is_file():
        try:
            kernels = _ext.load_library(str(path))
            _stats["disk_hits"] += 1
        except Error:
            # Not a library this runtime accepts (damaged, or another ABI):
            # compile it again over it.
            kernels = None
        if kernels:
            return kernels[0]
    _compile(spec, compiler, path, modifiers, target)
    kernels = _ext.load_library(str(path))
    if len(kernels) != 1:
        raise Error(f"{path}: expected one kernel, found {len(kernels)}")
    return kernels[0]


def kernel(spec: str, modifiers: str | None = None, target: str | None = None) -> _ext.Kernel:
    """The loaded kernel for `spec`, compiling it on first use; with
    `modifiers` (the .mlir text of an attn.attention whose score_mod and
    mask_mod the kernel gets, attn-compile --modifiers) part of its key;
    for GPU architecture `target` (``sm_90``) where given, else this CPU."""
    key = spec if not modifiers and not target else (spec, modifiers, target)
    found = _loaded.get(key)
    if found is not None:
        _stats["memory_hits"] += 1
        return found
    with _lock:
        found = _loaded.get(key)
        if found is None:
            found = _load(spec, modifiers, target)
            _loaded[key] = found
        return found


def stats() -> dict[str, int]:
    """Counts since the process started: kernels compiled, loaded from the
    disk cache, and found already loaded."""
    return dict(_stats)


def clear_memory_cache() -> None:
    """Forgets the loaded kernels (the next call loads them from disk)."""
    with _lock:
        _loaded.clear()
