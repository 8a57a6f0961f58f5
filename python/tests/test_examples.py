"""examples/python: the tutorials' modules on attn against the same modules
on the tutorials' plain attention (same parameters), and the training
example, which must learn to reverse a sequence and attend along the
anti-diagonal."""

import copy
import pathlib
import sys

import pytest
import torch

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"
sys.path.insert(0, str(EXAMPLES))

import tutorial_modules as tm  # noqa: E402


def twins(make):
    """The module on attn and the same module (same parameters) on plain
    attention, in eval mode."""
    torch.manual_seed(0)
    ours = make(tm.attn_attention).eval()
    plain = make(tm.plain_attention).eval()
    plain.load_state_dict(ours.state_dict())
    return ours, plain


def close(a, b, tol=2e-5):
    assert a.shape == b.shape
    assert (a - b).abs().max().item() <= tol * max(b.abs().max().item(), 1.0)


def test_scaled_dot_product_attention():
    ours, plain = twins(lambda a: tm.ScaledDotProductAttention(0.1, a))
    q, k, v = torch.randn(2, 3, 7, 16), torch.randn(2, 3, 9, 16), torch.randn(2, 3, 9, 8)
    mask = torch.rand(2, 1, 7, 9) > 0.3
    mask[..., 0] = True
    for got, want in zip(ours(q, k, v, mask), plain(q, k, v, mask)):
        close(got, want)


def test_scaled_dot_product_attention_with_dropout():
    # In training mode the module drops weights by attn's generator on a seed
    # drawn from torch's: context and weights are the float64 softmax times
    # attn.dropout_mask(...) / (1 - p), the same mask in both.
    p = 0.3
    ours = tm.ScaledDotProductAttention(p).train()
    generator = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(2, 3, 7, 16, generator=generator),
               torch.randn(2, 3, 9, 16, generator=generator),
               torch.randn(2, 3, 9, 8, generator=generator))
    mask = torch.rand(2, 1, 7, 9, generator=generator) > 0.3
    mask[..., 0] = True
    torch.manual_seed(11)
    context, weights = ours(q, k, v, mask)
    torch.manual_seed(11)
    seed = int(torch.randint(0, 2**62, ()))  # as attn_attention draws it
    keep = torch.from_numpy(tm.attn.dropout_mask(2, 3, 7, 9, p, seed))
    assert 0.5 < keep.double().mean().item() < 0.9  # about 1 - p kept
    scores = (q.double() @ k.double().transpose(-2, -1)) / 4.0
    probs = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    want_w = probs * keep / (1 - p)
    close(weights, want_w.float())
    close(context, (want_w @ v.double()).float())
    # Another seed, other weights dropped; eval mode drops none.
    assert not torch.equal(ours(q, k, v, mask)[1], weights)
    close(ours.eval()(q, k, v, mask)[1], probs.float())


def test_self_attention_with_different_dk_dv():
    ours, plain = twins(lambda a: tm.SelfAttention(24, 16, 8, a))
    x = torch.randn(3, 10, 24)
    (context, weights), (want_c, want_w) = ours(x), plain(x)
    assert context.shape == (3, 10, 8) and weights.shape == (3, 10, 10)
    close(context, want_c)
    close(weights, want_w)


def test_multi_head_and_cross_attention():
    ours, plain = twins(lambda a: tm.MultiHeadAttention(32, 4, 0.0, a))
    x, memory = torch.randn(2, 6, 32), torch.randn(2, 11, 32)
    for got, want in zip(ours(x, x, x, is_causal=True), plain(x, x, x, is_causal=True)):
        close(got, want)
    ours, plain = twins(lambda a: tm.CrossAttention(32, 4, 0.0, a))
    keep = torch.ones(2, 1, 1, 11, dtype=torch.bool)
    keep[1, ..., 8:] = False  # padding in the second source
    (out, weights), (want_o, want_w) = ours(x, memory, keep), plain(x, memory, keep)
    assert weights.shape == (2, 4, 6, 11) and bool((weights[1, ..., 8:] == 0).all())
    close(out, want_o)
    close(weights, want_w)


def test_encoder_decoder_layers_and_their_gradients():
    ours, plain = twins(lambda a: tm.DecoderLayer(32, 4, 64, 0.0, a))
    y, memory = torch.randn(2, 7, 32), torch.randn(2, 9, 32)
    got, want = ours(y, memory), plain(y, memory)
    for a, b in zip(got, want):
        close(a, b)
    got[0].square().sum().backward()
    want[0].square().sum().backward()
    for a, b in zip(ours.parameters(), plain.parameters()):
        close(a.grad, b.grad, 1e-4)
    ours, plain = twins(lambda a: tm.EncoderLayer(32, 4, 64, 0.0, a))
    for a, b in zip(ours(memory), plain(memory)):
        close(a, b)


def test_training_example_learns_the_anti_diagonal(tmp_path):
    pytest.importorskip("matplotlib")
    import train_reverse

    out = tmp_path / "reverse.png"
    # main trains 300 steps and returns 0 when the model, decoding held-out
    # sequences greedily from its own outputs, gets > 95 % of their tokens
    # right and its strongest cross-attention is on the mirror position for
    # > 90 % of the output positions.
    assert train_reverse.main(["--steps", "300", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
