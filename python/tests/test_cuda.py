"""attn on CUDA tensors: the GPU kernels through the Python package.

Everywhere: every GPU case's kernel compiles through the package for an
sm_90 target (the same cache entries a GPU machine uses; this is also how
scripts/gpu-bundle.sh fills the kernel cache it ships), and what can be
checked without a GPU is (device mix-ups, a stream for a CPU kernel, a GPU
kernel given CPU tensors, gradients of tensors on other devices). The tests
that need a
CPU kernel have "cpu_kernel" in their names: gpu-bundle/run.sh leaves them
out on a GPU machine without the compiler. With a GPU (cuda:0):
each case against the float64 reference, its gradients against float64
autograd, the launch on PyTorch's current stream without waiting,
torch.compile and torch.autocast("cuda").
"""

import pytest

import torch
import torch.nn.functional as F

import attn
from attn import _core

from conftest import TOLERANCE, naive_attention, random_qkv, relative_error

HAS_GPU = torch.cuda.is_available()
needs_gpu = pytest.mark.skipif(not HAS_GPU, reason="no CUDA GPU here")
#: The architecture the GPU-free test compiles for (H100/H200's).
TARGET = "sm_90"

#: (label, dtype, heads q/kv, Sq, Sk, d, mask kind, causal, alignment, lse)
CASES = [
    ("f16_plain", torch.float16, (4, 4), 77, 130, 64, None, False, "top_left", False),
    ("bf16_causal_lse", torch.bfloat16, (4, 4), 130, 130, 64, None, True, "top_left", True),
    ("f16_gqa_bottom_right", torch.float16, (8, 2), 40, 150, 128, None, True, "bottom_right",
     True),
    ("f16_bool_mask", torch.float16, (2, 2), 65, 70, 64, "bool", False, "top_left", False),
    ("bf16_bias", torch.bfloat16, (2, 2), 33, 90, 32, "bias", False, "top_left", True),
    ("f32_causal", torch.float32, (2, 2), 50, 50, 64, None, True, "top_left", False),
    ("f16_decode", torch.float16, (8, 2), 1, 300, 64, None, True, "bottom_right", True),
]


#: Kernels the tests below need besides those of CASES: the first case
#: causal (torch.compile) and with the LSE (a gradient's forward).
VARIANTS = [
    ("f16_plain_causal",) + CASES[0][1:7] + (True, "top_left", False),
    ("f16_plain_lse",) + CASES[0][1:9] + (True,),
]


def _inputs(case, seed=0):
    _, dtype, (hq, hkv), sq, sk, d, mask_kind, *_ = case
    q, k, v = random_qkv(2, hq, hkv, sq, sk, d, dtype=dtype, seed=seed)
    mask = None
    generator = torch.Generator().manual_seed(seed + 1)
    if mask_kind == "bool":
        mask = torch.rand(sq, sk, generator=generator) > 0.3
    elif mask_kind == "bias":
        mask = torch.randn(1, hq, sq, sk, generator=generator).to(dtype)
    return q, k, v, mask


def _spec(case):
    _, _, _, _, _, _, _, causal, alignment, lse = case
    q, k, v, mask = _inputs(case)
    return _core.spec_for(q, k, v, mask, causal, None, alignment, None, None, None, lse)


@pytest.mark.parametrize("case", CASES + VARIANTS, ids=[c[0] for c in CASES + VARIANTS])
def test_gpu_kernel_compiles_through_the_package(case):
    assert attn.kernel(_spec(case), target=TARGET).device == "cuda"


#: The cases whose gradients the GPU tests check (their forwards have the
#: LSE: CASES[0]'s is VARIANTS[1]).
GRAD_CASES = [CASES[0], CASES[1], CASES[2], CASES[4]]


