"""The PyTorch operator ``torch.ops.attn.sdpa``.

A custom operator (torch.library.custom_op) with a fake implementation, so
that torch.compile (fullgraph=True included) and torch.export trace through
it as one opaque node instead of breaking the graph. attn.scaled_dot_product_
attention calls it for PyTorch tensors whenever something traces, compiles or
tracks gradients (plain eager calls run its implementation directly, without
the dispatcher's round trip); it can also be called directly with 4-D
[B, H, S, D] tensors:

    out, lse = torch.ops.attn.sdpa(q, k, v, None, True, None, False,
                                   "top_left", None, None, None, False)

It always returns (output, lse); lse has shape [0] unless return_lse.
Under torch.autocast("cpu") and torch.autocast("cuda") it follows PyTorch's
SDPA: the floating inputs are cast to the autocast dtype first.

On tensors on cuda:0 it runs attn's GPU kernel, compiled for the GPU's
architecture (cached like the CPU kernels) and queued on PyTorch's current
stream, with no copy and no synchronization, and so does the backward
(attn's GPU backward kernel), dropout included (the same keep bits as on
the CPU for a seed).

Its autograd formula is attn's backward kernel (docs/spec.md, "The
gradient"): gradients flow to query, key and value, and through the returned
LSE when return_lse (a loss that reads it); P is recomputed from the saved
LSE, which the forward computes whenever a gradient will be needed. A float
attn_mask (an additive bias) that requires grad gets its gradient too: the
backward kernel writes dS [B, Hq, Sq, Sk] (f32) and the bias's broadcast
dims are summed (Tensor.sum_to_size).
The optional last argument, sinks [Hq] (docs/spec.md, "Attention sinks"),
gets its gradient from O, dO and the LSE (which includes the sinks):
dsinks[h] = sum over b, i of exp(sinks[h] - LSE) * (dLSE - rowsum(dO * O)).
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _core

try:
    # The tensors go to the kernel as DLPack capsules: torch's C converter
    # takes about 0.4 us a tensor, Tensor.__dlpack__ (Python, with its
    # checks) about 2; on a short decoding step that was a fifth of the call.
    from torch.utils.dlpack import to_dlpack as _capsule
except ImportError:  # pragma: no cover - a PyTorch without it
    def _capsule(tensor: Tensor):
        return tensor


def _sdpa_eager(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor],
    is_causal: bool,
    scale: Optional[float],
    enable_gqa: bool,
    causal_alignment: str,
    window_left: Optional[int],
    window_right: Optional[int],
    softcap: Optional[float],
    return_lse: bool,
    dropout_p: float = 0.0,
    dropout_seed: int = 0,
    sinks: Optional[Tensor] = None,
) -> Tuple[Tensor, Tensor]:
    """The operator's implementation: checks, allocates, runs the kernel."""
    output, lse = _run(
        query, key, value, attn_mask, is_causal, scale, enable_gqa,
        causal_alignment, window_left, window_right, softcap, return_lse,
        dropout_p, dropout_seed, sinks,
    )
    if lse is None:  # the operator returns a tensor in every case
        lse = query.new_empty((0,), dtype=torch.float32)
    return output, lse


def _run(
    query, key, value, attn_mask, is_causal, scale, enable_gqa,
    causal_alignment, window_left, window_right, softcap, return_lse,
    dropout_p=0.0, dropout_seed=0, sinks=None,
) -> Tuple[Tensor, Optional[Tensor]]:
    """Checks, allocates and runs the kernel (the arguments are
    _sdpa_eager's); the LSE only where asked for (else None)."""
    # Tensor.__dlpack__ (the capsule's fallback) refuses tensors that
    # require grad (they may, under no_grad or in the operator); the kernel
    # only reads them.
    if query.requires_grad or key.requires_grad or value.requires_grad:
        query, key, value = query.detach(), key.detach(), value.detach()
    if attn_mask is not None and attn_mask.requires_grad:
        attn_mask = attn_mask.detach()
    _core.check_shapes(query, key, value, enable_gqa)
    gpu = _gpu_launch(query, key, value, attn_mask, sinks)
    if sinks is not None:
        _core.check_sinks(sinks.shape, query.shape[1])
        sinks = sinks.detach().float()
    mask = None
    if attn_mask is not None:
        mask = attn_mask
        shape = _core.mask_view_shape(mask.shape, query.shape, key.shape)
        try:
            mask = mask.expand(shape)  # stride 0 where it broadcasts
        except RuntimeError:
            pass  # not broadcastable: the runtime says why
    spec = _core.spec_for(
        query, key, value, mask, is_causal, scale, causal_alignment,
        window_left, window_right, softcap, return_lse,
        dropout=dropout_p > 0.0, sinks=sinks is not None,
    )
    batch, heads, seq_q = query.shape[:3]
    output = _output_like(query, value.shape[3])
    lse = query.new_empty((batch, heads, seq_q), dtype=torch.float32) if return_lse else None
    _core.run(
        spec, _capsule(query), _capsule(key), _capsule(value),
        None if mask is None else _capsule(mask), _capsule(output),
        None if lse is None else _capsule(lse), dropout_p, dropout_seed,
        None if sinks is None else _capsule(sinks), gpu=gpu,
    )
    return output, lse


