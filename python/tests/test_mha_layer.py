"""attn.mha, a whole multi-head attention layer compiled as one kernel
(attn.mha through attn-compile's spec key `mha` and the runtime), against a
float64 reference of docs/spec.md's "Multi-head attention layer" and against
torch.nn.MultiheadAttention and attn.nn.MultiheadAttention with the same
weights."""

import math

import numpy as np
import pytest

import attn
from conftest import relative_error

torch = pytest.importorskip("torch")

TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-2}


def rounded(x, dtype):
    """x rounded to dtype and back to float64 (the spec's roundings)."""
    return x.to(dtype).double()


def reference(query, key, value, heads, w_q, w_k, w_v, w_o, b_in=None, b_out=None,
              mask=None, causal=False, scale=None):
    """docs/spec.md steps 1-4 in float64, rounding the projections to the
    inputs' dtype where the kernel does; a row with no allowed key gives 0
    before the output projection."""
    dtype = query.dtype
    d = lambda t: None if t is None else t.double()  # noqa: E731
    q, k, v = d(query), d(key), d(value)
    e = q.shape[-1]
    b_q, b_k, b_v = (None, None, None) if b_in is None else d(b_in).split(e)
    q = rounded(q @ d(w_q).T + (0 if b_q is None else b_q), dtype)
    k = rounded(k @ d(w_k).T + (0 if b_k is None else b_k), dtype)
    v = rounded(v @ d(w_v).T + (0 if b_v is None else b_v), dtype)
    batch, sq, sk, dh = q.shape[0], q.shape[1], k.shape[1], e // heads
    split = lambda t, s: t.view(batch, s, heads, dh).transpose(1, 2)  # noqa: E731
    q, k, v = split(q, sq), split(k, sk), split(v, sk)
    scores = q @ k.transpose(-1, -2) * (scale if scale is not None else 1 / math.sqrt(dh))
    allowed = torch.ones(sq, sk, dtype=torch.bool)
    if causal:
        allowed = torch.ones(sq, sk, dtype=torch.bool).tril()
    allowed = allowed.expand(batch, heads, sq, sk)
    if mask is not None:
        if mask.dtype == torch.bool:
            allowed = allowed & mask.expand(batch, heads, sq, sk)
        else:
            scores = scores + mask.double()
    scores = scores.masked_fill(~allowed, float("-inf"))
    top = scores.amax(-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    p = torch.exp(scores - top)
    total = p.sum(-1, keepdim=True)
    p = p / torch.where(total == 0, torch.ones_like(total), total)
    o = rounded((p @ v).transpose(1, 2).reshape(batch, sq, e), dtype)
    return o @ d(w_o).T + (0 if b_out is None else d(b_out))


def layer_inputs(batch, sq, sk, e, ek, ev, dtype, bias=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s, scale=1.0: (torch.randn(*s, generator=g) * scale).to(dtype)  # noqa: E731
    tensors = dict(query=r(batch, sq, e), key=r(batch, sk, ek), value=r(batch, sk, ev),
                   q_proj_weight=r(e, e, scale=e ** -0.5),
                   k_proj_weight=r(e, ek, scale=ek ** -0.5),
                   v_proj_weight=r(e, ev, scale=ev ** -0.5),
                   out_proj_weight=r(e, e, scale=e ** -0.5))
    if bias:
        tensors.update(in_proj_bias=r(3 * e, scale=0.1), out_proj_bias=r(e, scale=0.1))
    return tensors


def run_layer(t, heads, **kwargs):
    return attn.mha(t["query"], t["key"], t["value"], heads,
                    in_proj_bias=t.get("in_proj_bias"),
                    out_proj_weight=t["out_proj_weight"],
                    out_proj_bias=t.get("out_proj_bias"),
                    q_proj_weight=t["q_proj_weight"], k_proj_weight=t["k_proj_weight"],
                    v_proj_weight=t["v_proj_weight"], **kwargs)


def reference_of(t, heads, **kwargs):
    return reference(t["query"], t["key"], t["value"], heads, t["q_proj_weight"],
                     t["k_proj_weight"], t["v_proj_weight"], t["out_proj_weight"],
                     t.get("in_proj_bias"), t.get("out_proj_bias"), **kwargs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_matches_reference(dtype, causal, bias):
    # Sq, Sk not multiples of any tile; Ek, Ev other than E; 72 columns
    # (a strip of 64 and a partial vector).
    t = layer_inputs(3, 37, 53 if not causal else 37, 72, 40, 24, dtype, bias=bias)
    with torch.no_grad():
        y = run_layer(t, 6, is_causal=causal)
    ref = reference_of(t, 6, causal=causal)
    assert y.dtype == dtype and y.shape == (3, 37, 72)
    assert relative_error(y, ref) <= TOLERANCE[dtype]


@pytest.mark.parametrize("shape", [(1, 1, 1, 8, 1), (2, 1, 300, 64, 4), (2, 130, 7, 32, 2),
                                   (1, 65, 65, 1024, 8)])
def test_sizes(shape):
    batch, sq, sk, e, heads = shape
    t = layer_inputs(batch, sq, sk, e, e, e, torch.float32, seed=1)
    y = run_layer(t, heads)
    assert relative_error(y, reference_of(t, heads)) <= 1e-5


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_masks_in_every_broadcast_form(dtype):
    batch, heads, sq, sk = 2, 4, 19, 23
    t = layer_inputs(batch, sq, sk, 32, 32, 32, dtype, seed=2)
    g = torch.Generator().manual_seed(3)
    for shape in [(sq, sk), (1, 1, 1, sk), (batch, 1, 1, sk), (1, heads, sq, sk),
                  (batch, heads, sq, sk), (batch, 1, sq, sk)]:
        keep = torch.rand(*shape, generator=g) > 0.3
        y = run_layer(t, heads, attn_mask=keep)
        full = keep if len(shape) == 4 else keep[None, None]
        assert relative_error(y, reference_of(t, heads, mask=full)) <= TOLERANCE[dtype], shape
        bias = torch.randn(*shape, generator=g).to(dtype)
        y = run_layer(t, heads, attn_mask=bias)
        full = bias if len(shape) == 4 else bias[None, None]
        assert relative_error(y, reference_of(t, heads, mask=full)) <= TOLERANCE[dtype], shape


def test_fully_masked_rows_give_the_output_bias():
    t = layer_inputs(2, 5, 6, 16, 16, 16, torch.float32, seed=4)
    keep = torch.ones(2, 1, 5, 6, dtype=torch.bool)
    keep[1, :, 2] = False
    y = run_layer(t, 2, attn_mask=keep)
    assert torch.equal(y[1, 2], t["out_proj_bias"])
    assert relative_error(y, reference_of(t, 2, mask=keep)) <= 1e-5


def test_scale_and_packed_weights_match_torch_module():
    torch.manual_seed(5)
    module = torch.nn.MultiheadAttention(48, 4, batch_first=True)
    x = torch.randn(3, 29, 48)
    causal = torch.ones(29, 29, dtype=torch.bool).triu(1)
    with torch.no_grad():
        expected, _ = module(x, x, x, attn_mask=causal, need_weights=False)
        y = attn.mha(x, x, x, 4, module.in_proj_weight, module.in_proj_bias,
                     module.out_proj.weight, module.out_proj.bias, is_causal=True)
        assert (y - expected).abs().max().item() <= 1e-5
        # PyTorch's bool attn_mask is True where not allowed; ours keeps.
        y = attn.mha(x, x, x, 4, module.in_proj_weight, module.in_proj_bias,
                     module.out_proj.weight, module.out_proj.bias, attn_mask=~causal)
        assert (y - expected).abs().max().item() <= 1e-5
        scaled = attn.mha(x, x, x, 4, module.in_proj_weight, module.in_proj_bias,
                          module.out_proj.weight, module.out_proj.bias, scale=0.5)
    ref = reference(x, x, x, 4, *module.in_proj_weight.detach().split(48),
                    module.out_proj.weight.detach(), module.in_proj_bias.detach(),
                    module.out_proj.bias.detach(), scale=0.5)
    assert relative_error(scaled, ref) <= 1e-5


def test_matches_attn_module_with_kdim_vdim():
    torch.manual_seed(6)
    module = attn.nn.MultiheadAttention(32, 4, kdim=20, vdim=12, batch_first=True)
    q, k, v = torch.randn(2, 9, 32), torch.randn(2, 14, 20), torch.randn(2, 14, 12)
    with torch.no_grad():
        expected, _ = module(q, k, v, need_weights=False)
        y = attn.mha(q, k, v, 4, None, module.in_proj_bias, module.out_proj.weight,
                     module.out_proj.bias, q_proj_weight=module.q_proj_weight,
                     k_proj_weight=module.k_proj_weight, v_proj_weight=module.v_proj_weight)
    assert (y - expected).abs().max().item() <= 1e-5


def test_strided_inputs_and_numpy():
    t = layer_inputs(2, 11, 13, 32, 32, 32, torch.float32, seed=7)
    wide = torch.randn(2, 11, 64)
    wide[:, :, ::2] = t["query"]
    query = wide[:, :, ::2]  # stride 2 along E
    y = attn.mha(query, t["key"], t["value"], 4, None, t["in_proj_bias"],
                 t["out_proj_weight"], t["out_proj_bias"],
                 q_proj_weight=t["q_proj_weight"].T.contiguous().T,  # column-major
                 k_proj_weight=t["k_proj_weight"], v_proj_weight=t["v_proj_weight"])
    assert relative_error(y, reference_of(t, 4)) <= 1e-5
    arrays = {name: tensor.numpy() for name, tensor in t.items()}
    y = attn.mha(arrays["query"], arrays["key"], arrays["value"], 4, None,
                 arrays["in_proj_bias"], arrays["out_proj_weight"], arrays["out_proj_bias"],
                 q_proj_weight=arrays["q_proj_weight"], k_proj_weight=arrays["k_proj_weight"],
                 v_proj_weight=arrays["v_proj_weight"])
    assert isinstance(y, np.ndarray)
    assert relative_error(torch.from_numpy(y), reference_of(t, 4)) <= 1e-5


def test_bad_arguments_are_refused():
    t = layer_inputs(2, 4, 5, 16, 16, 16, torch.float32)
    w = torch.cat([t["q_proj_weight"], t["k_proj_weight"], t["v_proj_weight"]])
    args = (t["query"], t["key"], t["value"])
    good = dict(in_proj_weight=w, in_proj_bias=t["in_proj_bias"],
                out_proj_weight=t["out_proj_weight"], out_proj_bias=t["out_proj_bias"])
    cases = [
        (dict(num_heads=3), "multiple of num_heads"),
        (dict(in_proj_weight=w[:40]), "in_proj_weight: shape"),
        (dict(in_proj_weight=None), "input projections are missing"),
        (dict(out_proj_bias=None), "both biases"),
        (dict(in_proj_bias=t["in_proj_bias"].double()), "a layer has one dtype"),
        (dict(attn_mask=torch.ones(3, 5, dtype=torch.bool)), "does not broadcast"),
        (dict(attn_mask=torch.ones(4, 5, dtype=torch.float64)), "additive bias"),
    ]
    for change, message in cases:
        kwargs = dict(good, num_heads=4)
        kwargs.update(change)
        heads = kwargs.pop("num_heads")
        with pytest.raises(attn.Error, match=message):
            attn.mha(*args, heads, **kwargs)
    with pytest.raises(attn.Error, match="rank"):
        attn.mha(t["query"][0], t["key"], t["value"], 4, **good)
    with pytest.raises(attn.Error, match="batch"):
        attn.mha(t["query"], t["key"][:1], t["value"][:1], 4, **good)
    trained = w.clone().requires_grad_()
    with pytest.raises(attn.Error, match="no gradient"):
        attn.mha(*args, 4, trained, t["in_proj_bias"], t["out_proj_weight"],
                 t["out_proj_bias"])


def test_runtime_checks_the_kernel_call():
    """The runtime's own checks, below the Python wrapper: a layer kernel
    called with tensors that do not fit it."""
    kernel = attn.kernel("mha,dtype=f32,embed=16,heads=4,bias")
    assert kernel.mha
    t = layer_inputs(2, 4, 5, 16, 16, 16, torch.float32)
    out = torch.empty(2, 4, 16)
    names = ("query", "key", "value", "q_proj_weight", "k_proj_weight", "v_proj_weight",
             "in_proj_bias", "out_proj_weight", "out_proj_bias")
    args = [t[n] for n in names]
    kernel.run_mha(*args, None, out)
    assert relative_error(out, reference_of(t, 4)) <= 1e-5
    bad = list(args)
    bad[7] = torch.zeros(16, 8)
    with pytest.raises(attn.Error, match="out_weight: dim 1"):
        kernel.run_mha(*bad, None, out)
    with pytest.raises(attn.Error, match="takes no mask"):
        kernel.run_mha(*args, torch.ones(1, 1, 1, 5, dtype=torch.bool), out)
    with pytest.raises(attn.Error, match="has biases but in_bias is NULL"):
        kernel.run_mha(*args[:6], None, args[7], args[8], None, out)
    with pytest.raises(attn.Error, match="output"):
        kernel.run_mha(*args, None, t["query"])  # overlaps an input
    forward = attn.kernel("dtype=f32,d=16")
    with pytest.raises(attn.Error, match="not a multi-head attention layer"):
        forward.run_mha(*args, None, out)
