"""attn.additive_attention: additive (Bahdanau) attention from a kernel.

score(q, k) = v . tanh(W_q q + W_k k), a softmax over the keys, the weighted
sum of the values (docs/spec.md, "Additive attention"). The kernel
(attn.additive) projects the queries and keys once and folds the scores into
an online softmax a block of keys at a time: nothing of size Sq * Sk * A
exists, where the tutorials' module materializes the [B, Sq, Sk, A] tensor
of tanh inputs.
"""

from __future__ import annotations

from . import _cache, _core

Error = _core.Error


def _torch_or_none(query):
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and isinstance(query, torch.Tensor):
        return torch
    return None


def _spec(query, keys, values, w_q, mask, need_weights, mask_broadcast) -> str:
    items = [
        "additive",
        f"dtype={_core.dtype_name(query.dtype)}",
        f"dq={int(query.shape[2])}",
        f"d={int(keys.shape[2])}",
        f"dv={int(values.shape[2])}",
        f"attn_dim={int(w_q.shape[0])}",
    ]
    if mask is not None:
        dims = [name for name, b in zip(("b1", "q1"), mask_broadcast) if b]
        items.append("mask=bool" + (":" + ":".join(dims) if dims else ""))
    if need_weights:
        items.append("with_weights")
    return ",".join(items)


def _check(query, keys, values, w_q, w_k, w_v):
    for name, tensor, rank, layout in (
        ("query", query, 3, "[B, Sq, Dq]"),
        ("keys", keys, 3, "[B, Sk, Dk]"),
        ("values", values, 3, "[B, Sk, Dv]"),
        ("w_q", w_q, 2, "[A, Dq]"),
        ("w_k", w_k, 2, "[A, Dk]"),
        ("w_v", w_v, 1, "[A]"),
    ):
        if len(tensor.shape) != rank:
            raise Error(f"{name}: rank is {len(tensor.shape)} but must be {rank} {layout}")
    a = int(w_q.shape[0])
    if int(w_q.shape[1]) != int(query.shape[2]):
        raise Error(f"w_q: shape {list(w_q.shape)} but must be [A, Dq] with the query's "
                    f"Dq = {int(query.shape[2])}")
    if tuple(int(x) for x in w_k.shape) != (a, int(keys.shape[2])):
        raise Error(f"w_k: shape {list(w_k.shape)} but must be [A, Dk] = "
                    f"[{a}, {int(keys.shape[2])}]")
    if int(w_v.shape[0]) != a:
        raise Error(f"w_v: shape {list(w_v.shape)} but must be [A] = [{a}]")


def _mask_view(mask, batch, seq_q):
    """The mask as [B or 1, Sq or 1, Sk] (a [B, Sk] padding mask gains its
    Sq dim), and which dims broadcast."""
    if len(mask.shape) == 2:
        mask = mask[:, None, :]
    if len(mask.shape) != 3:
        raise Error(f"mask: rank is {len(mask.shape)} but must be 2 [B, Sk] or 3 "
                    "[B or 1, Sq or 1, Sk]")
    broadcast = (int(mask.shape[0]) == 1 and batch != 1,
                 int(mask.shape[1]) == 1 and seq_q != 1)
    return mask, broadcast


