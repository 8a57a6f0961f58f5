"""attn.mha: a whole multi-head attention layer as one compiled kernel.

The kernel (attn.mha in the dialect, attn-compile's spec key `mha`) projects
the query, key and value inputs, splits the heads, runs the fused attention,
merges the heads and projects the output, one batch per work item
(docs/spec.md, "Multi-head attention layer"). It is what a C program gets
from `attn-compile --spec mha,...`; this function runs the same kernel on
PyTorch tensors or NumPy arrays, for inference (the layer has no gradient:
train with attn.nn.MultiheadAttention, whose parameters this takes).
"""

from __future__ import annotations

from . import _cache, _core

Error = _core.Error


def _spec(query, key, value, num_heads, bias, mask_kind, mask_broadcast, is_causal,
          scale) -> str:
    items = [
        "mha",
        f"dtype={_core.dtype_name(query.dtype)}",
        f"embed={int(query.shape[2])}",
        f"heads={int(num_heads)}",
        f"kdim={int(key.shape[2])}",
        f"vdim={int(value.shape[2])}",
    ]
    if bias:
        items.append("bias")
    if mask_kind is not None:
        dims = "".join(name for name, b in zip(("b1", "h1", "q1"), mask_broadcast) if b)
        items.append(f"mask={mask_kind}" + (":" + dims if dims else ""))
    if is_causal:
        items.append("causal=top_left")
    if scale is not None:
        items.append(f"scale={float(scale)!r}")
    return ",".join(items)


def _shape(t):
    return tuple(int(x) for x in t.shape)


def _check(query, key, value, num_heads, weights, in_bias, out_weight, out_bias):
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        if len(tensor.shape) != 3:
            raise Error(f"{name}: rank is {len(tensor.shape)} but must be 3 "
                        "[B, S, features] (batch first)")
    batch, embed = int(query.shape[0]), int(query.shape[2])
    if int(num_heads) < 1 or embed % int(num_heads) != 0:
        raise Error(f"num_heads={num_heads}: the embedding width E = {embed} must be "
                    "a multiple of num_heads")
    if int(key.shape[0]) != batch or int(value.shape[0]) != batch:
        raise Error(f"key and value: batch {int(key.shape[0])} and "
                    f"{int(value.shape[0])} but the query's is {batch}")
    if int(value.shape[1]) != int(key.shape[1]):
        raise Error(f"value: {int(value.shape[1])} rows but key has "
                    f"{int(key.shape[1])} (Sk)")
    expected = (("q_proj_weight", (embed, embed)),
                ("k_proj_weight", (embed, int(key.shape[2]))),
                ("v_proj_weight", (embed, int(value.shape[2]))))
    for (name, shape), w in zip(expected, weights):
        if _shape(w) != shape:
            raise Error(f"{name}: shape {list(_shape(w))} but must be {list(shape)} "
                        "([E, in]: torch.nn.Linear's layout)")
    if _shape(out_weight) != (embed, embed):
        raise Error(f"out_proj_weight: shape {list(_shape(out_weight))} but must be "
                    f"[{embed}, {embed}]")
    if in_bias is not None and _shape(in_bias) != (3 * embed,):
        raise Error(f"in_proj_bias: shape {list(_shape(in_bias))} but must be "
                    f"[{3 * embed}]")
    if out_bias is not None and _shape(out_bias) != (embed,):
        raise Error(f"out_proj_bias: shape {list(_shape(out_bias))} but must be "
                    f"[{embed}]")
    for name, t in (("key", key), ("value", value), ("out_proj_weight", out_weight),
                    ("in_proj_bias", in_bias), ("out_proj_bias", out_bias)) + tuple(
                        (n, w) for (n, _), w in zip(expected, weights)):
        if t is not None and t.dtype != query.dtype:
            raise Error(f"{name}: dtype {t.dtype} but the query's is {query.dtype} "
                        "(a layer has one dtype)")