def _output_like(query: Tensor, value_dim: int) -> Tensor:
    """The [B, H, Sq, Dv] output, laid out in memory as the query is: as
    [B, Sq, H, Dv] (a transposed view) where the query's heads lie within its
    rows, as in the [B, S, H·D] projections a multi-head module splits, so
    that merging the heads back (`out.transpose(1, 2).flatten(2)`) is a view
    and not a copy (ATen's CPU flash attention returns that layout too);
    contiguous otherwise. The kernels take any output strides."""
    batch, heads, seq_q = query.shape[:3]
    if query.stride(1) < query.stride(2):
        return query.new_empty((batch, seq_q, heads, value_dim)).transpose(1, 2)
    return query.new_empty((batch, heads, seq_q, value_dim))


def _gpu_launch(query, key, value, attn_mask, sinks):
    """None for CPU tensors; for tensors on cuda:0, the GPU's architecture
    (``sm_90``: the kernel is compiled for it and cached) and PyTorch's
    current stream there (the kernel is queued on it: no copy, no
    synchronization). Every tensor must be on query's device."""
    device = query.device
    for name, tensor in (("key", key), ("value", value),
                         ("attn_mask", attn_mask), ("sinks", sinks)):
        if tensor is not None and tensor.device != device:
            raise _core.Error(f"{name}: tensor is on {tensor.device} but query is on {device}")
    if device.type == "cpu":
        return None
    if device.type != "cuda":
        raise _core.Error(f"query: tensor is on {device} but attn runs on the CPU "
                          "and on NVIDIA GPUs (cuda)")
    if device.index != 0:
        raise _core.Error(f"query: tensor is on {device} but attn's GPU kernels run "
                          "on the first GPU (cuda:0)")
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}", torch.cuda.current_stream(device).cuda_stream


sdpa = torch.library.custom_op("attn::sdpa", _sdpa_eager, mutates_args=())


def _sdpa_autocast(device_type, dispatch_key):
    """The operator under torch.autocast(device_type): PyTorch's SDPA rule,
    its floating inputs (a float mask included) cast to the autocast dtype,
    then the operator as usual."""
    def autocast(query, key, value, attn_mask, *options):
        dtype = torch.get_autocast_dtype(device_type)

        def cast(tensor):
            if tensor is not None and tensor.is_floating_point() and tensor.dtype != dtype:
                return tensor.to(dtype)
            return tensor

        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(dispatch_key)):
            return torch.ops.attn.sdpa(cast(query), cast(key), cast(value), cast(attn_mask),
                                       *options)
    return autocast


# The autocast dtype is read at each call (bf16 or f16), so this is not
# register_autocast, which fixes one dtype when it is registered.
_autocast_library = torch.library.Library("attn", "IMPL")
_autocast_library.impl("sdpa", _sdpa_autocast("cpu", torch._C.DispatchKey.AutocastCPU),
                       "AutocastCPU")
_autocast_library.impl("sdpa", _sdpa_autocast("cuda", torch._C.DispatchKey.AutocastCUDA),
                       "AutocastCUDA")


# ---------------------------------------------------------------------------
# Autograd
# ---------------------------------------------------------------------------

