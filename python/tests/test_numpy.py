"""NumPy arrays in, NumPy arrays out, against a float64 NumPy reference."""

import numpy as np
import pytest

import attn


def reference(q, k, v, mask=None, is_causal=False):
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    allowed = np.ones(s.shape[-2:], dtype=bool)
    if mask is not None:
        if mask.dtype == np.bool_:
            allowed = allowed & mask
        else:
            s = s + mask
    if is_causal:
        allowed = allowed & np.tri(*s.shape[-2:], dtype=bool)
    s = np.where(allowed, s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def relative_error(out, ref):
    return np.abs(out.astype(np.float64) - ref).max() / np.abs(ref).max()


def random(shape, dtype, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype,tolerance", [(np.float32, 1e-5), (np.float16, 1e-2)],
                         ids=["f32", "f16"])
def test_numpy_causal_gqa(dtype, tolerance):
    q = random((2, 8, 40, 32), dtype, 0)
    k = random((2, 2, 40, 32), dtype, 1)
    v = random((2, 2, 40, 32), dtype, 2)
    out = attn.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    assert isinstance(out, np.ndarray) and out.dtype == dtype and out.shape == (2, 8, 40, 32)
    assert relative_error(out, reference(q, k, v, is_causal=True)) <= tolerance


def test_numpy_bool_mask_broadcast():
    q, k, v = (random((1, 4, 20, 16), np.float32, s) for s in range(3))
    mask = np.random.default_rng(5).random((20, 20)) > 0.5
    mask[:, 0] = True
    out = attn.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert relative_error(out, reference(q, k, v, mask=mask)) <= 1e-5


def test_numpy_float_bias():
    q, k, v = (random((1, 2, 20, 16), np.float32, s) for s in range(3))
    bias = random((1, 1, 20, 20), np.float32, 7)
    out = attn.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    assert relative_error(out, reference(q, k, v, mask=bias)) <= 1e-5


def test_numpy_bshd_views_and_lse():
    # Arrays stored [B, S, H, D], seen as [B, H, S, D] without a copy.
    q = random((2, 30, 4, 16), np.float32, 0).transpose(0, 2, 1, 3)
    k = random((2, 50, 4, 16), np.float32, 1).transpose(0, 2, 1, 3)
    v = random((2, 50, 4, 16), np.float32, 2).transpose(0, 2, 1, 3)
    assert not q.flags.c_contiguous
    out, lse = attn.scaled_dot_product_attention(q, k, v, return_lse=True)
    assert relative_error(out, reference(q, k, v)) <= 1e-5
    s = q.astype(np.float64) @ np.swapaxes(k.astype(np.float64), -1, -2) / 4.0
    expected = np.log(np.exp(s - s.max(-1, keepdims=True)).sum(-1)) + s.max(-1)
    assert lse.dtype == np.float32 and np.abs(lse - expected).max() <= 1e-4


def test_numpy_three_dimensional():
    q, k, v = (random((3, 10, 8), np.float32, s) for s in range(3))
    out = attn.scaled_dot_product_attention(q, k, v)
    assert out.shape == (3, 10, 8)
    assert relative_error(out, reference(q[None], k[None], v[None])[0]) <= 1e-5


def test_read_only_inputs():
    q, k, v = (random((1, 2, 10, 8), np.float32, s) for s in range(3))
    for x in (q, k, v):
        x.flags.writeable = False
    out = attn.scaled_dot_product_attention(q, k, v)
    assert relative_error(out, reference(q, k, v)) <= 1e-5
