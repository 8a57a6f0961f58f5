"""attn.nn: attention modules on attn's kernels.

MultiheadAttention is a drop-in for torch.nn.MultiheadAttention: the same
constructor, parameters (names and shapes, so load_state_dict of a torch
module's weights works), forward arguments and results, with attention
computed by attn's fused kernel (and the weights, when asked for, by its
weights kernel, normalized by the forward's LSE).

Differences from torch, by design:
- a query row that may attend nothing (every key masked) gives output 0 and
  weights 0, where torch gives NaN;
- is_causal=True without attn_mask applies a causal mask (torch requires the
  mask as well and treats is_causal as a hint); with attn_mask, the hint is
  checked: the causal kernel runs (skipping the blocks above the diagonal)
  where the mask is exactly the causal one, the mask as given otherwise;
- the returned weights are not differentiable (they are for looking at);
  gradients flow through the output as in torch;
- with dropout in training mode, the weights are dropped by attn's
  generator (Philox on a seed drawn from torch's), not torch's.

And one addition: forward(..., kv_cache=KVCache()) keeps the projected keys
and values of the tokens seen so far, for decoding (torch's module has no
cache: it projects the whole cached sequence again at every step).
"""

from __future__ import annotations

import math
import threading
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._additive import additive_attention
from ._torch import scaled_dot_product_attention
from ._weights import attention_weights

__all__ = ["AdditiveAttention", "KVCache", "MultiheadAttention"]