def _backward_spec(case, grad_lse):
    _, _, _, _, _, _, _, causal, alignment, _ = case
    q, k, v, mask = _inputs(case)
    return _core.spec_for(q, k, v, mask, causal, None, alignment, None, None, None,
                          grad_lse, backward=True)


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_gpu_backward_kernel_compiles_through_the_package(case):
    # With and without dLSE: on a GPU a returned LSE's gradient (zeros when
    # the loss does not read it) goes to the kernel as it is.
    for grad_lse in (False, True):
        kernel = attn.kernel(_backward_spec(case, grad_lse), target=TARGET)
        assert kernel.device == "cuda" and kernel.backward


def _dropout_case(dtype):
    return random_qkv(2, 4, 2, 70, 90, 64, dtype=dtype, seed=21)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gpu_dropout_kernels_compile_through_the_package(dtype):
    # The kernels of the GPU dropout test below (forward with and without
    # the LSE, backward with and without dLSE): dropout's probability and
    # seed are their last parameters.
    q, k, v = _dropout_case(dtype)
    for backward in (False, True):
        for lse in (False, True):
            spec = _core.spec_for(q, k, v, None, True, None, "bottom_right", None, None,
                                  None, lse, backward=backward, dropout=True)
            kernel = attn.kernel(spec, target=TARGET)
            assert kernel.device == "cuda" and kernel.backward == backward


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gpu_dropout_matches_the_cpu_bits_and_float64_autograd(dtype):
    # The keep bits are the seed's and the position's alone: the GPU drops
    # what attn.dropout_mask says, forward and backward.
    p, seed = 0.3, 0x5EED5EED
    q, k, v = _dropout_case(dtype)
    keep = torch.from_numpy(attn.dropout_mask(2, 4, 70, 90, p, seed))
    leaves = [t.cuda().requires_grad_() for t in (q, k, v)]
    out = attn.scaled_dot_product_attention(
        *leaves, dropout_p=p, dropout_seed=seed, is_causal=True,
        causal_alignment="bottom_right", enable_gqa=True)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(4)).to(dtype)
    out.backward(grad.cuda())
    refs = [t.double().requires_grad_() for t in (q, k, v)]
    ref, _ = naive_attention(*refs, is_causal=True, alignment="bottom_right", keep=keep,
                             dropout_p=p)
    ref.backward(grad.double())
    tolerance = 1e-4 if dtype == torch.float32 else 2e-2
    assert relative_error(out.detach().cpu(), ref.detach()) <= tolerance
    for name, got, want in zip(("dq", "dk", "dv"), leaves, refs):
        error = relative_error(got.grad.cpu(), want.grad)
        assert error <= tolerance, f"{dtype} {name}: relative error {error:.3g}"


def _sinks_case():
    q, k, v = random_qkv(2, 4, 2, 70, 90, 64, dtype=torch.bfloat16, seed=13)
    # A moderate sink, none (-inf), a dominant one, a negative one.
    sinks = torch.tensor([0.5, float("-inf"), 8.0, -3.0])
    return q, k, v, sinks


def test_gpu_sinks_kernel_compiles_through_the_package():
    q, k, v, _ = _sinks_case()
    for lse in (False, True):
        spec = _core.spec_for(q, k, v, None, True, None, "bottom_right", None, None, None,
                              lse, sinks=True)
        assert attn.kernel(spec, target=TARGET).device == "cuda"


def test_cpu_kernel_is_the_cpu_one():
    assert attn.kernel(_spec(CASES[0])).device == "cpu"


def test_gpu_kernel_refuses_cpu_tensors():
    if HAS_GPU:
        pytest.skip("checks the refusal where no GPU runs the kernel")
    kernel = attn.kernel(_spec(CASES[0]), target=TARGET)
    q, k, v, _ = _inputs(CASES[0])
    out = torch.empty_like(q)
    with pytest.raises(attn.Error, match=r"query: tensor is on the CPU but the kernel "
                                         r"runs on the GPU \(cuda:0\)"):
        kernel.run(q, k, v, None, out, None)


def test_cpu_kernel_refuses_a_stream():
    q, k, v, _ = _inputs(CASES[0])
    kernel = attn.kernel(_spec(CASES[0]))
    with pytest.raises(attn.Error, match="cuda_stream is given but kernel 'attn_sdpa' "
                                         "runs on the CPU"):
        kernel.run(q, k, v, None, torch.empty_like(q), None, cuda_stream=1234)


