"""From a scaled_dot_product_attention call to a kernel spec and a run.

Shared by the NumPy path (attn.scaled_dot_product_attention on anything but
PyTorch tensors) and the PyTorch operator (attn/_torch.py). Shapes and
strides are the caller's: nothing here copies a tensor. A mask that
broadcasts (a dim of 1 where the call has more) is expanded as a stride-0
view, so one kernel serves every broadcast pattern, and shape errors are left
to the runtime, whose messages name the tensor, the dim and both sizes.
"""

from __future__ import annotations

import functools
import math
import numbers
import struct
from typing import Optional, Sequence, Tuple

from . import _cache, _ext

Error = _ext.Error

ALIGNMENTS = ("top_left", "bottom_right")

_DTYPES = {
    "float32": "f32",
    "float16": "f16",
    "bfloat16": "bf16",
}


def dtype_name(dtype) -> str:
    """'f32', 'f16', 'bf16' or 'bool' for a NumPy or PyTorch dtype."""
    text = str(dtype)
    if text.startswith("torch."):
        text = text[len("torch.") :]
    if text == "bool":
        return "bool"
    try:
        return _DTYPES[text]
    except KeyError:
        raise Error(
            f"element type {text} is not supported: attn takes float32, "
            "float16 and bfloat16 tensors (and bool or float masks)"
        ) from None


#: The largest finite float32: scale and softcap are f32 in the kernel.
_FLOAT32_MAX = 3.4028234663852886e38


