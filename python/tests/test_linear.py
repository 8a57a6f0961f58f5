"""attn.linear_attention against a float64 reference of docs/spec.md's
"Linear attention", written here in its quadratic form (the kernel computes
the chunked state form), through attn-compile's kernels and the runtime."""

import numpy as np
import pytest

import attn
import attn._linear

torch = pytest.importorskip("torch")

TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 1e-2}


def phi(x, feature_map):
    if feature_map == "identity":
        return x
    if feature_map == "relu":
        return x.clamp_min(0.0)
    return torch.where(x > 0, x + 1.0, torch.exp(x.clamp_max(0.0)))


def reference(q, k, v, causal, eps=1e-6, feature_map="elu_plus_one", state=None,
              normalize=True):
    """O, S, z in float64: O = (A V + φ(Q) S0) / (rowsum A + φ(Q) z0 + eps),
    A = φ(Q) φ(K)ᵀ (lower triangle when causal); the numerator alone
    without normalize."""
    q, k, v = (t.double() for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    fq, fk = phi(q, feature_map), phi(k, feature_map)
    b, hkv, d, dv = k.shape[0], k.shape[1], k.shape[3], v.shape[3]
    if state is None:
        s0, z0 = torch.zeros(b, hkv, d, dv, dtype=torch.float64), torch.zeros(
            b, hkv, d, dtype=torch.float64)
    else:
        s0, z0 = (t.double() for t in state)
    fk_q, v_q = fk.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    s0_q, z0_q = s0.repeat_interleave(group, 1), z0.repeat_interleave(group, 1)
    a = fq @ fk_q.transpose(-1, -2)
    if causal:
        a = torch.tril(a)
    num = a @ v_q + fq @ s0_q
    den = a.sum(-1) + (fq * z0_q[:, :, None]).sum(-1) + eps
    out = num / den[..., None] if normalize else num
    return out, (s0 + fk.transpose(-1, -2) @ v, z0 + fk.sum(2))


def relative_error(x, ref):
    return (x.double() - ref).abs().max().item() / max(ref.abs().max().item(), 1e-30)


def inputs(b, hq, hkv, sq, sk, d, dv, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, hq, sq, d, generator=g).to(dtype)
    k = torch.randn(b, hkv, sk, d, generator=g).to(dtype)
    v = torch.randn(b, hkv, sk, dv, generator=g).to(dtype)
    return q, k, v


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("feature_map", ["elu_plus_one", "relu"])
def test_matches_reference(dtype, causal, feature_map):
    # Odd sizes: no multiple of a vector, a chunk or a row block.
    q, k, v = inputs(2, 4, 2, 77, 77, 24, 40, dtype, seed=1)
    out, (s, z) = attn.linear_attention(q, k, v, causal=causal, feature_map=feature_map,
                                        enable_gqa=True, output_final_state=True)
    ref, (s_ref, z_ref) = reference(q, k, v, causal, feature_map=feature_map)
    assert out.dtype == dtype and out.shape == (2, 4, 77, 40)
    assert relative_error(out, ref) <= TOLERANCE[dtype]
    assert s.dtype == torch.float32 and s.shape == (2, 2, 24, 40)
    assert relative_error(s, s_ref) <= 1e-5
    assert relative_error(z, z_ref) <= 1e-5


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("feature_map", ["identity", "relu"])
def test_unnormalized(dtype, causal, feature_map):
    # normalize=False: the numerator alone (no eps); with the identity map
    # the plain sums of products, of either sign. With a state in and out.
    q, k, v = inputs(2, 4, 2, 45, 45, 20, 12, dtype, seed=4)
    g = torch.Generator().manual_seed(5)
    state = (torch.randn(2, 2, 20, 12, generator=g), torch.randn(2, 2, 20, generator=g))
    out, (s, z) = attn.linear_attention(q, k, v, causal, feature_map=feature_map,
                                        normalize=False, enable_gqa=True,
                                        initial_state=state, output_final_state=True)
    ref, (s_ref, z_ref) = reference(q, k, v, causal, feature_map=feature_map,
                                    state=state, normalize=False)
    assert relative_error(out, ref) <= TOLERANCE[dtype]
    assert relative_error(s, s_ref) <= 1e-5 and relative_error(z, z_ref) <= 1e-5
    # The NumPy reference of the package agrees (inputs as the kernel saw them).
    np_ref, _ = attn._linear.linear_attention_reference(
        q.float().numpy(), k.float().numpy(), v.float().numpy(), causal,
        feature_map=feature_map, initial_state=(state[0].numpy(), state[1].numpy()),
        normalize=False)
    assert relative_error(out, torch.from_numpy(np_ref)) <= TOLERANCE[dtype]


def test_normalize_must_be_a_bool():
    q, k, v = inputs(1, 1, 1, 4, 4, 8, 8, torch.float32)
    with pytest.raises(attn.Error, match="normalize is 0 but must be True or False"):
        attn.linear_attention(q, k, v, normalize=0)


@pytest.mark.parametrize("d,dv", [(64, 64), (128, 128), (1, 3), (80, 16)])
def test_head_dims(d, dv):
    q, k, v = inputs(1, 2, 2, 130, 130, d, dv, torch.float32, seed=d + dv)
    for causal in (False, True):
        out = attn.linear_attention(q, k, v, causal=causal)
        assert relative_error(out, reference(q, k, v, causal)[0]) <= 1e-5


def test_cross_attention_lengths():
    q, k, v = inputs(1, 2, 2, 5, 300, 32, 32, torch.float32, seed=3)
    out = attn.linear_attention(q, k, v)
    assert relative_error(out, reference(q, k, v, False)[0]) <= 1e-5


@pytest.mark.parametrize("chunk", [1, 7, 16, 64, 256])
def test_chunk_changes_only_rounding(chunk):
    q, k, v = inputs(1, 2, 2, 200, 200, 32, 48, torch.float32, seed=4)
    out = attn.linear_attention(q, k, v, causal=True, chunk_size=chunk)
    assert relative_error(out, reference(q, k, v, True)[0]) <= 1e-5


def test_state_carries_a_sequence_across_calls():
    """Prefill 50 tokens, decode one, prefill the rest: the outputs and the
    final state of one call over all of them."""
    q, k, v = inputs(2, 4, 2, 120, 120, 32, 32, torch.float32, seed=5)
    whole, (s_whole, z_whole) = attn.linear_attention(
        q, k, v, causal=True, enable_gqa=True, output_final_state=True)
    state, pieces = None, []
    for lo, hi in ((0, 50), (50, 51), (51, 52), (52, 120)):
        out, state = attn.linear_attention(
            q[:, :, lo:hi], k[:, :, lo:hi], v[:, :, lo:hi], causal=True,
            enable_gqa=True, initial_state=state, output_final_state=True)
        pieces.append(out)
    assert relative_error(torch.cat(pieces, 2), whole.double()) <= 1e-5
    assert relative_error(state[0], s_whole.double()) <= 1e-5
    assert relative_error(state[1], z_whole.double()) <= 1e-5
    # An initial state without asking for the final one.
    prefix = reference(q[:, :, :60], k[:, :, :60], v[:, :, :60], True)[1]
    tail = attn.linear_attention(q[:, :, 60:], k[:, :, 60:], v[:, :, 60:],
                                 causal=True, enable_gqa=True,
                                 initial_state=tuple(t.float() for t in prefix))
    assert relative_error(tail, whole[:, :, 60:].double()) <= 1e-5


def test_non_causal_state_adds_to_initial():
    q, k, v = inputs(1, 2, 2, 33, 33, 16, 16, torch.float32, seed=6)
    s0 = torch.rand(1, 2, 16, 16)
    z0 = torch.rand(1, 2, 16)
    out, (s, z) = attn.linear_attention(q, k, v, initial_state=(s0, z0),
                                        output_final_state=True)
    ref, (s_ref, z_ref) = reference(q, k, v, False, state=(s0, z0))
    assert relative_error(out, ref) <= 1e-5
    assert relative_error(s, s_ref) <= 1e-5 and relative_error(z, z_ref) <= 1e-5


def test_strided_and_numpy_inputs():
    q, k, v = inputs(2, 3, 3, 45, 45, 20, 28, torch.float32, seed=7)
    ref = reference(q, k, v, True)[0]
    # [B, S, H, D] buffers seen as [B, H, S, D]: no unit inner stride on the
    # head dim for the transposed-last views either.
    views = [t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v)]
    assert relative_error(attn.linear_attention(*views, causal=True), ref) <= 1e-5
    odd = [t.transpose(2, 3).contiguous().transpose(2, 3) for t in (q, k, v)]
    assert relative_error(attn.linear_attention(*odd, causal=True), ref) <= 1e-5
    out = attn.linear_attention(*(t.numpy() for t in (q, k, v)), causal=True)
    assert isinstance(out, np.ndarray)
    assert relative_error(torch.from_numpy(out), ref) <= 1e-5


