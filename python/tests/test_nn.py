"""attn.nn.MultiheadAttention against torch.nn.MultiheadAttention with the
same weights (load_state_dict): outputs, weights (averaged or per head),
masks of every kind, the layouts, bias_kv, zero attention, kdim/vdim, the
gradients, and dropout."""

import math

import pytest
import torch
from torch import nn

import attn
import attn.nn

pytestmark = pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")

TOL = 2e-5


def pair(embed_dim=32, num_heads=4, seed=0, **kwargs):
    torch.manual_seed(seed)
    ref = nn.MultiheadAttention(embed_dim, num_heads, **kwargs)
    ours = attn.nn.MultiheadAttention(embed_dim, num_heads, **kwargs)
    # Parameters of the torch module, some made nonzero (torch zeroes biases).
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.1 * torch.randn_like(p))
    missing = ours.load_state_dict(ref.state_dict())
    assert not missing.missing_keys and not missing.unexpected_keys
    return ref, ours


def close(a, b, tol=TOL):
    assert a.shape == b.shape
    scale = max(b.abs().max().item(), 1.0)
    assert (a - b).abs().max().item() / scale <= tol, (a - b).abs().max().item()


def inputs(batch, seq_q, seq_k, embed, kdim=None, vdim=None, batch_first=False, seed=1):
    g = torch.Generator().manual_seed(seed)
    shape = lambda s, e: (batch, s, e) if batch_first else (s, batch, e)  # noqa: E731
    q = torch.randn(shape(seq_q, embed), generator=g)
    k = torch.randn(shape(seq_k, kdim or embed), generator=g)
    v = torch.randn(shape(seq_k, vdim or embed), generator=g)
    return q, k, v


def test_parameters_match_torch():
    ref, ours = pair(kdim=24, vdim=16, add_bias_kv=True)
    names = lambda m: [(n, tuple(p.shape)) for n, p in m.named_parameters()]  # noqa: E731
    assert names(ours) == names(ref)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("average", [True, False])
def test_self_attention(batch_first, average):
    ref, ours = pair(batch_first=batch_first)
    x, _, _ = inputs(3, 11, 11, 32, batch_first=batch_first)
    got, got_w = ours(x, x, x, average_attn_weights=average)
    want, want_w = ref(x, x, x, average_attn_weights=average)
    close(got, want)
    close(got_w, want_w)


@pytest.mark.parametrize("kind", ["bool2d", "float2d", "bool3d", "float3d"])
@pytest.mark.parametrize("padding", [None, "bool", "float"])
def test_masks(kind, padding):
    ref, ours = pair(batch_first=True)
    q, k, v = inputs(2, 7, 9, 32, batch_first=True)
    g = torch.Generator().manual_seed(5)
    shape = (7, 9) if kind.endswith("2d") else (2 * 4, 7, 9)
    if kind.startswith("bool"):
        attn_mask = torch.rand(shape, generator=g) > 0.7
        attn_mask[..., 0] = False  # no row fully masked (torch gives NaN there)
    else:
        attn_mask = torch.randn(shape, generator=g)
    kpm = None
    if padding == "bool":
        kpm = torch.zeros(2, 9, dtype=torch.bool)
        kpm[0, 6:] = True
    elif padding == "float":
        kpm = torch.randn(2, 9, generator=g)
    got, got_w = ours(q, k, v, key_padding_mask=kpm, attn_mask=attn_mask,
                      average_attn_weights=False)
    want, want_w = ref(q, k, v, key_padding_mask=kpm, attn_mask=attn_mask,
                       average_attn_weights=False)
    close(got, want)
    close(got_w, want_w)


def test_causal_cross_kdim_bias_kv_zero_attn():
    ref, ours = pair(kdim=24, vdim=16, add_bias_kv=True, add_zero_attn=True, bias=False)
    q, k, v = inputs(2, 5, 8, 32, kdim=24, vdim=16)
    mask = nn.Transformer.generate_square_subsequent_mask(8)[:5]
    got, got_w = ours(q, k, v, attn_mask=mask)
    want, want_w = ref(q, k, v, attn_mask=mask)
    close(got, want)
    close(got_w, want_w)
    # is_causal alone: attn applies the causal mask itself.
    x, _, _ = inputs(2, 6, 6, 32, seed=3)
    ref2, ours2 = pair(seed=4)
    causal = nn.Transformer.generate_square_subsequent_mask(6)
    close(ours2(x, x, x, is_causal=True)[0], ref2(x, x, x, attn_mask=causal, is_causal=True)[0])


def test_unbatched_and_no_weights():
    ref, ours = pair()
    q, k, v = inputs(1, 4, 6, 32)
    q, k, v = q[:, 0], k[:, 0], v[:, 0]
    got, got_w = ours(q, k, v)
    want, want_w = ref(q, k, v)
    close(got, want)
    close(got_w, want_w)
    out, weights = ours(q, k, v, need_weights=False)
    assert weights is None
    close(out, want)


def test_fully_masked_rows_give_zero():
    _, ours = pair(batch_first=True)
    q, k, v = inputs(1, 3, 4, 32, batch_first=True)
    kpm = torch.ones(1, 4, dtype=torch.bool)  # every key padded
    out, weights = ours(q, k, v, key_padding_mask=kpm)
    bias = ours.out_proj.bias.detach()
    assert torch.allclose(out, bias.expand_as(out)) and not out.isnan().any()
    assert bool((weights == 0).all())


def test_gradients_match_torch():
    ref, ours = pair(batch_first=True)
    x, _, _ = inputs(2, 9, 9, 32, batch_first=True)
    xr = x.clone().requires_grad_(True)
    xo = x.clone().requires_grad_(True)
    mask = torch.rand(9, 9, generator=torch.Generator().manual_seed(2)) > 0.8
    mask.fill_diagonal_(False)
    ref(xr, xr, xr, attn_mask=mask)[0].square().sum().backward()
    ours(xo, xo, xo, attn_mask=mask)[0].square().sum().backward()
    close(xo.grad, xr.grad, 1e-4)
    for (name, p), q in zip(ref.named_parameters(), ours.parameters()):
        close(q.grad, p.grad, 1e-4)


def test_dropout_weights_are_the_ones_used():
    _, ours = pair(batch_first=True, dropout=0.3)
    ours.train()
    x, _, _ = inputs(2, 16, 16, 32, batch_first=True)
    torch.manual_seed(7)
    out, weights = ours(x, x, x, average_attn_weights=False)
    dropped = (weights == 0).float().mean().item()
    assert 0.2 < dropped < 0.4
    # The output is out_proj(weights @ V): the returned weights multiplied V.
    q, k, v = ours._project(x, x, x)
    v = v.unflatten(-1, (4, 8)).transpose(1, 2)
    context = (weights @ v).transpose(1, 2).flatten(2)
    close(out, ours.out_proj(context), 1e-5)
    ours.eval()
    _, weights = ours(x, x, x)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 16), atol=1e-5)


def test_torch_compile_fullgraph():
    _, ours = pair(batch_first=True)
    ours.eval()
    x, _, _ = inputs(2, 5, 5, 32, batch_first=True)
    compiled = torch.compile(ours, fullgraph=True)
    with torch.no_grad():
        for need_weights in (False, True):
            got, got_w = compiled(x, x, x, need_weights=need_weights)
            want, want_w = ours(x, x, x, need_weights=need_weights)
            close(got, want)
            if need_weights:
                close(got_w, want_w)
