"""Attention sinks (docs/spec.md, "Attention sinks") through
attn.scaled_dot_product_attention(..., sinks=): the forward against the
contract in float64 across the spec's cases, the rows the sink changes
(fully masked rows, -inf, +inf and NaN sinks), the gradients of Q, K, V and
the sinks against float64 autograd, torch.compile, NumPy, and bad sinks."""

import math

import numpy as np
import pytest
import torch

import attn
from conftest import (TOLERANCE, gradients, naive_attention, naive_weights, random_qkv,
                      relative_error)

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
GRAD_TOLERANCE = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 2e-2}


def random_sinks(heads, seed=3):
    """Sinks that matter: about the size of the rows' maxima, one far above
    them (the sink takes nearly all the weight) where there are 3 heads or
    more."""
    sinks = torch.randn(heads, generator=torch.Generator().manual_seed(seed)) * 2 + 2
    if heads >= 3:
        sinks[2] = 30.0
    return sinks


def check_forward(q, k, v, sinks, **options):
    out, lse = attn.scaled_dot_product_attention(q, k, v, sinks=sinks, return_lse=True,
                                                 **options)
    mask = options.get("attn_mask")
    if mask is not None and mask.dtype != torch.bool:
        mask = mask.double()
    ref, ref_lse = naive_attention(
        q, k, v, mask, options.get("is_causal", False), options.get("scale"),
        options.get("causal_alignment", "top_left"), options.get("window"),
        options.get("softcap"), sinks=sinks)
    assert out.dtype == q.dtype and out.shape == ref.shape
    assert relative_error(out, ref) <= TOLERANCE[q.dtype]
    finite = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse), finite)
    assert (lse[finite] - ref_lse[finite]).abs().max() <= 1e-4 * max(1.0, ref_lse[finite].abs().max())
    return out, lse


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_plain_and_causal(dtype):
    q, k, v = random_qkv(2, 4, 4, 37, 45, 32, dtype=dtype)
    check_forward(q, k, v, random_sinks(4))
    check_forward(q, k, v, random_sinks(4), is_causal=True, causal_alignment="bottom_right")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gqa_masks_window_softcap(dtype):
    q, k, v = random_qkv(2, 6, 2, 70, 131, 48, dv=24, dtype=dtype, seed=5)
    sinks = random_sinks(6)
    check_forward(q, k, v, sinks, enable_gqa=True, window=(20, 5), softcap=4.0)
    keep = torch.rand(1, 1, 70, 131, generator=torch.Generator().manual_seed(2)) > 0.3
    check_forward(q, k, v, sinks, enable_gqa=True, attn_mask=keep)
    bias = torch.randn(2, 1, 70, 131).to(dtype)
    bias[..., ::3] = -math.inf
    check_forward(q, k, v, sinks, enable_gqa=True, attn_mask=bias)


@pytest.mark.parametrize("seq_q", [1, 3], ids=lambda s: f"sq{s}")
def test_decoding_and_split_keys(seq_q):
    # One key/value head over 3000 keys: the runtime splits the keys across
    # the threads, and the sink joins once, in the merge.
    q, k, v = random_qkv(1, 8, 1, seq_q, 3000, 64, seed=7)
    check_forward(q, k, v, random_sinks(8), enable_gqa=True, is_causal=True,
                  causal_alignment="bottom_right")


def test_fully_masked_rows_give_zero_and_the_sink():
    # Bottom-right with Sq > Sk: the first rows see no key. With a sink
    # their output is 0 and their LSE the sink; a sink of -inf is no sink.
    q, k, v = random_qkv(1, 3, 3, 20, 8, 16)
    sinks = torch.tensor([0.5, -math.inf, -3.0])
    out, lse = check_forward(q, k, v, sinks, is_causal=True, causal_alignment="bottom_right")
    assert torch.equal(out[:, :, :12], torch.zeros_like(out[:, :, :12]))
    assert torch.equal(lse[0, :, 0], torch.tensor([0.5, -math.inf, -3.0]))
    # No key at all (Sk = 0).
    out, lse = attn.scaled_dot_product_attention(q, k[:, :, :0], v[:, :, :0], sinks=sinks,
                                                 return_lse=True)
    assert torch.equal(out, torch.zeros_like(out))
    assert torch.equal(lse, sinks.reshape(1, 3, 1).expand(1, 3, 20))


def test_minus_inf_sinks_are_no_sinks():
    q, k, v = random_qkv(2, 4, 4, 33, 40, 32)
    none, none_lse = attn.scaled_dot_product_attention(q, k, v, return_lse=True)
    out, lse = attn.scaled_dot_product_attention(q, k, v, return_lse=True,
                                                 sinks=torch.full((4,), -math.inf))
    assert torch.equal(out, none) and torch.equal(lse, none_lse)