def _check_number(name: str, value, positive: bool) -> None:
    """A finite float32 number (> 0 where `positive`), else attn.Error,
    before any kernel is compiled for it."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise Error(f"{name} is {value!r} but must be a number") from None
    if not math.isfinite(number) or abs(number) > _FLOAT32_MAX:
        raise Error(f"{name} is {value!r} but must be a finite number within float32's range")
    if positive and not number > 0:
        raise Error(f"{name} is {value!r} but must be a finite number > 0")


def dropout_probability(dropout_p) -> float:
    """dropout_p as a float, checked: a real number (a Python or NumPy
    scalar, or a 0-d tensor or array holding one) in [0, 1) whose float32
    rounding, which the kernels apply, stays below 1."""
    value = None
    zero_dim = (getattr(dropout_p, "ndim", None) == 0
                and "bool" not in str(getattr(dropout_p, "dtype", "")))
    if not isinstance(dropout_p, bool) and (isinstance(dropout_p, numbers.Real)
                                            or zero_dim):
        try:
            value = float(dropout_p)
        except (TypeError, ValueError):
            value = None
    if value is None or not 0.0 <= value < 1.0:
        raise Error(f"dropout_p is {dropout_p!r} but must be a probability in [0, 1)")
    if struct.unpack("f", struct.pack("f", value))[0] >= 1.0:
        raise Error(f"dropout_p is {dropout_p!r}, which rounds to 1 in float32 (the "
                    "kernels' type): it must be a probability in [0, 1)")
    return value


def check_options(
    dropout_p: float,
    causal_alignment: str,
    window: Optional[Sequence[Optional[int]]],
    softcap: Optional[float],
    scale: Optional[float] = None,
) -> Tuple[Optional[int], Optional[int], bool]:
    """Validates the options that need no tensor; returns the window sides
    (None = unbounded) and whether there is a window at all."""
    dropout_probability(dropout_p)
    if scale is not None:
        _check_number("scale", scale, positive=False)
    if softcap is not None:
        _check_number("softcap", softcap, positive=True)
    if causal_alignment not in ALIGNMENTS:
        raise Error(
            f"causal_alignment is {causal_alignment!r} but must be one of "
            f"{', '.join(repr(a) for a in ALIGNMENTS)}"
        )
    if window is None:
        return None, None, False
    try:
        left, right = window
    except (TypeError, ValueError):
        raise Error(
            f"window is {window!r} but must be a pair (left, right), each a "
            "count >= 0 or None for an unbounded side"
        ) from None
    for side, value in (("left", left), ("right", right)):
        if value is not None and (isinstance(value, bool) or int(value) != value or value < 0):
            raise Error(f"window: the {side} side is {value!r} but must be an integer >= 0 or None")
    left = None if left is None else int(left)
    right = None if right is None else int(right)
    return left, right, not (left is None and right is None)


#: Calls with at most this many query rows (decoding) get a kernel compiled
#: for their Sq: the compiler's CPU pipeline (option decode-rows, also 4)
#: then gives each work item a whole GQA group, whose query heads share
#: every K/V load. Longer calls share one kernel for any Sq.
DECODE_ROWS = 4


@functools.lru_cache(maxsize=1024)
def kernel_spec(
    dtype: str,
    head_dim: int,
    value_dim: int,
    mask: Optional[str],
    is_causal: bool,
    alignment: str,
    window_left: Optional[int],
    window_right: Optional[int],
    scale: Optional[float],
    softcap: Optional[float],
    lse: bool,
    decode_rows: Optional[int] = None,
    backward: bool = False,
    dropout: bool = False,
    weights: bool = False,
    sinks: bool = False,
    dbias: bool = False,
) -> str:
    """The attn-compile spec string (lib/Support/KernelSpec.h) of a call.
    `decode_rows`: a static Sq for a decoding kernel (see DECODE_ROWS).
    `backward`: the kernel of the call's gradients, which with `lse` also
    takes the gradient of the returned log-sum-exp. `weights`: the kernel
    of its attention weights (no V: `value_dim` is ignored), which with
    `lse` reads the forward's. `sinks`: a forward kernel that takes a sink
    logit per query head."""
    items = ["name=attn_sdpa", f"dtype={dtype}", f"d={head_dim}"]
    if not weights:
        items.append(f"dv={value_dim}")
    if mask is not None:
        items.append(f"mask={mask}")
    windowed = window_left is not None or window_right is not None
    if is_causal:
        items.append(f"causal={alignment}")
    elif windowed:
        items.append(f"align={alignment}")
    if windowed:
        side = lambda v: "inf" if v is None else str(v)  # noqa: E731
        items.append(f"window={side(window_left)}:{side(window_right)}")
    if scale is not None:
        _check_number("scale", scale, positive=False)
        items.append(f"scale={float(scale)!r}")
    if softcap is not None:
        _check_number("softcap", softcap, positive=True)
        items.append(f"softcap={float(softcap)!r}")
    if lse:
        items.append("lse")
    if backward:
        items.append("backward")
    if dbias:
        items.append("dbias")
    if dropout:
        items.append("dropout")
    if weights:
        items.append("weights")
    if sinks:
        items.append("sinks")
    if decode_rows is not None:
        items.append(f"sizes=?:?:?:{decode_rows}:?")
    return ",".join(items)


def check_shapes(query, key, value, enable_gqa: bool) -> None:
    """What PyTorch checks before the kernel's own checks: 4-D tensors, and
    equal head counts unless enable_gqa."""
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        if len(tensor.shape) != 4:
            raise Error(
                f"{name}: rank is {len(tensor.shape)} but must be 4 [B, H, S, D] "
                "(or 3 [H, S, D] for all of query, key and value)"
            )
    heads_q, heads_kv = query.shape[1], key.shape[1]
    if heads_q != heads_kv and not enable_gqa:
        raise Error(
            f"query has {heads_q} heads and key {heads_kv}: pass enable_gqa=True "
            "for grouped-query attention (as with PyTorch's SDPA)"
        )


def mask_view_shape(mask_shape: Sequence[int], query_shape, key_shape) -> Tuple[int, ...]:
    """The [B, Hq, Sq, Sk] shape a mask is expanded to: each dim of 1 (or
    missing, for masks of lower rank) takes the call's size; any other size
    is left for the runtime to accept or refuse."""
    if len(mask_shape) > 4:
        raise Error(
            f"mask: rank is {len(mask_shape)} but must be at most 4 (broadcastable "
            "to [B, Hq, Sq, Sk])"
        )
    full = (query_shape[0], query_shape[1], query_shape[2], key_shape[2])
    padded = (1,) * (4 - len(mask_shape)) + tuple(mask_shape)
    return tuple(f if m == 1 else m for m, f in zip(padded, full))


def spec_for(
    query,
    key,
    value,
    attn_mask,
    is_causal: bool,
    scale: Optional[float],
    causal_alignment: str,
    window_left: Optional[int],
    window_right: Optional[int],
    softcap: Optional[float],
    return_lse: bool,
    backward: bool = False,
    dropout: bool = False,
    sinks: bool = False,
    dbias: bool = False,
) -> str:
    """The spec of a call's kernel; with `backward`, of its gradients'
    (`return_lse` then: whether it takes dLSE); with `dropout`, one that
    takes dropout's probability and seed; with `sinks`, one that takes the
    sink logits (a forward kernel: the backward reads them in the LSE)."""
    dtype = dtype_name(query.dtype)
    rows = int(query.shape[2])
    mask = None
    if attn_mask is not None:
        mask = "bool" if dtype_name_or_none(attn_mask.dtype) == "bool" else "bias"
    return kernel_spec(
        dtype,
        int(query.shape[3]),
        int(value.shape[3]),
        mask,
        is_causal,
        causal_alignment,
        window_left,
        window_right,
        scale,
        softcap,
        return_lse,
        rows if 1 <= rows <= DECODE_ROWS and not (backward or dropout) else None,
        backward,
        dropout,
        sinks=sinks and not backward,
        dbias=dbias and backward,
    )


def dtype_name_or_none(dtype) -> Optional[str]:
    try:
        return dtype_name(dtype)
    except Error:
        return None


def run(spec: str, query, key, value, mask, output, lse, dropout_p: float = 0.0,
        dropout_seed: int = 0, sinks=None, modifiers: Optional[str] = None,
        captures=(), gpu: Optional[Tuple[str, int]] = None) -> None:
    """Runs the kernel of `spec` (compiling it on first use); `modifiers`
    and `captures`: its score and mask modifiers (attn._flex) and the
    tensors they read; `gpu`: (architecture, CUDA stream) for tensors on
    the GPU, the kernel compiled for that architecture and queued on that
    stream."""
    target, stream = gpu if gpu else (None, 0)
    _cache.kernel(spec, modifiers, target).run(
        query, key, value, mask, output, lse, dropout_p, seed_bits(dropout_seed),
        sinks, list(captures), stream)


def check_sinks(sinks_shape: Sequence[int], heads_q: int) -> None:
    """What the sinks must be before the kernel's own checks: one logit per
    query head (docs/spec.md, "Attention sinks")."""
    if tuple(sinks_shape) != (heads_q,):
        raise Error(
            f"sinks: shape is {list(sinks_shape)} but must be [Hq] = [{heads_q}] "
            "(one logit per query head)"
        )


def run_backward(spec: str, query, key, value, mask, output, lse, grad_output,
                 grad_lse, grad_query, grad_key, grad_value, dropout_p: float = 0.0,
                 dropout_seed: int = 0, grad_mask=None, modifiers: Optional[str] = None,
                 captures=(), grad_captures=(),
                 gpu: Optional[Tuple[str, int]] = None) -> None:
    """Runs the backward kernel of `spec` (compiling it on first use);
    `grad_captures`: the [B * Hkv, N] f32 partials of the captures the
    spec's dcaptures names, in order; `gpu` as run's."""
    target, stream = gpu if gpu else (None, 0)
    _cache.kernel(spec, modifiers, target).run_backward(
        query, key, value, mask, output, lse, grad_output, grad_lse,
        grad_query, grad_key, grad_value, dropout_p, seed_bits(dropout_seed),
        grad_mask, list(captures), list(grad_captures), stream,
    )


def seed_bits(seed: int) -> int:
    """A seed as the kernels take it: its 64 bits (a negative int64, as
    PyTorch stores seeds, is the same bits)."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise Error(f"dropout_seed is {seed!r} but must be an integer")
    if not -(2**63) <= seed < 2**64:
        raise Error(f"dropout_seed is {seed} but must fit in 64 bits")
    return seed & (2**64 - 1)


