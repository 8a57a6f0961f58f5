"""attn.additive_attention and attn.nn.AdditiveAttention against a float64
reference of docs/spec.md's "Additive attention", written as the tutorials
write it (the [B, Sq, Sk, A] tensor of tanh inputs materialized), through
attn-compile's kernels and the runtime."""

import numpy as np
import pytest

import attn

torch = pytest.importorskip("torch")

TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 1e-2}


def reference(q, k, v, w_q, w_k, w_v, mask=None):
    """context, weights in float64; 0 on a row with no allowed key."""
    q, k, v, w_q, w_k, w_v = (t.double() for t in (q, k, v, w_q, w_k, w_v))
    scores = torch.tanh((q @ w_q.T)[:, :, None, :] + (k @ w_k.T)[:, None, :, :]) @ w_v
    if mask is not None:
        if mask.dim() == 2:
            mask = mask[:, None, :]
        scores = scores.masked_fill(~mask.expand_as(scores), float("-inf"))
    top = scores.amax(-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(scores - top)
    total = e.sum(-1, keepdim=True)
    p = e / torch.where(total == 0, torch.ones_like(total), total)
    return p @ v, p


def relative_error(x, ref):
    return (x.double() - ref).abs().max().item() / max(ref.abs().max().item(), 1e-30)


def inputs(b, sq, sk, dq, dk, dv, a, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    shapes = [(b, sq, dq), (b, sk, dk), (b, sk, dv), (a, dq), (a, dk), (a,)]
    return [(torch.randn(*s, generator=g) * (0.3 if len(s) < 3 else 1.0)).to(dtype)
            for s in shapes]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("need_weights", [False, True])
def test_matches_reference(dtype, masked, need_weights):
    # Odd sizes: no multiple of a vector, a key block or a row block.
    q, k, v, w_q, w_k, w_v = inputs(2, 37, 53, 24, 20, 40, 36, dtype, seed=1)
    mask = None
    if masked:
        g = torch.Generator().manual_seed(2)
        mask = torch.rand(2, 37, 53, generator=g) > 0.3
        mask[0, 5] = False  # a row with nothing to attend
    result = attn.additive_attention(q, k, v, w_q, w_k, w_v, mask,
                                     need_weights=need_weights)
    out, weights = result if need_weights else (result, None)
    ref, ref_weights = reference(q, k, v, w_q, w_k, w_v, mask)
    assert out.dtype == dtype and out.shape == (2, 37, 40)
    assert relative_error(out, ref) <= TOLERANCE[dtype]
    if masked:
        assert torch.equal(out[0, 5], torch.zeros(40, dtype=dtype))
    if need_weights:
        assert weights.dtype == torch.float32 and weights.shape == (2, 37, 53)
        assert (weights.double() - ref_weights).abs().max().item() <= TOLERANCE[dtype]
        if masked:
            assert torch.equal(weights[0, 5], torch.zeros(53))
            assert torch.equal(weights[~mask], torch.zeros(int((~mask).sum())))


@pytest.mark.parametrize("shape", [(1, 1, 1, 1, 1, 1, 1), (3, 200, 130, 64, 48, 96, 128),
                                   (1, 5, 700, 16, 16, 16, 8)])
def test_sizes(shape):
    b, sq, sk, dq, dk, dv, a = shape
    q, k, v, w_q, w_k, w_v = inputs(b, sq, sk, dq, dk, dv, a, torch.float32, seed=sq)
    out, weights = attn.additive_attention(q, k, v, w_q, w_k, w_v, need_weights=True)
    ref, ref_weights = reference(q, k, v, w_q, w_k, w_v)
    assert relative_error(out, ref) <= 1e-5
    assert (weights.double() - ref_weights).abs().max().item() <= 1e-5


def test_broadcast_masks():
    q, k, v, w_q, w_k, w_v = inputs(2, 9, 30, 8, 8, 8, 16, torch.float32, seed=3)
    padding = torch.arange(30)[None, :] < torch.tensor([[30], [17]])  # [B, Sk]
    out = attn.additive_attention(q, k, v, w_q, w_k, w_v, padding)
    assert relative_error(out, reference(q, k, v, w_q, w_k, w_v, padding)[0]) <= 1e-5
    shared = torch.rand(1, 9, 30) > 0.5  # one mask for every batch
    out = attn.additive_attention(q, k, v, w_q, w_k, w_v, shared)
    ref = reference(q, k, v, w_q, w_k, w_v, shared.expand(2, 9, 30))[0]
    assert relative_error(out, ref) <= 1e-5
    everywhere = torch.rand(1, 1, 30) > 0.5  # one row for every batch and row
    out = attn.additive_attention(q, k, v, w_q, w_k, w_v, everywhere)
    ref = reference(q, k, v, w_q, w_k, w_v, everywhere.expand(2, 9, 30))[0]
    assert relative_error(out, ref) <= 1e-5
    as_ints = padding.int()  # nonzero attends
    out = attn.additive_attention(q, k, v, w_q, w_k, w_v, as_ints)
    assert relative_error(out, reference(q, k, v, w_q, w_k, w_v, padding)[0]) <= 1e-5


def test_nan_at_a_masked_key_stays_out():
    q, k, v, w_q, w_k, w_v = inputs(1, 4, 40, 8, 8, 8, 16, torch.float32, seed=4)
    mask = torch.ones(1, 4, 40, dtype=torch.bool)
    mask[:, :, 33] = False
    k[0, 33, 2] = float("nan")
    v[0, 33, 5] = float("nan")
    out = attn.additive_attention(q, k, v, w_q, w_k, w_v, mask)
    assert not torch.isnan(out).any()
    k[0, 33, 2], v[0, 33, 5] = 0.0, 0.0
    assert relative_error(out, reference(q, k, v, w_q, w_k, w_v, mask)[0]) <= 1e-5


def test_single_query_and_numpy():
    q, k, v, w_q, w_k, w_v = inputs(3, 1, 25, 12, 10, 6, 20, torch.float32, seed=5)
    out, weights = attn.additive_attention(q[:, 0], k, v, w_q, w_k, w_v,
                                           need_weights=True)
    assert out.shape == (3, 6) and weights.shape == (3, 25)
    ref, ref_weights = reference(q, k, v, w_q, w_k, w_v)
    assert relative_error(out, ref[:, 0]) <= 1e-5
    arrays = [t.numpy() for t in (q, k, v, w_q, w_k, w_v)]
    out = attn.additive_attention(*arrays)
    assert isinstance(out, np.ndarray)
    assert relative_error(torch.from_numpy(out), ref) <= 1e-5
    # Strided views: keys as the transpose of a [B, Dk, Sk] buffer.
    keys_t = k.transpose(1, 2).contiguous().transpose(1, 2)
    out = attn.additive_attention(q, keys_t, v, w_q.T.contiguous().T, w_k, w_v)
    assert relative_error(out, ref) <= 1e-5


class TutorialAdditiveAttention(torch.nn.Module):
    """The tutorials' module: the [B, Sq, Sk, A] tanh inputs materialized,
    masked positions filled with -1e9."""

    def __init__(self, query_dim, key_dim, attn_dim):
        super().__init__()
        self.W_q = torch.nn.Linear(query_dim, attn_dim, bias=False)
        self.W_k = torch.nn.Linear(key_dim, attn_dim, bias=False)
        self.v = torch.nn.Linear(attn_dim, 1, bias=False)

    def forward(self, query, keys, values, mask=None):
        scores = self.v(torch.tanh(self.W_q(query).unsqueeze(2) +
                                   self.W_k(keys).unsqueeze(1))).squeeze(-1)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, -1e9)
        weights = torch.softmax(scores, dim=-1)
        return weights @ values, weights


def test_module_is_a_drop_in_for_the_tutorials():
    torch.manual_seed(6)
    theirs = TutorialAdditiveAttention(24, 20, 36)
    ours = attn.nn.AdditiveAttention(24, 20, 36)
    ours.load_state_dict(theirs.state_dict())
    q, k, v = torch.randn(2, 7, 24), torch.randn(2, 30, 20), torch.randn(2, 30, 20)
    mask = torch.rand(2, 7, 30) > 0.2
    with torch.no_grad():
        (c1, w1), (c2, w2) = ours(q, k, v, mask), theirs(q, k, v, mask)
    assert relative_error(c1, c2.double()) <= 1e-5
    assert (w1 - w2).abs().max().item() <= 1e-5
    # One query per batch: the weights are [B, Sk], as the tutorial's.
    with torch.no_grad():
        context, weights = ours(q[:, :1], k, v)
    assert context.shape == (2, 1, 20) and weights.shape == (2, 30)
    # Training: gradients of every parameter and input as the tutorial's.
    q.requires_grad_()
    k.requires_grad_()
    c1, _ = ours(q, k, v, mask)
    c1.square().sum().backward()
    ours_grads = [q.grad.clone(), k.grad.clone()] + [p.grad.clone()
                                                     for p in ours.parameters()]
    q.grad, k.grad = None, None
    c2, _ = theirs(q, k, v, mask)
    c2.square().sum().backward()
    theirs_grads = [q.grad, k.grad] + [p.grad for p in theirs.parameters()]
    for mine, reference_grad in zip(ours_grads, theirs_grads):
        assert relative_error(mine, reference_grad.double()) <= 1e-4


def test_bad_arguments_are_refused():
    q, k, v, w_q, w_k, w_v = inputs(2, 3, 5, 8, 8, 8, 16, torch.float32)
    with pytest.raises(attn.Error, match="w_k: shape"):
        attn.additive_attention(q, k, v, w_q, w_k[:, :4], w_v)
    with pytest.raises(attn.Error, match="w_v: shape"):
        attn.additive_attention(q, k, v, w_q, w_k, w_v[:3])
    with pytest.raises(attn.Error, match="keys: rank is 4"):
        attn.additive_attention(q, k[None], v, w_q, w_k, w_v)
    with pytest.raises(attn.Error, match="mask: rank is 4"):
        attn.additive_attention(q, k, v, w_q, w_k, w_v, torch.ones(1, 2, 3, 5) > 0)
    # The runtime's checks, in the user's terms.
    with pytest.raises(attn.Error, match="values: dim 1 \\(Sk\\) is 4 but keys' Sk=5"):
        attn.additive_attention(q, k, v[:, :4], w_q, w_k, w_v)
    with pytest.raises(attn.Error, match="mask: dim 2 \\(Sk\\) is 4"):
        attn.additive_attention(q, k, v, w_q, w_k, w_v, torch.ones(2, 3, 4) > 0)
    with pytest.raises(attn.Error, match="values: element type is f16"):
        attn.additive_attention(q, k, v.half(), w_q, w_k, w_v)


def _kernel_backward(tensors, mask, grad_out):
    """The gradients of `tensors` (requires_grad) through the kernels (the
    forward's and attn.additive_backward's, not the kept block)."""
    import attn._additive as additive

    saved = additive.KEPT_BLOCK_BYTES
    try:
        additive.KEPT_BLOCK_BYTES = 0
        attn.additive_attention(*tensors, mask).backward(grad_out)
    finally:
        additive.KEPT_BLOCK_BYTES = saved
    return [t.grad for t in tensors]


def test_gradients_with_nan_at_a_masked_key_and_row():
    # A NaN in an excluded key (its keys and values) and in the query of a
    # row that attends nothing stays out of every gradient (the backward
    # kernel's selects, the finite copies under dW_q and dW_k): the
    # gradients are those of the same call with the NaN replaced by 0.
    tensors = inputs(1, 6, 40, 8, 8, 8, 16, torch.float32, seed=4)
    mask = torch.ones(1, 6, 40, dtype=torch.bool)
    mask[:, :, 33] = False
    mask[:, 4] = False
    grad_out = torch.randn(1, 6, 8, generator=torch.Generator().manual_seed(3))
    clean = [t.clone().requires_grad_() for t in tensors]
    expected = _kernel_backward(clean, mask, grad_out)
    q, k, v = (t.clone() for t in tensors[:3])
    k[0, 33, 2], v[0, 33, 5], q[0, 4, 1] = float("nan"), float("nan"), float("inf")
    dirty = [t.requires_grad_() for t in (q, k, v, *(t.clone() for t in tensors[3:]))]
    got = _kernel_backward(dirty, mask, grad_out)
    for name, ours, theirs in zip(("query", "keys", "values", "w_q", "w_k", "w_v"), got,
                                  expected):
        assert torch.isfinite(ours).all(), name
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6, msg=name)


