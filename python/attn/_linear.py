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

# The causal form's rows per chunk when not given: the kernel spec's default
# (lib/Support/Limits.h, kDefaultLinearChunk), so that the spec omits it.
DEFAULT_CHUNK = 16

FEATURE_MAPS = ("elu_plus_one", "relu", "identity")


def _torch_or_none(query):
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and isinstance(query, torch.Tensor):
        return torch
    return None


def _check(query, key, value, causal, eps, feature_map, chunk_size, enable_gqa,
           normalize):
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
    if not isinstance(normalize, bool):
        raise Error(f"normalize is {normalize!r} but must be True or False")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or not (
        1 <= chunk_size <= 256
    ):
        raise Error(f"chunk_size is {chunk_size!r} but must be an integer in [1, 256]")


def _spec(query, value, causal, eps, feature_map, chunk_size, state, normalize) -> str:
    items = [
        "linear",
        f"dtype={_core.dtype_name(query.dtype)}",
        f"d={int(query.shape[3])}",
        f"dv={int(value.shape[3])}",
    ]
    if causal:
        items.append("causal")
    if normalize and float(eps) != 1e-6:
        items.append(f"eps={float(eps)!r}")
    if chunk_size != DEFAULT_CHUNK:
        items.append(f"chunk={chunk_size}")
    if feature_map != "elu_plus_one":
        items.append(f"feature_map={feature_map}")
    if state:
        items.append("state")
    if not normalize:
        items.append("unnormalized")
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
    normalize: bool = True,
):
    """Linear attention of query [B, Hq, Sq, D], key [B, Hkv, Sk, D] and
    value [B, Hkv, Sk, Dv] (float32, bfloat16 or float16; any strides):

        O[i] = phi(Q[i]) S / (phi(Q[i]) z + eps)
        S = S0 + sum_j phi(K[j])^T V[j],  z = z0 + sum_j phi(K[j])

    over every key j, or over j <= i with causal=True (then Sq = Sk).

    feature_map: "elu_plus_one" (elu(x) + 1, the default), "relu" or
        "identity" (x: with normalize=False, the plain sums of products).
    normalize: False drops the denominator, O[i] = phi(Q[i]) S (eps is
        then unused), as flash-linear-attention's normalize=False.
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
    kernel, and so is the backward (attn.linear_backward: f32 inside,
    gradients of the inputs' dtype).
    """
    causal = bool(causal)
    _check(query, key, value, causal, eps, feature_map, chunk_size, enable_gqa,
           normalize)
    state = initial_state is not None or bool(output_final_state)
    spec = _spec(query, value, causal, eps, feature_map, chunk_size, state, normalize)
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
        if not (state or causal):
            # The non-causal training forward keeps its final state for the
            # backward: the same kernel with the state's operands.
            spec = _spec(query, value, causal, eps, feature_map, chunk_size, True,
                         normalize)
        options = _Options(causal, float(eps), feature_map, spec, normalize)
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

    def __init__(self, causal, eps, feature_map, spec, normalize):
        self.causal, self.eps, self.feature_map, self.spec = (causal, eps, feature_map,
                                                              spec)
        self.normalize = normalize


_FUNCTION = {}


def _autograd_function(torch):
    from ._torch import _capsule

    class LinearAttentionFunction(torch.autograd.Function):
        """Forward: the kernel. Backward: docs/spec.md's gradient of linear
        attention by attn.linear_backward's kernel, from the saved inputs,
        output and (non-causal) final state."""

        @staticmethod
        def forward(ctx, query, key, value, s0, z0, options):
            batch, heads_kv = key.shape[0], key.shape[1]
            d, dv = query.shape[3], value.shape[3]
            output = query.new_empty(query.shape[:3] + (dv,))
            run_s0, run_z0 = s0, z0
            s1 = z1 = None
            # The non-causal backward reads the final state S0 + φ(K)ᵀV and
            # z0 + Σφ(K): the kernel writes them ([D, Dv] a head; its spec has
            # the state's operands) so that the backward does not recompute a
            # matrix product for them.
            if s0 is not None or not options.causal:
                s1 = torch.empty((batch, heads_kv, d, dv), dtype=torch.float32)
                z1 = torch.empty((batch, heads_kv, d), dtype=torch.float32)
                if s0 is None:
                    run_s0, run_z0 = torch.zeros_like(s1), torch.zeros_like(z1)
            _run(options.spec, _capsule, query, key, value, run_s0, run_z0, output, s1,
                 z1)
            ctx.options = options
            ctx.save_for_backward(query, key, value, s0, z0, output, s1, z1)
            ctx.set_materialize_grads(False)
            if s0 is not None:
                return output, s1, z1
            return output, None, None

        @staticmethod
        @torch.autograd.function.once_differentiable  # O is saved, not recomputed
        def backward(ctx, grad_output, grad_state, grad_normalizer):
            query, key, value, s0, z0, output, s1, z1 = ctx.saved_tensors
            options = ctx.options
            grads = linear_attention_backward(
                torch, query, key, value, s0, z0, output, grad_output, grad_state,
                grad_normalizer, options.causal, options.eps, options.feature_map,
                options.normalize, None if s1 is None else (s1, z1))
            return (*(None if g is None or not ctx.needs_input_grad[i] else
                      g.to(t.dtype) for i, (g, t) in
                      enumerate(zip(grads, (query, key, value, s0, z0)))), None)

    return LinearAttentionFunction


