"""A multi-head self-attention module written the tutorial way, with attn as
its attention function, against the same module's naive attention."""

import math

import torch
import torch.nn as nn

import attn
from conftest import relative_error


def naive_attention(q, k, v, causal):
    """QKᵀ/√d, the causal mask filled with -inf, softmax, weights · V."""
    d_k = q.size(-1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if causal:
        seq = q.size(-2)
        mask = torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v


def attn_attention(q, k, v, causal):
    return attn.scaled_dot_product_attention(q, k, v, is_causal=causal)


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, attention=naive_attention):
        super().__init__()
        assert d_model % num_heads == 0
        self.num_heads = num_heads
        self.d_head = d_model // num_heads
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)
        self.attention = attention

    def split_heads(self, x):
        batch, seq, _ = x.shape
        return x.view(batch, seq, self.num_heads, self.d_head).transpose(1, 2)

    def forward(self, x, causal=True):
        batch, seq, d_model = x.shape
        q = self.split_heads(self.w_q(x))
        k = self.split_heads(self.w_k(x))
        v = self.split_heads(self.w_v(x))
        heads = self.attention(q, k, v, causal)
        merged = heads.transpose(1, 2).contiguous().view(batch, seq, d_model)
        return self.w_o(merged)


def test_multi_head_self_attention_module():
    torch.manual_seed(0)
    naive = MultiHeadSelfAttention(d_model=128, num_heads=4)
    fused = MultiHeadSelfAttention(d_model=128, num_heads=4, attention=attn_attention)
    fused.load_state_dict(naive.state_dict())
    x = torch.randn(2, 50, 128)
    with torch.no_grad():
        for causal in (True, False):
            expected = naive(x, causal).double()
            got = fused(x, causal)
            assert relative_error(got, expected) <= 1e-5


def test_module_with_autograd_enabled():
    # Forward only, but callable from a module whose weights require grad.
    torch.manual_seed(1)
    naive = MultiHeadSelfAttention(d_model=64, num_heads=2)
    fused = MultiHeadSelfAttention(d_model=64, num_heads=2, attention=attn_attention)
    fused.load_state_dict(naive.state_dict())
    x = torch.randn(1, 20, 64)
    assert relative_error(fused(x).detach(), naive(x).detach()) <= 1e-5
