"""Gradients of attn.linear_attention against float64 autograd through the
quadratic-form reference of docs/spec.md's "Linear attention" (test_linear.py's
`reference`): the forward is the kernel, the backward is docs/spec.md's
"Gradient of linear attention" by attn.linear_backward's kernel (causal:
chunkwise)."""

import pytest

import attn
import attn._linear

torch = pytest.importorskip("torch")

from test_linear import inputs, phi, reference  # noqa: E402

TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 2e-2, torch.float16: 2e-2}


def relative_error(x, ref):
    return (x.double() - ref).abs().max().item() / max(ref.abs().max().item(), 1e-30)


def states(b, hkv, d, dv, seed=1):
    g = torch.Generator().manual_seed(seed)
    return (0.1 * torch.randn(b, hkv, d, dv, generator=g),
            torch.rand(b, hkv, d, generator=g))


def gradients(q, k, v, causal, feature_map="elu_plus_one", state=None, final=False,
              seed=2, normalize=True):
    """(attn's gradients, float64 autograd's) of a random linear function of
    O (and of the final state with final=True)."""
    leaves = [q, k, v] + (list(state) if state is not None else [])
    mine = [t.detach().clone().requires_grad_() for t in leaves]
    ref = [t.detach().double().requires_grad_() for t in leaves]
    b, hq, sq, dv = q.shape[0], q.shape[1], q.shape[2], v.shape[3]
    hkv, d = k.shape[1], k.shape[3]
    g = torch.Generator().manual_seed(seed)
    w_o = torch.randn(b, hq, sq, dv, generator=g, dtype=torch.float64)
    w_s = torch.randn(b, hkv, d, dv, generator=g, dtype=torch.float64)
    w_z = torch.randn(b, hkv, d, generator=g, dtype=torch.float64)
    initial = (mine[3], mine[4]) if state is not None else None
    out = attn.linear_attention(mine[0], mine[1], mine[2], causal,
                                feature_map=feature_map, initial_state=initial,
                                output_final_state=final, enable_gqa=hq != hkv,
                                normalize=normalize)
    loss = 0
    if final:
        out, (s1, z1) = out
        loss = (s1.double() * w_s).sum() + (z1.double() * w_z).sum()
    (loss + (out.double() * w_o).sum()).backward()
    o, (s1, z1) = reference(ref[0], ref[1], ref[2], causal, feature_map=feature_map,
                            state=(ref[3], ref[4]) if state is not None else None,
                            normalize=normalize)
    loss = (o * w_o).sum()
    if final:
        loss = loss + (s1 * w_s).sum() + (z1 * w_z).sum()
    loss.backward()
    return [t.grad for t in mine], [t.grad for t in ref]


NAMES = ("dQ", "dK", "dV", "dS0", "dz0")


def assert_close(mine, ref, tolerance):
    for name, got, want in zip(NAMES, mine, ref):
        error = relative_error(got, want)
        assert error <= tolerance, f"{name}: relative error {error:.2e}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("feature_map", ["elu_plus_one", "relu"])
def test_matches_float64_autograd(dtype, causal, feature_map):
    # Odd sizes: S = 77 is a chunk and a part, D != Dv, a GQA group of 2.
    q, k, v = inputs(2, 4, 2, 77, 77, 24, 40, dtype)
    mine, ref = gradients(q, k, v, causal, feature_map)
    for got, tensor in zip(mine, (q, k, v)):
        assert got.dtype == dtype and got.shape == tensor.shape
    assert_close(mine, ref, TOLERANCE[dtype])


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("feature_map", ["identity", "elu_plus_one"])
def test_unnormalized_gradients(causal, feature_map):
    # normalize=False (and the identity map): GQA, a state in and out.
    q, k, v = inputs(2, 4, 2, 45, 45, 16, 24, torch.float32)
    mine, ref = gradients(q, k, v, causal, feature_map, state=states(2, 2, 16, 24),
                          final=True, normalize=False)
    assert_close(mine, ref, 1e-4)


@pytest.mark.parametrize("causal", [False, True])
def test_state_gradients(causal):
    # The initial state requires grad and the loss uses the final state.
    q, k, v = inputs(1, 2, 2, 70, 70, 16, 8, torch.float32)
    mine, ref = gradients(q, k, v, causal, state=states(1, 2, 16, 8), final=True)
    assert mine[3].dtype == torch.float32
    assert_close(mine, ref, 1e-4)


def test_final_state_alone_carries_gradient():
    # Only the final state reaches the loss: dQ is zero, dK and dV are not.
    q, k, v = (t.requires_grad_() for t in inputs(1, 1, 1, 9, 9, 8, 8, torch.float32))
    _, (s1, z1) = attn.linear_attention(q, k, v, causal=True, output_final_state=True)
    (s1.sum() + z1.sum()).backward()
    assert torch.equal(q.grad, torch.zeros_like(q))
    ref_k = torch.where(k > 0, 1.0, torch.exp(k.detach())) * (v.detach().sum(-1, True) + 1)
    assert relative_error(k.grad, ref_k.double()) < 1e-6
    ref_v = phi(k.detach(), "elu_plus_one").sum(-1, True).expand_as(v)
    assert relative_error(v.grad, ref_v.double()) < 1e-6