class MultiheadAttention(nn.Module):
    """torch.nn.MultiheadAttention on attn's kernels (see the module's doc
    for the differences)."""

    __constants__ = ["batch_first"]

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False,
                 device=None, dtype=None) -> None:
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(
                f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} "
                f"and num_heads={num_heads} instead"
            )
        if embed_dim % num_heads != 0:
            raise AssertionError("embed_dim must be divisible by num_heads")
        factory = {"device": device, "dtype": dtype}
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self._qkv_same_embed_dim:
            self.in_proj_weight = nn.Parameter(torch.empty((3 * embed_dim, embed_dim), **factory))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = nn.Parameter(torch.empty((embed_dim, embed_dim), **factory))
            self.k_proj_weight = nn.Parameter(torch.empty((embed_dim, self.kdim), **factory))
            self.v_proj_weight = nn.Parameter(torch.empty((embed_dim, self.vdim), **factory))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = nn.Parameter(torch.empty(3 * embed_dim, **factory))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = nn.modules.linear.NonDynamicallyQuantizableLinear(
            embed_dim, embed_dim, bias=bias, **factory)
        if add_bias_kv:
            self.bias_k = nn.Parameter(torch.empty((1, 1, embed_dim), **factory))
            self.bias_v = nn.Parameter(torch.empty((1, 1, embed_dim), **factory))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._scratch = _Scratch()
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        # torch's initialization, so that a seeded model starts the same.
        if self._qkv_same_embed_dim:
            nn.init.xavier_uniform_(self.in_proj_weight)
        else:
            nn.init.xavier_uniform_(self.q_proj_weight)
            nn.init.xavier_uniform_(self.k_proj_weight)
            nn.init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            nn.init.constant_(self.in_proj_bias, 0.0)
            nn.init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            nn.init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            nn.init.xavier_normal_(self.bias_v)

    def forward(self, query: Tensor, key: Optional[Tensor], value: Optional[Tensor],
                key_padding_mask: Optional[Tensor] = None, need_weights: bool = True,
                attn_mask: Optional[Tensor] = None, average_attn_weights: bool = True,
                is_causal: bool = False, *, kv_cache: Optional["KVCache"] = None
                ) -> Tuple[Tensor, Optional[Tensor]]:
        """torch.nn.MultiheadAttention.forward, plus `kv_cache`: with a
        KVCache, `key` and `value` are the new tokens only (or both None to
        attend to the cached ones alone, as a decoder's cross-attention does
        after its first step); they are projected, appended to the cache, and
        the query attends to every cached token. Then the masks cover all of
        them (`attn_mask` [L, cached + new], `key_padding_mask`
        [N, cached + new]) and is_causal places the L queries at the last L
        positions (query t sees the tokens up to cached + t)."""
        batched = query.dim() == 3
        if kv_cache is not None:
            self._check_cache_call(query, key, value, kv_cache, batched)
        if not batched:
            query = query[None]
            key, value = (None if x is None else x[None] for x in (key, value))
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask[None]
        elif not self.batch_first:
            # (L, N, E) as (N, L, E): views, no copies.
            query, key, value = (None if x is None else x.transpose(0, 1)
                                 for x in (query, key, value))
        batch, seq_q = query.shape[:2]

        heads, dim = self.num_heads, self.head_dim
        split = lambda x: x.unflatten(-1, (heads, dim)).transpose(1, 2)  # noqa: E731
        extra = 0
        if kv_cache is not None:
            # [N, H, S, hd] views of the cache after the new tokens.
            if key is None:
                q = F.linear(query, *self._projection(0))
                k, v = kv_cache.keys, kv_cache.values
            else:
                q, k, v = self._project(query, key, value)
                k, v = kv_cache._append(split(k), split(v))
            q = split(q)
        else:
            q, k, v = self._project(query, key, value)
            if self.bias_k is not None:
                k = torch.cat([k, self.bias_k.expand(batch, 1, -1)], dim=1)
                v = torch.cat([v, self.bias_v.expand(batch, 1, -1)], dim=1)
            # [N, S, E] as [N, H, S, hd]: strided views for the kernel.
            q, k, v = split(q), split(k), split(v)
            extra = int(self.bias_k is not None)
            if self.add_zero_attn:
                k = torch.cat([k, k.new_zeros(batch, heads, 1, dim)], dim=2)
                v = torch.cat([v, v.new_zeros(batch, heads, 1, dim)], dim=2)
                extra += 1
        seq_k = k.shape[2]

        # The queries are the sequence's last ones when they follow a cache.
        alignment = "bottom_right" if kv_cache is not None else "top_left"
        causal = bool(is_causal)
        if causal and attn_mask is not None:
            # torch's module wants attn_mask with is_causal, a hint that it is
            # the causal mask. Where it is, the causal kernel skips the blocks
            # above the diagonal instead of reading the mask; where it is not,
            # the mask applies as given (torch may trust a wrong hint).
            if extra == 0 and _is_causal_mask(attn_mask, seq_q, seq_k, alignment):
                attn_mask = None
            else:
                causal = False
        mask = _merge_masks(attn_mask, key_padding_mask, batch, heads, seq_q, seq_k,
                            extra, q.dtype)
        dropout_p = self.dropout if self.training else 0.0
        seed = None
        if dropout_p > 0.0:
            seed = int(torch.randint(0, 2**63 - 1, (), dtype=torch.int64))
        result = scaled_dot_product_attention(
            q, k, v, mask, causal, None, False, alignment, None, None, None,
            need_weights, float(dropout_p), seed)
        out, lse = result if need_weights else (result, None)
        out = self.out_proj(out.transpose(1, 2).flatten(2))

        weights = None
        if need_weights:
            # Averaged weights: the per-head ones go to a scratch buffer kept
            # per thread (a fresh one's page faults cost more than the
            # kernel: 20 ms against 15 for 64 MiB on Zen 4).
            if torch.compiler.is_compiling():
                # The operator: one node of the compiled graph.
                weights = torch.ops.attn.weights(
                    q, k, mask, causal, None, False, alignment, None, None, None,
                    lse, float(dropout_p), 0 if seed is None else seed)
            else:
                out_heads = None
                if average_attn_weights:
                    out_heads = self._scratch.get((batch, heads, seq_q, seq_k))
                weights = attention_weights(
                    q, k, mask, causal, causal_alignment=alignment, lse=lse,
                    dropout_p=dropout_p,
                    dropout_seed=seed, out=out_heads)
            if average_attn_weights:
                weights = weights.mean(dim=1)
            weights = weights.to(out.dtype)
            if not batched:
                weights = weights[0]
        if not batched:
            out = out[0]
        elif not self.batch_first:
            out = out.transpose(0, 1)
        return out, weights

    def _projection(self, which: int):
        """(weight, bias) of the query (0), key (1) or value (2) projection."""
        e = self.embed_dim
        if self._qkv_same_embed_dim:
            weight = self.in_proj_weight[which * e:(which + 1) * e]
        else:
            weight = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)[which]
        bias = self.in_proj_bias
        return weight, None if bias is None else bias[which * e:(which + 1) * e]

    def _project(self, query: Tensor, key: Tensor, value: Tensor):
        """Q, K, V projected, [N, S, E] each: one matrix multiplication for
        self-attention with the packed weight, else one each."""
        weight, bias = self.in_proj_weight, self.in_proj_bias
        if self._qkv_same_embed_dim:
            if query is key and key is value:
                return F.linear(query, weight, bias).chunk(3, dim=-1)
            if key is value:
                q = F.linear(query, *self._projection(0))
                kv = F.linear(key, weight[self.embed_dim:],
                              None if bias is None else bias[self.embed_dim:])
                return (q, *kv.chunk(2, dim=-1))
        return tuple(F.linear(x, *self._projection(i))
                     for i, x in enumerate((query, key, value)))

    def _check_cache_call(self, query, key, value, cache: "KVCache", batched: bool):
        """Refuses what a KVCache cannot do, in the caller's terms."""
        if not isinstance(cache, KVCache):
            raise TypeError(f"kv_cache must be an attn.nn.KVCache, not {type(cache).__name__}")
        if self.bias_k is not None or self.add_zero_attn:
            raise ValueError("kv_cache: add_bias_kv and add_zero_attn append keys at every "
                             "call, which a cache of past tokens cannot hold")
        if (key is None) != (value is None):
            raise ValueError("kv_cache: give key and value (the new tokens) or neither "
                             "(attend to the cached tokens alone)")
        if key is None and len(cache) == 0:
            raise ValueError("kv_cache: key and value are None but the cache is empty")
        if torch.is_grad_enabled() and (
                any(p.requires_grad for p in self.parameters())
                or any(x is not None and x.requires_grad for x in (query, key, value))):
            raise RuntimeError("kv_cache is for inference and keeps no autograd history: "
                               "call the module under torch.no_grad() or "
                               "torch.inference_mode()")
        if not batched and cache.batch not in (None, 1):
            raise ValueError(f"kv_cache holds a batch of {cache.batch}, the unbatched "
                             "query is one sequence")


