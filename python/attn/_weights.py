"""attn.attention_weights: the matrix of attention weights, from a kernel.

The weights W[b, h, i, j] that attention's softmax gives key j in query row i
(docs/spec.md, "Attention weights"): f32 [B, Hq, Sq, Sk], 0 at excluded
positions and on rows with nothing to attend. A kernel recomputes the scores
from Q and K and normalizes them by the forward's log-sum-exp when given
(the weights are then exactly the ones that forward used), else by each
row's own. The output is O(Sq * Sk), the only attention result that is:
calls whose weights would pass `max_bytes` are refused before anything is
allocated.
"""

from __future__ import annotations

import os
from typing import Optional, Sequence, Tuple

from . import _core

Error = _core.Error

#: The largest weights tensor a call makes unless told otherwise: 4 GiB,
#: or ATTN_WEIGHTS_MAX_BYTES.
DEFAULT_MAX_BYTES = int(os.environ.get("ATTN_WEIGHTS_MAX_BYTES", 4 << 30))


def _size_text(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def _check_rank(tensor, name: str) -> None:
    if len(tensor.shape) != 4:
        raise Error(
            f"{name}: rank is {len(tensor.shape)} but must be 4 [B, H, S, D] "
            "(or 3 [H, S, D] for both query and key)"
        )


def _check_size(shape: Sequence[int], max_bytes: int) -> None:
    size = 4
    for extent in shape:
        size *= int(extent)
    if size > max_bytes:
        dims = ", ".join(str(int(e)) for e in shape)
        raise Error(
            f"weights: [B, Hq, Sq, Sk] = [{dims}] f32 would take {_size_text(size)}, "
            f"over the limit of {_size_text(max_bytes)} (pass max_bytes=... to "
            "allow more, or ask for fewer rows or heads)"
        )


def _lse_with_sinks(query, key, attn_mask, is_causal, scale, enable_gqa,
                    causal_alignment, window, softcap, sinks):
    """The forward's LSE with the sinks: the forward with a value of one
    zero column (stride 0: no memory), for its LSE alone."""
    from . import scaled_dot_product_attention

    torch = _torch_or_none(query)
    shape = tuple(key.shape[:-1]) + (1,)
    if torch is not None:  # the weights are not differentiable
        query, key = query.detach(), key.detach()
        value = query.new_zeros(()).expand(shape)
        if isinstance(sinks, torch.Tensor):
            sinks = sinks.detach()
    else:
        import numpy as np

        query, key = _core.as_array(query, "query"), _core.as_array(key, "key")
        value = np.broadcast_to(np.zeros((), dtype=query.dtype), shape)
    _, lse = scaled_dot_product_attention(
        query, key, value, attn_mask, is_causal=is_causal, scale=scale,
        enable_gqa=enable_gqa, causal_alignment=causal_alignment, window=window,
        softcap=softcap, return_lse=True, sinks=sinks)
    return lse


def attention_weights(
    query,
    key,
    attn_mask=None,
    is_causal: bool = False,
    scale: Optional[float] = None,
    enable_gqa: bool = False,
    *,
    causal_alignment: str = "top_left",
    window: Optional[Tuple[Optional[int], Optional[int]]] = None,
    softcap: Optional[float] = None,
    lse=None,
    dropout_p: float = 0.0,
    dropout_seed: Optional[int] = None,
    max_bytes: Optional[int] = None,
    out=None,
    sinks=None,
):
    """The attention weights of the scaled_dot_product_attention call with
    these arguments, as a float32 [B, Hq, Sq, Sk] tensor.

    query [B, Hq, Sq, D] and key [B, Hkv, Sk, D] (or both 3-D, without B),
    attn_mask, is_causal, scale, enable_gqa, causal_alignment, window and
    softcap as in attn.scaled_dot_product_attention (no value: the weights
    do not depend on it).

    lse: the forward's log-sum-exp [B, Hq, Sq] (float32, as return_lse gives
        it): the weights are then normalized by it, exactly as that forward
        did; without, each row's own is computed (a second pass over K).
    dropout_p, dropout_seed: the forward's dropout; the weights are then the
        dropped ones, kept weights scaled by 1 / (1 - dropout_p): the matrix
        that multiplied V. dropout_p > 0 needs the forward's seed.
    sinks: the forward's attention sinks [Hq]: the weights are then
        normalized with the sink's column too (they sum to less than 1); a
        forward pass computes that LSE first. Give lse or sinks, not both
        (the forward's LSE already includes its sinks).
    max_bytes: the largest output allowed (default DEFAULT_MAX_BYTES, 4 GiB
        or ATTN_WEIGHTS_MAX_BYTES): a call over it raises attn.Error before
        allocating.
    out: a float32 [B, Hq, Sq, Sk] tensor (of the inputs' kind) to write the
        weights into, any strides, and return: a large buffer reused across
        calls saves the page faults of a fresh one (as long as the
        kernel's own time, for a new 512 MiB).

    A row with nothing to attend has weights 0 (torch's softmax gives NaN).
    Returns a PyTorch tensor for PyTorch inputs (not differentiable), else a
    NumPy array.
    """
    window_left, window_right, _ = _core.check_options(
        dropout_p, causal_alignment, window, softcap, scale
    )
    if dropout_p > 0.0 and dropout_seed is None:
        raise Error(
            "dropout_p > 0 needs the forward's dropout_seed: the weights are the "
            "ones that forward dropped"
        )
    limit = DEFAULT_MAX_BYTES if max_bytes is None else int(max_bytes)
    if sinks is not None:
        if lse is not None:
            raise Error(
                "give lse or sinks, not both: the forward's LSE already "
                "includes its sinks"
            )
        lse = _lse_with_sinks(query, key, attn_mask, is_causal, scale, enable_gqa,
                              causal_alignment, window, softcap, sinks)
    torch = _torch_or_none(query)
    if torch is not None:
        return _weights_torch(
            torch, query, key, attn_mask, bool(is_causal), scale, bool(enable_gqa),
            causal_alignment, window_left, window_right, softcap, lse,
            float(dropout_p), dropout_seed, limit, out,
        )
    return _weights_numpy(
        query, key, attn_mask, bool(is_causal), scale, bool(enable_gqa),
        causal_alignment, window_left, window_right, softcap, lse,
        float(dropout_p), dropout_seed, limit, out,
    )


def _torch_or_none(query):
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and isinstance(query, torch.Tensor):
        return torch
    return None


def _prepare(query, key, attn_mask, enable_gqa, expand):
    """The 4-D views of a call and its mask expanded to [B, Hq, Sq, Sk]
    (stride 0 where it broadcasts); whether the inputs were 3-D."""
    squeeze = len(query.shape) == 3 and len(key.shape) == 3
    if squeeze:
        query, key = query[None], key[None]
    _check_rank(query, "query")
    _check_rank(key, "key")
    heads_q, heads_kv = query.shape[1], key.shape[1]
    if heads_q != heads_kv and not enable_gqa:
        raise Error(
            f"query has {heads_q} heads and key {heads_kv}: pass enable_gqa=True "
            "for grouped-query attention (as with PyTorch's SDPA)"
        )
    mask = None
    if attn_mask is not None:
        shape = _core.mask_view_shape(attn_mask.shape, query.shape, key.shape)
        mask = expand(attn_mask, shape)
    return query, key, mask, squeeze


def _spec(query, mask, is_causal, scale, alignment, left, right, softcap, lse, dropout):
    mask_kind = None
    if mask is not None:
        mask_kind = "bool" if _core.dtype_name_or_none(mask.dtype) == "bool" else "bias"
    dim = int(query.shape[3])
    return _core.kernel_spec(
        _core.dtype_name(query.dtype), dim, dim, mask_kind, is_causal, alignment,
        left, right, scale, softcap, lse is not None, None, False, dropout,
        weights=True,
    )


def _output(out, shape, squeeze, allocate):
    """The caller's `out` (seen as 4-D) or a new tensor."""
    if out is None:
        return allocate(shape)
    return out[None] if squeeze and len(out.shape) == 3 else out


def _weights_torch(torch, query, key, attn_mask, is_causal, scale, enable_gqa,
                   alignment, left, right, softcap, lse, dropout_p, dropout_seed,
                   max_bytes, out):
    from ._torch import _capsule

    tensors = (("query", query), ("key", key), ("attn_mask", attn_mask), ("lse", lse),
               ("out", out))
    for name, tensor in tensors:
        if tensor is not None and not isinstance(tensor, torch.Tensor):
            raise Error(f"{name}: a {type(tensor).__name__} where the query is a torch.Tensor")
        if tensor is not None and not tensor.is_cpu:
            raise Error(f"{name}: tensor is on {tensor.device} but attn's attention "
                        "weights run on the CPU only")
    query, key = query.detach(), key.detach()
    attn_mask = None if attn_mask is None else attn_mask.detach()
    lse = None if lse is None else lse.detach()

    def expand(mask, shape):
        try:
            return mask.expand(shape)
        except RuntimeError:
            return mask  # not broadcastable: the runtime says why

    query, key, mask, squeeze = _prepare(query, key, attn_mask, enable_gqa, expand)
    if squeeze and lse is not None and lse.dim() == 2:
        lse = lse[None]
    shape = (query.shape[0], query.shape[1], query.shape[2], key.shape[2])
    _check_size(shape, max_bytes)
    spec = _spec(query, mask, is_causal, scale, alignment, left, right, softcap, lse,
                 dropout_p > 0.0)
    weights = _output(out, shape, squeeze,
                      lambda s: torch.empty(s, dtype=torch.float32))
    _core.run_weights(
        spec, _capsule(query), _capsule(key), None if mask is None else _capsule(mask),
        None if lse is None else _capsule(lse), _capsule(weights), dropout_p,
        0 if dropout_seed is None else dropout_seed,
    )
    return weights[0] if squeeze else weights


def _weights_numpy(query, key, attn_mask, is_causal, scale, enable_gqa, alignment,
                   left, right, softcap, lse, dropout_p, dropout_seed, max_bytes, out):
    import numpy as np

    as_array = _core.as_array
    query, key = as_array(query, "query"), as_array(key, "key")
    attn_mask = None if attn_mask is None else as_array(attn_mask, "attn_mask")
    lse = None if lse is None else as_array(lse, "lse")

    def expand(mask, shape):
        try:
            return np.broadcast_to(mask, shape)
        except ValueError:
            return mask  # not broadcastable: the runtime says why

    query, key, mask, squeeze = _prepare(query, key, attn_mask, enable_gqa, expand)
    if squeeze and lse is not None and lse.ndim == 2:
        lse = lse[None]
    shape = (query.shape[0], query.shape[1], query.shape[2], key.shape[2])
    _check_size(shape, max_bytes)
    spec = _spec(query, mask, is_causal, scale, alignment, left, right, softcap, lse,
                 dropout_p > 0.0)
    weights = _output(out, shape, squeeze, lambda s: np.empty(s, dtype=np.float32))
    _core.run_weights(spec, query, key, mask, lse, weights, dropout_p,
                      0 if dropout_seed is None else dropout_seed)
    return weights[0] if squeeze else weights
