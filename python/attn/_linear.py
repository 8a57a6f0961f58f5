"""attn.linear_attention: linear attention (Katharopoulos et al.) from a kernel.

O[i] = phi(Q[i]) S_i / (phi(Q[i]) z_i + eps) with the state
S_i = S0 + sum_j phi(K[j])^T V[j] and normalizer z_i = z0 + sum_j phi(K[j])
over every key, or with causal=True over the keys j <= i (docs/spec.md,
"Linear attention"). phi is elu(x) + 1 by default. The kernel (attn.linear)
computes the causal form chunk by chunk at matrix-multiply speed, with an f32
state; the state can be carried from call to call (decoding token by token,
or a long sequence in pieces).
"""

from __future__ import annotations

from typing import Optional, Tuple

from . import _cache, _core

Error = _core.Error

FEATURE_MAPS = ("elu_plus_one", "relu")


def _torch_or_none(query):
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and isinstance(query, torch.Tensor):
        return torch
    return None


def _check(query, key, value, causal, eps, feature_map, chunk_size, enable_gqa):
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        if len(tensor.shape) != 4:
            raise Error(
                f"{name}: rank is {len(tensor.shape)} but must be 4 [B, H, S, D]"
            )
    heads_q, heads_kv = int(query.shape[1]), int(key.shape[1])
    if heads_q != heads_kv and not enable_gqa:
        raise Error(
            f"query has {heads_q} heads and key {heads_kv}: pass enable_gqa=True "
            "for grouped-query attention"
        )
    if causal and query.shape[2] != key.shape[2]:
        raise Error(
            f"causal linear attention needs as many queries as keys (query i "
            f"sees keys 0..i), found Sq = {int(query.shape[2])} and "
            f"Sk = {int(key.shape[2])}"
        )
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise Error(f"eps is {eps!r} but must be a number")
    if not (float(eps) >= 0.0 and float(eps) != float("inf")):
        raise Error(f"eps is {eps} but must be finite and >= 0")
    if feature_map not in FEATURE_MAPS:
        raise Error(
            f"feature_map is {feature_map!r} but must be one of "
            + ", ".join(repr(f) for f in FEATURE_MAPS)
        )
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or not (
        1 <= chunk_size <= 256
    ):
        raise Error(f"chunk_size is {chunk_size!r} but must be an integer in [1, 256]")


def _spec(query, value, causal, eps, feature_map, chunk_size, state) -> str:
    items = [
        "linear",
        f"dtype={_core.dtype_name(query.dtype)}",
        f"d={int(query.shape[3])}",
        f"dv={int(value.shape[3])}",
    ]
    if causal:
        items.append("causal")
    if float(eps) != 1e-6:
        items.append(f"eps={float(eps)!r}")
    if chunk_size != 64:
        items.append(f"chunk={chunk_size}")
    if feature_map != "elu_plus_one":
        items.append(f"feature_map={feature_map}")
    if state:
        items.append("state")
    return ",".join(items)


def _state_pair(initial_state, name="initial_state"):
    if not isinstance(initial_state, (tuple, list)) or len(initial_state) != 2:
        raise Error(
            f"{name} must be a pair (state [B, Hkv, D, Dv], normalizer [B, Hkv, D]), "
            "as output_final_state=True returns it"
        )
    return initial_state[0], initial_state[1]