# ---------------------------------------------------------------------------
# Dropout's keep bits
# ---------------------------------------------------------------------------

_PHILOX_M = (0xD2511F53, 0xCD9E8D57)
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)


def dropout_mask(batch: int, heads: int, seq_q: int, seq_k: int, dropout_p: float,
                 seed: int):
    """The keep-mask [B, Hq, Sq, Sk] (NumPy bool, True = kept) that attn's
    kernels apply for `dropout_p` and `seed` (docs/spec.md): Philox 4x32-10
    keyed by the seed on the counter (j // 8, i, h, b); key j takes 16 bits
    of word (j % 8) // 2, the low half for even j, and is kept iff they are
    >= floor(p * 2**16) with p rounded to f32. Written here independently
    of the kernels, in NumPy."""
    import numpy as np

    dropout_p = dropout_probability(dropout_p)
    seed = seed_bits(seed)
    p32 = float(np.float32(dropout_p))
    threshold = int(p32 * 2.0**16)  # exact: an f32 times a power of two
    b, h, i, c = np.meshgrid(np.arange(batch, dtype=np.uint64),
                             np.arange(heads, dtype=np.uint64),
                             np.arange(seq_q, dtype=np.uint64),
                             np.arange((seq_k + 7) // 8, dtype=np.uint64),
                             indexing="ij")
    words = philox4x32((c, i, h, b), (seed & 0xFFFFFFFF, seed >> 32))
    # Each word's low then high 16 bits: keys 8c, 8c + 1, ... in order.
    halves = [part for word in words
              for part in (word & np.uint64(0xFFFF), word >> np.uint64(16))]
    bits = np.stack(halves, axis=-1).reshape(batch, heads, seq_q, -1)[..., :seq_k]
    return bits >= np.uint64(threshold)


def philox4x32(counter, key):
    """Philox 4x32-10 (Salmon et al., Random123) of the four counter words
    (NumPy uint64 arrays holding 32-bit values) under the two key words;
    returns the four output words."""
    import numpy as np

    mask32 = np.uint64(0xFFFFFFFF)
    ctr = [np.asarray(w, dtype=np.uint64) for w in counter]
    k0, k1 = int(key[0]), int(key[1])
    for round_ in range(10):
        if round_ > 0:
            k0 = (k0 + _PHILOX_W[0]) & 0xFFFFFFFF
            k1 = (k1 + _PHILOX_W[1]) & 0xFFFFFFFF
        p0 = ctr[0] * np.uint64(_PHILOX_M[0])
        p1 = ctr[2] * np.uint64(_PHILOX_M[1])
        ctr = [(p1 >> np.uint64(32)) ^ ctr[1] ^ np.uint64(k0), p1 & mask32,
               (p0 >> np.uint64(32)) ^ ctr[3] ^ np.uint64(k1), p0 & mask32]
    return ctr


# ---------------------------------------------------------------------------
# NumPy (and any other DLPack producer)
# ---------------------------------------------------------------------------


def run_weights(spec: str, query, key, mask, lse, weights, dropout_p: float = 0.0,
                dropout_seed: int = 0, modifiers: Optional[str] = None,
                captures=()) -> None:
    """Runs the weights kernel of `spec` (compiling it on first use)."""
    _cache.kernel(spec, modifiers).run_weights(query, key, mask, lse, weights, dropout_p,
                                               seed_bits(dropout_seed), list(captures))


def as_array(x, name: str):
    """`x` as a NumPy array (DLPack tensors without a copy)."""
    import numpy as np

    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "__dlpack__"):
        return np.from_dlpack(x)
    raise Error(
        f"{name}: a {type(x).__name__} is not a tensor; attn takes NumPy arrays, "
        "PyTorch tensors and other DLPack tensors"
    )