def test_infinite_and_nan_sinks():
    # +inf takes all the weight (O = 0, LSE = +inf); NaN makes its head NaN.
    q, k, v = random_qkv(1, 3, 3, 9, 17, 16)
    sinks = torch.tensor([math.inf, math.nan, 1.0])
    out, lse = attn.scaled_dot_product_attention(q, k, v, sinks=sinks, return_lse=True)
    assert torch.equal(out[:, 0], torch.zeros_like(out[:, 0]))
    assert torch.equal(lse[:, 0], torch.full_like(lse[:, 0], math.inf))
    assert out[:, 1].isnan().all() and lse[:, 1].isnan().all()
    assert torch.isfinite(out[:, 2]).all() and torch.isfinite(lse[:, 2]).all()


def test_weights_sum_to_one_minus_the_sink():
    # The weights of the keys sum to 1 - exp(sink - LSE): with V = 1, O is
    # that sum.
    q, k, _ = random_qkv(1, 4, 4, 21, 30, 16)
    v = torch.ones(1, 4, 30, 8)
    sinks = random_sinks(4)
    out, lse = attn.scaled_dot_product_attention(q, k, v, sinks=sinks, return_lse=True)
    expected = 1 - torch.exp(sinks.reshape(1, 4, 1) - lse)
    assert (out[..., 0] - expected).abs().max() <= 1e-5


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("with_lse", [False, True], ids=["o", "o_and_lse"])
def test_gradients(dtype, with_lse):
    q, k, v = random_qkv(2, 4, 2, 29, 41, 32, dv=16, dtype=dtype, seed=11)
    sinks = random_sinks(4)
    generator = torch.Generator().manual_seed(4)
    grad_out = torch.randn(2, 4, 29, 16, generator=generator)
    grad_lse = torch.randn(2, 4, 29, generator=generator) if with_lse else None
    options = dict(is_causal=True, causal_alignment="bottom_right")

    def ours(q, k, v, s):
        return attn.scaled_dot_product_attention(q, k, v, sinks=s, enable_gqa=True,
                                                 return_lse=True, **options)

    def ref(q, k, v, s):
        return naive_attention(q, k, v, None, True, None, "bottom_right", sinks=s)

    _, _, got = gradients(ours, (q, k, v, sinks), grad_out, grad_lse)
    _, _, want = gradients(ref, (q.double(), k.double(), v.double(), sinks.double()),
                           grad_out.double(), None if grad_lse is None else grad_lse.double())
    for name, g, w in zip(("dq", "dk", "dv", "dsinks"), got, want):
        assert not torch.isnan(g).any(), name
        assert relative_error(g, w) <= GRAD_TOLERANCE[dtype], name
    assert got[3].dtype == sinks.dtype


def test_gradient_of_sinks_alone_and_with_dropout():
    # Only the sinks learn (frozen Q, K, V); then with dropout, whose kept
    # weights the sink's gradient sees through the dropped O.
    q, k, v = random_qkv(1, 4, 4, 25, 25, 16, seed=2)
    sinks = random_sinks(4).requires_grad_()
    out = attn.scaled_dot_product_attention(q, k, v, sinks=sinks, is_causal=True)
    grad_out = torch.randn_like(out)
    (got,) = torch.autograd.grad(out, sinks, grad_out)
    s = sinks.detach().double().requires_grad_()
    ref, _ = naive_attention(q, k, v, is_causal=True, sinks=s)
    (want,) = torch.autograd.grad(ref, s, grad_out.double())
    assert relative_error(got, want) <= 1e-4

    seed, p = 1234, 0.25
    out = attn.scaled_dot_product_attention(q, k, v, dropout_p=p, dropout_seed=seed,
                                            sinks=sinks, is_causal=True)
    (got,) = torch.autograd.grad(out, sinks, grad_out)
    keep = torch.from_numpy(attn.dropout_mask(1, 4, 25, 25, p, seed))
    ref, _ = naive_attention(q, k, v, is_causal=True, keep=keep, dropout_p=p, sinks=s)
    assert relative_error(out, ref) <= 1e-5
    (want,) = torch.autograd.grad(ref, s, grad_out.double())
    assert relative_error(got, want) <= 1e-4