class KVCache:
    """The projected keys and values of the tokens one attn.nn.MultiheadAttention
    has seen, [N, H, S, head_dim] each, for decoding token by token::

        cache = attn.nn.KVCache()
        with torch.no_grad():
            out, _ = mha(prompt, prompt, prompt, is_causal=True, kv_cache=cache)
            out, _ = mha(token, token, token, kv_cache=cache)  # one more token

    A call projects only its new tokens and attends to the cached ones through
    strided views (no copies). Storage grows by doubling from `capacity`
    tokens (give the sequence's final length to allocate once). One cache per
    module and sequence batch; reset() empties it for the next sequence."""

    def __init__(self, capacity: int = 0) -> None:
        if capacity < 0:
            raise ValueError(f"KVCache capacity must be >= 0, got {capacity}")
        self.capacity = int(capacity)
        self.reset()

    def reset(self) -> None:
        """Forgets every token (keeps nothing: the next call sets the shape)."""
        self._keys = self._values = None
        self._length = 0

    def __len__(self) -> int:
        return self._length

    def crop(self, length: int) -> None:
        """Keeps the first `length` tokens (drops the rest: a rejected draft,
        a beam that restarts from a shorter prefix)."""
        if not 0 <= length <= self._length:
            raise ValueError(f"KVCache.crop({length}): the cache holds {self._length} tokens")
        self._length = int(length)

    @property
    def batch(self) -> Optional[int]:
        return None if self._keys is None else self._keys.shape[0]

    @property
    def keys(self) -> Tensor:
        """The cached keys, [N, H, len(self), head_dim] (a view)."""
        return self._keys[:, :, :self._length]

    @property
    def values(self) -> Tensor:
        """The cached values, [N, H, len(self), head_dim] (a view)."""
        return self._values[:, :, :self._length]

    def _append(self, k: Tensor, v: Tensor) -> Tuple[Tensor, Tensor]:
        """Appends [N, H, T, hd] keys and values; returns the views of all."""
        if self._keys is not None:
            have = self._keys.shape[:2] + self._keys.shape[3:]
            new = k.shape[:2] + k.shape[3:]
            if new != have or k.dtype != self._keys.dtype or k.device != self._keys.device:
                raise ValueError(
                    f"kv_cache holds keys of batch, heads, head_dim {tuple(have)} "
                    f"({self._keys.dtype}, {self._keys.device}); this call's are "
                    f"{tuple(new)} ({k.dtype}, {k.device}): reset() it for another "
                    "sequence or module")
        end = self._length + k.shape[2]
        if self._keys is None or end > self._keys.shape[2]:
            size = max(end, self.capacity,
                       2 * (0 if self._keys is None else self._keys.shape[2]))
            grown = []
            for old, new in ((self._keys, k), (self._values, v)):
                buffer = new.new_empty(new.shape[:2] + (size,) + new.shape[3:])
                if old is not None:
                    buffer[:, :, :self._length] = old[:, :, :self._length]
                grown.append(buffer)
            self._keys, self._values = grown
        self._keys[:, :, self._length:end] = k
        self._values[:, :, self._length:end] = v
        self._length = end
        return self.keys, self.values