def test_small_training_call_with_nan_at_a_masked_key_and_row():
    # A small call under autograd (a decoder step) computes its block in
    # PyTorch and keeps it for the backward; a NaN or inf at a masked key or
    # in a row that attends nothing must not reach the context or any
    # gradient there either (0 · NaN): the same output and gradients as the
    # call with the NaN replaced by 0.
    tensors = inputs(2, 3, 40, 8, 8, 8, 16, torch.float32, seed=6)
    mask = torch.ones(2, 3, 40, dtype=torch.bool)
    mask[:, :, 33] = False
    mask[1, 2] = False
    grad_out = torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(3))

    def step(q, k, v):
        leaves = [t.requires_grad_() for t in (q, k, v, *(t.clone() for t in tensors[3:]))]
        out = attn.additive_attention(*leaves, mask)
        out.backward(grad_out)
        return out.detach(), [t.grad for t in leaves]

    expected_out, expected = step(*(t.clone() for t in tensors[:3]))
    q, k, v = (t.clone() for t in tensors[:3])
    k[0, 33, 2], v[1, 33, 5], q[1, 2, 1] = float("nan"), float("inf"), float("nan")
    out, got = step(q, k, v)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, expected_out, rtol=1e-5, atol=1e-6)
    for name, ours, theirs in zip(("query", "keys", "values", "w_q", "w_k", "w_v"), got,
                                  expected):
        assert torch.isfinite(ours).all(), name
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5, msg=name)


