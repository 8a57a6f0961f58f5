"""Gradients through attn.scaled_dot_product_attention (attn's backward
kernel) against float64 autograd, across the spec's cases.

Each gradient is measured as max|g - ref| / max|ref| against torch.autograd
on the contract written out in float64 (and, where PyTorch's SDPA computes
the same function, on PyTorch's math SDPA too), with the spec's bounds for
the gradient: f32 1e-4, f16/bf16 2e-2."""

import math

import pytest
import torch
import torch.nn.functional as F

import attn
from conftest import (gradients, naive_attention, random_qkv, relative_error,
                      results_on_threads)

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
GRAD_TOLERANCE = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 2e-2}


#: The contract in float64, differentiable (conftest.py).
reference = naive_attention


def check(q, k, v, attn_mask=None, with_lse=False, is_causal=False, scale=None,
          causal_alignment="top_left", window=None, softcap=None, enable_gqa=False,
          seed=1):
    generator = torch.Generator().manual_seed(seed)
    dv = v.shape[-1]
    grad_out = torch.randn(q.shape[:-1] + (dv,), generator=generator).to(q.dtype)
    grad_lse = torch.randn(q.shape[:-1], generator=generator) if with_lse else None

    def ours(q, k, v):
        out, lse = attn.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, is_causal=is_causal, scale=scale,
            enable_gqa=enable_gqa, causal_alignment=causal_alignment, window=window,
            softcap=softcap, return_lse=True)
        return out, lse

    def ref(q, k, v):
        return reference(q, k, v, None if attn_mask is None else
                         (attn_mask if attn_mask.dtype == torch.bool else attn_mask.double()),
                         is_causal, scale, causal_alignment, window, softcap)

    _, _, got = gradients(ours, (q, k, v), grad_out, grad_lse)
    _, _, want = gradients(ref, (q.double(), k.double(), v.double()), grad_out.double(),
                           None if grad_lse is None else grad_lse.double())
    for name, g, w, t in zip(("dq", "dk", "dv"), got, want, (q, k, v)):
        assert g.dtype == t.dtype and g.shape == t.shape, name
        assert not torch.isnan(g).any(), f"{name} has NaN"
        error = relative_error(g, w)
        assert error <= GRAD_TOLERANCE[q.dtype], f"{name}: relative error {error:.3g}"
    return got


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_plain(dtype):
    check(*random_qkv(dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("alignment", ["top_left", "bottom_right"])
def test_causal(dtype, alignment):
    check(*random_qkv(seq_q=70, seq_k=90, dtype=dtype), is_causal=True,
          causal_alignment=alignment)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gqa_odd_sizes_and_value_dim(dtype):
    q, k, v = random_qkv(batch=3, heads_q=6, heads_kv=2, seq_q=29, seq_k=67, d=40, dv=24,
                         dtype=dtype)
    check(q, k, v, enable_gqa=True)


def test_mqa_decoding_rows():
    q, k, v = random_qkv(heads_q=8, heads_kv=1, seq_q=3, seq_k=130)
    check(q, k, v, enable_gqa=True, is_causal=True, causal_alignment="bottom_right")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_window_softcap_scale(dtype):
    check(*random_qkv(seq_q=64, seq_k=64, dtype=dtype), window=(12, 3), softcap=4.0,
          scale=0.3)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_bool_mask_with_fully_masked_rows(dtype):
    q, k, v = random_qkv(seq_q=33, seq_k=70, dtype=dtype)
    generator = torch.Generator().manual_seed(3)
    mask = torch.rand(2, 1, 33, 70, generator=generator) > 0.4
    mask[:, :, 5] = False  # rows with nothing to attend: zero gradients
    dq, _, _ = check(q, k, v, attn_mask=mask)
    assert (dq[:, :, 5] == 0).all()


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_masks_whose_keys_are_not_adjacent(kind):
    # A mask seen through a transposed view (keys strided in memory) takes
    # the kernels' element-by-element path, a contiguous one the vector
    # loads: the same gradients, against the reference, for both.
    q, k, v = random_qkv(seq_q=40, seq_k=90)
    generator = torch.Generator().manual_seed(6)
    keys_major = torch.rand(2, 4, 90, 40, generator=generator)
    mask = keys_major > 0.3 if kind == "bool" else torch.where(
        keys_major > 0.3, keys_major, torch.tensor(-math.inf))
    strided = mask.transpose(-1, -2)
    assert strided.stride(-1) != 1
    got = check(q, k, v, attn_mask=strided)
    contiguous = check(q, k, v, attn_mask=strided.contiguous())
    for a, b in zip(got, contiguous):
        assert torch.equal(a, b)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_float_mask_with_minus_inf(dtype):
    q, k, v = random_qkv(seq_q=20, seq_k=50, dtype=dtype)
    generator = torch.Generator().manual_seed(4)
    bias = torch.randn(1, 4, 20, 50, generator=generator)
    bias[torch.rand(bias.shape, generator=generator) < 0.2] = -math.inf
    check(q, k, v, attn_mask=bias.to(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_through_the_lse(dtype):
    # A loss that reads the returned LSE: dS gains P * dLSE.
    check(*random_qkv(seq_q=40, seq_k=40, dtype=dtype), with_lse=True, is_causal=True)


def test_bottom_right_rows_before_the_keys_get_zero_gradients():
    # Sq > Sk, bottom-right: the first Sq - Sk rows see no key.
    q, k, v = random_qkv(seq_q=30, seq_k=10)
    dq, dk, dv = check(q, k, v, is_causal=True, causal_alignment="bottom_right")
    assert (dq[:, :, :20] == 0).all()


def test_matches_pytorch_sdpa_autograd():
    q, k, v = random_qkv(seq_q=50, seq_k=50, d=64)
    grad = torch.randn(2, 4, 50, 64, generator=torch.Generator().manual_seed(9))
    _, _, ours = gradients(
        lambda q, k, v: (attn.scaled_dot_product_attention(q, k, v, is_causal=True), None),
        (q, k, v), grad)
    _, _, theirs = gradients(
        lambda q, k, v: (F.scaled_dot_product_attention(q, k, v, is_causal=True), None),
        (q.double(), k.double(), v.double()), grad.double())
    for g, w in zip(ours, theirs):
        assert relative_error(g, w) <= 1e-4


def test_strided_bshd_views():
    # [B, S, H, D] buffers seen as [B, H, S, D]: no copies, same gradients.
    generator = torch.Generator().manual_seed(5)
    q = torch.randn(2, 37, 4, 32, generator=generator).transpose(1, 2)
    k = torch.randn(2, 45, 4, 32, generator=generator).transpose(1, 2)
    v = torch.randn(2, 45, 4, 32, generator=generator).transpose(1, 2)
    assert not q.is_contiguous()
    check(q, k, v, is_causal=True)


def test_backward_is_deterministic_run_to_run():
    q, k, v = random_qkv(seq_q=200, seq_k=300, heads_q=8, heads_kv=2)
    first = check(q, k, v, enable_gqa=True, is_causal=True)
    second = check(q, k, v, enable_gqa=True, is_causal=True)
    for a, b in zip(first, second):
        assert torch.equal(a, b)


def test_backward_does_not_depend_on_the_thread_count(tmp_path):
    # The same call (with dropout) in processes with 1 and 3 threads: the
    # output and the gradients bit-identical.
    one, three = results_on_threads(
        tmp_path,
        "import sys, torch, attn\n"
        "g = torch.Generator().manual_seed(0)\n"
        "q = torch.randn(2, 6, 150, 32, generator=g, requires_grad=True)\n"
        "k = torch.randn(2, 3, 170, 32, generator=g, requires_grad=True)\n"
        "v = torch.randn(2, 3, 170, 32, generator=g, requires_grad=True)\n"
        "o = attn.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True,\n"
        "                                      dropout_p=0.2, dropout_seed=11)\n"
        "o.backward(torch.randn(o.shape, generator=g))\n"
        "torch.save([o.detach(), q.grad, k.grad, v.grad], sys.argv[1])\n")
    for a, b in zip(one, three):
        assert torch.equal(a, b)


def bias_gradient(q, k, v, bias, **options):
    """(attn's, float64 autograd's) gradient of an additive bias through
    the output and the LSE, the other inputs held fixed."""
    generator = torch.Generator().manual_seed(8)
    grad_out = torch.randn(q.shape[:-1] + (v.shape[-1],), generator=generator)
    grad_lse = torch.randn(q.shape[:-1], generator=generator)
    ours = bias.detach().clone().requires_grad_()
    out, lse = attn.scaled_dot_product_attention(q, k, v, attn_mask=ours, return_lse=True,
                                                 **options)
    torch.autograd.backward([out, lse], [grad_out.to(out.dtype), grad_lse])
    ref = bias.detach().double().requires_grad_()
    want_out, want_lse = reference(
        q, k, v, ref, options.get("is_causal", False), options.get("scale"),
        options.get("causal_alignment", "top_left"), options.get("window"),
        options.get("softcap"))
    torch.autograd.backward([want_out, want_lse], [grad_out.double(), grad_lse.double()])
    assert ours.grad.shape == bias.shape and ours.grad.dtype == bias.dtype
    return ours.grad, ref.grad


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(2, 4, 20, 50), (1, 4, 20, 50), (1, 1, 20, 50),
                                   (20, 50), (1, 1, 1, 50), (4, 1, 50)],
                         ids=lambda s: "x".join(map(str, s)))
def test_bias_gradient_in_every_broadcast_form(dtype, shape):
    # dM = dS, summed over the bias's broadcast dims (and the leading dims a
    # mask of lower rank lacks); 0 where -inf excludes the position.
    q, k, v = random_qkv(seq_q=20, seq_k=50, dtype=dtype, seed=6)
    generator = torch.Generator().manual_seed(5)
    bias = torch.randn(shape, generator=generator)
    bias[torch.rand(bias.shape, generator=generator) < 0.2] = -math.inf
    got, want = bias_gradient(q, k, v, bias.to(dtype))
    assert relative_error(got, want) <= GRAD_TOLERANCE[dtype]
    assert (got[bias == -math.inf] == 0).all()


def test_bias_gradient_with_causal_window_softcap_gqa():
    # Positions outside the band get 0; the soft cap's derivative does not
    # reach the bias (it is added after the cap).
    q, k, v = random_qkv(1, 4, 2, 37, 61, 32, dv=16, seed=2)
    bias = torch.randn(1, 4, 37, 61)
    got, want = bias_gradient(q, k, v, bias, is_causal=True, causal_alignment="bottom_right",
                              window=(20, 0), softcap=3.0, enable_gqa=True)
    assert relative_error(got, want) <= 1e-4
    i = torch.arange(37)[:, None] + 61 - 37
    j = torch.arange(61)[None, :]
    assert (got[0, :, ((j > i) | (j < i - 20))] == 0).all()


def test_bias_gradient_of_whole_key_blocks():
    # dM of whole 64-key blocks (Sk = 192, rows of 12 cache lines) is
    # written by non-temporal stores, the rows outside the band as zeros.
    q, k, v = random_qkv(1, 2, 2, 70, 192, 32, seed=9)
    bias = torch.randn(1, 2, 70, 192)
    got, want = bias_gradient(q, k, v, bias, is_causal=True, causal_alignment="bottom_right",
                              window=(100, 0))
    assert relative_error(got, want) <= 1e-4
    i = torch.arange(70)[:, None] + 192 - 70
    j = torch.arange(192)[None, :]
    assert (got[0, :, ((j > i) | (j < i - 100))] == 0).all()


def test_learned_relative_position_bias():
    # A T5-style learned bias table indexed by relative position: autograd
    # takes dM back through the indexing to the table.
    q, k, v = random_qkv(1, 4, 4, 24, 24, 16, seed=4)
    table = torch.zeros(4, 47, requires_grad=True)
    relative = torch.arange(24)[None, :] - torch.arange(24)[:, None] + 23
    optimizer = torch.optim.SGD([table], lr=0.5)
    losses = []
    for _ in range(5):
        optimizer.zero_grad()
        bias = table[:, relative].unsqueeze(0)   # [1, 4, 24, 24]
        out = attn.scaled_dot_product_attention(q, k, v, attn_mask=bias, is_causal=True)
        loss = (out - v).pow(2).mean()
        loss.backward()
        losses.append(loss.item())
        optimizer.step()
    assert losses[-1] < losses[0]
    ref_table = table.detach().clone().requires_grad_()
    ref_bias = ref_table[:, relative].unsqueeze(0)
    ref_out, _ = reference(q, k, v, ref_bias.double(), True)
    (ref_out - v.double()).pow(2).mean().backward()
    table.grad = None
    bias = table[:, relative].unsqueeze(0)
    out = attn.scaled_dot_product_attention(q, k, v, attn_mask=bias, is_causal=True)
    (out - v).pow(2).mean().backward()
    assert relative_error(table.grad, ref_table.grad) <= 1e-4


def test_wrong_grad_output_shape_is_refused_and_nothing_written():
    q, k, v = random_qkv(seq_q=8, seq_k=8)
    out, lse = attn.scaled_dot_product_attention(q, k, v, return_lse=True)
    from attn import _torch
    with pytest.raises(ValueError, match="grad_output: dim 2 .Sq. is 9"):
        _torch.sdpa_backward(q, k, v, None, out, lse, torch.zeros(2, 4, 9, 32), None,
                             False, None, False, "top_left", None, None, None)
    with pytest.raises(ValueError, match="lse: dim 2 .Sq. is 7"):
        _torch.sdpa_backward(q, k, v, None, out, lse[:, :, :7], torch.zeros_like(out),
                             None, False, None, False, "top_left", None, None, None)


def test_opcheck():
    q, k, v = random_qkv(seq_q=16, seq_k=16, d=16)
    args = (q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), None, True, None,
            False, "top_left", None, None, None, True)
    torch.library.opcheck(torch.ops.attn.sdpa.default, args)


def test_under_torch_compile():
    q, k, v = random_qkv(seq_q=32, seq_k=32, d=16)

    def loss(q, k, v):
        return attn.scaled_dot_product_attention(q, k, v, is_causal=True).square().sum()

    compiled = torch.compile(loss, fullgraph=True)
    qs = [t.clone().requires_grad_() for t in (q, k, v)]
    rs = [t.clone().requires_grad_() for t in (q, k, v)]
    compiled(*qs).backward()
    loss(*rs).backward()
    for a, b in zip(qs, rs):
        assert torch.allclose(a.grad, b.grad, rtol=0, atol=0)


class TinyTransformer(torch.nn.Module):
    """Two pre-norm layers of causal self-attention and a feed-forward block,
    with the attention function swappable."""

    def __init__(self, sdpa, vocab=17, dim=32, heads=4, layers=2):
        super().__init__()
        self.sdpa, self.heads = sdpa, heads
        self.embed = torch.nn.Embedding(vocab, dim)
        self.blocks = torch.nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(torch.nn.ModuleDict({
                "norm1": torch.nn.LayerNorm(dim), "qkv": torch.nn.Linear(dim, 3 * dim),
                "proj": torch.nn.Linear(dim, dim), "norm2": torch.nn.LayerNorm(dim),
                "ff": torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(),
                                          torch.nn.Linear(4 * dim, dim))}))
        self.head = torch.nn.Linear(dim, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        batch, seq, dim = x.shape
        for block in self.blocks:
            q, k, v = block["qkv"](block["norm1"](x)).chunk(3, dim=-1)
            split = lambda t: t.view(batch, seq, self.heads, -1).transpose(1, 2)  # noqa: E731
            a = self.sdpa(split(q), split(k), split(v), is_causal=True)
            x = x + block["proj"](a.transpose(1, 2).reshape(batch, seq, dim))
            x = x + block["ff"](block["norm2"](x))
        return self.head(x)


def test_training_matches_pytorch():
    # The same model, weights and data trained for a few steps with attn's
    # attention and with PyTorch's: the losses agree.
    torch.manual_seed(0)
    ours = TinyTransformer(attn.scaled_dot_product_attention)
    theirs = TinyTransformer(F.scaled_dot_product_attention)
    theirs.load_state_dict(ours.state_dict())
    data = torch.randint(0, 17, (8, 24), generator=torch.Generator().manual_seed(1))
    losses = []
    for model in (ours, theirs):
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
        history = []
        for _ in range(20):
            logits = model(data[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, 17), data[:, 1:].reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            history.append(loss.item())
        losses.append(history)
    assert losses[0][-1] < losses[0][0] - 0.3  # it learns
    for a, b in zip(*losses):
        assert abs(a - b) <= 1e-4 * max(1.0, abs(b))


# ---------------------------------------------------------------------------
# Dropout
# ---------------------------------------------------------------------------


def test_philox_known_answers():
    # Random123's known-answer vectors for Philox 4x32-10.
    import numpy as np
    cases = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
             ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2,
              (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
             ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
              (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]
    for counter, key, expected in cases:
        words = attn._core.philox4x32([np.uint64(w) for w in counter], key)
        assert tuple(int(w) for w in words) == expected


def dropout_reference(q, k, v, keep, p, is_causal=False, alignment="top_left", window=None,
                      softcap=None, mask=None):
    """O of the contract with dropout, float64, differentiable."""
    return reference(q, k, v, mask, is_causal, None, alignment, window, softcap, keep, p)[0]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("p", [0.1, 0.5])
def test_dropout_forward_and_gradients(dtype, p):
    q, k, v = random_qkv(batch=2, heads_q=4, heads_kv=2, seq_q=70, seq_k=90, d=32, dv=24,
                         dtype=dtype)
    seed = 0x123456789ABCDEF
    keep = torch.from_numpy(attn.dropout_mask(2, 4, 70, 90, p, seed))
    grad = torch.randn(2, 4, 70, 24, generator=torch.Generator().manual_seed(2)).to(dtype)

    def ours(q, k, v):
        return attn.scaled_dot_product_attention(
            q, k, v, dropout_p=p, dropout_seed=seed, is_causal=True,
            causal_alignment="bottom_right", enable_gqa=True), None

    def ref(q, k, v):
        return dropout_reference(q, k, v, keep, p, is_causal=True,
                                 alignment="bottom_right"), None

    out, _, got = gradients(ours, (q, k, v), grad)
    want_out, _, want = gradients(ref, (q.double(), k.double(), v.double()), grad.double())
    tolerance = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 1e-2}[dtype]
    assert relative_error(out, want_out) <= tolerance
    for name, g, w in zip(("dq", "dk", "dv"), got, want):
        error = relative_error(g, w)
        assert error <= GRAD_TOLERANCE[dtype], f"{name}: relative error {error:.3g}"


def test_dropout_with_mask_window_softcap_and_lse():
    q, k, v = random_qkv(seq_q=50, seq_k=64)
    generator = torch.Generator().manual_seed(6)
    mask = torch.rand(50, 64, generator=generator) > 0.3
    mask[7] = False
    seed, p = 99, 0.25
    keep = torch.from_numpy(attn.dropout_mask(2, 4, 50, 64, p, seed))
    grad = torch.randn(2, 4, 50, 32, generator=generator)
    options = dict(window=(20, 5), softcap=3.0)

    def ours(q, k, v):
        out, lse = attn.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=p, dropout_seed=seed, return_lse=True,
            **options)
        return out, lse

    def ref(q, k, v):
        return dropout_reference(q, k, v, keep, p, mask=mask, **options), None

    out, lse, got = gradients(ours, (q, k, v), grad)
    want_out, _, want = gradients(ref, (q.double(), k.double(), v.double()), grad.double())
    assert relative_error(out, want_out) <= 1e-5
    # The LSE is the undropped softmax's.
    _, plain_lse = reference(q.double(), k.double(), v.double(), mask, window=(20, 5),
                             softcap=3.0)
    finite = torch.isfinite(plain_lse)
    assert torch.equal(finite, torch.isfinite(lse))
    assert (lse[finite].double() - plain_lse[finite]).abs().max() <= 1e-5
    for g, w in zip(got, want):
        assert relative_error(g, w) <= 1e-4
    assert (got[0][:, :, 7] == 0).all()


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_keep_rate(p):
    # 4 * 8 * 256 * 256 = 2M positions: the rate within 5 standard errors.
    keep = attn.dropout_mask(4, 8, 256, 256, p, 2024)
    n = keep.size
    rate = keep.mean()
    assert abs(rate - (1 - p)) <= 5 * math.sqrt(p * (1 - p) / n)


def test_dropout_seeds_and_reproducibility():
    q, k, v = random_qkv(seq_q=40, seq_k=40)
    a = attn.scaled_dot_product_attention(q, k, v, dropout_p=0.2, dropout_seed=5)
    b = attn.scaled_dot_product_attention(q, k, v, dropout_p=0.2, dropout_seed=5)
    c = attn.scaled_dot_product_attention(q, k, v, dropout_p=0.2, dropout_seed=6)
    assert torch.equal(a, b) and not torch.equal(a, c)
    torch.manual_seed(3)
    d = attn.scaled_dot_product_attention(q, k, v, dropout_p=0.2)
    torch.manual_seed(3)
    e = attn.scaled_dot_product_attention(q, k, v, dropout_p=0.2)
    assert torch.equal(d, e)
    # p = 0 is no dropout (and no generator in the kernel).
    f = attn.scaled_dot_product_attention(q, k, v, dropout_p=0.0)
    g = attn.scaled_dot_product_attention(q, k, v)
    assert torch.equal(f, g)


#: Micro-kernels and blockings whose keep bits take each of the generator's
#: paths (docs/spec.md: 8 keys a Philox counter, 16 bits a key).
DROPOUT_KERNELS = {
    # 4 key vectors a block: one Philox on 16 counters for two rows.
    "packed_64": "<packed, query_tile = 32, key_block = 64, row_block = 2>",
    # Three rows: a pair's Philox and the third row's on 8 counters.
    "packed_64_3_rows": "<packed, query_tile = 32, key_block = 64, row_block = 3>",
    # 8 key vectors a block: one Philox on 16 counters.
    "packed_128": "<packed, query_tile = 32, key_block = 128, row_block = 2>",
    # 2 key vectors a block: a Philox per key.
    "packed_32": "<packed, query_tile = 32, key_block = 32, row_block = 2>",
    # 8-lane vectors (AVX2), 4 a block: one Philox on 4 counters, one
    # 128-bit lane of words.
    "packed_32_avx2": ("<packed, query_tile = 32, key_block = 32, row_block = 2>",
                       "--vector-width=8"),
    # 4-lane vectors, 8 a block: one Philox on 4 counters, two key vectors
    # a counter.
    "packed_32_4_lanes": ("<packed, query_tile = 32, key_block = 32, row_block = 2>",
                          "--vector-width=4"),
    # 4-lane vectors, 4 a block: 2 counters' keys from a Philox on 4.
    "packed_16_4_lanes": ("<packed, query_tile = 32, key_block = 16, row_block = 2>",
                          "--vector-width=4"),
    # Rows in lanes, 8 keys a step: one Philox per row vector.
    "lane_rows_64": "<lane_rows, query_tile = 64, key_block = 64, row_block = 4, "
                    "lane_rows = 32>",
    # 4-lane vectors, 4 keys a step (blocks of 20): half a counter's words,
    # either half.
    "lane_rows_20": ("<lane_rows, query_tile = 64, key_block = 20, row_block = 4, "
                     "lane_rows = 16>", "--vector-width=4"),
}


@pytest.mark.parametrize("kernel", DROPOUT_KERNELS.values(), ids=DROPOUT_KERNELS.keys())
def test_dropout_bits_on_every_kernel_path(tmp_path, kernel):
    # The forward of each micro-kernel against float64 with attn.dropout_mask's
    # bits (Sk = 100: a tail that is not a whole counter's 8 keys).
    import subprocess

    import numpy as np

    library = tmp_path / "dropout.so"
    kernel, *options = (kernel,) if isinstance(kernel, str) else kernel
    subprocess.run([str(attn._cache.find_compiler()), "--spec", "d=32,dropout",
                    "--kernel", kernel, *options, "-o", str(library)], check=True)
    (compiled,) = attn.load_library(str(library))
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((2, 3, s, 32), dtype=np.float32)
               for s in (70, 100, 100))
    p, seed = 0.3, 0x0123456789ABCDEF
    out = np.full((2, 3, 70, 32), np.nan, dtype=np.float32)  # poisoned
    compiled.run(q, k, v, None, out, None, p, seed)
    scores = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 1, 3, 2) / math.sqrt(32)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    kept = attn.dropout_mask(2, 3, 70, 100, p, seed) / float(1 - np.float32(p))
    want = (weights * kept) @ v.astype(np.float64)
    assert np.abs(out - want).max() / np.abs(want).max() <= 1e-5


def test_dropout_mask_does_not_depend_on_the_slice():
    # The keep bits are a function of the global indices: a sub-block of a
    # larger mask is the mask of nothing else.
    big = attn.dropout_mask(2, 3, 20, 30, 0.4, 77)
    small = attn.dropout_mask(1, 2, 10, 13, 0.4, 77)
    assert (big[:1, :2, :10, :13] == small).all()
