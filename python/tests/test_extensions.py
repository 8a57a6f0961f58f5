"""The spec's extensions as keyword arguments: the log-sum-exp, sliding
windows, soft-capping and bottom-right alignment, against a naive float64
PyTorch reference (conftest.naive_attention)."""

import math

import pytest
import torch

import attn
from conftest import TOLERANCE, naive_attention, random_qkv, relative_error

DTYPES = [torch.float32, torch.bfloat16]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_lse_matches_logsumexp_of_the_scores(dtype):
    q, k, v = random_qkv(dtype=dtype, seq_q=50, seq_k=50)
    out, lse = attn.scaled_dot_product_attention(q, k, v, is_causal=True, return_lse=True)
    assert lse.dtype == torch.float32 and lse.shape == (2, 4, 50)
    scores = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(32)
    scores = scores.masked_fill(torch.ones(50, 50, dtype=torch.bool).triu(1), -math.inf)
    expected = torch.logsumexp(scores, dim=-1)
    assert (lse.double() - expected).abs().max().item() <= 1e-4
    ref, _ = naive_attention(q, k, v, is_causal=True)
    assert relative_error(out, ref) <= TOLERANCE[dtype]


def test_rows_with_nothing_allowed_give_zero_and_minus_inf_lse():
    q, k, v = random_qkv(seq_q=8, seq_k=8)
    mask = torch.ones(8, 8, dtype=torch.bool)
    mask[3] = False
    out, lse = attn.scaled_dot_product_attention(q, k, v, attn_mask=mask, return_lse=True)
    assert torch.isfinite(out).all()
    assert (out[:, :, 3] == 0).all()
    assert torch.isneginf(lse[:, :, 3]).all()
    ref, ref_lse = naive_attention(q, k, v, mask=mask)
    assert relative_error(out, ref) <= 1e-5


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "window,is_causal",
    [((8, 0), False), ((4, 3), False), ((None, 2), False), ((5, None), True)],
    ids=["local8", "band4-3", "left-unbounded", "causal-window5"],
)
def test_sliding_window(dtype, window, is_causal):
    q, k, v = random_qkv(dtype=dtype, seq_q=40, seq_k=40)
    out, lse = attn.scaled_dot_product_attention(q, k, v, is_causal=is_causal, window=window,
                                                 return_lse=True)
    ref, ref_lse = naive_attention(q, k, v, is_causal=is_causal, window=window)
    assert relative_error(out, ref) <= TOLERANCE[dtype]
    assert (lse.double() - ref_lse).abs().max().item() <= 1e-2


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_softcap(dtype):
    q, k, v = random_qkv(dtype=dtype)
    q = q * 4  # large logits, so that the cap matters
    out = attn.scaled_dot_product_attention(q, k, v, softcap=5.0, is_causal=True)
    ref, _ = naive_attention(q, k, v, softcap=5.0, is_causal=True)
    assert relative_error(out, ref) <= TOLERANCE[dtype]
    uncapped, _ = naive_attention(q, k, v, is_causal=True)
    assert relative_error(uncapped, ref) > 1e-2


def test_bottom_right_causal_for_decoding():
    # Four new queries against a cache of 60 keys: query i sees keys <= 56 + i.
    q, k, v = random_qkv(seq_q=4, seq_k=60)
    out = attn.scaled_dot_product_attention(q, k, v, is_causal=True,
                                            causal_alignment="bottom_right")
    ref, _ = naive_attention(q, k, v, is_causal=True, alignment="bottom_right")
    assert relative_error(out, ref) <= 1e-5


def test_bottom_right_window_without_causal():
    q, k, v = random_qkv(seq_q=10, seq_k=50)
    out = attn.scaled_dot_product_attention(q, k, v, window=(6, 2),
                                            causal_alignment="bottom_right")
    ref, _ = naive_attention(q, k, v, window=(6, 2), alignment="bottom_right")
    assert relative_error(out, ref) <= 1e-5


def test_everything_at_once():
    q, k, v = random_qkv(heads_q=8, heads_kv=2, seq_q=33, seq_k=65, d=16, dv=24)
    bias = torch.randn(1, 8, 1, 65)
    out, lse = attn.scaled_dot_product_attention(
        q, k, v, attn_mask=bias, is_causal=True, scale=0.5, enable_gqa=True,
        causal_alignment="bottom_right", window=(20, None), softcap=10.0, return_lse=True)
    ref, ref_lse = naive_attention(q, k, v, mask=bias, is_causal=True, scale=0.5,
                                   alignment="bottom_right", window=(20, None), softcap=10.0)
    assert relative_error(out, ref) <= 1e-5
    assert (lse.double() - ref_lse).abs().max().item() <= 1e-4