def test_backward_bit_identical_on_any_thread_count(tmp_path):
    # The rows' partial sums are per part of the rows, summed in one order:
    # the gradients do not depend on the thread count.
    from conftest import results_on_threads

    one, three = results_on_threads(tmp_path, f"""
import sys, torch, attn
import attn._additive as additive
additive.KEPT_BLOCK_BYTES = 0
g = torch.Generator().manual_seed(11)
shapes = [(3, 300, 24), (3, 77, 20), (3, 77, 40), (36, 24), (36, 20), (36,)]
tensors = [(torch.randn(*s, generator=g) * 0.3).requires_grad_() for s in shapes]
mask = torch.rand(3, 300, 77, generator=g) > 0.2
attn.additive_attention(*tensors, mask).backward(torch.randn(3, 300, 40, generator=g))
torch.save([t.grad for t in tensors], sys.argv[1])
""")
    assert additive_parts_of(300) > 1
    for a, b in zip(one, three):
        assert torch.equal(a, b)


def additive_parts_of(seq_q):
    import attn._additive as additive

    return additive.backward_parts(seq_q)


def test_backward_kernel_checks_its_tensors():
    # attn_run_additive_backward's checks, in the user's terms, through the
    # binding: nothing is written when one fails.
    from attn import _cache

    kernel = _cache.kernel("additive,backward,dtype=f32,dq=8,d=6,dv=5,attn_dim=4")
    f = np.float32
    q, k, v = np.ones((2, 3, 8), f), np.ones((2, 7, 6), f), np.ones((2, 7, 5), f)
    w_q, w_k, w_v = np.ones((4, 8), f), np.ones((4, 6), f), np.ones(4, f)
    grad_out = np.ones((2, 3, 5), f)

    def outs(parts=2, qp_dtype=f):
        return (np.full((2, 3, 4), 7, qp_dtype), np.full((2, parts, 7, 4), 7, f),
                np.full((2, parts, 7, 5), 7, f), np.full((2, parts, 4), 7, f))

    good = outs()
    kernel.run_additive_backward(q, k, v, w_q, w_k, w_v, None, grad_out, *good)
    assert all(np.isfinite(t).all() for t in good)
    with pytest.raises(attn.Error, match="grad_output: dim 1 \\(Sq\\) is 2 but query's Sq=3"):
        kernel.run_additive_backward(q, k, v, w_q, w_k, w_v, None, grad_out[:, :2], *outs())
    bad = outs()
    bad = (bad[0], bad[1], np.full((2, 3, 7, 5), 7, f), bad[3])
    with pytest.raises(attn.Error, match="grad_values: dim 1 \\(P\\) is 3 but grad_kp's P=2"):
        kernel.run_additive_backward(q, k, v, w_q, w_k, w_v, None, grad_out, *bad)
    assert all((t == 7).all() for t in bad)
    with pytest.raises(attn.Error, match="grad_qp: element type is f16"):
        kernel.run_additive_backward(q, k, v, w_q, w_k, w_v, None, grad_out,
                                     *outs(qp_dtype=np.float16))
    with pytest.raises(attn.Error, match="grad_kp: dim 1 \\(P, the parts"):
        kernel.run_additive_backward(q, k, v, w_q, w_k, w_v, None, grad_out, *outs(parts=0))
    shared = outs()
    with pytest.raises(attn.Error, match="overlaps"):
        kernel.run_additive_backward(q, k, v, w_q, w_k, w_v, None, grad_out, shared[0],
                                     shared[1], shared[2], shared[1][:, :, 0])
    with pytest.raises(attn.Error, match="mask: kernel .* takes no mask"):
        kernel.run_additive_backward(q, k, v, w_q, w_k, w_v, np.ones((2, 3, 7), bool),
                                     grad_out, *outs())
    forward = _cache.kernel("additive,dtype=f32,dq=8,d=6,dv=5,attn_dim=4")
    with pytest.raises(attn.Error, match="is not an additive attention backward kernel"):
        forward.run_additive_backward(q, k, v, w_q, w_k, w_v, None, grad_out, *outs())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("mask_shape", [None, (2, 37, 53), (1, 37, 53), (2, 53)],
                         ids=lambda s: "none" if s is None else "x".join(map(str, s)))