def linear_attention(
    query,
    key,
    value,
    causal: bool = False,
    eps: float = 1e-6,
    *,
    feature_map: str = "elu_plus_one",
    chunk_size: int = 64,
    initial_state=None,
    output_final_state: bool = False,
    enable_gqa: bool = False,
):
    """Linear attention of query [B, Hq, Sq, D], key [B, Hkv, Sk, D] and
    value [B, Hkv, Sk, Dv] (float32, bfloat16 or float16; any strides):

        O[i] = phi(Q[i]) S / (phi(Q[i]) z + eps)
        S = S0 + sum_j phi(K[j])^T V[j],  z = z0 + sum_j phi(K[j])

    over every key j, or over j <= i with causal=True (then Sq = Sk).

    feature_map: "elu_plus_one" (elu(x) + 1, the default) or "relu".
    chunk_size: rows per chunk of the causal form (it changes only the
        order of f32 sums).
    initial_state: (S0 [B, Hkv, D, Dv], z0 [B, Hkv, D]), float32: the state
        a previous call left (output_final_state=True); zeros when None.
    output_final_state: also return the final (S, z), to continue the
        sequence in the next call.
    enable_gqa: query heads in groups of Hq / Hkv share a key/value head
        (and its state).

    Returns O (a PyTorch tensor for PyTorch inputs, else a NumPy array) of
    the inputs' dtype, or (O, (S, z)) with output_final_state. No gradient
    yet: PyTorch inputs that require grad are refused under autograd.
    """
    causal = bool(causal)
    _check(query, key, value, causal, eps, feature_map, chunk_size, enable_gqa)
    state = initial_state is not None or bool(output_final_state)
    spec = _spec(query, value, causal, eps, feature_map, chunk_size, state)
    batch, heads_kv = int(key.shape[0]), int(key.shape[1])
    d, dv = int(query.shape[3]), int(value.shape[3])
    out_shape = (int(query.shape[0]), int(query.shape[1]), int(query.shape[2]), dv)
    torch = _torch_or_none(query)
    if torch is not None:
        from ._torch import _capsule

        tensors = [("query", query), ("key", key), ("value", value)]
        if initial_state is not None:
            s0, z0 = _state_pair(initial_state)
            tensors += [("initial_state[0]", s0), ("initial_state[1]", z0)]
        for name, tensor in tensors:
            if not isinstance(tensor, torch.Tensor):
                raise Error(f"{name}: a {type(tensor).__name__} where the query is a "
                            "torch.Tensor")
            if not tensor.is_cpu:
                raise Error(f"{name}: tensor is on {tensor.device} but attn's linear "
                            "attention runs on the CPU only")
            if torch.is_grad_enabled() and tensor.requires_grad:
                raise Error(
                    f"{name} requires grad, but attn.linear_attention has no "
                    "gradient yet: call it under torch.no_grad() or on detached "
                    "tensors"
                )
        output = torch.empty(out_shape, dtype=query.dtype)
        zeros = lambda shape: torch.zeros(shape, dtype=torch.float32)  # noqa: E731
        empty = lambda shape: torch.empty(shape, dtype=torch.float32)  # noqa: E731
        wrap = _capsule
    else:
        import numpy as np

        as_array = _core.as_array
        query, key, value = (as_array(query, "query"), as_array(key, "key"),
                             as_array(value, "value"))
        output = np.empty(out_shape, dtype=query.dtype)
        zeros = lambda shape: np.zeros(shape, dtype=np.float32)  # noqa: E731
        empty = lambda shape: np.empty(shape, dtype=np.float32)  # noqa: E731
        wrap = lambda x: x  # noqa: E731
        if initial_state is not None:
            s0, z0 = _state_pair(initial_state)
            initial_state = (as_array(s0, "initial_state[0]"),
                             as_array(z0, "initial_state[1]"))
    state_shape, normalizer_shape = (batch, heads_kv, d, dv), (batch, heads_kv, d)
    s0 = z0 = s1 = z1 = None
    if state:
        if initial_state is not None:
            s0, z0 = _state_pair(initial_state)
        else:
            s0, z0 = zeros(state_shape), zeros(normalizer_shape)
        s1, z1 = empty(state_shape), empty(normalizer_shape)
    kernel = _cache.kernel(spec)
    kernel.run_linear(
        wrap(query), wrap(key), wrap(value),
        None if s0 is None else wrap(s0), None if z0 is None else wrap(z0),
        wrap(output),
        None if s1 is None else wrap(s1), None if z1 is None else wrap(z1),
    )
    if output_final_state:
        return output, (s1, z1)
    return output


def linear_attention_reference(query, key, value, causal=False, eps=1e-6,
                               feature_map="elu_plus_one",
                               initial_state=None) -> Tuple:
    """The definition in float64 NumPy, token by token (no chunks): what
    the tests and benchmarks compare against. Returns (O, (S, z))."""
    import numpy as np

    q, k, v = (np.asarray(_core.as_array(x, n), dtype=np.float64)
               for x, n in ((query, "query"), (key, "key"), (value, "value")))

    def phi(x):
        if feature_map == "relu":
            return np.maximum(x, 0.0)
        return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))

    b, hq, sq, _ = q.shape
    hkv, sk, dv = k.shape[1], k.shape[2], v.shape[3]
    group = hq // hkv
    fq, fk = phi(q), phi(k)
    if initial_state is None:
        s0 = np.zeros((b, hkv, q.shape[3], dv))
        z0 = np.zeros((b, hkv, q.shape[3]))
    else:
        s0, z0 = (np.asarray(_core.as_array(x, "initial_state"), dtype=np.float64)
                  for x in initial_state)
    out = np.zeros((b, hq, sq, dv))
    kv = np.einsum("bhjd,bhje->bhjde", fk, v)
    if causal:
        states = s0[:, :, None] + np.cumsum(kv, axis=2)
        norms = z0[:, :, None] + np.cumsum(fk, axis=2)
    else:
        states = np.broadcast_to((s0 + kv.sum(2))[:, :, None], (b, hkv, sq) + s0.shape[2:])
        norms = np.broadcast_to((z0 + fk.sum(2))[:, :, None], (b, hkv, sq, z0.shape[2]))
    for h in range(hq):
        g = h // group
        num = np.einsum("bid,bide->bie", fq[:, h], states[:, g])
        den = np.einsum("bid,bid->bi", fq[:, h], norms[:, g]) + eps
        out[:, h] = num / den[..., None]
    return out, (s0 + kv.sum(2), z0 + fk.sum(2))
