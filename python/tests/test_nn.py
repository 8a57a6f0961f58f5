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


@pytest.mark.parametrize("bias", [False, True])
def test_causal_cross_kdim_bias_kv_zero_attn(bias):
    ref, ours = pair(kdim=24, vdim=16, add_bias_kv=True, add_zero_attn=True, bias=bias)
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


@pytest.mark.parametrize("need_weights", [False, True])
def test_causal_hint_is_checked(monkeypatch, need_weights):
    # torch's way of asking for causal attention: attn_mask and is_causal.
    # An exact causal mask (float or bool) runs the causal kernel without
    # the mask (a key_padding_mask still applies); any other mask applies
    # as given, whatever the hint says.
    calls = []
    sdpa = attn.nn.scaled_dot_product_attention

    def spy(q, k, v, mask, causal, *args):
        calls.append((mask is None, causal))
        return sdpa(q, k, v, mask, causal, *args)

    monkeypatch.setattr(attn.nn, "scaled_dot_product_attention", spy)
    ref, ours = pair(batch_first=True)
    x, _, _ = inputs(2, 9, 9, 32, batch_first=True)
    square = nn.Transformer.generate_square_subsequent_mask(9)
    kpm = torch.zeros(2, 9, dtype=torch.bool)
    kpm[1, 7:] = True
    wrong = square.clone()
    wrong[3, 5] = 0.0  # one position above the diagonal allowed
    for mask, padding, exact in [(square, None, True), (square.isinf(), None, True),
                                 (square.isinf(), kpm, True), (wrong, None, False)]:
        calls.clear()
        got, got_w = ours(x, x, x, attn_mask=mask, is_causal=True, key_padding_mask=padding,
                          need_weights=need_weights)
        want, want_w = ref(x, x, x, attn_mask=mask, key_padding_mask=padding)
        assert calls == [(exact and padding is None, exact)]
        close(got, want)
        if need_weights:
            close(got_w, want_w)
    # Extra keys (bias_kv) are allowed to every row: the mask path.
    ref, ours = pair(batch_first=True, add_bias_kv=True, seed=2)
    calls.clear()
    close(ours(x, x, x, attn_mask=square, is_causal=True)[0], ref(x, x, x, attn_mask=square)[0])
    assert calls == [(False, False)]


def test_causal_mask_recognition():
    top = torch.ones(3, 5, dtype=torch.bool).triu(1)  # True: masked out
    bottom = torch.ones(3, 5, dtype=torch.bool).triu(3)
    assert attn.nn._is_causal_mask(top, 3, 5, "top_left")
    assert not attn.nn._is_causal_mask(top, 3, 5, "bottom_right")
    assert attn.nn._is_causal_mask(bottom, 3, 5, "bottom_right")
    as_float = torch.zeros(3, 5, dtype=torch.bfloat16).masked_fill(bottom, -math.inf)
    assert attn.nn._is_causal_mask(as_float, 3, 5, "bottom_right")
    assert not attn.nn._is_causal_mask(as_float.masked_fill(bottom, -1e9), 3, 5, "bottom_right")
    assert not attn.nn._is_causal_mask(top[None], 3, 5, "top_left")  # 3-D: per head
    learned = torch.zeros(3, 5).masked_fill(top, -math.inf).requires_grad_()
    assert not attn.nn._is_causal_mask(learned, 3, 5, "top_left")


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


# KVCache: decoding with the projected keys and values kept between calls.


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("capacity", [0, 2, 64])
def test_kv_cache_decoding_equals_the_whole_sequence(batch_first, capacity):
    # A causal prefill of 5 tokens, then one token at a time, then 3 at once:
    # each call's output and weights are the rows of one causal call over
    # the whole sequence, and of torch's module given the whole prefix.
    ref, ours = pair(batch_first=batch_first)
    x, _, _ = inputs(2, 12, 12, 32, batch_first=batch_first)
    rows = (lambda t, a, b: t[:, a:b]) if batch_first else (lambda t, a, b: t[a:b])
    causal = nn.Transformer.generate_square_subsequent_mask(12)
    want, want_w = ref(x, x, x, attn_mask=causal, average_attn_weights=False)
    cache = attn.nn.KVCache(capacity)
    with torch.no_grad():
        for start, end in [(0, 5), (5, 6), (6, 7), (7, 8), (8, 9), (9, 12)]:
            new = rows(x, start, end)
            got, got_w = ours(new, new, new, is_causal=True, kv_cache=cache,
                              average_attn_weights=False)
            assert len(cache) == end
            close(got, rows(want, start, end))
            close(got_w, want_w[:, :, start:end, :end])
    assert cache.keys.shape == (2, 4, 12, 8) and cache.values.shape == (2, 4, 12, 8)
    # crop: back to 7 tokens, then the same token 7 again gives the same row.
    cache.crop(7)
    with torch.no_grad():
        new = rows(x, 7, 8)
        got, _ = ours(new, new, new, is_causal=True, kv_cache=cache)
    close(got, rows(want, 7, 8))
    assert len(cache) == 8
    with pytest.raises(ValueError, match="holds 8 tokens"):
        cache.crop(9)