class _Scratch:
    """A float32 buffer per thread, reused while the shape asked for stays
    the same (not part of the module's state)."""

    def __init__(self) -> None:
        self._local = threading.local()

    def get(self, shape) -> Tensor:
        buffer = getattr(self._local, "buffer", None)
        if buffer is None or tuple(buffer.shape) != tuple(shape):
            buffer = torch.empty(shape, dtype=torch.float32)
            self._local.buffer = buffer
        return buffer

    def __deepcopy__(self, memo):
        return _Scratch()

    def __getstate__(self):
        return {}

    def __setstate__(self, state):
        self._local = threading.local()


def _is_causal_mask(attn_mask, seq_q, seq_k, alignment) -> bool:
    """Whether a 2-D attn_mask [L, S] is exactly the causal mask of
    `alignment` in torch.nn.MultiheadAttention's convention: bool True (or
    float -inf) above the diagonal, False (or 0) elsewhere. One pass over
    the mask; False for anything else, for a mask that requires grad (its
    gradient needs it read), and while torch.compile traces (the answer
    would depend on the mask's values)."""
    if (attn_mask.dim() != 2 or tuple(attn_mask.shape) != (seq_q, seq_k)
            or attn_mask.requires_grad or torch.compiler.is_compiling()):
        return False
    offset = seq_k - seq_q if alignment == "bottom_right" else 0
    above = torch.ones((seq_q, seq_k), dtype=torch.bool,
                       device=attn_mask.device).triu_(offset + 1)
    if attn_mask.dtype == torch.bool:
        return torch.equal(attn_mask, above)
    causal = torch.zeros((seq_q, seq_k), dtype=attn_mask.dtype, device=attn_mask.device)
    return torch.equal(attn_mask, causal.masked_fill_(above, -math.inf))