@pytest.mark.parametrize("sq,sk", [(30, 50), (1, 33), (64, 3)])
def test_cross_lengths(sq, sk):
    q, k, v = inputs(2, 2, 1, sq, sk, 16, 24, torch.float32)
    mine, ref = gradients(q, k, v, False)
    assert_close(mine, ref, 1e-4)


@pytest.mark.parametrize("seq", [1, 15, 16, 17, 77])
def test_lengths_around_the_kernels_chunk(seq):
    # The causal kernel works in chunks of 16 rows: lengths below, at and
    # past one, and several chunks with a partial last one.
    q, k, v = inputs(1, 2, 2, seq, seq, 16, 16, torch.float32)
    mine, ref = gradients(q, k, v, True, state=states(1, 2, 16, 16), final=True)
    assert_close(mine, ref, 1e-4)


def test_state_carried_across_calls_backpropagates():
    # Prefill, two decoding steps and the rest, each call starting from the
    # last one's state: the gradients of one call over the whole sequence.
    q, k, v = inputs(1, 2, 1, 40, 40, 16, 16, torch.float32)
    whole = [t.clone().requires_grad_() for t in (q, k, v)]
    attn.linear_attention(*whole, causal=True, enable_gqa=True).sum().backward()
    parts = [t.clone().requires_grad_() for t in (q, k, v)]
    state, outs = None, []
    for lo, hi in ((0, 17), (17, 18), (18, 19), (19, 40)):
        out, state = attn.linear_attention(
            *(t[:, :, lo:hi] for t in parts), causal=True, enable_gqa=True,
            initial_state=state, output_final_state=True)
        outs.append(out)
    torch.cat(outs, 2).sum().backward()
    for name, a, b in zip(NAMES, whole, parts):
        assert relative_error(b.grad, a.grad.double()) < 1e-5, name


def test_nan_reaches_only_what_it_touches():
    # Causal (the kernel's chunks of 16: 64..79 holds both): a NaN key at 70
    # is outside the rows 64..69 of its chunk, so their dQ is what it would be with any finite key
    # there; a NaN query at 66 is outside the keys after it, so their dV is
    # unchanged.
    q, k, v = inputs(1, 1, 1, 77, 77, 8, 8, torch.float32)

    def grads(q, k, v):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        attn.linear_attention(*leaves, causal=True).sum().backward()
        return [t.grad for t in leaves]

    clean = grads(q, k, v)
    bad_k = k.clone()
    bad_k[:, :, 70] = float("nan")
    dq = grads(q, bad_k, v)[0]
    assert torch.isfinite(dq[:, :, :70]).all() and torch.isnan(dq[:, :, 70:]).all()
    assert relative_error(dq[:, :, :70], clean[0][:, :, :70].double()) < 1e-5
    bad_q = q.clone()
    bad_q[:, :, 66] = float("nan")
    dq, _, dv = grads(bad_q, k, v)
    assert torch.isfinite(dv[:, :, 67:]).all() and torch.isnan(dv[:, :, :67]).all()
    assert relative_error(dv[:, :, 67:], clean[2][:, :, 67:].double()) < 1e-5
    assert torch.isfinite(dq[:, :, :66]).all()


def test_only_what_requires_grad_gets_a_gradient():
    q, k, v = inputs(1, 2, 2, 20, 20, 8, 8, torch.float32)
    v.requires_grad_()
    attn.linear_attention(q, k, v, causal=True).sum().backward()
    assert q.grad is None and k.grad is None and v.grad is not None


def test_strided_inputs_and_empty_sequence():
    # [B, S, H, D] storage viewed as [B, H, S, D]; and a sequence of 0.
    g = torch.Generator().manual_seed(3)
    base = [torch.randn(2, 33, 2, 16, generator=g) for _ in range(3)]
    views = [t.transpose(1, 2) for t in base]
    mine, ref = gradients(*views, causal=True)
    assert_close(mine, ref, 1e-4)
    q, k, v = (t.requires_grad_() for t in inputs(1, 2, 2, 0, 0, 8, 8, torch.float32))
    attn.linear_attention(q, k, v, causal=True).sum().backward()
    assert q.grad.shape == q.shape and k.grad.shape == k.shape


def test_a_module_trains():
    # A linear-attention layer fits a fixed random target: the loss falls.
    torch.manual_seed(0)
    proj = torch.nn.Linear(16, 3 * 16)
    x = torch.randn(4, 32, 16)
    target = torch.randn(4, 2, 32, 8)
    opt = torch.optim.Adam(proj.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        q, k, v = proj(x).view(4, 32, 3, 2, 8).permute(2, 0, 3, 1, 4)
        out = attn.linear_attention(q, k, v, causal=True)
        loss = torch.nn.functional.mse_loss(out, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.9 * losses[0]


def test_second_derivatives_are_refused():
    # The backward uses the saved O as a constant: a gradient of it would be
    # wrong, so double backward raises instead.
    q, k, v = (t.requires_grad_() for t in inputs(1, 1, 1, 8, 8, 8, 8, torch.float32))
    out = attn.linear_attention(q, k, v, causal=True)
    (dq,) = torch.autograd.grad((out * out).sum(), q, create_graph=True)
    with pytest.raises(RuntimeError, match="twice|once"):
        dq.sum().backward()
