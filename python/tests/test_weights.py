"""attn.attention_weights (the weights kernel) against the contract in
float64 (docs/spec.md, "Attention weights"), across the spec's cases: every
dtype, masks (bool, bias, broadcast), causal alignments, windows, soft-cap,
GQA, dropout, the forward's LSE or the kernel's own, NaN and fully masked
rows; then its checks."""

import math

import numpy as np
import pytest
import torch

import attn
from conftest import naive_weights, random_qkv

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
#: docs/spec.md: max|W - ref| for f32 inputs, and bf16/f16 (the reference
#: takes the same rounded inputs).
TOLERANCE = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 1e-2}


def check(q, k, attn_mask=None, is_causal=False, scale=None, alignment="top_left",
          window=None, softcap=None, enable_gqa=False, with_lse=False, v=None):
    """The weights with and without the forward's LSE against the reference;
    exactly 0 wherever the reference is."""
    ref, _ = naive_weights(q, k, attn_mask, is_causal, scale, alignment, window, softcap)
    lse = None
    if with_lse:
        v = k if v is None else v
        _, lse = attn.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, is_causal=is_causal, scale=scale,
            enable_gqa=enable_gqa, causal_alignment=alignment, window=window,
            softcap=softcap, return_lse=True)
    got = attn.attention_weights(
        q, k, attn_mask, is_causal, scale, enable_gqa, causal_alignment=alignment,
        window=window, softcap=softcap, lse=lse)
    assert got.dtype == torch.float32 and got.shape == ref.shape
    assert (got.double() - ref).abs().max().item() <= TOLERANCE[q.dtype]
    assert bool((got[ref == 0] == 0).all())
    return got, ref


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_lse", [False, True])
def test_plain(dtype, with_lse):
    # Lengths that are not multiples of a key block (64) or a row block (4).
    q, k, _ = random_qkv(2, 3, 3, 37, 131, 48, dtype=dtype)
    got, _ = check(q, k, with_lse=with_lse)
    rows = got.sum(-1)
    assert torch.allclose(rows, torch.ones_like(rows), atol=1e-5)


@pytest.mark.parametrize("alignment", ["top_left", "bottom_right"])
@pytest.mark.parametrize("shape", [(70, 70), (33, 150), (150, 33)])
def test_causal(alignment, shape):
    q, k, _ = random_qkv(1, 2, 2, shape[0], shape[1], 32)
    got, ref = check(q, k, is_causal=True, alignment=alignment, with_lse=True)
    # Excluded positions are exactly 0, and top-left with Sq > Sk or
    # bottom-right with Sq > Sk have fully masked rows: 0 there too.
    assert bool((got[ref == 0] == 0).all())


@pytest.mark.parametrize("window", [(8, 0), (5, 7), (None, 3), (20, None)])
def test_window(window):
    q, k, _ = random_qkv(1, 2, 2, 90, 100, 16)
    check(q, k, window=window, alignment="bottom_right")
    check(q, k, window=window, is_causal=True, with_lse=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["bool", "bias"])
@pytest.mark.parametrize("mask_shape", [(2, 4, 21, 77), (1, 1, 21, 77), (2, 1, 1, 77), (77,)])
def test_mask(dtype, kind, mask_shape):
    q, k, _ = random_qkv(2, 4, 4, 21, 77, 32, dtype=dtype)
    generator = torch.Generator().manual_seed(3)
    if kind == "bool":
        mask = torch.rand(mask_shape, generator=generator) > 0.3
    else:
        mask = torch.randn(mask_shape, generator=generator).to(dtype)
        mask[..., 5] = -math.inf
    check(q, k, mask, with_lse=True)
    check(q, k, mask, is_causal=True)


def test_gqa_softcap_scale():
    q, k, _ = random_qkv(2, 8, 2, 45, 70, 64)
    check(q, k, enable_gqa=True, softcap=5.0, scale=0.3, with_lse=True)
    check(q, k, enable_gqa=True, softcap=2.0, is_causal=True, alignment="bottom_right")