_OPTIONS = ("is_causal", "scale", "enable_gqa", "causal_alignment",
            "window_left", "window_right", "softcap", "return_lse",
            "dropout_p", "dropout_seed")


def _setup_context(ctx, inputs, output):
    query, key, value, attn_mask, *options = inputs
    sinks = options[len(_OPTIONS)] if len(options) > len(_OPTIONS) else None
    out, lse = output
    ctx.options = dict(zip(_OPTIONS, options))
    ctx.save_for_backward(query, key, value, attn_mask, out, lse, sinks)


def _sinks_gradient(sinks, out, lse, grad_output, grad_lse):
    """dsinks (docs/spec.md, "Attention sinks"): the sink's weight
    exp(sinks - LSE) times (dLSE - rowsum(dO * O)), summed over the rows of
    each head; a sink of -inf has weight 0 (never exp(-inf - -inf))."""
    sink = sinks.detach().float()[None, :, None]
    weight = torch.where(sink == float("-inf"), 0.0, torch.exp(sink - lse))
    delta = (grad_output.float() * out.float()).sum(-1)
    if grad_lse is not None:
        delta = delta - grad_lse.float()
    return (-(weight * delta)).sum((0, 2)).to(sinks.dtype)


def _sdpa_backward(ctx, grad_output, grad_lse):
    query, key, value, attn_mask, out, lse, sinks = ctx.saved_tensors
    o = ctx.options
    forward_options = (o["is_causal"], o["scale"], o["enable_gqa"],
                       o["causal_alignment"], o["window_left"],
                       o["window_right"], o["softcap"])
    dropout = (o["dropout_p"], o["dropout_seed"])
    if lse.dim() != 3:
        # Called without the LSE (torch.ops.attn.sdpa directly, with
        # return_lse False): the forward again, for it.
        out, lse = torch.ops.attn.sdpa(query, key, value, attn_mask,
                                       *forward_options, True, *dropout, sinks)
    if grad_output is None:
        grad_output = torch.zeros_like(out)
    grad_lse = grad_lse if o["return_lse"] else None
    mask_grad = attn_mask is not None and ctx.needs_input_grad[3]
    *grads, grad_scores = torch.ops.attn.sdpa_backward(
        query, key, value, attn_mask, out, lse, grad_output, grad_lse,
        *forward_options, *dropout, mask_grad)
    grad_mask = None
    if mask_grad:
        # dS of every score; the bias's broadcast dims (size 1, or missing
        # in a mask of lower rank) sum what they were added to.
        grad_mask = grad_scores.sum_to_size(attn_mask.shape).to(attn_mask.dtype)
    grad_sinks = None
    if sinks is not None and ctx.needs_input_grad[4 + len(_OPTIONS)]:
        grad_sinks = _sinks_gradient(sinks, out, lse, grad_output, grad_lse)
    return (*grads, grad_mask, *(None,) * len(_OPTIONS), grad_sinks)


def _sdpa_backward_eager(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor],
    output: Tensor,
    lse: Tensor,
    grad_output: Tensor,
    grad_lse: Optional[Tensor],
    is_causal: bool,
    scale: Optional[float],
    enable_gqa: bool,
    causal_alignment: str,
    window_left: Optional[int],
    window_right: Optional[int],
    softcap: Optional[float],
    dropout_p: float = 0.0,
    dropout_seed: int = 0,
    mask_grad: bool = False,
) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """The backward operator: dQ, dK, dV of the call (its O and LSE given)
    for the incoming gradient dO and, when not None, the LSE's gradient; and
    with mask_grad dS [B, Hq, Sq, Sk] f32 (else an empty tensor)."""
    # An LSE the caller did not use gets zeros from autograd: no dLSE then
    # (a kernel without it). On a GPU the test would wait for the stream:
    # the dLSE of zeros goes to the kernel instead.
    if grad_lse is not None and query.is_cpu and not bool(grad_lse.any()):
        grad_lse = None
    return sdpa_backward(query, key, value, attn_mask, output, lse, grad_output,
                         grad_lse, is_causal, scale, enable_gqa, causal_alignment,
                         window_left, window_right, softcap, dropout_p,
                         dropout_seed, mask_grad)