def test_devices_must_match_and_be_cpu_or_cuda_before_any_kernel():
    q, k, v, _ = _inputs(CASES[0])
    with pytest.raises(attn.Error, match="key: tensor is on meta but query is on cpu"):
        attn.scaled_dot_product_attention(q, k.to("meta"), v)
    meta = [t.to("meta") for t in (q, k, v)]
    with pytest.raises(attn.Error, match="query: tensor is on meta but attn runs on the "
                                         r"CPU and on NVIDIA GPUs \(cuda\)"):
        attn.scaled_dot_product_attention(*meta)


def test_gradients_of_tensors_on_other_devices_are_refused_with_a_reason():
    # The backward runs on the CPU and on cuda:0; a meta tensor's gradient
    # says so before any kernel.
    q, k, v = (t.to("meta") for t in _inputs(CASES[0])[:3])
    with pytest.raises(attn.Error, match="query: tensor is on meta but attn runs on the "
                                         r"CPU and on NVIDIA GPUs \(cuda\)"):
        attn._torch.sdpa_backward(q, k, v, None, q, q[..., 0].float(), q, None,
                                  False, None, False, "top_left", None, None, None)


@needs_gpu
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_gpu_matches_the_float64_reference(case):
    label, dtype, _, _, _, _, _, causal, alignment, lse = case
    q, k, v, mask = _inputs(case, seed=7)
    ref, ref_lse = naive_attention(q, k, v, mask=mask, is_causal=causal, alignment=alignment)
    gpu = [None if t is None else t.cuda() for t in (q, k, v, mask)]
    result = attn.scaled_dot_product_attention(
        *gpu[:3], attn_mask=gpu[3], is_causal=causal, causal_alignment=alignment,
        enable_gqa=True, return_lse=lse)
    out, out_lse = result if lse else (result, None)
    assert out.device == q.cuda().device and out.dtype == dtype
    assert out.shape == ref.shape
    assert relative_error(out.cpu(), ref) <= TOLERANCE[dtype], label
    if lse:
        finite = torch.isfinite(ref_lse)
        assert torch.equal(torch.isfinite(out_lse.cpu()), finite)
        assert torch.allclose(out_lse.cpu().double()[finite], ref_lse[finite], atol=1e-3)


@needs_gpu
def test_gpu_sinks_match_the_float64_reference():
    q, k, v, sinks = _sinks_case()
    ref, ref_lse = naive_attention(q, k, v, is_causal=True, alignment="bottom_right",
                                   sinks=sinks)
    out, lse = attn.scaled_dot_product_attention(
        q.cuda(), k.cuda(), v.cuda(), is_causal=True, causal_alignment="bottom_right",
        enable_gqa=True, return_lse=True, sinks=sinks.cuda())
    assert relative_error(out.cpu(), ref) <= TOLERANCE[torch.bfloat16]
    assert torch.allclose(lse.cpu().double(), ref_lse, rtol=1e-3, atol=1e-3)


@needs_gpu
def test_gpu_kernel_writes_every_element_of_a_poisoned_output():
    case = CASES[2]
    q, k, v, _ = (t.cuda() if t is not None else None for t in _inputs(case))
    kernel = attn.kernel(_spec(case), target=TARGET)
    out = torch.full((q.shape[0], q.shape[1], q.shape[2], v.shape[3]), float("nan"),
                     dtype=q.dtype, device="cuda")
    lse = torch.full(q.shape[:3], float("nan"), device="cuda")
    kernel.run(q, k, v, None, out, lse)  # default stream: waits
    assert not out.isnan().any() and not lse.isnan().any()


@needs_gpu
def test_gpu_launch_is_queued_on_the_current_stream():
    q, k, v, _ = (t.cuda() if t is not None else None for t in _inputs(CASES[0]))
    expected = attn.scaled_dot_product_attention(q, k, v)
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(200_000_000)  # about 0.1 s of GPU time ahead of attn
        out = attn.scaled_dot_product_attention(q, k, v)
        queued = not stream.query()  # attn returned while the stream was busy
    stream.synchronize()
    assert queued
    assert torch.equal(out, expected)