def mha(query, key, value, num_heads: int, in_proj_weight=None, in_proj_bias=None,
        out_proj_weight=None, out_proj_bias=None, *, q_proj_weight=None,
        k_proj_weight=None, v_proj_weight=None, attn_mask=None,
        is_causal: bool = False, scale=None):
    """A multi-head attention layer's forward, batch first, as one kernel:

        q = query @ W_q.T + b_q,  k = key @ W_k.T + b_k,  v = value @ W_v.T + b_v
        o = softmax(q_h k_h^T * scale + mask) v_h for each of num_heads heads
        return concat_h(o_h) @ out_proj_weight.T + out_proj_bias

    query [B, Sq, E], key [B, Sk, Ek], value [B, Sk, Ev]; the projections in
    torch.nn.MultiheadAttention's names and layouts: in_proj_weight [3E, E]
    (packed, Ek = Ev = E) or q_proj_weight [E, E], k_proj_weight [E, Ek],
    v_proj_weight [E, Ev]; in_proj_bias [3E]; out_proj_weight [E, E],
    out_proj_bias [E] (biases both or neither). attn_mask: [Sq, Sk] or
    [B or 1, H or 1, Sq or 1, Sk], bool (True attends) or a float bias of
    the query's dtype; is_causal: top-left causal. One dtype (float32,
    bfloat16 or float16), any strides. A row with no key to attend gives
    out_proj_bias (PyTorch gives NaN). Inference only: no gradient.

    Returns [B, Sq, E], a PyTorch tensor for PyTorch inputs, else NumPy.
    """
    import sys

    torch = sys.modules.get("torch")
    is_torch = torch is not None and isinstance(query, torch.Tensor)
    if in_proj_weight is not None:
        if any(w is not None for w in (q_proj_weight, k_proj_weight, v_proj_weight)):
            raise Error("give in_proj_weight (packed) or q_proj_weight, k_proj_weight "
                        "and v_proj_weight, not both")
        e = int(query.shape[-1])
        if _shape(in_proj_weight) != (3 * e, e):
            raise Error(f"in_proj_weight: shape {list(_shape(in_proj_weight))} but "
                        f"must be [3E, E] = [{3 * e}, {e}]")
        weights = (in_proj_weight[:e], in_proj_weight[e:2 * e], in_proj_weight[2 * e:])
    elif all(w is not None for w in (q_proj_weight, k_proj_weight, v_proj_weight)):
        weights = (q_proj_weight, k_proj_weight, v_proj_weight)
    else:
        raise Error("the input projections are missing: give in_proj_weight or all "
                    "of q_proj_weight, k_proj_weight, v_proj_weight")
    if out_proj_weight is None:
        raise Error("out_proj_weight is missing")
    if (in_proj_bias is None) != (out_proj_bias is None):
        raise Error("give both biases (in_proj_bias and out_proj_bias) or neither")
    _check(query, key, value, num_heads, weights, in_proj_bias, out_proj_weight,
           out_proj_bias)
    tensors = (query, key, value, *weights, in_proj_bias, out_proj_weight,
               out_proj_bias)
    if is_torch:
        for t in tensors + (attn_mask,):
            if t is not None and not isinstance(t, torch.Tensor):
                raise Error(f"a {type(t).__name__} among torch.Tensor arguments")
            if t is not None and not t.is_cpu:
                raise Error(f"a tensor on {t.device}: attn.mha runs on the CPU only")
        if torch.is_grad_enabled() and any(
                t is not None and t.requires_grad for t in tensors):
            raise Error("attn.mha has no gradient (it is an inference kernel): "
                        "train with attn.nn.MultiheadAttention, or call this under "
                        "torch.no_grad()")

    batch, seq_q, embed = (int(x) for x in query.shape)
    seq_k = int(key.shape[1])
    heads = int(num_heads)
    mask_kind, broadcast, mask = None, (False, False, False), attn_mask
    if mask is not None:
        if len(mask.shape) == 2:
            mask = mask[None, None]
        if len(mask.shape) != 4:
            raise Error(f"attn_mask: rank {len(mask.shape)} but must be [Sq, Sk] or "
                        "[B or 1, H or 1, Sq or 1, Sk]")
        full = (batch, heads, seq_q, seq_k)
        for d, (size, want) in enumerate(zip(_shape(mask), full)):
            if size != want and not (d < 3 and size == 1):
                raise Error(f"attn_mask: shape {list(_shape(attn_mask))} does not "
                            f"broadcast to [B, H, Sq, Sk] = {list(full)}")
        broadcast = tuple(_shape(mask)[d] == 1 and full[d] != 1 for d in range(3))
        is_bool = (mask.dtype == torch.bool) if is_torch else mask.dtype == bool
        if not is_bool and mask.dtype != query.dtype:
            raise Error(f"attn_mask: dtype {mask.dtype}; a float mask is an additive "
                        f"bias of the query's dtype {query.dtype}")
        mask_kind = "bool" if is_bool else "bias"
    spec = _spec(query, key, value, heads, in_proj_bias is not None, mask_kind,
                 broadcast, is_causal, scale)
    kernel = _cache.kernel(spec)
    if is_torch:
        from ._torch import _capsule

        output = query.new_empty((batch, seq_q, embed))
        args = [None if t is None else _capsule(t.detach()) for t in tensors]
        mask_arg = None if mask is None else _capsule(mask.detach())
        kernel.run_mha(*args, mask_arg, _capsule(output))
        return output
    import numpy as np

    as_array = _core.as_array
    args = [None if t is None else as_array(t, "tensor") for t in tensors]
    output = np.empty((batch, seq_q, embed), dtype=args[0].dtype)
    kernel.run_mha(*args, None if mask is None else as_array(mask, "attn_mask"), output)
    return output