def sdpa_backward(query, key, value, attn_mask, output, lse, grad_output,
                  grad_lse, is_causal, scale, enable_gqa, causal_alignment,
                  window_left, window_right, softcap, dropout_p=0.0,
                  dropout_seed=0, mask_grad=False):
    """dQ, dK, dV of the call (its O and LSE given) for the incoming
    gradient dO and, when not None, the LSE's gradient dLSE; with the
    forward's dropout probability and seed; and dS [B, Hq, Sq, Sk] f32 with
    mask_grad (an additive mask's gradient before its broadcast dims are
    summed), else an empty tensor."""
    gpu = _gpu_launch(query, key, value, attn_mask, None)
    query, key, value, output, lse, grad_output = (
        t.detach() for t in (query, key, value, output, lse, grad_output))
    if attn_mask is not None:
        attn_mask = attn_mask.detach()
    if grad_lse is not None:
        grad_lse = grad_lse.detach().float()
    _core.check_shapes(query, key, value, enable_gqa)
    mask = None
    if attn_mask is not None:
        shape = _core.mask_view_shape(attn_mask.shape, query.shape, key.shape)
        try:
            mask = attn_mask.expand(shape)
        except RuntimeError:
            mask = attn_mask  # not broadcastable: the runtime says why
    spec = _core.spec_for(
        query, key, value, mask, is_causal, scale, causal_alignment,
        window_left, window_right, softcap, grad_lse is not None,
        backward=True, dropout=dropout_p > 0.0, dbias=mask_grad,
    )
    grad_query = torch.empty_like(query, memory_format=torch.contiguous_format)
    grad_key = torch.empty_like(key, memory_format=torch.contiguous_format)
    grad_value = torch.empty_like(value, memory_format=torch.contiguous_format)
    if mask_grad:
        if mask is None or mask.dtype == torch.bool:
            raise _core.Error("mask_grad: only an additive float mask has a gradient")
        grad_scores = query.new_empty(
            (query.shape[0], query.shape[1], query.shape[2], key.shape[2]),
            dtype=torch.float32)
    else:
        grad_scores = query.new_empty((0,), dtype=torch.float32)
    _core.run_backward(
        spec, _capsule(query), _capsule(key), _capsule(value),
        None if mask is None else _capsule(mask), _capsule(output),
        _capsule(lse), _capsule(grad_output),
        None if grad_lse is None else _capsule(grad_lse),
        _capsule(grad_query), _capsule(grad_key), _capsule(grad_value),
        dropout_p, dropout_seed, _capsule(grad_scores) if mask_grad else None,
        gpu=gpu,
    )
    return grad_query, grad_key, grad_value, grad_scores


sdpa_backward_op = torch.library.custom_op(
    "attn::sdpa_backward", _sdpa_backward_eager, mutates_args=())


@sdpa_backward_op.register_fake
def _sdpa_backward_fake(query, key, value, attn_mask, output, lse, grad_output,
                        grad_lse, is_causal, scale, enable_gqa, causal_alignment,
                        window_left, window_right, softcap, dropout_p=0.0,
                        dropout_seed=0, mask_grad=False):
    scores = ((query.shape[0], query.shape[1], query.shape[2], key.shape[2])
              if mask_grad else (0,))
    return (torch.empty_like(query, memory_format=torch.contiguous_format),
            torch.empty_like(key, memory_format=torch.contiguous_format),
            torch.empty_like(value, memory_format=torch.contiguous_format),
            query.new_empty(scores, dtype=torch.float32))


sdpa.register_autograd(_sdpa_backward, setup_context=_setup_context)


def _needs_grad(*tensors) -> bool:
    return torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in tensors)


def _plain_eager_call(*tensors) -> bool:
    """Whether the operator may be skipped: plain CPU tensors (not fake,
    functional or other subclasses), nothing being traced or compiled, no
    gradient to track. The dispatcher's round trip then costs about as much
    as the kernel of a short decoding step (tens of microseconds)."""
    if torch.compiler.is_compiling() or torch.jit.is_tracing():
        return False
    if torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda"):
        return False  # the operator's autocast rule
    grad = torch.is_grad_enabled()
    return all(
        t is None or (type(t) is Tensor and not (grad and t.requires_grad))
        for t in tensors
    )