def test_nan_reaches_only_later_rows_when_causal():
    q, k, v = inputs(1, 1, 1, 100, 100, 16, 16, torch.float32, seed=8)
    v[0, 0, 70, 3] = float("nan")
    out = attn.linear_attention(q, k, v, causal=True)
    assert not torch.isnan(out[0, 0, :70]).any()
    assert torch.isnan(out[0, 0, 70:]).any(dim=-1).all()
    # The rows before it are those of the sequence without its later keys.
    ref = reference(q[:, :, :70], k[:, :, :70], v[:, :, :70], True)[0]
    assert relative_error(out[:, :, :70], ref) <= 1e-5


def test_relu_row_without_mass_is_zero():
    q, k, v = inputs(1, 1, 1, 10, 10, 8, 8, torch.float32, seed=9)
    q[0, 0, 4] = -1.0  # relu(q) = 0: the numerator and φ(Q)·z are 0
    out = attn.linear_attention(q, k, v, feature_map="relu")
    assert torch.equal(out[0, 0, 4], torch.zeros(8))


def test_empty_sequence():
    q, k, v = inputs(1, 2, 2, 0, 0, 16, 16, torch.float32)
    out, (s, z) = attn.linear_attention(q, k, v, causal=True, output_final_state=True)
    assert out.shape == (1, 2, 0, 16)
    assert torch.equal(s, torch.zeros(1, 2, 16, 16)) and torch.equal(z, torch.zeros(1, 2, 16))


