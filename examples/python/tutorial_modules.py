"""The tutorials' attention modules, written on attn.

Each module takes its attention function as an argument: `attn_attention`
(attn's fused kernel for the context, and its weights kernel, normalized by
the forward's log-sum-exp, for the weights) or `plain_attention` (the
tutorials' own: scores, masked_fill, softmax, dropout, weights @ V). The
same module with the same parameters gives the same results either way
(python/tests/test_examples.py checks it); attn's runs fused, trains through
attn's backward kernel, and gives 0 where every key is masked (plain
softmax gives NaN).

    ScaledDotProductAttention   (context, weights) of Q, K, V, with dropout
    SelfAttention               one head, d_k != d_v allowed
    MultiHeadAttention          W_q, W_k, W_v, W_o around the heads
    CrossAttention              queries from one sequence, keys/values from another
    EncoderLayer, DecoderLayer  the encoder-decoder's layers (causal
                                self-attention + cross-attention + feed-forward)
    Seq2Seq                     a small encoder-decoder (train_reverse.py)
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import attn

#: attention(q, k, v, mask, dropout_p, is_causal, need_weights) -> (context, weights)
Attention = Callable[..., "tuple[Tensor, Optional[Tensor]]"]


def attn_attention(q, k, v, mask=None, dropout_p=0.0, is_causal=False, need_weights=True):
    """attn's kernels. mask: a bool keep-mask (True = attend) broadcastable to
    the scores. The weights are the ones the context was computed with
    (dropout included: the same seed), not differentiable."""
    seed = int(torch.randint(0, 2**62, ())) if dropout_p > 0 else None
    context, lse = attn.scaled_dot_product_attention(
        q, k, v, mask, dropout_p, is_causal, return_lse=True, dropout_seed=seed)
    weights = None
    if need_weights:
        weights = attn.attention_weights(q, k, mask, is_causal, lse=lse,
                                         dropout_p=dropout_p, dropout_seed=seed)
    return context, weights


def plain_attention(q, k, v, mask=None, dropout_p=0.0, is_causal=False, need_weights=True):
    """The tutorials' attention, step by step."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if is_causal:
        causal = torch.ones(scores.shape[-2:], dtype=torch.bool).tril()
        mask = causal if mask is None else mask & causal
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if dropout_p > 0:
        weights = F.dropout(weights, dropout_p)
    return weights @ v, weights


class ScaledDotProductAttention(nn.Module):
    """softmax(Q·Kᵀ/√d_k)·V, returning (context, weights)."""

    def __init__(self, dropout: float = 0.0, attention: Attention = attn_attention):
        super().__init__()
        self.dropout = dropout
        self.attention = attention

    def forward(self, q, k, v, mask=None, is_causal=False):
        p = self.dropout if self.training else 0.0
        return self.attention(q, k, v, mask, p, is_causal)


class SelfAttention(nn.Module):
    """One head of self-attention: x [B, S, d_in] -> context [B, S, d_v] and
    weights [B, S, S]; d_k (queries and keys) may differ from d_v."""

    def __init__(self, d_in: int, d_k: int, d_v: int, attention: Attention = attn_attention):
        super().__init__()
        self.W_q = nn.Linear(d_in, d_k, bias=False)
        self.W_k = nn.Linear(d_in, d_k, bias=False)
        self.W_v = nn.Linear(d_in, d_v, bias=False)
        self.attend = ScaledDotProductAttention(attention=attention)

    def forward(self, x, mask=None):
        # [B, S, d] is attention's [H, S, d] with B as the heads.
        return self.attend(self.W_q(x), self.W_k(x), self.W_v(x), mask)