def test_fully_masked_rows_are_zero():
    q, k, _ = random_qkv(1, 2, 2, 9, 40, 16)
    mask = torch.ones(9, 40, dtype=torch.bool)
    mask[3] = False
    for lse in (False, True):
        got, _ = check(q, k, mask, with_lse=lse)
        assert bool((got[:, :, 3] == 0).all())
        assert not got.isnan().any()


@pytest.mark.parametrize("with_lse", [False, True])
def test_nan(with_lse):
    q, k, _ = random_qkv(1, 1, 1, 12, 70, 16)
    q[0, 0, 4, 2] = math.nan          # a NaN query row: NaN where allowed
    k[0, 0, 69, 1] = math.nan         # a NaN key outside row 0..5's band
    lse = None
    if with_lse:
        _, lse = attn.scaled_dot_product_attention(q, k, k, is_causal=True,
                                                   causal_alignment="top_left",
                                                   return_lse=True)
    got = attn.attention_weights(q, k, is_causal=True, lse=lse)
    band = torch.ones(12, 70, dtype=torch.bool).tril()
    assert bool(got[0, 0, 4][band[4]].isnan().all())
    assert bool((got[0, 0, 4][~band[4]] == 0).all())
    # Every other row is finite: the NaN key is excluded for all of them.
    others = torch.cat([got[0, 0, :4], got[0, 0, 5:]])
    assert not others.isnan().any()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dropout_weights_multiply_v(dtype):
    # The weights with dropout are the matrix that multiplied V: W @ V is
    # the forward's output for the same seed.
    q, k, v = random_qkv(2, 4, 2, 50, 90, 32, dtype=dtype)
    seed, p = 1234, 0.25
    out, lse = attn.scaled_dot_product_attention(
        q, k, v, dropout_p=p, dropout_seed=seed, is_causal=True, enable_gqa=True,
        return_lse=True)
    got = attn.attention_weights(q, k, is_causal=True, enable_gqa=True, lse=lse,
                                 dropout_p=p, dropout_seed=seed)
    keep = torch.from_numpy(attn.dropout_mask(2, 4, 50, 90, p, seed))
    ref, _ = naive_weights(q, k, is_causal=True, keep=keep, dropout_p=p)
    assert (got.double() - ref).abs().max().item() <= 4 * TOLERANCE[dtype]
    assert torch.equal(got == 0, ref == 0)
    v_heads = v.double().repeat_interleave(2, dim=1)
    product = got.double() @ v_heads
    scale = product.abs().max().item()
    assert (out.double() - product).abs().max().item() / scale <= 2 * TOLERANCE[dtype]


def test_strided_inputs_and_3d():
    # [B, S, H, D] buffers seen as [B, H, S, D]; 3-D inputs without B.
    q_bshd = torch.randn(2, 33, 4, 16)
    k_bshd = torch.randn(2, 50, 4, 16)
    check(q_bshd.transpose(1, 2), k_bshd.transpose(1, 2), is_causal=True)
    q, k = torch.randn(4, 10, 8), torch.randn(4, 12, 8)
    got = attn.attention_weights(q, k)
    ref, _ = naive_weights(q, k)
    assert got.shape == (4, 10, 12)
    assert (got.double() - ref).abs().max().item() <= 1e-5


def test_numpy():
    q, k, _ = random_qkv(1, 2, 2, 6, 9, 8)
    got = attn.attention_weights(q.numpy(), k.numpy(), is_causal=True)
    assert isinstance(got, np.ndarray) and got.dtype == np.float32
    ref, _ = naive_weights(q, k, is_causal=True)
    assert np.abs(got - ref.numpy()).max() <= 1e-5


def test_every_element_is_written():
    # Poisoned output: the kernel writes every element, zeros included.
    q, k, _ = random_qkv(1, 2, 2, 19, 70, 16)
    spec = attn._core.kernel_spec("f32", 16, 16, None, True, "bottom_right", 4, None,
                                  None, None, False, weights=True)
    weights = torch.full((1, 2, 19, 70), math.nan)
    attn.kernel(spec).run_weights(q, k, None, None, weights)
    ref, _ = naive_weights(q, k, is_causal=True, alignment="bottom_right", window=(4, None))
    assert (weights.double() - ref).abs().max().item() <= 1e-5


