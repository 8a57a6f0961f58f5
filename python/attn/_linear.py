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

import math
from typing import Optional, Tuple

from . import _cache, _core

Error = _core.Error

# The causal form's rows per chunk when not given: the kernel spec's default
# (lib/Support/Limits.h, kDefaultLinearChunk), so that the spec omits it.
DEFAULT_CHUNK = 16

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
    if chunk_size != DEFAULT_CHUNK:
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
    chunk_size: int = DEFAULT_CHUNK,
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
    the inputs' dtype, or (O, (S, z)) with output_final_state. Gradients
    flow to query, key, value and initial_state from O and the final state
    (docs/spec.md, "Gradient of linear attention"): the forward is the
    kernel, the backward is computed chunkwise in PyTorch (f32).
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
        new_output = lambda: torch.empty(out_shape, dtype=query.dtype)  # noqa: E731
        zeros = lambda shape: torch.zeros(shape, dtype=torch.float32)  # noqa: E731
        empty = lambda shape: torch.empty(shape, dtype=torch.float32)  # noqa: E731
        wrap = _capsule
    else:
        import numpy as np

        as_array = _core.as_array
        query, key, value = (as_array(query, "query"), as_array(key, "key"),
                             as_array(value, "value"))
        new_output = lambda: np.empty(out_shape, dtype=query.dtype)  # noqa: E731
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
    if torch is not None and torch.is_grad_enabled() and any(
            t is not None and t.requires_grad for t in (query, key, value, s0, z0)):
        if "function" not in _FUNCTION:
            _FUNCTION["function"] = _autograd_function(torch)
        options = _Options(causal, float(eps), feature_map, spec)
        output, s1, z1 = _FUNCTION["function"].apply(query, key, value, s0, z0,
                                                     options)
    else:
        output = new_output()
        if state:
            s1, z1 = empty(state_shape), empty(normalizer_shape)
        _run(spec, wrap, query, key, value, s0, z0, output, s1, z1)
    if output_final_state:
        return output, (s1, z1)
    return output


def _run(spec, wrap, query, key, value, s0, z0, output, s1, z1) -> None:
    _cache.kernel(spec).run_linear(
        wrap(query), wrap(key), wrap(value),
        None if s0 is None else wrap(s0), None if z0 is None else wrap(z0),
        wrap(output),
        None if s1 is None else wrap(s1), None if z1 is None else wrap(z1),
    )


class _Options:
    """What the backward needs of the call besides its tensors."""

    def __init__(self, causal, eps, feature_map, spec):
        self.causal, self.eps, self.feature_map, self.spec = (causal, eps, feature_map,
                                                              spec)


#: Rows per chunk of the causal backward (the forward's chunk_size orders
#: only the forward's sums).
BACKWARD_CHUNK = 64

_FUNCTION = {}


def _autograd_function(torch):
    from ._torch import _capsule

    class LinearAttentionFunction(torch.autograd.Function):
        """Forward: the kernel. Backward: docs/spec.md's gradient of linear
        attention, computed chunkwise in PyTorch (f32) from the saved
        inputs and output."""

        @staticmethod
        def forward(ctx, query, key, value, s0, z0, options):
            batch, heads_kv = key.shape[0], key.shape[1]
            d, dv = query.shape[3], value.shape[3]
            output = query.new_empty(query.shape[:3] + (dv,))
            s1 = z1 = None
            if s0 is not None:
                s1 = torch.empty((batch, heads_kv, d, dv), dtype=torch.float32)
                z1 = torch.empty((batch, heads_kv, d), dtype=torch.float32)
            _run(options.spec, _capsule, query, key, value, s0, z0, output, s1, z1)
            ctx.options = options
            ctx.save_for_backward(query, key, value, s0, z0, output)
            ctx.set_materialize_grads(False)
            if s1 is not None:
                return output, s1, z1
            return output, None, None

        @staticmethod
        @torch.autograd.function.once_differentiable  # O is saved, not recomputed
        def backward(ctx, grad_output, grad_state, grad_normalizer):
            query, key, value, s0, z0, output = ctx.saved_tensors
            options = ctx.options
            grads = linear_attention_backward(
                torch, query, key, value, s0, z0, output, grad_output, grad_state,
                grad_normalizer, options.causal, options.eps, options.feature_map)
            return (*(None if g is None or not ctx.needs_input_grad[i] else
                      g.to(t.dtype) for i, (g, t) in
                      enumerate(zip(grads, (query, key, value, s0, z0)))), None)

    return LinearAttentionFunction


def _feature_map(torch, x, feature_map):
    """φ(x) in f32, a new tensor (elu + 1 as elu(x) + 1: within an f32 ulp
    of 1 of the kernel's exp(x) for x <= 0)."""
    if feature_map == "relu":
        return torch.relu(x.float())
    return torch.nn.functional.elu(x.float()).add_(1.0)


