"""attn: fused attention kernels from an MLIR compiler, for NumPy and PyTorch.

    import attn
    out = attn.scaled_dot_product_attention(q, k, v, is_causal=True)

``scaled_dot_product_attention`` has PyTorch's signature and semantics where
they overlap, and the attention contract's extensions (docs/spec.md) as
keyword arguments. It takes NumPy arrays, PyTorch CPU
tensors and other DLPack tensors without copying them, in any strides, and
returns the caller's kind of tensor (PyTorch in, PyTorch out; NumPy
otherwise). Kernels are compiled by attn-compile on first use and cached on
disk ($ATTN_CACHE_DIR, else ~/.cache/attn). On PyTorch tensors the call goes
through the custom operator ``torch.ops.attn.sdpa``, which torch.compile and
torch.export can trace.
"""

from __future__ import annotations

import os
import sys
from typing import Optional, Tuple

from . import _cache, _core, _ext

__version__ = "0.1.0"

#: A call attn cannot make (bad shapes, types, options, a missing compiler),
#: with the runtime's or the compiler's message. A subclass of ValueError.
Error = _ext.Error

cache_dir = _cache.cache_dir
cache_stats = _cache.stats
clear_memory_cache = _cache.clear_memory_cache
find_compiler = _cache.find_compiler
compiler_search_path = _cache.compiler_search_path
set_compile_status = _cache.set_compile_status
load_library = _ext.load_library
num_threads = _ext.num_threads
Kernel = _ext.Kernel


def kernel(spec: str, target: str | None = None) -> Kernel:
    """The compiled kernel of an attn-compile spec string (compiled on first
    use, then cached); see README for the spec format. `target`: a GPU
    architecture (``"sm_90"``) to compile for instead of this CPU."""
    return _cache.kernel(spec, target=target)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_ext._forget_pool_after_fork)


def _torch_module():
    """attn._torch if PyTorch is imported (it registers torch.ops.attn.sdpa);
    attn itself never imports PyTorch for NumPy users."""
    if "torch" not in sys.modules:
        return None
    from . import _torch

    return _torch


if "torch" in sys.modules:  # register torch.ops.attn.sdpa now, before any tracing
    _torch_module()


def scaled_dot_product_attention(
    query,
    key,
    value,
    attn_mask=None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    scale: Optional[float] = None,
    enable_gqa: bool = False,
    causal_alignment: str = "top_left",
    window: Optional[Tuple[Optional[int], Optional[int]]] = None,
    softcap: Optional[float] = None,
    return_lse: bool = False,
    dropout_seed: Optional[int] = None,
    sinks=None,
):
    """Attention as torch.nn.functional.scaled_dot_product_attention computes it.

    query [B, Hq, Sq, D], key [B, Hkv, Sk, D], value [B, Hkv, Sk, Dv]
    (or all three 3-D, without B); f32, f16 or bf16; any strides.

    attn_mask: bool (True = attend) or a float additive bias of the query's
        type, broadcastable to [B, Hq, Sq, Sk].
    dropout_p: dropout on the attention weights, as PyTorch's: each weight
        is dropped with this probability and the kept ones scaled by
        1 / (1 - dropout_p) (the LSE stays the undropped softmax's). The
        keep bits come from dropout_seed and the position alone (Philox
        4x32-10, docs/spec.md): attn.dropout_mask gives them, and the
        backward regenerates them.
    dropout_seed: the 64-bit seed of dropout; when None, drawn from
        PyTorch's default generator (torch.manual_seed reproduces a run), or
        NumPy's global one for NumPy inputs.
    is_causal: causal masking, aligned as causal_alignment says (PyTorch's
        is_causal is "top_left"). Unlike PyTorch, it may be combined with
        attn_mask.
    scale: defaults to 1/sqrt(D).
    enable_gqa: allow Hq = G * Hkv (query head h reads key/value head h // G).

    Extensions (docs/spec.md):
    causal_alignment: "top_left" (diagonal j <= i) or "bottom_right"
        (j <= i + Sk - Sq, for decoding with a KV cache); also aligns window.
    window: (left, right): query i attends keys i+off-left .. i+off+right;
        None for an unbounded side.
    softcap: c > 0: scores become c * tanh(s / c) before masking.
    return_lse: also return the log-sum-exp [B, Hq, Sq] (float32): a row
        with nothing to attend gives output 0 and lse -inf.
    sinks: attention sinks, one logit per query head [Hq] (any float type,
        used as float32): each row's softmax gains the sink as one more
        column that carries no value (as in gpt-oss), so the weights of the
        keys sum to less than 1 and a fully masked row gives output 0 with
        a finite lse (= the sink). Differentiable on PyTorch tensors.

    Returns the output [B, Hq, Sq, Dv] (or (output, lse)) of the query's
    type and kind: a PyTorch tensor for PyTorch inputs, else a NumPy array.
    Raises attn.Error (a ValueError) with the runtime's message when the
    tensors do not fit.
    """
    window_left, window_right, _ = _core.check_options(
        dropout_p, causal_alignment, window, softcap, scale
    )
    torch_path = _torch_module()
    if torch_path is not None:
        import torch

        if isinstance(query, torch.Tensor):
            return torch_path.scaled_dot_product_attention(
                query, key, value, attn_mask, bool(is_causal), scale, bool(enable_gqa),
                causal_alignment, window_left, window_right, softcap, bool(return_lse),
                float(dropout_p), dropout_seed, sinks,
            )
    return _core.sdpa_numpy(
        query, key, value, attn_mask, bool(is_causal), scale, bool(enable_gqa),
        causal_alignment, window_left, window_right, softcap, bool(return_lse),
        float(dropout_p), dropout_seed, sinks,
    )


def dropout_mask(batch: int, heads: int, seq_q: int, seq_k: int, dropout_p: float,
                 seed: int):
    """The boolean keep-mask [B, Hq, Sq, Sk] (a NumPy array, True = kept)
    that scaled_dot_product_attention applies for dropout_p and seed: a
    reference for tests (a dropped output is attention with the weights
    times dropout_mask(...) / (1 - dropout_p))."""
    return _core.dropout_mask(batch, heads, seq_q, seq_k, dropout_p, seed)


from ._plot import plot_attention  # noqa: E402


_FLEX_NAMES = ("flex_attention", "create_block_mask", "create_mask", "BlockMask",
               "AuxRequest", "AuxOutput", "and_masks", "or_masks", "noop_mask")


def __getattr__(name):
    # attn.nn and FlexAttention's interface import torch: only when used.
    import importlib

    if name == "nn":
        return importlib.import_module(".nn", __name__)
    if name in _FLEX_NAMES:
        return getattr(importlib.import_module("._flex", __name__), name)
    raise AttributeError(f"module 'attn' has no attribute {name!r}")

from ._weights import attention_weights  # noqa: E402
from ._linear import linear_attention  # noqa: E402
from ._additive import additive_attention  # noqa: E402
from ._mha import mha  # noqa: E402

__all__ = [
    "additive_attention",
    "and_masks",
    "attention_weights",
    "AuxOutput",
    "AuxRequest",
    "BlockMask",
    "create_block_mask",
    "create_mask",
    "flex_attention",
    "noop_mask",
    "or_masks",
    "Error",
    "Kernel",
    "cache_dir",
    "set_compile_status",
    "cache_stats",
    "clear_memory_cache",
    "dropout_mask",
    "compiler_search_path",
    "find_compiler",
    "kernel",
    "linear_attention",
    "mha",
    "load_library",
    "num_threads",
    "plot_attention",
    "scaled_dot_product_attention",
]