@sdpa.register_fake
def _sdpa_fake(
    query, key, value, attn_mask, is_causal, scale, enable_gqa,
    causal_alignment, window_left, window_right, softcap, return_lse,
    dropout_p=0.0, dropout_seed=0, sinks=None,
):
    torch._check(query.dim() == 4, lambda: "attn::sdpa: query must be 4-D [B, H, S, D]")
    torch._check(value.dim() == 4, lambda: "attn::sdpa: value must be 4-D [B, H, S, D]")
    batch, heads, seq_q = query.shape[:3]
    output = _output_like(query, value.shape[3])
    lse = query.new_empty((batch, heads, seq_q) if return_lse else (0,), dtype=torch.float32)
    return output, lse


def scaled_dot_product_attention(
    query, key, value, attn_mask, is_causal, scale, enable_gqa,
    causal_alignment, window_left, window_right, softcap, return_lse,
    dropout_p=0.0, dropout_seed=None, sinks=None,
):
    """The public function's PyTorch path: 3-D inputs gain and lose B=1
    around the operator. Written to be traced by torch.compile."""
    if dropout_p > 0.0 and dropout_seed is None:
        # From PyTorch's default generator: torch.manual_seed reproduces it.
        dropout_seed = int(torch.randint(-(2**63), 2**63 - 1, (), dtype=torch.int64))
    dropout_seed = 0 if dropout_seed is None else _core.seed_bits(dropout_seed)
    if dropout_seed >= 2**63:  # the operator's int is an int64: the same bits
        dropout_seed -= 2**64
    if sinks is not None and not isinstance(sinks, Tensor):
        sinks = torch.as_tensor(sinks)
    squeeze = query.dim() == 3 and key.dim() == 3 and value.dim() == 3
    if squeeze:
        query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
    # Eager calls on plain tensors run the implementation directly (without
    # the empty LSE the operator returns when none is asked for); anything
    # traced, compiled or differentiated goes through the operator.
    call = _run if _plain_eager_call(query, key, value, attn_mask, sinks) else torch.ops.attn.sdpa
    # The backward recomputes the weights from the LSE: compute it whenever
    # a gradient will be needed (the caller sees it only if asked for).
    with_lse = return_lse or _needs_grad(query, key, value, attn_mask, sinks)
    output, lse = call(
        query, key, value, attn_mask, is_causal, scale, enable_gqa,
        causal_alignment, window_left, window_right, softcap, with_lse,
        float(dropout_p), dropout_seed, sinks,
    )
    if squeeze:
        output, lse = output.squeeze(0), (lse.squeeze(0) if return_lse else lse)
    return (output, lse) if return_lse else output


def _weights_eager(
    query: Tensor,
    key: Tensor,
    attn_mask: Optional[Tensor],
    is_causal: bool,
    scale: Optional[float],
    enable_gqa: bool,
    causal_alignment: str,
    window_left: Optional[int],
    window_right: Optional[int],
    softcap: Optional[float],
    lse: Optional[Tensor],
    dropout_p: float = 0.0,
    dropout_seed: int = 0,
) -> Tensor:
    """torch.ops.attn.weights: attn.attention_weights on 4-D tensors, as an
    operator that torch.compile keeps as one node (not differentiable)."""
    from ._weights import attention_weights

    window = None
    if window_left is not None or window_right is not None:
        window = (window_left, window_right)
    return attention_weights(
        query, key, attn_mask, is_causal, scale, enable_gqa,
        causal_alignment=causal_alignment, window=window, softcap=softcap, lse=lse,
        dropout_p=dropout_p, dropout_seed=dropout_seed if dropout_p > 0.0 else None)


weights_op = torch.library.custom_op("attn::weights", _weights_eager, mutates_args=())


@weights_op.register_fake
def _weights_fake(query, key, attn_mask, is_causal, scale, enable_gqa,
                  causal_alignment, window_left, window_right, softcap, lse,
                  dropout_p=0.0, dropout_seed=0):
    torch._check(query.dim() == 4, lambda: "attn::weights: query must be 4-D [B, H, S, D]")
    torch._check(key.dim() == 4, lambda: "attn::weights: key must be 4-D [B, H, S, D]")
    batch, heads, seq_q = query.shape[:3]
    return query.new_empty((batch, heads, seq_q, key.shape[2]), dtype=torch.float32)