@pytest.mark.parametrize("kept_bytes, parts", [(8 << 20, None), (0, None), (0, 5), (0, 50)],
                         ids=["kept", "kernel", "five_parts", "more_parts_than_rows"])
def test_gradients_match_float64_autograd(dtype, mask_shape, kept_bytes, parts):
    # Every input's and parameter's gradient against float64 autograd of the
    # reference: a mask with a row that attends nothing (its gradients 0,
    # not NaN), a mask shared by the batches, a padding mask [B, Sk]; the
    # block kept from a PyTorch forward (a small call), and the kernels
    # (forward and attn.additive_backward) with the rows' partial sums in
    # the shape's parts, in 5 (parts of 8 rows and a last of 5), and in
    # more parts than rows (the last ones empty).
    import attn._additive as additive

    tensors = [t.requires_grad_() for t in inputs(2, 37, 53, 24, 20, 40, 36, dtype, seed=5)]
    mask = None
    if mask_shape is not None:
        mask = torch.rand(*mask_shape, generator=torch.Generator().manual_seed(6)) > 0.3
        if len(mask_shape) == 3:
            mask[-1, 7] = False  # a row with nothing to attend
    grad_out = torch.randn(2, 37, 40, generator=torch.Generator().manual_seed(7)).to(dtype)
    saved = additive.BACKWARD_PARTS, additive.KEPT_BLOCK_BYTES
    try:
        additive.BACKWARD_PARTS, additive.KEPT_BLOCK_BYTES = parts, kept_bytes
        out = attn.additive_attention(*tensors, mask)
        out.backward(grad_out)
    finally:
        additive.BACKWARD_PARTS, additive.KEPT_BLOCK_BYTES = saved
    doubles = [t.detach().double().requires_grad_() for t in tensors]
    ref, _ = reference(*doubles, mask)
    ref.backward(grad_out.double())
    bound = {torch.float32: 1e-4, torch.bfloat16: 3e-2}[dtype]
    for name, ours, theirs in zip(("query", "keys", "values", "w_q", "w_k", "w_v"),
                                  tensors, doubles):
        assert ours.grad.dtype == dtype and torch.isfinite(ours.grad).all(), name
        assert relative_error(ours.grad, theirs.grad) <= bound, name