def linear_attention_backward(torch, query, key, value, s0, z0, output, grad_output,
                              grad_state=None, grad_normalizer=None, causal=False,
                              eps=1e-6, feature_map="elu_plus_one", normalize=True,
                              final_state=None):
    """Gradients (dQ, dK, dV of the inputs' dtype, dS0 and dz0 in f32) of
    linear attention with the given forward inputs and output (docs/spec.md,
    "Gradient of linear attention"), by the compiled kernel
    (attn.linear_backward); grad_output, grad_state and grad_normalizer are
    dO, dS_final and dz_final (None: zero). dS0 and dz0 are None without s0.
    final_state: the forward's final (S, z), which the non-causal gradient
    reads (every row saw it: S0 + φ(K)ᵀV and z0 + Σφ(K), written by the
    forward's kernel); the causal one reads the initial state (s0, z0;
    zeros without) and makes the rows' states itself, chunk by chunk."""
    if causal:
        if s0 is None:
            batch, heads_kv, d, dv = (key.shape[0], key.shape[1], query.shape[3],
                                      value.shape[3])
            state = (torch.zeros((batch, heads_kv, d, dv), dtype=torch.float32),
                     torch.zeros((batch, heads_kv, d), dtype=torch.float32))
        else:
            state = (s0.float(), z0.float())
    else:
        state = final_state
    return _kernel_backward(torch, query, key, value, s0, output, grad_output,
                            grad_state, grad_normalizer, causal, eps, feature_map,
                            normalize, state)


def _kernel_backward(torch, query, key, value, s0, output, grad_output, grad_state,
                     grad_normalizer, causal, eps, feature_map, normalize, state):
    """The gradients by the compiled kernel (attn.linear_backward), which
    reads `state` (S, z): the final one non-causal, the initial one causal.
    dQ, dK, dV of the inputs' dtype; dS0 and dz0 (f32) where there is an
    initial state s0."""
    from ._torch import _capsule

    d, dv = query.shape[3], value.shape[3]
    state, norm = state
    # The state's gradients go in and out where the call has a state (s0)
    # or the loss used the final one.
    with_state = s0 is not None or grad_state is not None or grad_normalizer is not None
    items = ["linear", "backward", f"dtype={_core.dtype_name(query.dtype)}", f"d={d}",
             f"dv={dv}"]
    if causal:
        items.append("causal")
    if normalize and float(eps) != 1e-6:
        items.append(f"eps={float(eps)!r}")
    if feature_map != "elu_plus_one":
        items.append(f"feature_map={feature_map}")
    if with_state:
        items.append("state")
    if not normalize:
        items.append("unnormalized")
    if grad_output is None:
        grad_output = torch.zeros_like(output)
    elif grad_output.dtype != output.dtype:
        grad_output = grad_output.to(output.dtype)
    dq, dk, dv_ = (torch.empty_like(t, memory_format=torch.contiguous_format)
                   for t in (query, key, value))
    ds1 = dz1 = ds0 = dz0 = None
    if with_state:
        ds1 = torch.zeros_like(state) if grad_state is None else grad_state.float()
        dz1 = torch.zeros_like(norm) if grad_normalizer is None else grad_normalizer.float()
        ds0, dz0 = torch.empty_like(state), torch.empty_like(norm)

    def wrap(t):
        return None if t is None else _capsule(t)

    _cache.kernel(",".join(items)).run_linear_backward(
        _capsule(query), _capsule(key), _capsule(value), _capsule(output),
        _capsule(grad_output), _capsule(state), _capsule(norm), wrap(ds1), wrap(dz1),
        _capsule(dq), _capsule(dk), _capsule(dv_), wrap(ds0), wrap(dz0))
    if s0 is None:
        ds0 = dz0 = None
    return dq, dk, dv_, ds0, dz0


def linear_attention_reference(query, key, value, causal=False, eps=1e-6,
                               feature_map="elu_plus_one",
                               initial_state=None, normalize=True) -> Tuple:
    """The definition in float64 NumPy, token by token (no chunks): what
    the tests and benchmarks compare against. Returns (O, (S, z))."""
    import numpy as np

    q, k, v = (np.asarray(_core.as_array(x, n), dtype=np.float64)
               for x, n in ((query, "query"), (key, "key"), (value, "value")))

    def phi(x):
        if feature_map == "identity":
            return x
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
        out[:, h] = num / den[..., None] if normalize else num
    return out, (s0 + kv.sum(2), z0 + fk.sum(2))