class MultiHeadAttention(nn.Module):
    """The classic module: project, split into heads, attend, merge, project.
    Returns (output [B, Sq, d_model], weights [B, H, Sq, Sk])."""

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0,
                 attention: Attention = attn_attention):
        super().__init__()
        assert d_model % num_heads == 0, "d_model must be divisible by num_heads"
        self.num_heads, self.d_k = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self.attend = ScaledDotProductAttention(dropout, attention)

    def split_heads(self, x):  # [B, S, d_model] -> [B, H, S, d_k], a view
        return x.unflatten(-1, (self.num_heads, self.d_k)).transpose(1, 2)

    def forward(self, query, key, value, mask=None, is_causal=False):
        q = self.split_heads(self.W_q(query))
        k = self.split_heads(self.W_k(key))
        v = self.split_heads(self.W_v(value))
        context, weights = self.attend(q, k, v, mask, is_causal)
        return self.W_o(context.transpose(1, 2).flatten(2)), weights


class CrossAttention(MultiHeadAttention):
    """Queries from x [B, Sq, d_model], keys and values from memory [B, Sk,
    d_model] (the encoder's output); memory_mask [B, 1, 1, Sk] keeps keys."""

    def forward(self, x, memory, memory_mask=None):
        return super().forward(x, memory, memory, memory_mask)


class FeedForward(nn.Sequential):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Dropout(dropout),
                         nn.Linear(d_ff, d_model))


class EncoderLayer(nn.Module):
    """Self-attention and a feed-forward network, each with a residual and
    a LayerNorm (post-norm, as in "Attention Is All You Need")."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, attention=attn_attention):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout, attention)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)

    def forward(self, x, mask=None):
        attended, weights = self.self_attn(x, x, x, mask)
        x = self.norm1(x + attended)
        return self.norm2(x + self.ff(x)), weights


class DecoderLayer(nn.Module):
    """Causal self-attention, cross-attention to the encoder's output, and a
    feed-forward network. Returns (x, self-attention weights, cross-attention
    weights)."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, attention=attn_attention):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout, attention)
        self.cross_attn = CrossAttention(d_model, num_heads, dropout, attention)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)

    def forward(self, x, memory, memory_mask=None):
        attended, self_weights = self.self_attn(x, x, x, is_causal=True)
        x = self.norm1(x + attended)
        attended, cross_weights = self.cross_attn(x, memory, memory_mask)
        x = self.norm2(x + attended)
        return self.norm3(x + self.ff(x)), self_weights, cross_weights


def positional_encoding(length: int, d_model: int) -> Tensor:
    """The sinusoidal encoding of "Attention Is All You Need"."""
    position = torch.arange(length)[:, None]
    rates = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    encoding = torch.zeros(length, d_model)
    encoding[:, 0::2] = torch.sin(position * rates)
    encoding[:, 1::2] = torch.cos(position * rates)
    return encoding


class Seq2Seq(nn.Module):
    """A small encoder-decoder: embeddings and positions, one encoder layer,
    one decoder layer, a projection to the vocabulary. forward returns the
    logits and the decoder's cross-attention weights [B, H, St, Ss]."""

    def __init__(self, vocab, d_model=64, num_heads=2, d_ff=128, max_len=32,
                 attention=attn_attention):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        # Scaled by √d_model below: start at unit size, as the positions.
        nn.init.normal_(self.embed.weight, std=d_model**-0.5)
        self.register_buffer("positions", positional_encoding(max_len, d_model))
        self.encoder = EncoderLayer(d_model, num_heads, d_ff, attention=attention)
        self.decoder = DecoderLayer(d_model, num_heads, d_ff, attention=attention)
        self.out = nn.Linear(d_model, vocab)
        self.scale = math.sqrt(d_model)

    def encode(self, source):
        x = self.embed(source) * self.scale + self.positions[: source.size(1)]
        return self.encoder(x)[0]

    def decode(self, target_in, memory):
        """Logits of each next token and the cross-attention weights, for
        the target's tokens so far (teacher forcing, or a greedy prefix)."""
        y = self.embed(target_in) * self.scale + self.positions[: target_in.size(1)]
        y, _, cross = self.decoder(y, memory)
        return self.out(y), cross

    def forward(self, source, target_in):
        return self.decode(target_in, self.encode(source))