@pytest.mark.parametrize("kept_bytes", [8 << 20, 0], ids=["kept", "kernel"])
def test_training_call_with_weights(kept_bytes):
    # A training call that also asks for the weights makes them in the same
    # pass (kernel or kept block), equal to an inference call's and not
    # differentiable; a second backward through the graph (retain_graph)
    # gives the same gradients as the first (the kept block is not
    # overwritten).
    import attn._additive as additive

    tensors = [t.requires_grad_() for t in inputs(2, 5, 31, 24, 20, 40, 36, torch.float32,
                                                  seed=9)]
    saved = additive.KEPT_BLOCK_BYTES
    try:
        additive.KEPT_BLOCK_BYTES = kept_bytes
        out, weights = attn.additive_attention(*tensors, need_weights=True)
    finally:
        additive.KEPT_BLOCK_BYTES = saved
    with torch.no_grad():
        plain_out, plain_weights = attn.additive_attention(*tensors, need_weights=True)
    assert not weights.requires_grad
    torch.testing.assert_close(weights, plain_weights, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out.detach(), plain_out, rtol=1e-5, atol=1e-6)
    grad_out = torch.randn_like(out)
    out.backward(grad_out, retain_graph=True)
    first = [t.grad.clone() for t in tensors]
    for t in tensors:
        t.grad = None
    out.backward(grad_out)
    for a, b in zip(first, tensors):
        torch.testing.assert_close(b.grad, a)