def test_bad_arguments_are_refused():
    q, k, v = inputs(1, 2, 2, 8, 9, 16, 16, torch.float32)
    with pytest.raises(attn.Error, match="needs as many queries as keys"):
        attn.linear_attention(q, k, v, causal=True)
    with pytest.raises(attn.Error, match="eps"):
        attn.linear_attention(q, k, v, eps=-1.0)
    with pytest.raises(attn.Error, match="feature_map"):
        attn.linear_attention(q, k, v, feature_map="softmax")
    with pytest.raises(attn.Error, match="chunk_size"):
        attn.linear_attention(q, k, v, chunk_size=0)
    with pytest.raises(attn.Error, match="rank is 3"):
        attn.linear_attention(q[0], k[0], v[0])
    with pytest.raises(attn.Error, match="enable_gqa"):
        attn.linear_attention(q, k[:, :1], v[:, :1])
    with pytest.raises(attn.Error, match="initial_state must be a pair"):
        attn.linear_attention(q, k, v, initial_state=torch.zeros(1, 2, 16, 16))
    # The runtime's checks, in the user's terms.
    with pytest.raises(attn.Error, match="initial_state: dim 2 \\(D\\) is 8"):
        attn.linear_attention(q, k, v, initial_state=(torch.zeros(1, 2, 8, 16),
                                                      torch.zeros(1, 2, 16)))
    with pytest.raises(attn.Error, match="initial_normalizer: element type is f16"):
        attn.linear_attention(q, k, v, initial_state=(
            torch.zeros(1, 2, 16, 16), torch.zeros(1, 2, 16, dtype=torch.float16)))
    with pytest.raises(attn.Error, match="value: dim 2 \\(Sk\\) is 8"):
        attn.linear_attention(q, k, v[:, :, :8])
