"""attn.scaled_dot_product_attention on PyTorch tensors against
torch.nn.functional.scaled_dot_product_attention, across the spec's cases.

Each output is measured against PyTorch's SDPA evaluated in float64 on the
same inputs, with the spec's bounds (f32 1e-5, f16/bf16 1e-2)."""

import math

import pytest
import torch
import torch.nn.functional as F

import attn
from conftest import TOLERANCE, random_qkv, relative_error

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def torch_reference(q, k, v, attn_mask=None, *args, **kwargs):
    mask = attn_mask
    if mask is not None and mask.dtype != torch.bool:
        mask = mask.double()
    return F.scaled_dot_product_attention(q.double(), k.double(), v.double(), mask, *args, **kwargs)


def check(q, k, v, attn_mask=None, **kwargs):
    out = attn.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, **kwargs)
    ref = torch_reference(q, k, v, attn_mask=attn_mask, **kwargs)
    assert isinstance(out, torch.Tensor)
    assert out.dtype == q.dtype
    assert out.shape == ref.shape
    error = relative_error(out, ref)
    assert error <= TOLERANCE[q.dtype], f"relative error {error:.3g}"
    return out


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_plain(dtype):
    check(*random_qkv(dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_causal(dtype):
    check(*random_qkv(seq_q=70, seq_k=70, dtype=dtype), is_causal=True)


def test_causal_cross_attention_is_top_left():
    # Sq < Sk: PyTorch's is_causal keeps j <= i (top-left diagonal).
    check(*random_qkv(seq_q=9, seq_k=40), is_causal=True)


def test_decoding_single_query():
    check(*random_qkv(seq_q=1, seq_k=130))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "seq_q,heads_q,heads_kv", [(1, 8, 2), (3, 6, 2), (1, 32, 1), (4, 4, 4)],
    ids=["sq1-gqa4", "sq3-gqa3", "sq1-mqa32", "sq4-mha"])
def test_decoding_kernels_group_the_query_heads(dtype, seq_q, heads_q, heads_kv):
    # Sq <= 4: a kernel compiled for that Sq, whose work items take a whole
    # GQA group (or one head, for groups of more than 16).
    q, k, v = random_qkv(heads_q=heads_q, heads_kv=heads_kv, seq_q=seq_q, seq_k=300,
                         dtype=dtype)
    spec = attn._core.spec_for(q, k, v, None, False, None, "top_left", None, None, None, False)
    assert spec.endswith(f"sizes=?:?:?:{seq_q}:?")
    check(q, k, v, enable_gqa=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "mask_shape",
    [(2, 4, 37, 45), (37, 45), (1, 1, 37, 45), (2, 1, 1, 45), (4, 37, 1), (1, 45)],
    ids=lambda s: "x".join(map(str, s)),
)
def test_bool_mask_broadcast(dtype, mask_shape):
    generator = torch.Generator().manual_seed(1)
    mask = torch.rand(mask_shape, generator=generator) > 0.3
    if mask.shape[-1] == 1:
        mask[...] = True  # broadcast over keys: keep every row attending
    else:
        mask[..., 0] = True  # one key per row, so PyTorch's rows are never empty
    q, k, v = random_qkv(dtype=dtype)
    check(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mask_shape", [(2, 4, 37, 45), (1, 4, 1, 45), (37, 45)],
                         ids=lambda s: "x".join(map(str, s)))
def test_float_mask_is_an_additive_bias(dtype, mask_shape):
    generator = torch.Generator().manual_seed(2)
    bias = (torch.randn(mask_shape, generator=generator) * 2).to(dtype)
    check(*random_qkv(dtype=dtype), attn_mask=bias)


def test_float_mask_with_minus_inf_excludes_positions():
    q, k, v = random_qkv()
    bias = torch.zeros(37, 45)
    bias[:, 10:20] = -math.inf
    check(q, k, v, attn_mask=bias)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("heads_kv", [1, 2], ids=["mqa", "gqa4"])
def test_grouped_query_attention(dtype, heads_kv):
    q, k, v = random_qkv(heads_q=8, heads_kv=heads_kv, dtype=dtype)
    check(q, k, v, enable_gqa=True, is_causal=True)


def test_scale():
    check(*random_qkv(), scale=0.3)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_head_dims_differ(dtype):
    check(*random_qkv(d=16, dv=48, dtype=dtype), is_causal=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_bshd_views_run_without_a_copy(dtype):
    # [B, S, H, D] buffers seen as [B, H, S, D]: the kernel reads them with
    # their strides (the extension refuses conversions, so a copy would fail).
    generator = torch.Generator().manual_seed(3)
    q = torch.randn(2, 37, 4, 32, generator=generator).to(dtype).transpose(1, 2)
    k = torch.randn(2, 45, 4, 32, generator=generator).to(dtype).transpose(1, 2)
    v = torch.randn(2, 45, 4, 32, generator=generator).to(dtype).transpose(1, 2)
    assert not q.is_contiguous()
    check(q, k, v, is_causal=True)
    # The output is laid out as the query: [B, S, H, Dv] in memory, so that
    # merging the heads is a view; the values are those of dense inputs.
    out = attn.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert out.transpose(1, 2).is_contiguous()
    dense = attn.scaled_dot_product_attention(*(x.contiguous() for x in (q, k, v)),
                                              is_causal=True)
    assert dense.is_contiguous() and torch.equal(out, dense)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_projection_views_match_dense_inputs(dtype, causal):
    # Q, K, V as the head-split views of one [B, S, (H + 2·Hkv)·D] projection
    # (rows far apart): with more rows than a lane-rows tile and a GQA group,
    # the kernel copies each head's K and V rows dense once; the result is
    # the reference's and, bit for bit, that of dense inputs.
    batch, seq, heads, heads_kv, dim = 2, 150, 4, 2, 64
    generator = torch.Generator().manual_seed(8)
    packed = torch.randn(batch, seq, (heads + 2 * heads_kv) * dim,
                         generator=generator).to(dtype)
    q, k, v = (part.unflatten(-1, (-1, dim)).transpose(1, 2) for part in
               packed.split([heads * dim, heads_kv * dim, heads_kv * dim], -1))
    assert k.stride(2) == (heads + 2 * heads_kv) * dim
    out = check(q, k, v, is_causal=causal, enable_gqa=True)
    dense = attn.scaled_dot_product_attention(q.contiguous(), k.contiguous(),
                                              v.contiguous(), is_causal=causal,
                                              enable_gqa=True)
    assert torch.equal(out, dense)


def test_sliced_views():
    # Every other query row, a slice of the head dim of a larger buffer.
    q, k, v = random_qkv(seq_q=80, d=32)
    check(q[:, :, ::2], k, v)


def test_three_dimensional_inputs():
    q, k, v = random_qkv(batch=1)
    out = check(q[0], k[0], v[0], is_causal=True)
    assert out.shape == (4, 37, 32)


def test_empty_query():
    q, k, v = random_qkv(seq_q=0)
    out = attn.scaled_dot_product_attention(q, k, v)
    assert out.shape == (2, 4, 0, 32)


def test_positional_arguments_match_pytorch():
    # (query, key, value, attn_mask, dropout_p, is_causal, *, scale, enable_gqa)
    q, k, v = random_qkv(heads_q=8, heads_kv=2)
    out = attn.scaled_dot_product_attention(q, k, v, None, 0.0, True, scale=0.2, enable_gqa=True)
    ref = torch_reference(q, k, v, None, 0.0, True, scale=0.2, enable_gqa=True)
    assert relative_error(out, ref) <= 1e-5


def test_inputs_that_require_grad():
    q, k, v = (t.requires_grad_() for t in random_qkv())
    out = attn.scaled_dot_product_attention(q, k, v)
    ref = torch_reference(q.detach(), k.detach(), v.detach())
    assert relative_error(out.detach(), ref) <= 1e-5


def test_runs_on_torchs_threads():
    # With PyTorch loaded, CPU calls run on its OpenMP team with as many
    # threads as torch.get_num_threads() (ATTN_NUM_THREADS overrides).
    import os

    assert attn._ext.pool_kind() == "openmp"
    expected = int(os.environ.get("ATTN_NUM_THREADS") or torch.get_num_threads())
    assert attn.num_threads() == expected


POOL_SCRIPT = """
import sys, numpy as np
import attn
q = np.random.default_rng(0).standard_normal((2, 4, 300, 32), dtype=np.float32)
numpy_only = attn.scaled_dot_product_attention(q, q, q, is_causal=True)
kinds = [attn._ext.pool_kind()]
import torch
kinds.append(attn._ext.pool_kind())
t = torch.from_numpy(q)
outs = [attn.scaled_dot_product_attention(t, t, t, is_causal=True).numpy()]
torch.set_num_threads(1)
threads = attn.num_threads()
outs.append(attn.scaled_dot_product_attention(t, t, t, is_causal=True).numpy())
ref = torch.nn.functional.scaled_dot_product_attention(t.double(), t.double(), t.double(), is_causal=True).numpy()
err = max(float(np.abs(o - ref).max() / np.abs(ref).max()) for o in [numpy_only] + outs)
print(kinds[0], kinds[1], threads, err <= 1e-5, all((o == numpy_only).all() for o in outs))
"""


@pytest.mark.parametrize("pool, expected", [("", "attn openmp 1 True True"),
                                            ("attn", "attn attn 2 True True")])
def test_thread_pools(pool, expected):
    # NumPy alone runs on attn's pool; once torch is imported, on its OpenMP
    # team, sized by torch.set_num_threads; ATTN_POOL=attn keeps attn's pool.
    # Same results everywhere (the kernels' work items never depend on the
    # thread count).
    import os
    import subprocess
    import sys

    env = dict(os.environ, ATTN_POOL=pool, ATTN_NUM_THREADS="")
    if pool == "attn":
        env["ATTN_NUM_THREADS"] = "2"
    result = subprocess.run([sys.executable, "-c", POOL_SCRIPT], env=env,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[-2] == expected


FORK_SCRIPT = """
import os, torch, attn
t = torch.randn(2, 4, 300, 32)
a = attn.scaled_dot_product_attention(t, t, t).numpy()
pid = os.fork()
if pid == 0:
    b = attn.scaled_dot_product_attention(t, t, t).numpy()
    os._exit(0 if attn._ext.pool_kind() == "attn" and (a == b).all() else 1)
_, status = os.waitpid(pid, 0)
print(attn._ext.pool_kind(), os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork")
def test_forked_child_runs_on_its_own_pool():
    # GNU OpenMP hangs in a child forked after its team started (PyTorch's
    # own operators too); attn's calls in the child run on a pool of its own.
    import os
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", FORK_SCRIPT], capture_output=True,
                            text=True, timeout=120,
                            env=dict(os.environ, ATTN_POOL="", ATTN_NUM_THREADS="2"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-2:] == ["openmp", "0"]


@pytest.mark.parametrize("pool, message", [
    ("openmp", "ATTN_POOL is 'openmp' but no OpenMP runtime is loaded"),
    ("threads", "ATTN_POOL is 'threads' but must be 'auto', 'attn' or 'openmp'")])
def test_bad_pool_requests(pool, message):
    import os
    import subprocess
    import sys

    script = ("import numpy as np, attn\n"
              "q = np.ones((1, 1, 4, 8), np.float32)\n"
              "attn.scaled_dot_product_attention(q, q, q)\n")
    result = subprocess.run([sys.executable, "-c", script],
                            env=dict(os.environ, ATTN_POOL=pool),
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


def test_plain_eager_calls_skip_the_dispatcher(monkeypatch):
    # Plain tensors, nothing traced, no gradient: the implementation runs
    # directly; a tensor that requires grad (grad mode on) goes through
    # torch.ops.attn.sdpa as before. Both give the same result.
    from attn import _torch

    calls = []
    real = torch.ops.attn.sdpa

    class Recording:
        def __call__(self, *args):
            calls.append(args)
            return real(*args)

    monkeypatch.setattr(torch.ops.attn, "sdpa", Recording())
    q, k, v = random_qkv()
    eager = attn.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert calls == []
    assert _torch._plain_eager_call(q, k, v, None)
    assert not _torch._plain_eager_call(q.clone().requires_grad_(), k, v, None)
    with torch.no_grad():
        assert _torch._plain_eager_call(q.clone().requires_grad_(), k, v, None)
        # Run directly, such a tensor is detached for DLPack.
        no_grad = attn.scaled_dot_product_attention(q.clone().requires_grad_(), k, v, is_causal=True)
    assert calls == []
    assert torch.equal(eager, no_grad)
    through_op = attn.scaled_dot_product_attention(q.clone().requires_grad_(), k, v, is_causal=True)
    assert len(calls) == 1
    assert torch.equal(eager, through_op.detach())


@pytest.mark.parametrize("autocast_dtype", [torch.bfloat16, torch.float16])
def test_autocast_casts_inputs_as_sdpa_does(autocast_dtype):
    # Under torch.autocast("cpu") PyTorch's SDPA casts its floating inputs
    # (a float mask too) to the autocast dtype; so does attn, eager, through
    # the operator and compiled, instead of refusing the mixed dtypes.
    q, k, v = random_qkv(dtype=torch.float32)
    mask = torch.randn(q.shape[2], k.shape[2])
    with torch.autocast("cpu", dtype=autocast_dtype):
        expected = F.scaled_dot_product_attention(q, k.to(autocast_dtype), v, attn_mask=mask)
        out = attn.scaled_dot_product_attention(q, k.to(autocast_dtype), v, attn_mask=mask)
        op_out, _ = torch.ops.attn.sdpa(q, k, v, mask, False, None, False, "top_left",
                                        None, None, None, False)
        compiled = torch.compile(
            lambda a, b, c: attn.scaled_dot_product_attention(a, b, c, is_causal=True),
            fullgraph=True, backend="aot_eager")(q, k, v)
    assert out.dtype == expected.dtype == op_out.dtype == compiled.dtype == autocast_dtype
    cast = [t.to(autocast_dtype) for t in (q, k, v)]
    ref = torch_reference(*cast, attn_mask=mask.to(autocast_dtype))
    assert relative_error(out, ref) <= TOLERANCE[autocast_dtype]
    assert relative_error(op_out, ref) <= TOLERANCE[autocast_dtype]
    assert relative_error(compiled, torch_reference(*cast, is_causal=True)) <= TOLERANCE[autocast_dtype]