def _merge_masks(attn_mask, key_padding_mask, batch, heads, seq_q, seq_k, extra, dtype):
    """torch.nn.MultiheadAttention's masks (bool True = masked out, or float
    added) as one attn mask [N or 1, H or 1, L, S]: a keep-mask (True =
    attend) when both are bool, else an additive bias of the query's type.
    `extra` key columns (bias_kv, zero attention) are appended, allowed."""
    masks = []
    if attn_mask is not None:
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (seq_q, seq_k - extra):
                raise RuntimeError(
                    f"The shape of the 2D attn_mask is {tuple(attn_mask.shape)}, but should "
                    f"be {(seq_q, seq_k - extra)}.")
            attn_mask = attn_mask[None, None]
        elif attn_mask.dim() == 3:
            if tuple(attn_mask.shape) != (batch * heads, seq_q, seq_k - extra):
                raise RuntimeError(
                    f"The shape of the 3D attn_mask is {tuple(attn_mask.shape)}, but should "
                    f"be {(batch * heads, seq_q, seq_k - extra)}.")
            attn_mask = attn_mask.view(batch, heads, seq_q, seq_k - extra)
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")
        masks.append(attn_mask)
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (batch, seq_k - extra):
            raise RuntimeError(
                f"expecting key_padding_mask shape of {(batch, seq_k - extra)}, but got "
                f"{tuple(key_padding_mask.shape)}")
        masks.append(key_padding_mask[:, None, None, :])
    if not masks:
        return None
    if all(m.dtype == torch.bool for m in masks):
        masked = masks[0] if len(masks) == 1 else masks[0] | masks[1]
        keep = ~masked
        if extra:
            keep = F.pad(keep, (0, extra), value=True)
        return keep
    bias = None
    for m in masks:
        term = (torch.zeros(m.shape, dtype=dtype).masked_fill(m, -math.inf)
                if m.dtype == torch.bool else m.to(dtype))
        bias = term if bias is None else bias + term
    if extra:
        bias = F.pad(bias, (0, extra), value=0.0)
    return bias


class AdditiveAttention(nn.Module):
    """Additive (Bahdanau) attention, the tutorials' module on attn's kernel:
    score(q, k) = v . tanh(W_q q + W_k k), softmax over the keys, the
    weighted sum of the values.

    The parameters are the tutorials' (W_q: Linear(query_dim, attn_dim), W_k:
    Linear(key_dim, attn_dim), v: Linear(attn_dim, 1), none with a bias), so
    their state_dict loads here. forward(query, keys, values=None, mask=None)
    takes query [B, Sq, Dq] (or [B, Dq], or [B, 1, Dq] for one query per
    batch), keys [B, Sk, Dk], values [B, Sk, Dv] (the keys when None) and a
    keep-mask ([B, Sk] or [B or 1, Sq or 1, Sk], nonzero attends), and
    returns (context, weights): context [B, Sq, Dv] ([B, Dv] for a 2-D
    query), weights [B, Sq, Sk] float32 ([B, Sk] for a single query, as the
    tutorial's). need_weights=False skips the weights.

    Unlike the tutorials' -1e9 fill, a row whose keys are all masked gets
    context 0 and weights 0, not the uniform average. Gradients flow through
    the context (recomputed in PyTorch by blocks of rows for now); the
    weights are not differentiable.
    """

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int,
                 device=None, dtype=None) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.W_q = nn.Linear(query_dim, attn_dim, bias=False, **factory)
        self.W_k = nn.Linear(key_dim, attn_dim, bias=False, **factory)
        self.v = nn.Linear(attn_dim, 1, bias=False, **factory)

    def forward(self, query: Tensor, keys: Tensor, values: Optional[Tensor] = None,
                mask: Optional[Tensor] = None, need_weights: bool = True):
        values = keys if values is None else values
        single = query.dim() == 3 and query.shape[1] == 1
        result = additive_attention(query, keys, values, self.W_q.weight,
                                    self.W_k.weight, self.v.weight[0], mask,
                                    need_weights=need_weights)
        if not need_weights:
            return result, None
        context, weights = result
        if single:
            weights = weights[:, 0]
        return context, weights