def additive_attention(query, keys, values, w_q, w_k, w_v, mask=None,
                       need_weights: bool = False):
    """Additive attention of query [B, Sq, Dq] (or [B, Dq]: one query per
    batch), keys [B, Sk, Dk] and values [B, Sk, Dv] with the scoring network
    w_q [A, Dq], w_k [A, Dk] and w_v [A] (or [1, A], nn.Linear's layout):

        s[b, i, j] = sum_a w_v[a] * tanh((w_q q_i)[a] + (w_k k_j)[a])
        context[b, i] = sum_j softmax_j(s[b, i, :]) * values[b, j]

    All of one dtype (float32, bfloat16 or float16; any strides). mask: a
    keep-mask (bool, true attends), [B, Sk] or [B or 1, Sq or 1, Sk]; a row
    with no key to attend gives context 0 and weights 0.

    Returns context [B, Sq, Dv] ([B, Dv] for a 2-D query), and with
    need_weights=True also the weights [B, Sq, Sk] float32 ([B, Sk] for a
    2-D query). A PyTorch tensor for PyTorch inputs, else a NumPy array.
    Gradients flow through context for PyTorch inputs (see
    attn.nn.AdditiveAttention); the weights are not differentiable.
    """
    if _torch_or_none(query) is not None:
        return additive_attention_torch(query, keys, values, w_q, w_k, w_v, mask,
                                        need_weights)
    import numpy as np

    as_array = _core.as_array
    query, keys, values = (as_array(query, "query"), as_array(keys, "keys"),
                           as_array(values, "values"))
    w_q, w_k, w_v = (as_array(w_q, "w_q"), as_array(w_k, "w_k"), as_array(w_v, "w_v"))
    if w_v.ndim == 2 and w_v.shape[0] == 1:
        w_v = w_v[0]
    single = query.ndim == 2
    if single:
        query = query[:, None, :]
    _check(query, keys, values, w_q, w_k, w_v)
    batch, seq_q, seq_k = int(query.shape[0]), int(query.shape[1]), int(keys.shape[1])
    broadcast = (False, False)
    if mask is not None:
        mask = as_array(mask, "mask")
        if mask.dtype != np.bool_:
            mask = mask != 0
        mask, broadcast = _mask_view(mask, batch, seq_q)
    output = np.empty((batch, seq_q, int(values.shape[2])), dtype=query.dtype)
    weights = (np.empty((batch, seq_q, seq_k), dtype=np.float32)
               if need_weights else None)
    run(_spec(query, keys, values, w_q, mask, need_weights, broadcast), query, keys,
        values, w_q, w_k, w_v, mask, output, weights)
    if single:
        output = output[:, 0]
        weights = None if weights is None else weights[:, 0]
    return (output, weights) if need_weights else output


def run(spec, query, keys, values, w_q, w_k, w_v, mask, output, weights) -> None:
    """Runs the additive kernel of `spec` (compiling it on first use) on
    NumPy arrays or DLPack capsules."""
    _cache.kernel(spec).run_additive(query, keys, values, w_q, w_k, w_v, mask, output,
                                     weights)