def test_kv_cache_cross_attention_and_masks():
    # A decoder's cross-attention: the encoder's memory is projected on the
    # first call only; later calls pass key = value = None. A padding mask
    # over the memory applies at every step.
    ref, ours = pair(batch_first=True, kdim=24, vdim=16)
    q, k, v = inputs(3, 4, 9, 32, kdim=24, vdim=16, batch_first=True)
    kpm = torch.zeros(3, 9, dtype=torch.bool)
    kpm[1, 5:] = True
    want, want_w = ref(q, k, v, key_padding_mask=kpm)
    cache = attn.nn.KVCache()
    with torch.no_grad():
        got, got_w = ours(q[:, :1], k, v, key_padding_mask=kpm, kv_cache=cache)
        close(got, want[:, :1])
        close(got_w, want_w[:, :1])
        for t in range(1, 4):
            got, got_w = ours(q[:, t:t + 1], None, None, key_padding_mask=kpm, kv_cache=cache)
            close(got, want[:, t:t + 1])
            close(got_w, want_w[:, t:t + 1])
    assert len(cache) == 9
    # An attention mask over cached + new tokens, unbatched.
    ref, ours = pair()
    x, _, _ = inputs(1, 6, 6, 32)
    mask = torch.rand(6, 6, generator=torch.Generator().manual_seed(3)) > 0.6
    mask[:, 0] = False
    want, _ = ref(x[:, 0], x[:, 0], x[:, 0], attn_mask=mask)
    cache = attn.nn.KVCache()
    with torch.no_grad():
        ours(x[:4, 0], x[:4, 0], x[:4, 0], attn_mask=mask[:4, :4], kv_cache=cache)
        got, _ = ours(x[4:, 0], x[4:, 0], x[4:, 0], attn_mask=mask[4:], kv_cache=cache)
    close(got, want[4:])


def test_kv_cache_refusals():
    _, ours = pair(batch_first=True)
    x, _, _ = inputs(2, 3, 3, 32, batch_first=True)
    cache = attn.nn.KVCache()
    with pytest.raises(RuntimeError, match="torch.no_grad"):
        ours(x, x, x, kv_cache=cache)
    assert len(cache) == 0
    with torch.no_grad():
        with pytest.raises(ValueError, match="cache is empty"):
            ours(x, None, None, kv_cache=cache)
        with pytest.raises(ValueError, match="key and value"):
            ours(x, x, None, kv_cache=cache)
        with pytest.raises(TypeError, match="KVCache"):
            ours(x, x, x, kv_cache={})
        ours(x, x, x, kv_cache=cache)
        with pytest.raises(ValueError, match="reset"):
            ours(x[:1], x[:1], x[:1], kv_cache=cache)  # another batch
        _, two_heads = pair(num_heads=2, batch_first=True)
        with pytest.raises(ValueError, match="reset"):
            two_heads(x, x, x, kv_cache=cache)  # another module's heads
        assert len(cache) == 3
        cache.reset()
        ours(x[:1], x[:1], x[:1], kv_cache=cache)
        assert len(cache) == 3 and cache.batch == 1
        _, bias_kv = pair(batch_first=True, add_bias_kv=True)
        with pytest.raises(ValueError, match="add_bias_kv"):
            bias_kv(x, x, x, kv_cache=attn.nn.KVCache())
    with pytest.raises(ValueError, match="capacity"):
        attn.nn.KVCache(-1)