@needs_gpu
def test_gpu_under_torch_compile_and_autocast():
    q, k, v = (t.cuda() for t in _inputs(CASES[0])[:3])
    compiled = torch.compile(
        lambda a, b, c: attn.scaled_dot_product_attention(a, b, c, is_causal=True),
        fullgraph=True)  # VARIANTS[0]
    eager = attn.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert torch.equal(compiled(q, k, v), eager)
    with torch.autocast("cuda", dtype=torch.float16):
        out = attn.scaled_dot_product_attention(q.float(), k.float(), v.float())
    assert out.dtype == torch.float16
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    assert relative_error(out.cpu(), ref.cpu()) <= TOLERANCE[torch.float16]


@needs_gpu
@pytest.mark.parametrize("case", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_gpu_gradients_match_float64_autograd(case):
    label, dtype, _, _, _, _, _, causal, alignment, _ = case
    q, k, v, mask = _inputs(case, seed=11)
    leaves = [t.cuda().requires_grad_() for t in (q, k, v)]
    out = attn.scaled_dot_product_attention(
        *leaves, attn_mask=None if mask is None else mask.cuda(), is_causal=causal,
        causal_alignment=alignment, enable_gqa=True)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(3)).to(dtype)
    out.backward(grad.cuda())
    refs = [t.double().requires_grad_() for t in (q, k, v)]
    ref, _ = naive_attention(*refs, mask=mask, is_causal=causal, alignment=alignment)
    ref.backward(grad.double())
    for name, got, want in zip(("dq", "dk", "dv"), leaves, refs):
        assert got.grad.device == got.device and got.grad.dtype == dtype, name
        error = relative_error(got.grad.cpu(), want.grad)
        assert error <= 2e-2, f"{label} {name}: relative error {error:.3g}"



def test_cpu_only_weights_say_so_for_other_devices():
    # The attention weights have no GPU kernel: tensors elsewhere (meta
    # here, a GPU's alike) get a message saying so.
    q, k = (t.to("meta") for t in _inputs(CASES[0])[:2])
    with pytest.raises(attn.Error, match="attention weights run on the CPU only"):
        attn.attention_weights(q, k)


#: flex_attention's GPU case: ALiBi as a score_mod reading a slope per head,
#: document masking as a block mask's mask_mod reading each position's
#: document, GQA 4/2, Sq != Sk; the GPU kernels skip the key tiles the
#: block mask's table keeps nothing of, as the CPU's do.
FLEX_SHAPE = (2, 4, 2, 70, 90, 64)


def _flex_case(device):
    batch, hq, hkv, sq, sk, d = FLEX_SHAPE
    q, k, v = random_qkv(batch, hq, hkv, sq, sk, d, dtype=torch.float16, seed=11)
    slopes = torch.tensor([2.0 ** -(h + 1) for h in range(hq)])
    docs = torch.arange(max(sq, sk)) // 23  # documents of 23 tokens
    slopes, docs = slopes.to(device), docs.to(device)

    def alibi(score, b, h, q_idx, kv_idx):
        return score + slopes[h] * (kv_idx - q_idx)

    def same_document(b, h, q_idx, kv_idx):
        return docs[q_idx] == docs[kv_idx]

    block_mask = attn.create_block_mask(same_document, None, None, sq, sk, device=device,
                                        BLOCK_SIZE=32)
    return (q, k, v), alibi, block_mask, slopes.cpu(), docs.cpu()