@pytest.mark.parametrize("offset", [0, 1, 16], ids=["aligned", "off4B", "off64B"])
def test_whole_key_blocks_into_any_buffer(offset):
    # Rows of whole 64-key blocks (Sk = 192) that start a cache line are
    # written by non-temporal stores, the others (the buffer moved by one
    # element) by masked stores: the same weights, every element written,
    # the zeros outside the band included.
    q, k, _ = random_qkv(1, 2, 2, 70, 192, 16, seed=4)
    count = 2 * 70 * 192
    storage = torch.full((count + offset,), math.nan)
    buffer = storage[offset:].view(1, 2, 70, 192)
    got = attn.attention_weights(q, k, is_causal=True, causal_alignment="bottom_right",
                                 window=(100, 0), out=buffer)
    assert got is buffer
    ref, _ = naive_weights(q, k, is_causal=True, alignment="bottom_right", window=(100, 0))
    assert (buffer.double() - ref).abs().max().item() <= 1e-5
    assert bool((buffer[ref == 0] == 0).all())


def test_out():
    q, k, _ = random_qkv(1, 2, 2, 10, 20, 16)
    buffer = torch.full((1, 20, 2, 10), math.nan).permute(0, 2, 3, 1)  # strided
    got = attn.attention_weights(q, k, is_causal=True, out=buffer)
    assert got is buffer
    ref, _ = naive_weights(q, k, is_causal=True)
    assert (buffer.double() - ref).abs().max().item() <= 1e-5
    with pytest.raises(attn.Error, match="weights: element type"):
        attn.attention_weights(q, k, out=torch.empty(1, 2, 10, 20, dtype=torch.float64))
    with pytest.raises(attn.Error, match="weights: dim 3"):
        attn.attention_weights(q, k, out=torch.empty(1, 2, 10, 21))
    base = torch.randn(400)
    with pytest.raises(attn.Error, match="overlaps"):
        attn.attention_weights(base[:320].view(1, 2, 10, 16), k,
                               out=base.view(1, 2, 10, 20))


def test_errors():
    q, k, _ = random_qkv(1, 2, 2, 8, 9, 16)
    with pytest.raises(attn.Error, match="over the limit"):
        attn.attention_weights(q, k, max_bytes=100)
    with pytest.raises(attn.Error, match=r"weights: \[B, Hq, Sq, Sk\] = \[4096, 64, 8192, 8192\]"):
        # 8 TiB of weights from two 64-byte buffers seen with stride 0.
        huge = torch.zeros(16).as_strided((4096, 64, 8192, 16), (0, 0, 0, 1))
        attn.attention_weights(huge, huge)
    with pytest.raises(attn.Error, match="key: dim 3"):
        attn.attention_weights(q, torch.randn(1, 2, 9, 8))
    with pytest.raises(attn.Error, match="lse: dim 2"):
        attn.attention_weights(q, k, lse=torch.zeros(1, 2, 7))
    with pytest.raises(attn.Error, match="lse: element type"):
        attn.attention_weights(q, k, lse=torch.zeros(1, 2, 8, dtype=torch.float64))
    with pytest.raises(attn.Error, match="needs the forward's dropout_seed"):
        attn.attention_weights(q, k, dropout_p=0.1)
    with pytest.raises(attn.Error, match="enable_gqa"):
        attn.attention_weights(q, torch.randn(1, 1, 9, 16))
    with pytest.raises(attn.Error, match="mask: dim 3"):
        attn.attention_weights(q, k, torch.ones(8, 5, dtype=torch.bool))
    kernel = attn.kernel(attn._core.kernel_spec("f32", 16, 16, None, False, "top_left",
                                                None, None, None, None, False))
    with pytest.raises(attn.Error, match="not a weights kernel"):
        kernel.run_weights(q, k, None, None, torch.empty(1, 2, 8, 9))