def _weights(torch, scores, mask):
    """The softmax of scores [B, R, Sk] over the allowed keys; 0 on a row
    with none (docs/spec.md, "Additive attention")."""
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    top = scores.amax(-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(scores - top)
    total = e.sum(-1, keepdim=True)
    return e / torch.where(total == 0, torch.ones_like(total), total)


#: The parts of the query rows that the backward kernel's partial sums
#: split a call into (attn.additive_backward's P; the work items are B·P):
#: None for the shape's own (backward_parts), else this many. A function
#: of the shape only, so that the gradients are bit-identical whatever the
#: thread count.
BACKWARD_PARTS = None


def backward_parts(seq_q: int) -> int:
    """P for Sq query rows: a part per 128 rows, between 1 and 8 (the
    partial sums take P·B·Sk·(A + Dv) floats)."""
    return max(1, min(8, seq_q // 128))


#: The most bytes of a call's whole [B, Sq, Sk, A] tanh block that training
#: computes in the forward and keeps for the backward (a decoder step's,
#: one query per sequence: B·Sk·A floats) instead of calling the kernel and
#: recomputing the block: the backward reads the block anyway, and a small
#: one costs less than the kernel's own projection of the keys.
KEPT_BLOCK_BYTES = 8 << 20


def _as_f32(*tensors):
    return tuple(t.detach().float() for t in tensors)


def _doubled_projections(query, keys, w_q, w_k):
    """2·qp = 2·query·W_qᵀ [B, Sq, A] and 2·kp [B, Sk, A], what _block takes."""
    return (query @ w_q.transpose(0, 1)).mul_(2), (keys @ w_k.transpose(0, 1)).mul_(2)


def _block(torch, qp2, kp2, w_v, mask, out=None):
    """σ = sigmoid(qp2 + kp2) [B, R, Sk, A] (into `out` when given) and the
    weights P [B, R, Sk] (mask: broadcast to [B, R, Sk], or None); qp2 and
    kp2 are the projections times 2, so that t = tanh(qp + kp) = 2σ − 1.
    The block is kept as σ because PyTorch's CPU sigmoid runs about 6x
    faster than its tanh (3.8 against 24.5 ms for 64 MiB on a Zen 4), and
    nothing needs t itself: the scores t·v = σ·2v − Σv, and 1 − t² =
    4σ(1 − σ)."""
    sigma = torch.add(qp2[:, :, None, :], kp2[:, None, :, :], out=out).sigmoid_()
    return sigma, _weights(torch, sigma @ (2 * w_v) - w_v.sum(), mask)


def _block_gradients(torch, sigma, p, grad_out, values, output=None, values_grad=True):
    """One block's part of the gradients from its σ (_block: t = 2σ − 1) and
    P (σ is overwritten): dV = Pᵀ dO (None without values_grad), dv_a = Σ
    dS·t, and dS·(1 − t²) summed over the keys (dqp of the block's rows) and
    over the rows (its part of dkp), before the factor v; dS = P·(dP − Δ)
    with Δ = dO·O (O = P V, computed when not given)."""
    if output is None:
        output = p @ values
    delta = (grad_out * output).sum(-1, keepdim=True)
    grad_scores = p * (grad_out @ values.transpose(1, 2) - delta)  # [B, R, Sk]
    grad_values = p.transpose(1, 2) @ grad_out if values_grad else None
    # Σ dS·t = 2 Σ dS·σ − Σ dS, row by row (a batched product: 1.5x faster
    # than one [1, B·R·Sk] x [B·R·Sk, A] product).
    seq_k, attn_dim = sigma.shape[2], sigma.shape[3]
    grad_v = torch.bmm(grad_scores.reshape(-1, 1, seq_k),
                       sigma.reshape(-1, seq_k, attn_dim)).sum((0, 1))
    grad_v = 2 * grad_v - grad_scores.sum()
    # dS·(1 − t²) = 4·dS·(σ − σ²), in place.
    u = sigma.addcmul_(sigma, sigma, value=-1).mul_(grad_scores[..., None])
    return grad_values, grad_v, 4 * u.sum(2), 4 * u.sum(1)


def _input_gradients(query, keys, w_q, w_k, grad_qp, grad_kp, grad_values, grad_v,
                     needed):
    """(dquery, dkeys, dvalues, dW_q, dW_k, dv) from dqp and dkp: the
    projections' matrices carry them back. `needed`: which of the six want
    one (None for the others)."""
    attn_dim = w_q.shape[0]
    return (
        grad_qp @ w_q if needed[0] else None,
        grad_kp @ w_k if needed[1] else None,
        grad_values if needed[2] else None,
        grad_qp.reshape(-1, attn_dim).transpose(0, 1) @ query.reshape(-1, query.shape[2])
        if needed[3] else None,
        grad_kp.reshape(-1, attn_dim).transpose(0, 1) @ keys.reshape(-1, keys.shape[2])
        if needed[4] else None,
        grad_v if needed[5] else None,
    )


def backward(torch, spec, query, keys, values, w_q, w_k, w_v, mask, grad_output,
             needed):
    """The gradients of additive attention's output by the backward kernel
    (attn.additive_backward, the spec `spec` of the forward's kernel with
    'backward'): the projections' gradients dqp [B, Sq, A] and, per part of
    the query rows, the partial sums of dkp, dV and dv (f32), which are
    summed here in a fixed order; the projections' matrices carry dqp and
    dkp to the query, the keys and W_q, W_k. `needed`: which of (query,
    keys, values, w_q, w_k, w_v) want one (None for the others)."""
    from ._torch import _capsule

    batch, seq_q, seq_k = query.shape[0], query.shape[1], keys.shape[1]
    attn_dim, value_dim = w_q.shape[0], values.shape[2]
    parts = BACKWARD_PARTS or backward_parts(seq_q)
    grad_qp = torch.empty(batch, seq_q, attn_dim)
    grad_kp = torch.empty(batch, parts, seq_k, attn_dim)
    grad_values = torch.empty(batch, parts, seq_k, value_dim)
    grad_v = torch.empty(batch, parts, attn_dim)
    grad_output = grad_output.to(query.dtype)
    kernel_spec = spec.replace(",with_weights", "") + ",backward"
    _cache.kernel(kernel_spec).run_additive_backward(
        *(_capsule(t.detach()) for t in (query, keys, values, w_q, w_k, w_v)),
        None if mask is None else _capsule(mask), _capsule(grad_output),
        _capsule(grad_qp), _capsule(grad_kp), _capsule(grad_values), _capsule(grad_v))
    query, keys, w_q, w_k = _as_f32(query, keys, w_q, w_k)
    if mask is not None:
        # A row or key that the mask excludes has a zero projection
        # gradient, which must give 0 in dW_q and dW_k even where its query
        # or key holds a NaN or inf (allowed ones carry theirs in dqp, dkp).
        query = torch.where(torch.isfinite(query), query, 0.0)
        keys = torch.where(torch.isfinite(keys), keys, 0.0)
    return _input_gradients(query, keys, w_q, w_k, grad_qp, grad_kp.sum(1),
                            grad_values.sum(1), grad_v.sum((0, 1)), needed)


def _kept_forward(torch, query, keys, values, w_q, w_k, w_v, mask):
    """The forward in PyTorch (f32) for a call whose whole block is kept
    (KEPT_BLOCK_BYTES): O (f32), the weights P, and the block (as σ,
    _block), which the backward reads instead of recomputing them."""
    query, keys, values, w_q, w_k, w_v = _as_f32(query, keys, values, w_q, w_k, w_v)
    sigma, p = _block(torch, *_doubled_projections(query, keys, w_q, w_k), w_v, mask)
    return p @ values, p, sigma


def _autograd_function(torch):
    class AdditiveAttentionFunction(torch.autograd.Function):
        """Forward: the kernel, or for a call whose tanh block is at most
        KEPT_BLOCK_BYTES the block itself in PyTorch, kept. Backward: from
        the kept block, else the backward kernel (`backward` above), whose
        memory is O(P·B·Sk·(A + Dv))."""

        @staticmethod
        def forward(ctx, query, keys, values, w_q, w_k, w_v, mask, spec, need_weights):
            """The context and, with need_weights, the weights (not
            differentiable): one kernel call, or for a small call (a
            decoder step) the block in PyTorch, kept for the backward."""
            from ._torch import _capsule

            batch, seq_q, seq_k = query.shape[0], query.shape[1], keys.shape[1]
            # The kept block's products multiply an excluded key's value
            # (and differentiate a masked score) by its weight 0, which an
            # inf or NaN there would turn into NaN: such inputs take the
            # kernels, which drop excluded keys (docs/spec.md, "Additive
            # attention", step 4 and the gradient's steps 1 and 3).
            ctx.kept = (batch * seq_q * seq_k * w_q.shape[0] * 4 <= KEPT_BLOCK_BYTES
                        and all(bool(torch.isfinite(t).all())
                                for t in (query, keys, values, w_q, w_k, w_v)))
            weights = None
            if ctx.kept:
                output, weights, sigma = _kept_forward(torch, query, keys, values, w_q,
                                                       w_k, w_v, mask)
                ctx.save_for_backward(query, keys, values, w_q, w_k, w_v, sigma, weights,
                                      output)
                output = output.to(query.dtype, copy=True)
                weights = weights.clone() if need_weights else None
            else:
                output = query.new_empty((batch, seq_q, values.shape[2]))
                if need_weights:
                    weights = torch.empty((batch, seq_q, seq_k), dtype=torch.float32)
                run(spec, _capsule(query), _capsule(keys), _capsule(values),
                    _capsule(w_q), _capsule(w_k), _capsule(w_v),
                    None if mask is None else _capsule(mask), _capsule(output),
                    None if weights is None else _capsule(weights))
                ctx.save_for_backward(query, keys, values, w_q, w_k, w_v, mask)
                ctx.spec = spec
            if weights is not None:
                ctx.mark_non_differentiable(weights)
            return output, weights

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, grad_output, _grad_weights):
            tensors = ctx.saved_tensors
            needed = ctx.needs_input_grad[:6]
            if ctx.kept:
                query, keys, values, w_q, w_k, w_v = _as_f32(*tensors[:6])
                sigma, p, output = tensors[6:]
                # A copy of σ: the gradients overwrite it, and a second
                # backward (retain_graph) reads the saved block again.
                dvalues, dv, dqp, dkp = _block_gradients(
                    torch, sigma.clone(), p, grad_output.float(), values, output,
                    needed[2])
                grads = _input_gradients(query, keys, w_q, w_k, dqp * w_v, dkp * w_v,
                                         dvalues, dv, needed)
            else:
                grads = backward(torch, ctx.spec, *tensors, grad_output, needed)
            return (*(None if g is None else g.to(t.dtype)
                      for g, t in zip(grads, tensors[:6])), None, None, None)

    return AdditiveAttentionFunction


_FUNCTION = {}


def additive_attention_torch(query, keys, values, w_q, w_k, w_v, mask, need_weights):
    """additive_attention for PyTorch tensors (CPU): differentiable through
    the context."""
    import torch

    from ._torch import _capsule

    tensors = (("query", query), ("keys", keys), ("values", values), ("w_q", w_q),
               ("w_k", w_k), ("w_v", w_v), ("mask", mask))
    for name, tensor in tensors:
        if tensor is not None and not isinstance(tensor, torch.Tensor):
            raise Error(f"{name}: a {type(tensor).__name__} where the query is a "
                        "torch.Tensor")
        if tensor is not None and not tensor.is_cpu:
            raise Error(f"{name}: tensor is on {tensor.device} but attn's additive "
                        "attention runs on the CPU only")
    if w_v.dim() == 2 and w_v.shape[0] == 1:
        w_v = w_v[0]
    single = query.dim() == 2
    if single:
        query = query[:, None, :]
    _check(query, keys, values, w_q, w_k, w_v)
    batch, seq_q, seq_k = query.shape[0], query.shape[1], keys.shape[1]
    broadcast = (False, False)
    if mask is not None:
        if mask.dtype != torch.bool:
            mask = mask != 0
        mask, broadcast = _mask_view(mask, batch, seq_q)
        mask = mask.detach()
    spec = _spec(query, keys, values, w_q, mask, need_weights, broadcast)
    if "function" not in _FUNCTION:
        _FUNCTION["function"] = _autograd_function(torch)
    grad = torch.is_grad_enabled() and any(
        t.requires_grad for t in (query, keys, values, w_q, w_k, w_v))
    if grad:
        # The context and the weights from one kernel call either way.
        output, weights = _FUNCTION["function"].apply(query, keys, values, w_q, w_k, w_v,
                                                      mask, spec, need_weights)
    else:
        detached = [t.detach() for t in (query, keys, values, w_q, w_k, w_v)]
        output = query.new_empty((batch, seq_q, values.shape[2]))
        weights = (torch.empty((batch, seq_q, seq_k), dtype=torch.float32)
                   if need_weights else None)
        run(spec, *(_capsule(t) for t in detached),
            None if mask is None else _capsule(mask), _capsule(output),
            None if weights is None else _capsule(weights))
    if single:
        output = output[:, 0]
        weights = None if weights is None else weights[:, 0]
    return (output, weights) if need_weights else output