def _slope_(f, feature_map):
    """φ'(x) from φ(x), in place: min(φ, 1) for elu + 1, sign(φ) for relu
    (NaN stays NaN)."""
    return f.sign_() if feature_map == "relu" else f.clamp_(max=1.0)


def linear_attention_backward(torch, query, key, value, s0, z0, output, grad_output,
                              grad_state=None, grad_normalizer=None, causal=False,
                              eps=1e-6, feature_map="elu_plus_one"):
    """Gradients (dQ, dK, dV, dS0, dz0) in f32 of linear attention with the
    given forward inputs and output (docs/spec.md, "Gradient of linear
    attention"); grad_output, grad_state and grad_normalizer are dO, dS_final
    and dz_final (None: zero). dS0 and dz0 are None without s0."""
    batch, heads_q, seq_q, d = query.shape
    heads_kv, dv = key.shape[1], value.shape[3]
    group = heads_q // heads_kv
    phi_q, phi_k = _feature_map(torch, query, feature_map), _feature_map(torch, key,
                                                                           feature_map)
    v = value.float()
    # Query heads of a group side by side: [B, Hkv, G, Sq, ·].
    fq = phi_q.reshape(batch, heads_kv, group, seq_q, d)
    out = output.float().reshape(batch, heads_kv, group, seq_q, dv)
    if grad_output is None:
        grad_output = torch.zeros_like(out)
    do = grad_output.float().reshape(batch, heads_kv, group, seq_q, dv)
    f32 = torch.float32
    state = torch.zeros((batch, heads_kv, d, dv), dtype=f32) if s0 is None else s0.float()
    norm = torch.zeros((batch, heads_kv, d), dtype=f32) if z0 is None else z0.float()
    final_ds = torch.zeros_like(state) if grad_state is None else grad_state.float()
    final_dz = torch.zeros_like(norm) if grad_normalizer is None else \
        grad_normalizer.float()
    backward = _causal_backward if causal else _full_backward
    dfq, dfk, dv_, ds0, dz0 = backward(torch, fq, phi_k, v, state, norm, out, do,
                                       final_ds, final_dz, eps)
    # φ's storage becomes φ' once the products are done (fewer fresh pages).
    dq = dfq.reshape(batch, heads_q, seq_q, d).mul_(_slope_(phi_q, feature_map))
    dk = dfk.mul_(_slope_(phi_k, feature_map))
    if s0 is None:
        ds0 = dz0 = None
    return dq, dk, dv_, ds0, dz0


def _exclusive_prefix(torch, x, start, reverse=False):
    """start plus the sums over the chunks (dim 2 of x) before each one, or
    after it with reverse: a chunk's own terms (and NaN) stay out of its
    sum. A loop of in-place adds into chunk-major storage (torch.cumsum
    over a middle dim is slower)."""
    count = x.shape[2]
    result = torch.empty((count,) + start.shape, dtype=x.dtype)
    order = range(count - 1, -1, -1) if reverse else range(count)
    previous = None
    for n in order:
        if previous is None:
            result[n] = start
        else:
            torch.add(result[previous], x[:, :, previous], out=result[n])
        previous = n
    return result.movedim(0, 2).contiguous()


def _masked_matmul(torch, m, y, keep, exact):
    """m @ y over the chunks' rows, m [..., N, C, C] zero where keep is
    false. exact: where y has NaN or ±inf, a kept-out entry's 0 · y would
    reach the row; sum only the kept products (a chunk at a time)."""
    if not exact:
        return m @ y
    rows = []
    for n in range(m.shape[-3]):
        prod = m[..., n, :, :, None] * y[..., n, None, :, :]
        rows.append(torch.where(keep[..., None], prod, torch.zeros_like(prod)).sum(-2))
    return torch.stack(rows, -3)


def _row_dots(torch, x, y):
    """Σ over the last dim of x · y, as a batched matrix-vector product."""
    return (x @ y[..., None])[..., 0]


