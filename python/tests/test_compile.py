"""torch.compile (fullgraph=True) and torch.export through torch.ops.attn.sdpa."""

import torch
import torch._dynamo.testing

import attn
from conftest import naive_attention, random_qkv, relative_error


def causal_block(q, k, v):
    # Some PyTorch around the call, so that the graph is more than one op.
    out = attn.scaled_dot_product_attention(q * 1.0, k, v, is_causal=True)
    return out + 1.0


def test_torch_compile_fullgraph_matches_eager_without_recompiling():
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("inductor")
    compiled = torch.compile(causal_block, fullgraph=True, backend=counter)
    q, k, v = random_qkv()
    eager = causal_block(q, k, v)
    first = compiled(q, k, v)
    assert relative_error(first, eager) <= 1e-6
    assert counter.frame_count == 1
    q2, k2, v2 = random_qkv(seed=1)
    second = compiled(q2, k2, v2)
    assert counter.frame_count == 1  # same shapes: no recompilation
    assert relative_error(second, causal_block(q2, k2, v2)) <= 1e-6
    assert relative_error(second - 1.0, naive_attention(q2, k2, v2, is_causal=True)[0]) <= 1e-5


def test_torch_compile_with_extensions_and_lse():
    torch._dynamo.reset()

    def fn(q, k, v, bias):
        return attn.scaled_dot_product_attention(
            q, k, v, attn_mask=bias, enable_gqa=True, window=(8, 0), softcap=20.0,
            return_lse=True)

    q, k, v = random_qkv(heads_q=8, heads_kv=2)
    bias = torch.randn(37, 45)
    out, lse = torch.compile(fn, fullgraph=True)(q, k, v, bias)
    ref_out, ref_lse = fn(q, k, v, bias)
    assert relative_error(out, ref_out) <= 1e-6
    assert relative_error(lse, ref_lse) <= 1e-6


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(32, 32)

    def forward(self, q, k, v):
        return self.proj(attn.scaled_dot_product_attention(q, k, v, is_causal=True))


def test_torch_export():
    torch.manual_seed(0)
    block = Block().eval()
    q, k, v = random_qkv()
    program = torch.export.export(block, (q, k, v))
    assert "attn.sdpa" in str(program.graph)
    with torch.no_grad():
        assert relative_error(program.module()(q, k, v), block(q, k, v)) <= 1e-6


def test_the_operator_directly():
    q, k, v = random_qkv()
    out, lse = torch.ops.attn.sdpa(q, k, v, None, True, None, False, "top_left",
                                   None, None, None, False)
    assert lse.shape == (0,)
    assert relative_error(out, naive_attention(q, k, v, is_causal=True)[0]) <= 1e-5
    torch.library.opcheck(torch.ops.attn.sdpa.default,
                          (q, k, v, None, True, None, False, "top_left", None, None, None, True))
