"""Shared fixtures and references for the attn Python tests.

Kernels compile into $ATTN_CACHE_DIR when it is set (scripts/python-test.sh
keeps one across runs), else into a fresh folder for the session.
"""

import math
import os
import subprocess
import sys

import pytest

import torch

#: The spec's accuracy bounds, max|O - ref| / max|ref| against float64.
TOLERANCE = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 1e-2}


@pytest.fixture(scope="session", autouse=True)
def kernel_cache(tmp_path_factory):
    if not os.environ.get("ATTN_CACHE_DIR"):
        os.environ["ATTN_CACHE_DIR"] = str(tmp_path_factory.mktemp("attn-kernels"))
    yield os.environ["ATTN_CACHE_DIR"]


def results_on_threads(tmp_path, source: str, threads=("1", "3")):
    """Runs the Python `source` (which torch.save()s its result to
    sys.argv[1]) in one fresh process per ATTN_NUM_THREADS value and returns
    the loaded results, in order: for checks that a result does not depend
    on the thread count."""
    script = tmp_path / "on_threads.py"
    script.write_text(source)
    results = []
    for count in threads:
        out = tmp_path / f"result{count}.pt"
        env = dict(os.environ, ATTN_NUM_THREADS=count)
        subprocess.run([sys.executable, str(script), str(out)], env=env, check=True)
        results.append(torch.load(out))
    return results


def relative_error(out, ref):
    out = torch.as_tensor(out).double()
    ref = torch.as_tensor(ref).double()
    scale = ref.abs().max().item()
    return (out - ref).abs().max().item() / (scale if scale > 0 else 1.0)


def naive_attention(q, k, v, mask=None, is_causal=False, scale=None, alignment="top_left",
                    window=None, softcap=None, keep=None, dropout_p=0.0, sinks=None):
    """The contract (docs/spec.md), step by step, in float64, written so that
    autograd differentiates it. Returns (output, lse); rows with nothing
    allowed give 0 and -inf (and zero gradients, never NaN). With `keep`
    (attn.dropout_mask's bits) the weights are dropped as dropout_p (rounded
    to f32) says; with `sinks` ([Hq]) each row's softmax has one more column
    per head that carries no value."""
    p, lse = naive_weights(q, k, mask, is_causal, scale, alignment, window, softcap,
                           keep, dropout_p, sinks)
    v = v.double()
    v = v.repeat_interleave(q.shape[-3] // v.shape[-3], dim=-3)
    return p @ v, lse


def naive_weights(q, k, mask=None, is_causal=False, scale=None, alignment="top_left",
                  window=None, softcap=None, keep=None, dropout_p=0.0, sinks=None):
    """The weights of naive_attention (the matrix that multiplies V) and its
    LSE, in float64: docs/spec.md's "Attention weights"."""
    q, k = q.double(), k.double()
    group = q.shape[-3] // k.shape[-3]
    k = k.repeat_interleave(group, dim=-3)
    seq_q, seq_k = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q @ k.transpose(-1, -2)) * scale
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    allowed = torch.ones(seq_q, seq_k, dtype=torch.bool)
    if mask is not None:
        if mask.dtype == torch.bool:
            allowed = allowed & mask
        else:
            s = s + mask.double()
            allowed = allowed & (mask != -math.inf)
    off = 0 if alignment == "top_left" else seq_k - seq_q
    i = torch.arange(seq_q)[:, None]
    j = torch.arange(seq_k)[None, :]
    if is_causal:
        allowed = allowed & (j <= i + off)
    if window is not None:
        left, right = window
        if left is not None:
            allowed = allowed & (j >= i + off - left)
        if right is not None:
            allowed = allowed & (j <= i + off + right)
    allowed = allowed.expand(s.shape)
    s = s.masked_fill(~allowed, -math.inf)
    any_allowed = allowed.any(-1, keepdim=True)
    if sinks is not None:
        # The sink as one more column (docs/spec.md, "Attention sinks"); a
        # row whose keys and sink are all -inf is a row with nothing allowed.
        sink = sinks.double().reshape(1, -1, 1, 1).expand(*s.shape[:-1], 1)
        z = torch.cat([s, sink], dim=-1)
        anything = any_allowed | (sink > -math.inf) | sink.isnan()
        z = torch.where(anything, z, torch.zeros_like(z))
        lse = torch.logsumexp(z, dim=-1, keepdim=True)
        p = (torch.exp(z - lse) * anything)[..., :-1]
        lse = torch.where(anything, lse, torch.full_like(lse, -math.inf)).squeeze(-1)
        if keep is not None:
            p = p * keep / (1.0 - float(torch.tensor(dropout_p, dtype=torch.float32)))
        return p, lse
    s = torch.where(any_allowed, s, torch.zeros_like(s))
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = torch.exp(s - lse) * any_allowed
    lse = torch.where(any_allowed, lse, torch.full_like(lse, -math.inf)).squeeze(-1)
    if keep is not None:
        p = p * keep / (1.0 - float(torch.tensor(dropout_p, dtype=torch.float32)))
    return p, lse


def gradients(fn, tensors, grad_out, grad_lse=None):
    """(out, lse, [the gradient of each tensor]) of fn(*tensors) -> (out,
    lse) for the given gradients of out and (when not None) lse."""
    tensors = [t.detach().clone().requires_grad_(True) for t in tensors]
    out, lse = fn(*tensors)
    outputs, grads = [out], [grad_out.to(out.dtype)]
    if grad_lse is not None:
        outputs.append(lse)
        grads.append(grad_lse)
    return out, lse, torch.autograd.grad(outputs, tensors, grads)


def random_qkv(batch=2, heads_q=4, heads_kv=4, seq_q=37, seq_k=45, d=32, dv=None,
               dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    dv = d if dv is None else dv
    q = torch.randn(batch, heads_q, seq_q, d, generator=generator).to(dtype)
    k = torch.randn(batch, heads_kv, seq_k, d, generator=generator).to(dtype)
    v = torch.randn(batch, heads_kv, seq_k, dv, generator=generator).to(dtype)
    return q, k, v