def _causal_backward(torch, fq, fk, v, state, norm, out, do, final_ds, final_dz, eps):
    """Causal, chunkwise: the states before each chunk (forward prefix sums)
    give dφ(Q); the state gradients after each chunk (reverse prefix sums)
    give dφ(K) and dV; within a chunk, the masked products. A chunk's rows
    of every head of the group are one [G·C] matrix, so that each product
    is one batched matmul over (B, Hkv, chunk) and sums over the group."""
    batch, heads_kv, group, seq, d = fq.shape
    if seq == 0:
        return (torch.zeros_like(fq), torch.zeros_like(fk), torch.zeros_like(v),
                final_ds, final_dz)
    chunk = min(BACKWARD_CHUNK, seq)
    count = -(-seq // chunk)
    pad = count * chunk - seq

    def padded(x):  # rows padded with zeros to count · chunk
        return torch.nn.functional.pad(x, (0, 0, 0, pad)) if pad else x

    def keys(x):  # [B, Hkv, S, ·] as [B, Hkv, N, C, ·]
        return padded(x).reshape(batch, heads_kv, count, chunk, x.shape[-1])

    def rows(x):  # [B, Hkv, G, S, ·] as [B, Hkv, N, G·C, ·]
        x = padded(x).reshape(batch, heads_kv, group, count, chunk, x.shape[-1])
        return x.transpose(2, 3).reshape(batch, heads_kv, count, group * chunk, -1)

    def unrows(x):  # the inverse of rows, as [B, Hkv, G, S, ·]
        x = x.reshape(batch, heads_kv, count, group, chunk, x.shape[-1]).transpose(2, 3)
        return x.reshape(batch, heads_kv, group, count * chunk, -1)[..., :seq, :]

    fq, out, do, fk, v = rows(fq), rows(out), rows(do), keys(fk), keys(v)
    before = _exclusive_prefix(torch, fk.transpose(-1, -2) @ v, state)
    norm_before = _exclusive_prefix(torch, fk.sum(-2), norm)
    # Row (r, i) of a chunk keeps the keys j <= i.
    keep = torch.ones(chunk, chunk, dtype=torch.bool).tril().repeat(group, 1)
    drop = ~keep
    a = (fq @ fk.transpose(-1, -2)).masked_fill_(drop, 0.0)
    den = a.sum(-1).add_(_row_dots(torch, fq, norm_before)).add_(eps)
    if pad:  # padded rows: dO is 0, and so is their g whatever eps is
        real = (torch.arange(count * chunk) < seq).reshape(count, chunk).repeat(1, group)
        den.masked_fill_(~real, 1.0)
    g = do / den[..., None]
    c = torch.linalg.vecdot(g, out).neg_()
    b = (g @ v.transpose(-1, -2)).add_(c[..., None]).masked_fill_(drop, 0.0)
    # A sum is finite only if every term is (one pass each; an overflowing
    # sum of finite terms only takes the exact path).
    exact = not all(math.isfinite(float(x.sum())) for x in (fq, fk, g))
    dfq = _masked_matmul(torch, b, fk, keep, exact)
    dfq += g @ before.transpose(-1, -2)
    dfq.addcmul_(c[..., None], norm_before[..., None, :])
    qg = fq.transpose(-1, -2) @ g
    qc = _row_dots(torch, fq.transpose(-1, -2), c)
    after = _exclusive_prefix(torch, qg, final_ds, reverse=True)
    norm_after = _exclusive_prefix(torch, qc, final_dz, reverse=True)
    keep_t = keep.transpose(0, 1)  # key j, row (r, i): i >= j
    dfk = _masked_matmul(torch, b.transpose(-1, -2), fq, keep_t, exact)
    dfk += v @ after.transpose(-1, -2)
    dfk += norm_after[..., None, :]
    dv = _masked_matmul(torch, a.transpose(-1, -2), g, keep_t, exact)
    dv += fk @ after

    def merge(x):  # [B, Hkv, N, C, ·] back to [B, Hkv, S, ·]
        return x.reshape(batch, heads_kv, count * chunk, x.shape[-1])[..., :seq, :]

    return (unrows(dfq), merge(dfk), merge(dv), after[:, :, 0] + qg[:, :, 0],
            norm_after[:, :, 0] + qc[:, :, 0])


def _full_backward(torch, fq, fk, v, state, norm, out, do, final_ds, final_dz, eps):
    """Non-causal: every row sees S = S0 + φ(K)ᵀV, z = z0 + Σφ(K); the
    rows of a group's heads are one matrix."""
    batch, heads_kv, group, seq_q, d = fq.shape
    rows = lambda x: x.reshape(batch, heads_kv, group * seq_q, x.shape[-1])  # noqa: E731
    fq, out, do = rows(fq), rows(out), rows(do)
    state = (fk.transpose(-1, -2) @ v).add_(state)
    norm = fk.sum(2).add_(norm)
    g = do / _row_dots(torch, fq, norm).add_(eps)[..., None]
    c = torch.linalg.vecdot(g, out).neg_()
    dfq = (g @ state.transpose(-1, -2)).addcmul_(c[..., None], norm[:, :, None])
    ds = (fq.transpose(-1, -2) @ g).add_(final_ds)
    dz = _row_dots(torch, fq.transpose(-1, -2), c).add_(final_dz)
    dfk = (v @ ds.transpose(-1, -2)).add_(dz[:, :, None])
    return dfq, dfk, fk @ ds, ds, dz


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