def test_learns_a_sink_in_a_module():
    # A sink as an nn.Parameter in bf16 (as open-weight checkpoints store
    # it), trained a few steps: its gradient arrives in its own dtype.
    sinks = torch.nn.Parameter(torch.zeros(4, dtype=torch.bfloat16))
    q, k, v = random_qkv(1, 4, 4, 16, 16, 16, dtype=torch.bfloat16)
    optimizer = torch.optim.SGD([sinks], lr=1.0)
    for _ in range(3):
        optimizer.zero_grad()
        out = attn.scaled_dot_product_attention(q, k, v, sinks=sinks)
        out.float().pow(2).mean().backward()
        assert sinks.grad is not None and sinks.grad.dtype == torch.bfloat16
        optimizer.step()
    # The loss pushes the sink up: a larger sink shrinks O.
    assert (sinks.detach() > 0).all()


def test_compiled_fullgraph():
    q, k, v = random_qkv(1, 4, 4, 19, 19, 16)
    sinks = random_sinks(4).requires_grad_()

    def f(q, k, v, s):
        return attn.scaled_dot_product_attention(q, k, v, is_causal=True, sinks=s)

    eager = f(q, k, v, sinks)
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")(q, k, v, sinks)
    assert torch.equal(eager, compiled)
    compiled.sum().backward()
    assert sinks.grad is not None and torch.isfinite(sinks.grad).all()


def test_numpy_and_3d_inputs():
    q, k, v = random_qkv(1, 4, 4, 11, 13, 16)
    sinks = random_sinks(4)
    out = attn.scaled_dot_product_attention(q[0].numpy(), k[0].numpy(), v[0].numpy(),
                                            sinks=sinks.numpy())
    assert isinstance(out, np.ndarray) and out.shape == (4, 11, 16)
    ref, _ = naive_attention(q, k, v, sinks=sinks)
    assert relative_error(torch.from_numpy(out), ref[0]) <= 1e-5
    out3 = attn.scaled_dot_product_attention(q[0], k[0], v[0], sinks=sinks)
    assert relative_error(out3, ref[0]) <= 1e-5


@pytest.mark.parametrize("sinks, message", [
    (torch.zeros(3), r"sinks: shape is \[3\] but must be \[Hq\] = \[4\]"),
    (torch.zeros(1, 4), r"sinks: shape is \[1, 4\] but must be \[Hq\] = \[4\]"),
])
def test_bad_sinks(sinks, message):
    q, k, v = random_qkv(1, 4, 4, 5, 6, 16)
    with pytest.raises(attn.Error, match=message):
        attn.scaled_dot_product_attention(q, k, v, sinks=sinks)
    with pytest.raises(attn.Error, match=message):
        attn.scaled_dot_product_attention(q.numpy(), k.numpy(), v.numpy(),
                                          sinks=sinks.numpy())


def test_a_kernel_with_sinks_refuses_a_call_without():
    kernel = attn.kernel("name=k,dtype=f32,d=16,sinks")
    assert kernel.sinks
    q, k, v = (t.numpy() for t in random_qkv(1, 2, 2, 3, 4, 16))
    out = np.empty_like(q)
    with pytest.raises(attn.Error, match="sinks: kernel 'k' takes attention sinks"):
        kernel.run(q, k, v, None, out, None)
    with pytest.raises(attn.Error, match="element type is f16 but the sink logits are always f32"):
        kernel.run(q, k, v, None, out, None, sinks=np.zeros(2, dtype=np.float16))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_attention_weights_with_sinks(dtype):
    # The weights of a forward with sinks: normalized with the sink's
    # column, so that they times V are its output.
    q, k, v = random_qkv(2, 4, 2, 23, 31, 16, dtype=dtype, seed=9)
    sinks = random_sinks(4)
    weights = attn.attention_weights(q, k, is_causal=True, enable_gqa=True, sinks=sinks)
    ref, _ = naive_attention(q, k, v, is_causal=True, sinks=sinks)
    want, _ = naive_weights(q, k, is_causal=True, sinks=sinks)
    assert (weights - want).abs().max() <= TOLERANCE[dtype]
    out = weights @ v.float().repeat_interleave(2, dim=1)
    assert relative_error(out, ref) <= TOLERANCE[dtype]
    # NumPy in, NumPy out; and lse and sinks are one or the other.
    w_np = attn.attention_weights(q.float().numpy(), k.float().numpy(), is_causal=True,
                                  enable_gqa=True, sinks=sinks.numpy())
    assert isinstance(w_np, np.ndarray) and w_np.shape == (2, 4, 23, 31)
    with pytest.raises(attn.Error, match="give lse or sinks, not both"):
        attn.attention_weights(q, k, lse=torch.zeros(2, 4, 23), sinks=sinks)