def test_gpu_flex_kernel_compiles_through_the_package():
    # The kernels the GPU tests below ask for, compiled here for TARGET (the
    # cache scripts/gpu-bundle.sh ships): the modifiers as flex_attention
    # traces them (the table a captured tensor, on the query's device), the
    # spec as its operator makes it.
    (q, k, v), alibi, block_mask, _, _ = _flex_case("cpu")
    modifiers = attn._flex._traced(alibi, block_mask)
    assert "attn.block_mask" in modifiers.source
    for lse in (False, True):  # True: a forward whose gradient is asked for
        spec = _core.spec_for(q, k, v, None, False, None, "top_left", None, None, None, lse)
        assert attn._cache.kernel(spec, modifiers.source, TARGET).device == "cuda"
        # Its backward, with and without dLSE.
        spec = _core.spec_for(q, k, v, None, False, None, "top_left", None, None, None, lse,
                              backward=True)
        kernel = attn._cache.kernel(spec, modifiers.source, TARGET)
        assert kernel.device == "cuda" and kernel.backward


@needs_gpu
def test_gpu_flex_attention_matches_the_float64_reference():
    (q, k, v), alibi, block_mask, slopes, docs = _flex_case("cuda")
    batch, hq, hkv, sq, sk, d = FLEX_SHAPE
    out = attn.flex_attention(q.cuda(), k.cuda(), v.cuda(), score_mod=alibi,
                              block_mask=block_mask, enable_gqa=True)
    assert out.device.type == "cuda" and out.dtype == torch.float16
    # float64 reference of the same function.
    qd, kd, vd = (t.double() for t in (q, k, v))
    kd = kd.repeat_interleave(hq // hkv, dim=1)
    vd = vd.repeat_interleave(hq // hkv, dim=1)
    scores = qd @ kd.transpose(-1, -2) / d ** 0.5
    rows, cols = torch.arange(sq)[:, None], torch.arange(sk)[None, :]
    scores = scores + slopes.double()[None, :, None, None] * (cols - rows)
    keep = docs[:sq][:, None] == docs[:sk][None, :]
    scores = scores.masked_fill(~keep, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    ref = weights @ vd
    assert relative_error(out.cpu(), ref) <= TOLERANCE[torch.float16]


@needs_gpu
def test_gpu_flex_attention_says_what_runs_on_the_cpu_only():
    (q, k, v), alibi, _, slopes, _ = _flex_case("cuda")
    q, k, v = (t.cuda() for t in (q, k, v))
    # A captured tensor on another device than the query's.
    with pytest.raises(attn.Error, match="captures.*is on cpu but query is on cuda"):
        attn.flex_attention(q, k, v, score_mod=lambda s, b, h, i, j: s + slopes[h])
    # The gradient of a captured tensor that the score_mod reads.
    trained = slopes.cuda().requires_grad_()
    out = attn.flex_attention(q, k, v, score_mod=lambda s, b, h, i, j: s + trained[h],
                              enable_gqa=True)
    with pytest.raises((attn.Error, RuntimeError),
                       match="gradient of a captured tensor .* runs on the CPU only"):
        out.sum().backward()


@needs_gpu
def test_gpu_flex_gradients_match_float64_autograd():
    (q, k, v), alibi, block_mask, slopes, docs = _flex_case("cuda")
    batch, hq, hkv, sq, sk, d = FLEX_SHAPE
    leaves = [t.cuda().requires_grad_() for t in (q, k, v)]
    out = attn.flex_attention(*leaves, score_mod=alibi, block_mask=block_mask,
                              enable_gqa=True)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(5)).half()
    out.backward(grad.cuda())
    refs = [t.double().requires_grad_() for t in (q, k, v)]
    kd = refs[1].repeat_interleave(hq // hkv, dim=1)
    vd = refs[2].repeat_interleave(hq // hkv, dim=1)
    scores = refs[0] @ kd.transpose(-1, -2) / d ** 0.5
    rows, cols = torch.arange(sq)[:, None], torch.arange(sk)[None, :]
    scores = scores + slopes.double()[None, :, None, None] * (cols - rows)
    keep = docs[:sq][:, None] == docs[:sk][None, :]
    weights = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
    (weights.nan_to_num(0.0) @ vd).backward(grad.double())
    for name, got, want in zip(("dq", "dk", "dv"), leaves, refs):
        assert got.grad.device.type == "cuda", name
        error = relative_error(got.grad.cpu(), want.grad)
        assert error <= 2e-2, f"{name}: relative error {error:.3g}"