def sdpa_numpy(
    query,
    key,
    value,
    attn_mask,
    is_causal,
    scale,
    enable_gqa,
    causal_alignment,
    window_left,
    window_right,
    softcap,
    return_lse,
    dropout_p=0.0,
    dropout_seed=None,
    sinks=None,
):
    import numpy as np

    if dropout_p > 0.0 and dropout_seed is None:
        dropout_seed = int(np.random.randint(0, 2**63 - 1, dtype=np.int64))

    query, key, value = (as_array(t, n) for t, n in ((query, "query"), (key, "key"), (value, "value")))
    squeeze = query.ndim == 3 and key.ndim == 3 and value.ndim == 3
    if squeeze:
        query, key, value = query[None], key[None], value[None]
    check_shapes(query, key, value, enable_gqa)
    mask = None
    if attn_mask is not None:
        attn_mask = as_array(attn_mask, "attn_mask")
        shape = mask_view_shape(attn_mask.shape, query.shape, key.shape)
        try:
            mask = np.broadcast_to(attn_mask, shape)
        except ValueError:
            mask = attn_mask  # not broadcastable: the runtime says why
    if sinks is not None:
        sinks = as_array(sinks, "sinks")
        check_sinks(sinks.shape, query.shape[1])
        sinks = sinks.astype(np.float32, copy=False)
    spec = spec_for(
        query, key, value, mask, is_causal, scale, causal_alignment,
        window_left, window_right, softcap, return_lse, dropout=dropout_p > 0.0,
        sinks=sinks is not None,
    )
    batch, heads, seq_q = query.shape[:3]
    output = np.empty((batch, heads, seq_q, value.shape[3]), dtype=query.dtype)
    lse = np.empty((batch, heads, seq_q), dtype=np.float32) if return_lse else None
    run(spec, query, key, value, mask, output, lse, dropout_p,
        0 if dropout_seed is None else dropout_seed, sinks)
    if squeeze:
        output = output[0]
        lse = lse[0] if lse is not None else None
    return (output, lse) if return_lse else output
