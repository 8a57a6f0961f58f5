"""FlexAttention's interface (attn.flex_attention, attn.create_block_mask):
the issue's examples written as ordinary Python score_mod / mask_mod
functions, each against the same functions evaluated densely in float64
(PyTorch broadcasting, not attn's tracer) across dtypes, GQA, Sq != Sk and
D != Dv; fully masked rows; gradients against float64 autograd; the block
lists against PyTorch's own create_block_mask; caching by structure; and
the errors for what a modifier cannot do."""

import inspect
import math
import sys
import types
import warnings

import pytest
import torch

import attn
from conftest import TOLERANCE, relative_error, results_on_threads

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def random_qkv(batch, heads_q, heads_kv, seq_q, seq_k, d, dv, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads_q, seq_q, d, generator=g).to(dtype)
    k = torch.randn(batch, heads_kv, seq_k, d, generator=g).to(dtype)
    v = torch.randn(batch, heads_kv, seq_k, dv, generator=g).to(dtype)
    return q, k, v


def reference(q, k, v, score_mod=None, mask_mod=None, scale=None, sinks=None):
    """Output and LSE in float64: the scores, score_mod and mask_mod applied
    to every [b, h, i, j] at once by broadcasting, the softmax (with the
    sinks' column), 0 and -inf on rows with nothing kept."""
    q, k, v = q.double(), k.double(), v.double()
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    batch, heads, seq_q, seq_k = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q @ k.transpose(-1, -2)) * scale
    b = torch.arange(batch)[:, None, None, None]
    h = torch.arange(heads)[None, :, None, None]
    i = torch.arange(seq_q)[None, None, :, None]
    j = torch.arange(seq_k)[None, None, None, :]
    if score_mod is not None:
        s = score_mod(s, b, h, i, j).double().expand(s.shape)
    if mask_mod is not None:
        s = s.masked_fill(~mask_mod(b, h, i, j).expand(s.shape), float("-inf"))
    columns = s
    if sinks is not None:
        sink = sinks.double()[None, :, None, None].expand(batch, heads, seq_q, 1)
        columns = torch.cat([s, sink], -1)
    lse = torch.logsumexp(columns, -1)
    p = torch.exp(s - lse[..., None]).nan_to_num(0.0)
    return p @ v, lse


def check(q, k, v, score_mod=None, mask_mod=None, scale=None, enable_gqa=False, sinks=None):
    block_mask = None
    if mask_mod is not None:
        block_mask = attn.create_block_mask(mask_mod, None, None, q.shape[2], k.shape[2],
                                            BLOCK_SIZE=16)
    out, lse = attn.flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask,
                                   scale=scale, enable_gqa=enable_gqa, return_lse=True,
                                   sinks=sinks)
    ref, ref_lse = reference(q, k, v, score_mod, mask_mod, scale, sinks)
    assert out.dtype == q.dtype and out.shape == ref.shape
    assert relative_error(out, ref) <= TOLERANCE[q.dtype]
    finite = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse), finite)
    if finite.any():
        error = (lse.double()[finite] - ref_lse[finite]).abs().max()
        assert error <= 1e-4 * max(1.0, ref_lse[finite].abs().max().item())
    return out, lse


# The examples, as users write them for FlexAttention ------------------

HEADS = 4
SEQ = 70
SLOPES = torch.exp2(-8.0 * torch.arange(1, HEADS + 1) / HEADS)
TABLE = torch.randn(HEADS, 17, generator=torch.Generator().manual_seed(5))
LOG_TABLE = torch.randn(HEADS, 16, generator=torch.Generator().manual_seed(6))
DOCUMENTS = torch.tensor([0] * 20 + [1] * 31 + [2] * 19, dtype=torch.int32)
PREFIX = torch.tensor([9, 30])  # per batch, int64


def alibi(score, b, h, q_idx, kv_idx):
    return score - SLOPES[h] * (q_idx - kv_idx).abs()


def relative_bias(score, b, h, q_idx, kv_idx):
    bucket = torch.clamp(kv_idx - q_idx, -8, 8) + 8
    return score + TABLE[h, bucket]


def t5_buckets(score, b, h, q_idx, kv_idx):
    """T5's causal buckets: exact up to 8, logarithmic up to 128."""
    distance = torch.clamp(q_idx - kv_idx, min=0)
    log_bucket = 8 + (torch.log(distance.float().clamp(min=1) / 8) / math.log(128 / 8) * 8).long()
    bucket = torch.where(distance < 8, distance, torch.clamp(log_bucket, max=15))
    return score + LOG_TABLE[h, bucket]


def softcap(score, b, h, q_idx, kv_idx):
    return 20 * torch.tanh(score / 20)


def assorted_math(score, b, h, q_idx, kv_idx):
    distance = (q_idx - kv_idx).abs().float()
    return (score + 0.5 * torch.sigmoid(score) - 0.1 * torch.floor(score)
            + torch.exp2(-distance) - 0.001 * (q_idx - kv_idx) ** 2 + torch.rsqrt(distance + 1))


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def document(b, h, q_idx, kv_idx):
    return DOCUMENTS[q_idx] == DOCUMENTS[kv_idx]


def prefix_lm(b, h, q_idx, kv_idx):
    return (kv_idx < PREFIX[b]) | (q_idx >= kv_idx)


def window_global(b, h, q_idx, kv_idx):
    return ((q_idx - kv_idx).abs() <= 6) | (kv_idx < 2) | (q_idx < 2)


def stripes(b, h, q_idx, kv_idx):
    # Python's modulo on negative numbers, and integer division.
    return ((kv_idx - q_idx) % 5 == 0) | ((q_idx // 7) == (kv_idx // 7))


def late_rows(b, h, q_idx, kv_idx):
    return (q_idx >= 5) & (kv_idx <= q_idx)  # rows 0-4 keep nothing


EXAMPLES = {
    "alibi": (alibi, None),
    "relative_bias": (relative_bias, None),
    "t5_buckets": (t5_buckets, None),
    "softcap": (softcap, None),
    "assorted_math": (assorted_math, None),
    "causal": (None, causal),
    "document": (None, document),
    "document_causal": (None, attn.and_masks(document, causal)),
    "prefix_lm": (None, prefix_lm),
    "window_global": (None, window_global),
    "stripes": (None, stripes),
    "alibi_document": (alibi, attn.and_masks(causal, document)),
    "late_rows": (None, late_rows),
}


@pytest.mark.parametrize("name", EXAMPLES)
def test_examples_f32(name):
    score_mod, mask_mod = EXAMPLES[name]
    q, k, v = random_qkv(2, HEADS, HEADS, SEQ, SEQ, 32, 32, torch.float32)
    check(q, k, v, score_mod, mask_mod)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", ["alibi", "t5_buckets", "document_causal", "late_rows"])
def test_examples_half(name, dtype):
    score_mod, mask_mod = EXAMPLES[name]
    q, k, v = random_qkv(2, HEADS, HEADS, SEQ, SEQ, 64, 64, dtype, seed=1)
    check(q, k, v, score_mod, mask_mod)


def striking_out_every_seventh(score, b, h, q_idx, kv_idx):
    return torch.where((q_idx + kv_idx) % 7 == 0, float("-inf"), score)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("seq_q", [SEQ, 4], ids=["prefill", "decoding"])
@pytest.mark.parametrize("case", ["document", "minus_inf"])
def test_nan_at_excluded_keys_stays_out(case, seq_q, dtype):
    # A NaN V row at a key that the mask_mod excludes for some rows (or the
    # score_mod by -inf) reaches exactly the rows that keep the key: an
    # excluded key's weight 0 must drop its V, not multiply it (0 * NaN).
    score_mod, mask_mod = ((None, document) if case == "document"
                           else (striking_out_every_seventh, None))
    q, k, v = random_qkv(1, HEADS, 2, seq_q, SEQ, 64, 64, dtype, seed=2)
    nan_key = 25  # the second document; (i + 25) % 7 == 0 for rows 3, 10, ...
    v[:, :, nan_key] = float("nan")
    block_mask = None if mask_mod is None else attn.create_block_mask(
        mask_mod, None, None, seq_q, SEQ, BLOCK_SIZE=16)
    out = attn.flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask,
                              enable_gqa=True)
    i = torch.arange(seq_q)[:, None]
    keeps = (mask_mod(0, 0, i, nan_key) if mask_mod is not None
             else score_mod(torch.zeros(()), 0, 0, i, nan_key) != float("-inf"))
    keeps = keeps.reshape(seq_q)
    # Decoding's rows 0-3 are all in the first document: none keeps it.
    assert not keeps.all() and (keeps.any() or case == "document")
    assert out[:, :, keeps].isnan().all()
    clean = v.clone()
    clean[:, :, nan_key] = 0
    ref, _ = reference(q, k, clean, score_mod, mask_mod)
    assert relative_error(out[:, :, ~keeps], ref[:, :, ~keeps]) <= TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gqa_unequal_lengths_and_dims(dtype):
    # Hq = 2 Hkv, Sq != Sk (neither a multiple of any tile), D != Dv: the
    # indices reach the modifiers as global positions and query heads.
    q, k, v = random_qkv(2, HEADS, 2, 45, SEQ, 40, 24, dtype, seed=2)

    def bias(score, b, h, q_idx, kv_idx):
        return score + TABLE[h, (kv_idx - q_idx).clamp(-8, 8) + 8] * (b + 1)

    def aligned_causal(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx + (SEQ - 45)

    check(q, k, v, bias, aligned_causal, enable_gqa=True, scale=0.2)


def test_decoding_rows():
    q, k, v = random_qkv(1, HEADS, HEADS, 1, 300, 64, 64, torch.float32, seed=3)
    check(q, k, v, alibi, lambda b, h, q_idx, kv_idx: kv_idx % 3 != 0)


def test_fully_masked_rows_and_sinks():
    q, k, v = random_qkv(2, HEADS, HEADS, SEQ, SEQ, 32, 32, torch.float32, seed=4)
    out, lse = check(q, k, v, None, late_rows)
    assert torch.equal(out[:, :, :5], torch.zeros_like(out[:, :, :5]))
    assert torch.isneginf(lse[:, :, :5]).all()
    sinks = torch.tensor([0.5, -1.0, 2.0, 0.0])
    out, lse = check(q, k, v, alibi, late_rows, sinks=sinks)
    assert torch.equal(out[:, :, :5], torch.zeros_like(out[:, :, :5]))
    assert torch.equal(lse[:, :, :5], sinks[None, :, None].expand(2, HEADS, 5))


def test_held_scalars_are_captured_values():
    # SLOPES[-1] and a 0-d tensor are computed before tracing: captured, so
    # another value runs the same kernel.
    q, k, v = random_qkv(1, HEADS, HEADS, 30, 30, 16, 16, torch.float32, seed=15)
    for temperature in (torch.tensor(0.5), torch.tensor(2.0)):
        def mod(score, b, h, q_idx, kv_idx):
            return score * temperature - SLOPES[-1] * (q_idx - kv_idx).abs()
        out = attn.flex_attention(q, k, v, score_mod=mod)
        assert relative_error(out, reference(q, k, v, mod)[0]) <= 1e-5


def counting_traces(monkeypatch):
    """The roles of the modifiers traced from now on (a list that grows)."""
    from attn import _flex

    traced, trace = [], _flex._trace
    monkeypatch.setattr(_flex, "_trace", lambda fn, role, captures: (
        traced.append(role), trace(fn, role, captures))[1])
    return traced


def check_counted(traced, q, k, v, score_mod, traces):
    """flex_attention with `score_mod` against the reference, `traces`
    traced so far."""
    out = attn.flex_attention(q, k, v, score_mod=score_mod)
    assert relative_error(out, reference(q, k, v, score_mod)[0]) <= 1e-5
    assert len(traced) == traces


def test_traces_are_reused_until_what_they_read_changes(monkeypatch):
    # A call's modifiers are traced once for what they read (closure cells,
    # the globals they name, their tensors' shapes and dtypes); their
    # tensors are read at every call.
    traced = counting_traces(monkeypatch)
    q, k, v = random_qkv(1, 2, 2, 40, 40, 16, 16, torch.float32, seed=21)
    g = torch.Generator().manual_seed(22)
    bias, width = torch.randn(2, 40, generator=g), 8

    def mod(score, b, h, q_idx, kv_idx):
        return score + bias[h, kv_idx] * width - SLOPES[h] * (q_idx - kv_idx).abs()

    def run(traces):
        check_counted(traced, q, k, v, mod, traces)

    run(1)
    run(1)
    bias.mul_(-1)  # in place
    run(1)
    bias = torch.randn(2, 40, generator=g)  # the cell rebound, same shape
    run(1)
    monkeypatch.setattr(sys.modules[__name__], "SLOPES", SLOPES.flip(0))  # a global
    run(1)
    bias = torch.randn(2, 40, generator=g, dtype=torch.float64)  # another dtype
    run(2)
    width = 3  # a number the region holds as a constant
    run(3)
    bias = torch.randn(40, generator=g)  # another rank: indexed as before, an error
    with pytest.raises(attn.Error, match="indices"):
        attn.flex_attention(q, k, v, score_mod=mod)


CONFIG = types.ModuleType("attn_test_config")
CONFIG.SCALE = 1.0


def test_traces_see_module_and_function_attributes(monkeypatch):
    traced = counting_traces(monkeypatch)
    q, k, v = random_qkv(1, 2, 2, 30, 30, 16, 16, torch.float32, seed=26)

    def mod(score, b, h, q_idx, kv_idx):
        return score * CONFIG.SCALE * mod.factor

    mod.factor = 1.0

    def run(traces):
        check_counted(traced, q, k, v, mod, traces)

    run(1)
    run(1)
    monkeypatch.setattr(CONFIG, "SCALE", 2.0)  # an attribute of a module it names
    run(2)
    mod.factor = 0.5  # the function's own attribute
    run(3)


def test_modifiers_whose_reads_cannot_be_keyed_still_run(monkeypatch):
    # A value of a subclass (which may hash otherwise) is not keyed: traced
    # at every call; a list that holds itself is keyed once.
    traced = counting_traces(monkeypatch)
    q, k, v = random_qkv(1, 2, 2, 30, 30, 16, 16, torch.float32, seed=27)

    class Scale(float):
        __hash__ = None

    scale, cyclic = Scale(2.0), [1.5]
    cyclic.append(cyclic)

    def unhashable(score, b, h, q_idx, kv_idx):
        return score * scale

    def self_holding(score, b, h, q_idx, kv_idx):
        return score * cyclic[0]

    for expected, score_mod in ((2, unhashable), (1, self_holding)):
        before = len(traced)
        for _ in range(2):
            out = attn.flex_attention(q, k, v, score_mod=score_mod)
            assert relative_error(out, reference(q, k, v, score_mod)[0]) <= 1e-5
        assert len(traced) - before == expected


def test_traces_that_read_values_are_not_reused(monkeypatch):
    # A modifier that looks at a tensor's values while it is traced is
    # traced at every call, as is one that makes its tensors itself.
    traced = counting_traces(monkeypatch)
    q, k, v = random_qkv(1, 2, 2, 30, 30, 16, 16, torch.float32, seed=23)
    doubled, true = torch.tensor(True), torch.tensor(True)

    def mod(score, b, h, q_idx, kv_idx):
        return score * 2 if doubled else score

    def equal(score, b, h, q_idx, kv_idx):  # a read inside another function
        return score * 2 if torch.equal(doubled, true) else score

    def fresh(b, h, q_idx, kv_idx):
        return torch.arange(30)[kv_idx] <= q_idx

    for value in (True, False, True):
        doubled.fill_(value)
        for score_mod in (mod, equal):
            out = attn.flex_attention(q, k, v, score_mod=score_mod)
            assert relative_error(out, reference(q, k, v, score_mod)[0]) <= 1e-5
    assert len(traced) == 6
    mask = attn.create_block_mask(fresh, None, None, 30, 30, BLOCK_SIZE=16)
    before = len(traced)
    for _ in range(2):
        out = attn.flex_attention(q, k, v, block_mask=mask)
        assert relative_error(out, reference(q, k, v, None, fresh)[0]) <= 1e-5
    assert len(traced) == before + 2


def test_modifiers_that_inspect_their_arguments():
    # Code written for FlexAttention may look at its 0-d arguments.
    q, k, v = random_qkv(1, 2, 2, 20, 20, 16, 16, torch.float32, seed=19)

    def mod(score, b, h, q_idx, kv_idx):
        assert score.dtype == torch.float32 and q_idx.dtype == torch.int32
        assert score.shape == () and score.dim() == 0 and score.device.type == "cpu"
        return torch.where(q_idx >= kv_idx, score, torch.tensor(float("-inf"), dtype=score.dtype))

    ref, _ = reference(q, k, v, mask_mod=causal)
    assert relative_error(attn.flex_attention(q, k, v, score_mod=mod), ref) <= 1e-5


def test_chained_indexing_reads_the_same_element():
    q, k, v = random_qkv(1, HEADS, HEADS, 30, 30, 16, 16, torch.float32, seed=14)
    chained = attn.flex_attention(
        q, k, v, score_mod=lambda s, b, h, i, j: s + TABLE[h][(j - i).clamp(-8, 8) + 8])
    indexed = attn.flex_attention(q, k, v, score_mod=relative_bias)
    assert torch.equal(chained, indexed)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_per_position_bias_contiguous_and_strided(dtype):
    # bias[h, q_idx, kv_idx] along a contiguous row is read by vector loads
    # where 16 keys fall inside it (a gather at the row's end), along a
    # strided one (a transposed view) by gathers; both as PyTorch reads it.
    # (Scaled, so that the kernel reads it: a plain `score + bias[...]` of
    # the query's dtype becomes an attn_mask, below.)
    g = torch.Generator().manual_seed(24)
    q, k, v = random_qkv(1, 2, 2, 37, 45, 16, 16, dtype, seed=25)
    rows = torch.randn(2, 37, 45, generator=g)
    columns = torch.randn(2, 45, 37, generator=g).transpose(1, 2)
    for bias in (rows, columns):
        def mod(score, b, h, q_idx, kv_idx):
            return score + 0.5 * bias[h, q_idx, kv_idx]
        out = attn.flex_attention(q, k, v, score_mod=mod)
        assert relative_error(out, reference(q, k, v, mod)[0]) <= TOLERANCE[dtype]


def _spy_masks(monkeypatch):
    """The attn_mask of each attn.scaled_dot_product_attention call that
    flex_attention makes (None where it calls none)."""
    from attn import _torch
    masks, sdpa = [], _torch.scaled_dot_product_attention

    def spy(query, key, value, attn_mask, *args):
        masks.append(attn_mask)
        return sdpa(query, key, value, attn_mask, *args)

    monkeypatch.setattr(_torch, "scaled_dot_product_attention", spy)
    return masks


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_per_position_bias_runs_as_a_mask(dtype, monkeypatch):
    # score + T[b?, h?, q_idx, kv_idx] with T of the query's dtype is T as
    # an additive mask: a view (T's dims past the call's cut, a dim of 1
    # broadcast, as the score_mod's clamped index reads it), with GQA, the
    # LSE and sinks; its result is the score_mod's.
    masks = _spy_masks(monkeypatch)
    g = torch.Generator().manual_seed(40)
    q, k, v = random_qkv(2, 4, 2, 37, 45, 16, 24, dtype, seed=41)
    sinks = torch.randn(4, generator=g)
    exact = torch.randn(4, 37, 45, generator=g).to(dtype)
    larger = torch.randn(3, 4, 50, 64, generator=g).to(dtype)
    one_batch = torch.randn(1, 4, 37, 45, generator=g).to(dtype)
    shared = torch.randn(37, 45, generator=g).to(dtype)
    cases = [
        (lambda s, b, h, i, j: s + exact[h, i, j], None, [1, 4, 37, 45]),
        (lambda s, b, h, i, j: larger[b, h, i, j] + s, None, [2, 4, 37, 45]),
        (lambda s, b, h, i, j: s + one_batch[b, h, i, j],
         lambda s, b, h, i, j: s + one_batch[0, h, i, j], [1, 4, 37, 45]),
        (lambda s, b, h, i, j: s + shared[i, j], None, [1, 1, 37, 45]),
    ]
    for mod, same, shape in cases:
        masks.clear()
        if same is None:
            check(q, k, v, mod, enable_gqa=True, sinks=sinks)
        else:  # (PyTorch's reference indexes batch 1 of one_batch: out of range)
            out = attn.flex_attention(q, k, v, score_mod=mod, enable_gqa=True, sinks=sinks)
            ref, _ = reference(q, k, v, same, sinks=sinks)
            assert relative_error(out, ref) <= TOLERANCE[dtype]
        assert len(masks) == 1 and list(masks[0].shape) == shape
        assert masks[0].dtype == dtype


def test_per_position_bias_as_a_mask_trains_the_table(monkeypatch):
    # A learned per-position bias: its gradient is the mask's (the backward
    # kernel's d(bias), summed over a broadcast batch), as float64 autograd
    # through the score_mod gives it.
    masks = _spy_masks(monkeypatch)
    g = torch.Generator().manual_seed(42)
    q, k, v = random_qkv(2, 2, 2, 33, 40, 16, 16, torch.float32, seed=43)
    table = torch.randn(2, 36, 40, generator=g, requires_grad=True)
    q.requires_grad_(), k.requires_grad_(), v.requires_grad_()

    def mod(score, b, h, q_idx, kv_idx):
        return score + table[h, q_idx, kv_idx]

    out = attn.flex_attention(q, k, v, score_mod=mod)
    grad = torch.randn(out.shape, generator=g)
    out.backward(grad)
    assert len(masks) == 1 and masks[0].requires_grad
    inputs = [x.detach().double().requires_grad_() for x in (q, k, v, table)]
    qd, kd, vd, td = inputs
    ref, _ = reference(qd, kd, vd, lambda s, b, h, i, j: s + td[h, i, j])
    ref.backward(grad.double())
    assert relative_error(out, ref) <= 1e-5
    for mine, theirs in zip((q, k, v, table), inputs):
        assert relative_error(mine.grad, theirs.grad) <= 1e-4


def test_bias_that_is_not_a_mask_stays_a_score_mod(monkeypatch):
    # Where a mask would not compute the same, the kernel reads the table:
    # f32 under bf16 queries (the score_mod adds it in f32), a table dim
    # between 1 and the call's length (whose clamped index repeats its last
    # row), a scaled bias, a mask_mod beside it.
    masks = _spy_masks(monkeypatch)
    g = torch.Generator().manual_seed(44)
    q, k, v = random_qkv(1, 2, 2, 37, 45, 16, 16, torch.bfloat16, seed=45)
    f32_table = torch.randn(2, 37, 45, generator=g)
    check(q, k, v, lambda s, b, h, i, j: s + f32_table[h, i, j])
    qf, kf, vf = (x.float() for x in (q, k, v))
    short = torch.randn(2, 20, 45, generator=g)
    out = attn.flex_attention(qf, kf, vf, score_mod=lambda s, b, h, i, j: s + short[h, i, j])
    ref, _ = reference(qf, kf, vf, lambda s, b, h, i, j: s + short[h, i.clamp(max=19), j])
    assert relative_error(out, ref) <= 1e-5
    table = torch.randn(2, 37, 45, generator=g)
    check(qf, kf, vf, lambda s, b, h, i, j: s - table[h, i, j])
    check(qf, kf, vf, lambda s, b, h, i, j: s + table[h, i, j],
          lambda b, h, i, j: i >= j)
    assert masks == []


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_bool_tensor_mask_mod_reads_its_bytes(dtype, monkeypatch):
    # A mask_mod that returns T[b?, h?, q_idx, kv_idx] of a bool T: the
    # kernel reads T's bytes as they are (no int32 copy; with keys in lanes,
    # 16 a load), with GQA, the LSE (rows with nothing kept: O = 0, LSE =
    # -inf) and sinks, T larger than the call or broadcast over b or h; and
    # T negated or combined, beside a score_mod, or under lists that do not
    # agree with it (a block left out of them is excluded whatever T says).
    masks = _spy_masks(monkeypatch)
    g = torch.Generator().manual_seed(48)
    q, k, v = random_qkv(2, 4, 2, 37, 45, 16, 24, dtype, seed=49)
    sinks = torch.randn(4, generator=g)
    larger = torch.rand(3, 4, 50, 64, generator=g) > 0.3
    larger[1, 2, 5] = False  # a row with nothing kept
    per_head = torch.rand(4, 37, 45, generator=g) > 0.5
    shared = torch.rand(37, 45, generator=g) > 0.5
    cases = [
        (lambda b, h, i, j: larger[b, h, i, j], None),
        (lambda b, h, i, j: per_head[h, i, j], sinks),
        (lambda b, h, i, j: shared[i, j], sinks),
        (lambda b, h, i, j: ~per_head[h, i, j], None),
        (lambda b, h, i, j: shared[i, j] & (i >= j), None),
    ]
    for mask_mod, with_sinks in cases:
        check(q, k, v, None, mask_mod, enable_gqa=True, sinks=with_sinks)
    check(q, k, v, lambda s, b, h, i, j: s * 0.5, cases[1][0], enable_gqa=True)
    block_mask = attn.create_block_mask(cases[0][0], None, None, 37, 45, BLOCK_SIZE=16)
    captures = attn._flex._traced(None, block_mask).captures
    assert captures[0].dtype == torch.bool and captures[0].data_ptr() == larger.data_ptr()
    counts = torch.tensor([[[1, 1, 1]]], dtype=torch.int32)
    indices = torch.tensor([[[[0, 0, 0], [1, 0, 0], [0, 0, 0]]]], dtype=torch.int32)
    listed = attn.BlockMask.from_kv_blocks(counts, indices, BLOCK_SIZE=16,
                                           mask_mod=cases[1][0], seq_lengths=(37, 45))
    out = attn.flex_attention(q, k, v, block_mask=listed, enable_gqa=True)
    ref, _ = reference(q, k, v, mask_mod=lambda b, h, i, j: per_head[h, i, j] & (
        j // 16 == torch.tensor([0, 1, 0])[(i // 16).clamp(max=2)]))
    assert relative_error(out, ref) <= TOLERANCE[dtype]
    assert masks == []


def test_bool_and_int64_captures():
    allowed = torch.rand(SEQ, generator=torch.Generator().manual_seed(7)) > 0.3
    documents = DOCUMENTS.long()

    def mask(b, h, q_idx, kv_idx):
        return allowed[kv_idx] & (documents[q_idx] == documents[kv_idx])

    q, k, v = random_qkv(1, 2, 2, SEQ, SEQ, 16, 16, torch.float32, seed=8)
    check(q, k, v, None, mask)


def test_matches_pytorch_flex_attention():
    flex = pytest.importorskip("torch.nn.attention.flex_attention")  # PyTorch >= 2.5
    torch_block_mask, torch_flex = flex.create_block_mask, flex.flex_attention

    q, k, v = random_qkv(1, 2, 2, 130, 130, 16, 16, torch.float32, seed=9)
    block_mask = torch_block_mask(causal, None, None, 130, 130, device="cpu")
    with warnings.catch_warnings():  # PyTorch's note that its CPU path is unfused
        warnings.simplefilter("ignore")
        expected = torch_flex(q, k, v, score_mod=alibi_2, block_mask=block_mask)
    ours = attn.flex_attention(q, k, v, score_mod=alibi_2,
                               block_mask=attn.create_block_mask(causal, None, None, 130, 130))
    assert (ours - expected).abs().max() <= 1e-5


SLOPES_2 = torch.tensor([0.5, 0.25])


def alibi_2(score, b, h, q_idx, kv_idx):
    return score + SLOPES_2[h] * (kv_idx - q_idx)


# Gradients -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gradient_with_mask_mod(dtype):
    q, k, v = random_qkv(2, HEADS, 2, 45, SEQ, 32, 24, dtype, seed=10)
    mask_mod = attn.and_masks(document, lambda b, h, i, j: j <= i + SEQ - 45)
    block_mask = attn.create_block_mask(mask_mod, None, None, 45, SEQ, BLOCK_SIZE=16)
    assert block_mask.sparsity() > 0  # the kernels get its table
    sinks = torch.tensor([0.5, -1.0, 2.0, 0.0])
    tensors = [t.detach().clone().requires_grad_() for t in (q, k, v, sinks)]
    out, lse = attn.flex_attention(*tensors[:3], block_mask=block_mask, enable_gqa=True,
                                   return_lse=True, sinks=tensors[3])
    g = torch.Generator().manual_seed(11)
    grad_out = torch.randn(out.shape, generator=g).to(dtype)
    grad_lse = torch.randn(lse.shape, generator=g)
    torch.autograd.backward([out, lse], [grad_out, grad_lse])
    doubles = [t.detach().double().requires_grad_() for t in (q, k, v, sinks)]
    ref, ref_lse = reference(*doubles[:3], mask_mod=mask_mod, sinks=doubles[3])
    torch.autograd.backward([ref, ref_lse], [grad_out.double(), grad_lse.double()])
    bound = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 2e-2}[dtype]
    for ours, theirs in zip(tensors, doubles):
        assert relative_error(ours.grad, theirs.grad) <= bound


@pytest.mark.parametrize("score_mod", [alibi, relative_bias, t5_buckets, softcap, assorted_math],
                         ids=lambda f: f.__name__)
def test_gradient_through_score_mod(score_mod):
    # The compiler differentiates the traced score_mod (assorted_math: a
    # sigmoid of the score, its floor (derivative 0), exp2 and rsqrt of the
    # distance); float64 autograd through the same Python is the reference.
    check_gradient(score_mod, None, torch.float32, 1e-4, seed=12)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_gradient_through_score_mod_and_mask_mod(dtype):
    check_gradient(softcap, document, dtype, 2e-2, seed=13)


def check_gradient(score_mod, mask_mod, dtype, bound, seed):
    q, k, v = random_qkv(2, HEADS, 2, 45, SEQ, 32, 24, dtype, seed=seed)
    q = q * 2  # scores spread enough for the soft cap and the sigmoid to bend
    block_mask = None
    if mask_mod is not None:
        block_mask = attn.create_block_mask(mask_mod, None, None, 45, SEQ, BLOCK_SIZE=16)
    tensors = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out, lse = attn.flex_attention(*tensors, score_mod=score_mod, block_mask=block_mask,
                                   enable_gqa=True, return_lse=True)
    g = torch.Generator().manual_seed(seed + 1)
    grad_out = torch.randn(out.shape, generator=g).to(dtype)
    grad_lse = torch.randn(lse.shape, generator=g)
    torch.autograd.backward([out, lse], [grad_out, grad_lse])
    doubles = [t.detach().double().requires_grad_() for t in (q, k, v)]
    ref, ref_lse = reference(*doubles, score_mod=score_mod, mask_mod=mask_mod)
    torch.autograd.backward([ref, ref_lse], [grad_out.double(), grad_lse.double()])
    for name, ours, theirs in zip("qkv", tensors, doubles):
        assert relative_error(ours.grad, theirs.grad) <= bound, name


def reference_with_captures(q, k, v, score_mod, mask_mod, sinks, grad_out, grad_lse,
                            trained):
    """Float64 autograd of the reference: the gradients of q, k, v and of the
    tensors in `trained` (float64 copies that the score_mod reads)."""
    doubles = [t.detach().double().requires_grad_() for t in (q, k, v)]
    ref, ref_lse = reference(*doubles, score_mod=score_mod, mask_mod=mask_mod, sinks=sinks)
    torch.autograd.backward([ref, ref_lse], [grad_out.double(), grad_lse.double()])
    return [t.grad for t in doubles] + [t.grad for t in trained]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", ["relative_bias", "alibi_slopes", "t5_documents"])
def test_gradient_of_captured_tensors(dtype, case):
    # A trained bias table (T5/relative buckets) and trained ALiBi slopes:
    # their gradient, and dQ, dK, dV beside it, against float64 autograd of
    # the same Python. With a documents block mask (partial and empty
    # blocks), GQA, Sq != Sk, sinks and a loss on the LSE too.
    g = torch.Generator().manual_seed(21)
    table = torch.randn(HEADS, 17, generator=g)
    slopes = torch.rand(HEADS, generator=g)
    mine = {"table": table.clone().requires_grad_(), "slopes": slopes.clone().requires_grad_()}
    theirs = {"table": table.double().requires_grad_(),
              "slopes": slopes.double().requires_grad_()}

    def make(params):
        if case == "alibi_slopes":
            return lambda s, b, h, i, j: s - params["slopes"][h] * (i - j).abs()
        return lambda s, b, h, i, j: s + params["table"][h, torch.clamp(j - i, -8, 8) + 8]

    mask_mod = document if case == "t5_documents" else None
    seq_q = SEQ if mask_mod is not None else 45
    q, k, v = random_qkv(2, HEADS, 2, seq_q, SEQ, 32, 24, dtype, seed=22)
    sinks = torch.tensor([0.5, -1.0, 2.0, 0.0])
    block_mask = None
    if mask_mod is not None:
        block_mask = attn.create_block_mask(mask_mod, None, None, seq_q, SEQ, BLOCK_SIZE=16)
        assert block_mask.sparsity() > 0
    tensors = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out, lse = attn.flex_attention(*tensors, score_mod=make(mine), block_mask=block_mask,
                                   enable_gqa=True, return_lse=True, sinks=sinks)
    grad_out = torch.randn(out.shape, generator=g).to(dtype)
    grad_lse = torch.randn(lse.shape, generator=g)
    torch.autograd.backward([out, lse], [grad_out, grad_lse])
    name = "slopes" if case == "alibi_slopes" else "table"
    refs = reference_with_captures(q, k, v, make(theirs), mask_mod, sinks, grad_out,
                                   grad_lse, [theirs[name]])
    bound = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 2e-2}[dtype]
    for label, ours, ref in zip(("dq", "dk", "dv", name), tensors + [mine[name]], refs):
        assert ours.grad is not None and ours.grad.dtype == ours.dtype, label
        assert relative_error(ours.grad, ref) <= bound, label
    unused = mine["slopes" if name == "table" else "table"]
    assert unused.grad is None


def test_captured_gradient_trains_a_bias_table():
    # Only the table is trained (q, k, v fixed), through the output alone:
    # the loss falls, and the backward kernel's gradient is the one that
    # PyTorch computes when the partial sums would not fit (in blocks of
    # query rows, here one row a block).
    q, k, v = random_qkv(1, HEADS, HEADS, 40, 40, 16, 16, torch.float32, seed=23)
    target = torch.randn(1, HEADS, 40, 16, generator=torch.Generator().manual_seed(24))
    table = torch.zeros(HEADS, 17, requires_grad=True)

    def bias(s, b, h, i, j):
        return s + table[h, torch.clamp(j - i, -8, 8) + 8]

    def loss():
        return torch.nn.functional.mse_loss(attn.flex_attention(q, k, v, score_mod=bias),
                                            target)

    loss().backward()
    whole = table.grad.clone()
    table.grad = None
    import attn._flex as flex
    saved = flex.CAPTURE_BLOCK_BYTES, flex.CAPTURE_PARTIAL_BYTES
    try:
        flex.CAPTURE_PARTIAL_BYTES = 0  # no partial sums: in PyTorch
        flex.CAPTURE_BLOCK_BYTES = 1  # one query row per block
        loss().backward()
    finally:
        flex.CAPTURE_BLOCK_BYTES, flex.CAPTURE_PARTIAL_BYTES = saved
    assert relative_error(table.grad, whole.double()) < 1e-5
    opt = torch.optim.Adam([table], lr=0.1)
    first = loss().item()
    for _ in range(20):
        opt.zero_grad()
        value = loss()
        value.backward()
        opt.step()
    assert loss().item() < first


def capture_score_mods(params):
    """score_mods that read trained tensors every way the backward kernel
    adds their gradients: a key's bias (16 increasing elements a vector), a
    query's bias (one element for all lanes), relative buckets cut by a clamp
    and a floor division (lanes sharing elements: lane by lane), a table read
    twice, a trained temperature and soft cap (derivatives through the score),
    a [B, Sk] bias indexed by b and kv_idx."""
    p = params
    return {
        "key_bias": lambda s, b, h, i, j: s + p["key"][j],
        "query_bias": lambda s, b, h, i, j: s + p["query"][i],
        "buckets": lambda s, b, h, i, j: s + p["table"][h, torch.clamp((j - i) // 3, -4, 4) + 4],
        "read_twice": lambda s, b, h, i, j: (s + p["table"][h, torch.clamp(j - i, -4, 4) + 4]
                                             - p["table"][(h + 1) % HEADS, 8 - (j % 9)]),
        "temperature": lambda s, b, h, i, j: s * p["temperature"][h],
        "softcap": lambda s, b, h, i, j: p["cap"][h] * torch.tanh(s / p["cap"][h]),
        "batch_keys": lambda s, b, h, i, j: s + p["batch_keys"][b, j],
    }


def capture_params(seq_k, generator):
    return {"key": torch.randn(seq_k, generator=generator),
            "query": torch.randn(45, generator=generator),
            "table": torch.randn(HEADS, 9, generator=generator),
            "temperature": 0.5 + torch.rand(HEADS, generator=generator),
            "cap": 2.0 + torch.rand(HEADS, generator=generator),
            "batch_keys": torch.randn(2, seq_k, generator=generator)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", ["key_bias", "query_bias", "buckets", "read_twice",
                                  "temperature", "softcap", "batch_keys"])
def test_compiled_gradient_of_captured_tensors(dtype, case):
    # The backward kernel's gradient of each trained capture (and dQ, dK, dV
    # beside it) against float64 autograd of the same Python, with GQA, a
    # causal block mask whose rows of 45 queries against 70 keys leave
    # partial and empty blocks, and a loss on the LSE too; and against the
    # gradient PyTorch computes when the partial sums would not fit.
    g = torch.Generator().manual_seed(31)
    values = capture_params(SEQ, g)
    name = {"key_bias": "key", "query_bias": "query", "buckets": "table",
            "read_twice": "table", "batch_keys": "batch_keys", "softcap": "cap"}.get(case, case)
    mine = {n: t.clone().requires_grad_(n == name) for n, t in values.items()}
    theirs = {n: t.double().requires_grad_(n == name) for n, t in values.items()}
    q, k, v = random_qkv(2, HEADS, 2, 45, SEQ, 32, 24, dtype, seed=32)

    def causal(b, h, i, j):
        return j <= i + (SEQ - 45)

    block_mask = attn.create_block_mask(causal, None, None, 45, SEQ, BLOCK_SIZE=16)
    grad_out = torch.randn(2, HEADS, 45, 24, generator=g).to(dtype)
    grad_lse = torch.randn(2, HEADS, 45, generator=g)

    def gradients():
        tensors = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        out, lse = attn.flex_attention(*tensors, score_mod=capture_score_mods(mine)[case],
                                       block_mask=block_mask, enable_gqa=True, return_lse=True)
        torch.autograd.backward([out, lse], [grad_out, grad_lse])
        grads = [t.grad for t in tensors] + [mine[name].grad]
        mine[name].grad = None
        return grads

    compiled = gradients()
    refs = reference_with_captures(q, k, v, capture_score_mods(theirs)[case], causal, None,
                                   grad_out, grad_lse, [theirs[name]])
    bound = {torch.float32: 1e-4, torch.bfloat16: 2e-2}[dtype]
    for label, ours, ref in zip(("dq", "dk", "dv", name), compiled, refs):
        assert ours.dtype == (torch.float32 if label == name else dtype), label
        assert relative_error(ours, ref) <= bound, label
    import attn._flex as flex
    saved = flex.CAPTURE_PARTIAL_BYTES
    try:
        flex.CAPTURE_PARTIAL_BYTES = 0
        in_pytorch = gradients()
    finally:
        flex.CAPTURE_PARTIAL_BYTES = saved
    assert relative_error(compiled[3], in_pytorch[3].double()) <= 1e-4
    for ours, theirs_ in zip(compiled[:3], in_pytorch[:3]):
        assert torch.equal(ours, theirs_)


def test_captured_gradient_does_not_depend_on_the_thread_count(tmp_path):
    # The same trained table in processes with 1 and 3 threads: the gradient
    # bit-identical (each work item writes its own partial, summed in order).
    one, three = results_on_threads(
        tmp_path,
        "import sys, torch, attn\n"
        "g = torch.Generator().manual_seed(0)\n"
        "q = torch.randn(2, 6, 150, 32, generator=g)\n"
        "k = torch.randn(2, 3, 170, 32, generator=g)\n"
        "v = torch.randn(2, 3, 170, 32, generator=g)\n"
        "table = torch.randn(6, 33, generator=g, requires_grad=True)\n"
        "def bias(s, b, h, i, j):\n"
        "    return s + table[h, torch.clamp(j - i, -16, 16) + 16]\n"
        "o = attn.flex_attention(q, k, v, score_mod=bias, enable_gqa=True)\n"
        "o.backward(torch.randn(o.shape, generator=g))\n"
        "torch.save(table.grad, sys.argv[1])\n")
    assert torch.equal(one, three)


def test_trained_capture_that_only_the_mask_mod_reads():
    # A gradient does not reach through the mask_mod: a trained tensor that
    # only it reads gets zeros, beside the score_mod's own capture's gradient.
    q, k, v = random_qkv(1, HEADS, HEADS, 30, 30, 16, 16, torch.float32, seed=33)
    limits = torch.full((HEADS,), 10.0, requires_grad=True)
    slopes = torch.rand(HEADS, requires_grad=True)
    block_mask = attn.create_block_mask(lambda b, h, i, j: (i - j).abs() < limits[h], None,
                                        None, 30, 30, BLOCK_SIZE=16)
    out = attn.flex_attention(q, k, v, score_mod=lambda s, b, h, i, j: s - slopes[h] * (i - j),
                              block_mask=block_mask)
    out.sum().backward()
    assert slopes.grad is not None and bool(slopes.grad.abs().sum() > 0)
    assert limits.grad is None or bool((limits.grad == 0).all())


def test_under_torch_compile():
    # The modifiers are traced eagerly (one graph break); the operator
    # torch.ops.attn.flex is in the compiled graph.
    import torch._dynamo

    q, k, v = random_qkv(1, 2, 2, 33, 33, 16, 16, torch.float32, seed=16)

    def f(q, k, v):
        return attn.flex_attention(q, k, v, score_mod=alibi_2) * 2

    torch._dynamo.reset()
    explained = torch._dynamo.explain(f)(q, k, v)
    assert explained.graph_break_count <= 1
    assert torch.equal(torch.compile(f)(q, k, v), f(q, k, v))


def _eager_gradients(f, tensors):
    """The gradients of f(q, k, v).sum() in eager mode to `tensors` (q, k,
    v and a table), whose .grad is then cleared for the compiled run."""
    f(*tensors[:3]).sum().backward()
    grads = [t.grad.clone() for t in tensors]
    for t in tensors:
        t.grad = None
    return grads


def _assert_gradients(eager, tensors):
    """The compiled run's gradients are eager mode's bits."""
    for name, want, t in zip(("dq", "dk", "dv", "table"), eager, tensors):
        assert torch.equal(t.grad, want), name


def test_per_position_bias_under_torch_compile():
    # The bias found in the trace (eager, the one graph break) and the
    # masked operator compiled: eager mode's bits, gradients included.
    import torch._dynamo

    table = torch.randn(HEADS, 33, 40, generator=torch.Generator().manual_seed(19),
                        requires_grad=True)

    def f(q, k, v):
        return attn.flex_attention(q, k, v, score_mod=lambda s, b, h, i, j: s + table[h, i, j])

    q, k, v = (t.requires_grad_() for t in random_qkv(1, HEADS, HEADS, 33, 40, 16, 16,
                                                         torch.float32, seed=20))
    eager = _eager_gradients(f, (q, k, v, table))
    torch._dynamo.reset()
    explained = torch._dynamo.explain(f)(q, k, v)
    assert explained.graph_break_count <= 1
    torch._dynamo.reset()
    out = torch.compile(f)(q, k, v)
    assert torch.equal(out, f(q, k, v))
    out.sum().backward()
    _assert_gradients(eager, (q, k, v, table))


def test_training_under_torch_compile():
    # The backward is an operator too (torch.ops.attn.flex_backward, with a
    # fake implementation): AOTAutograd traces it without falling back, and
    # the gradients of q, k, v and of a trained table are eager mode's bits.
    import torch._dynamo

    table = torch.randn(HEADS, 17, generator=torch.Generator().manual_seed(17),
                        requires_grad=True)

    def f(q, k, v):
        return attn.flex_attention(
            q, k, v, score_mod=lambda s, b, h, i, j: s + table[h, torch.clamp(j - i, -8, 8) + 8])

    q, k, v = (t.requires_grad_() for t in random_qkv(1, HEADS, HEADS, 33, 40, 16, 16,
                                                         torch.float32, seed=18))
    eager = _eager_gradients(f, (q, k, v, table))
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Error detected in ...Backward" is a warning
        torch.compile(f)(q, k, v).sum().backward()
    _assert_gradients(eager, (q, k, v, table))


# Block masks -------------------------------------------------------------------


@pytest.mark.parametrize("mask_mod", [causal, window_global, document],
                         ids=lambda f: f.__name__)
def test_block_lists_match_pytorch(mask_mod):
    torch_block_mask = pytest.importorskip("torch.nn.attention.flex_attention").create_block_mask

    theirs = torch_block_mask(mask_mod, 2, None, SEQ, 50, device="cpu", BLOCK_SIZE=16)
    ours = attn.create_block_mask(mask_mod, 2, None, SEQ, 50, BLOCK_SIZE=16)
    for name in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices",
                 "q_num_blocks", "q_indices", "full_q_num_blocks", "full_q_indices"):
        assert torch.equal(getattr(ours, name), getattr(theirs, name)), name
    assert ours.shape == (2, 1, SEQ, 50)
    assert ours.sparsity() == pytest.approx(theirs.sparsity())
    assert torch.equal(ours.to_dense(), theirs.to_dense())


def test_block_mask_changed_after_a_call():
    # The kernel table is made once per block mask; lists changed in place
    # or replaced after a call are read again: no block listed, nothing
    # attended (O = 0, LSE = -inf); the lists restored, the first result.
    q, k, v = random_qkv(1, 2, 2, 40, 40, 16, 16, torch.float32, seed=19)
    block_mask = attn.create_block_mask(causal, None, None, 40, 40, BLOCK_SIZE=16)
    first = attn.flex_attention(q, k, v, block_mask=block_mask)
    saved = block_mask.kv_num_blocks.clone(), block_mask.full_kv_num_blocks.clone()
    block_mask.kv_num_blocks.zero_()
    block_mask.full_kv_num_blocks.zero_()
    out, lse = attn.flex_attention(q, k, v, block_mask=block_mask, return_lse=True)
    assert bool((out == 0).all()) and bool((lse == float("-inf")).all())
    block_mask.kv_num_blocks, block_mask.full_kv_num_blocks = saved
    assert torch.equal(attn.flex_attention(q, k, v, block_mask=block_mask), first)


def test_block_mask_all_full_leaves_the_mask_mod_out():
    # A block mask that declares every block full promises that its
    # mask_mod keeps every score: the kernel neither reads a table nor
    # evaluates the mask_mod (as in any full block), so a mask_mod that
    # reads a tensor costs nothing there.
    ids = torch.arange(40, dtype=torch.int32)

    def reads_ids(b, h, q_idx, kv_idx):
        return ids[q_idx] >= 0

    block_mask = attn.create_block_mask(reads_ids, None, None, 40, 40, BLOCK_SIZE=8)
    assert bool((block_mask.kernel_table() == 2).all())
    modifiers = attn._flex._traced(None, block_mask)
    assert modifiers.source is None
    q, k, v = random_qkv(1, 2, 2, 40, 40, 16, 16, torch.float32, seed=23)
    out = attn.flex_attention(q, k, v, block_mask=block_mask)
    assert torch.equal(out, attn.flex_attention(q, k, v))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_block_sparse_skipping_per_batch_and_head(dtype):
    # The kernel skips the key blocks the block mask's table leaves out
    # (per batch and query head here: the mask_mod reads b and h), with
    # block sizes that are not the kernel's tiles and lengths that are not
    # multiples of either. Skipping must not drop a kept score.
    seq_q, seq_k = 300, 333
    ends = torch.tensor([[0, 50, 140, 141, 260, 333], [0, 200, 333, 333, 333, 333]])
    doc_q = torch.stack([torch.bucketize(torch.arange(seq_q), e[1:], right=True) for e in ends])
    doc_k = torch.stack([torch.bucketize(torch.arange(seq_k), e[1:], right=True) for e in ends])
    doc_q, doc_k = doc_q.to(torch.int32), doc_k.to(torch.int32)
    reach = torch.tensor([40, 1000, 90, 7])  # per query head

    def mask_mod(b, h, q_idx, kv_idx):
        return ((doc_q[b, q_idx] == doc_k[b, kv_idx]) & (kv_idx <= q_idx + (seq_k - seq_q))
                & (q_idx + (seq_k - seq_q) - kv_idx <= reach[h]))

    block_mask = attn.create_block_mask(mask_mod, 2, 4, seq_q, seq_k, BLOCK_SIZE=(32, 64))
    assert block_mask.sparsity() > 50
    assert "attn.block_mask = array<i64: 3, 32, 64>" in attn._flex._traced(None, block_mask).source
    q, k, v = random_qkv(2, 4, 2, seq_q, seq_k, 32, 16, dtype, seed=17)
    out, lse = attn.flex_attention(q, k, v, block_mask=block_mask, enable_gqa=True,
                                   return_lse=True)
    ref, ref_lse = reference(q, k, v, mask_mod=mask_mod)
    assert relative_error(out, ref) <= TOLERANCE[dtype]
    finite = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse), finite)
    assert (lse.double()[finite] - ref_lse[finite]).abs().max() <= 1e-3


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_block_table_without_a_mask_mod_left(dtype):
    # A causal mask_mod becomes the causal attribute whole; its block table
    # stays and is read with global rows in every query tile (bf16 tiles
    # hold 256 rows: two table rows each).
    seq = 600
    q, k, v = random_qkv(1, 2, 2, seq, seq, 64, 64, dtype, seed=18)
    block_mask = attn.create_block_mask(causal, None, None, seq, seq)
    out, lse = attn.flex_attention(q, k, v, block_mask=block_mask, return_lse=True)
    ref, ref_lse = reference(q, k, v, mask_mod=causal)
    assert relative_error(out, ref) <= TOLERANCE[dtype]
    assert (lse.double() - ref_lse).abs().max() <= 1e-3


def _per_batch_and_head_documents():
    ends = torch.tensor([[0, 50, 140, 141, 260], [0, 200, 333, 333, 333]])
    docs = torch.stack([torch.bucketize(torch.arange(333), e[1:], right=True)
                        for e in ends]).to(torch.int32)
    reach = torch.tensor([40, 1000, 90, 7])

    def per_batch_and_head(b, h, q_idx, kv_idx):
        return ((docs[b, q_idx] == docs[b, kv_idx]) & (kv_idx <= q_idx)
                & (q_idx - kv_idx <= reach[h]))
    return per_batch_and_head


@pytest.mark.parametrize("case", [
    (causal, None, None, 300, 300, 128),
    (causal, 2, 3, 300, 250, (32, 64)),         # rectangular blocks, cut ends
    (window_global, None, 4, 333, 333, 32),
    (document, None, None, SEQ, 50, 16),
    (attn.and_masks(document, causal), 2, None, SEQ, SEQ, 16),
    (attn.noop_mask, None, None, 100, 70, 32),  # traced to nothing
    (_per_batch_and_head_documents(), 2, 4, 333, 333, (32, 64)),
], ids=["causal", "causal_rect", "window_global", "document", "document_causal", "noop",
        "per_batch_and_head"])
def test_compiled_block_mask_matches_eager(case):
    # create_block_mask(_compile=True) fills the table in a kernel compiled
    # from the traced mask_mod (attn_fill_block_table), whose band
    # attn-band-from-mask-mod moves to attributes: the same blocks as
    # PyTorch's evaluation, and flex_attention gives the same output on it.
    mask_mod, batch, heads, seq_q, seq_k, size = case
    eager = attn.create_block_mask(mask_mod, batch, heads, seq_q, seq_k, BLOCK_SIZE=size)
    compiled = attn.create_block_mask(mask_mod, batch, heads, seq_q, seq_k, BLOCK_SIZE=size,
                                      _compile=True)
    for ours, theirs in zip(compiled.as_tuple(), eager.as_tuple()):
        if isinstance(ours, torch.Tensor):
            assert torch.equal(ours, theirs)
        else:
            assert ours == theirs
    q, k, v = random_qkv(batch or 1, heads or 1, heads or 1, seq_q, seq_k, 16, 16,
                         torch.float32, seed=19)
    assert torch.equal(attn.flex_attention(q, k, v, block_mask=compiled),
                       attn.flex_attention(q, k, v, block_mask=eager))


def test_compiled_block_mask_refuses_what_it_cannot_trace():
    def item(b, h, q_idx, kv_idx):
        return q_idx.item() >= kv_idx.item()

    with pytest.raises(attn.Error, match=r"\.item\(\) is not supported in a modifier"):
        attn.create_block_mask(item, None, None, 64, 64, _compile=True)


def test_block_mask_that_needs_vmap():
    def scalar_only(b, h, q_idx, kv_idx):
        # torch.where with Python numbers on both sides only works on 0-d
        # tensors under broadcasting too; .item() would not: vmap it is.
        return torch.where(q_idx >= kv_idx, True, False)

    mask = attn.create_block_mask(scalar_only, None, None, 40, 40, BLOCK_SIZE=8)
    assert mask.full_kv_num_blocks[0, 0].tolist() == [0, 1, 2, 3, 4]


def test_block_mask_shape_must_match_the_call():
    q, k, v = random_qkv(2, 2, 2, 32, 32, 16, 16, torch.float32)
    with pytest.raises(attn.Error, match="Q_LEN, KV_LEN = \\(16, 32\\)"):
        attn.flex_attention(q, k, v, block_mask=attn.create_block_mask(causal, None, None, 16, 32))
    with pytest.raises(attn.Error, match="B, H = \\(3, 1\\)"):
        attn.flex_attention(q, k, v, block_mask=attn.create_block_mask(causal, 3, None, 32, 32))
    with pytest.raises(attn.Error, match="must be a BlockMask"):
        attn.flex_attention(q, k, v, block_mask=causal)


# PyTorch's FlexAttention API beyond the call ------------------------------------


def torch_flex():
    return pytest.importorskip("torch.nn.attention.flex_attention")


@pytest.mark.parametrize("separate_full_blocks", [True, False])
@pytest.mark.parametrize("mask_mod", [document, prefix_lm, window_global],
                         ids=lambda f: f.__name__)
def test_pytorch_block_mask_runs_as_ours(mask_mod, separate_full_blocks):
    # A BlockMask made by PyTorch's create_block_mask (switching only
    # flex_attention's import) gives what attn's own gives, and the
    # reference; separate_full_blocks=False (no full lists) too.
    flex = torch_flex()
    if not separate_full_blocks and "separate_full_blocks" not in str(
            inspect.signature(flex.create_block_mask)):
        pytest.skip("this PyTorch's create_block_mask has no separate_full_blocks")
    q, k, v = random_qkv(2, 2, 2, SEQ, SEQ, 16, 16, torch.float32, seed=29)
    theirs = flex.create_block_mask(mask_mod, 2, None, SEQ, SEQ, device="cpu", BLOCK_SIZE=16,
                                    separate_full_blocks=separate_full_blocks)
    ours = attn.create_block_mask(mask_mod, 2, None, SEQ, SEQ, BLOCK_SIZE=16,
                                  separate_full_blocks=separate_full_blocks)
    assert (ours.full_kv_num_blocks is None) == (not separate_full_blocks)
    want = attn.flex_attention(q, k, v, block_mask=ours)
    assert torch.equal(attn.flex_attention(q, k, v, block_mask=theirs), want)
    ref, _ = reference(q, k, v, mask_mod=mask_mod)
    assert relative_error(want, ref) <= TOLERANCE[torch.float32]
    # Converted once: a second call reads the same kernel table.
    converted = attn.BlockMask._of_torch(theirs)
    assert attn.BlockMask._of_torch(theirs) is converted
    theirs.kv_num_blocks.zero_()  # changed in place: converted again
    assert attn.BlockMask._of_torch(theirs) is not converted


def test_constants_made_like_an_argument():
    q, k, v = random_qkv(1, 2, 2, 30, 30, 16, 16, torch.float32, seed=59)

    def shifted(score, b, h, q_idx, kv_idx):
        return (score + torch.full_like(score, 0.5) * torch.zeros_like(score)
                + score.new_tensor(0.25) - q_idx.new_full((), 1).float())

    ref, _ = reference(q, k, v, score_mod=lambda s, b, h, i, j: s + 0.25 - 1.0)
    assert relative_error(attn.flex_attention(q, k, v, score_mod=shifted), ref) <= 1e-5


def test_pytorch_mask_combinators_trace():
    # PyTorch's and_masks / or_masks / noop_mask start from
    # b.new_ones((), dtype=torch.bool): traced as a constant.
    flex = torch_flex()
    q, k, v = random_qkv(1, 2, 2, SEQ, SEQ, 16, 16, torch.float32, seed=53)
    for mask_mod in (flex.and_masks(document, causal), flex.or_masks(causal, window_global),
                     flex.noop_mask):
        block_mask = flex.create_block_mask(mask_mod, None, None, SEQ, SEQ, device="cpu",
                                            BLOCK_SIZE=16)
        ref, _ = reference(q, k, v, mask_mod=lambda b, h, i, j: attn.create_mask(
            mask_mod, 1, 1, SEQ, SEQ)[0, 0, i, j])
        out = attn.flex_attention(q, k, v, block_mask=block_mask)
        assert relative_error(out, ref) <= TOLERANCE[torch.float32], mask_mod.__name__


def test_block_mask_from_kv_blocks():
    # Lists written by hand (each query block of 16 rows attends its own
    # key block and block 0, without a mask_mod: every score of a listed
    # block kept) against PyTorch's from_kv_blocks and the dense reference.
    flex = torch_flex()
    blocks = -(-SEQ // 16)
    counts = torch.tensor([[[1] + [2] * (blocks - 1)]], dtype=torch.int32)
    indices = torch.zeros(1, 1, blocks, blocks, dtype=torch.int32)
    for r in range(blocks):
        indices[0, 0, r, 0] = r
    indices[0, 0, 1:, 1] = 0
    ours = attn.BlockMask.from_kv_blocks(counts, indices, BLOCK_SIZE=16, seq_lengths=(SEQ, SEQ))
    theirs = flex.BlockMask.from_kv_blocks(counts, indices, BLOCK_SIZE=16,
                                           seq_lengths=(SEQ, SEQ))
    for name in ("q_num_blocks", "q_indices"):
        assert torch.equal(getattr(ours, name), getattr(theirs, name)), name
    assert torch.equal(ours.to_dense(), theirs.to_dense())
    assert ours.sparsity() == pytest.approx(theirs.sparsity())
    assert ours.numel() == theirs.numel() == SEQ * SEQ
    assert ours.to_string() == theirs.to_string()
    assert str(ours) == str(theirs).replace("BlockMask(shape=(1, 1, 70, 70)",
                                            "BlockMask(shape=(1, 1, 70, 70)")

    def listed(b, h, q_idx, kv_idx):
        return (kv_idx // 16 == q_idx // 16) | (kv_idx < 16)

    q, k, v = random_qkv(1, 2, 2, SEQ, SEQ, 16, 16, torch.float32, seed=31)
    ref, _ = reference(q, k, v, mask_mod=listed)
    out = attn.flex_attention(q, k, v, block_mask=ours)
    assert relative_error(out, ref) <= TOLERANCE[torch.float32]
    assert torch.equal(attn.flex_attention(q, k, v, block_mask=theirs), out)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_lists_that_disagree_with_the_mask_mod_decide_as_pytorch(dtype):
    # Lists from from_kv_blocks (or PyTorch's BlockMask) decide as
    # FlexAttention's kernels do, whatever the mask_mod says: a block left
    # out is excluded, a full one kept whole, the mask_mod applied in the
    # partial ones. (PyTorch's compiled flex_attention gives this; its eager
    # CPU path evaluates the mask_mod everywhere and ignores the lists.) At
    # the table's 16 x 16 blocks, finer than the kernels' own (rows of 64
    # keys, tiles of 256 rows), their blocks meet entries of every kind.
    flex = torch_flex()
    seq, size = 150, 16
    blocks = -(-seq // size)
    g = torch.Generator().manual_seed(43)
    kind = torch.randint(0, 3, (1, 2, blocks, blocks), generator=g)  # 0, 1 partial, 2 full
    kind[0, 1, 3] = 0  # a query block with nothing listed: O = 0, LSE = -inf
    counts, indices = attn._flex._block_lists(kind == 1)
    full_counts, full_indices = attn._flex._block_lists(kind == 2)
    q, k, v = random_qkv(1, 2, 2, seq, seq, 64, 64, dtype, seed=47)
    for mask_mod in (causal, None):
        def listed(b, h, q_idx, kv_idx):
            entry = kind[b, h, q_idx // size, kv_idx // size]
            return (entry == 2) | ((entry == 1) & (True if mask_mod is None
                                                    else mask_mod(b, h, q_idx, kv_idx)))

        ref, ref_lse = reference(q, k, v, mask_mod=listed)
        ours = attn.BlockMask.from_kv_blocks(counts, indices, full_counts, full_indices,
                                             BLOCK_SIZE=size, mask_mod=mask_mod,
                                             seq_lengths=(seq, seq))
        theirs = flex.BlockMask.from_kv_blocks(counts, indices, full_counts, full_indices,
                                               BLOCK_SIZE=size, mask_mod=mask_mod,
                                               seq_lengths=(seq, seq))
        for mask in (ours, theirs):
            out, lse = attn.flex_attention(q, k, v, block_mask=mask, return_lse=True)
            assert relative_error(out, ref) <= TOLERANCE[dtype], mask_mod
            finite = torch.isfinite(ref_lse)
            assert torch.equal(torch.isfinite(lse), finite)
            assert (lse.double()[finite] - ref_lse[finite]).abs().max() <= 1e-3
    # The backward takes the same positions.
    tensors = [t.detach().float().requires_grad_() for t in (q, k, v)]
    out = attn.flex_attention(*tensors, block_mask=ours, score_mod=alibi_2)
    grad_out = torch.randn(out.shape, generator=g)
    out.backward(grad_out)
    doubles = [t.detach().double().requires_grad_() for t in (q, k, v)]
    ref, _ = reference(*doubles, score_mod=alibi_2, mask_mod=listed)
    ref.backward(grad_out.double())
    for mine, want in zip(tensors, doubles):
        assert relative_error(mine.grad, want.grad) <= 1e-4


def test_block_mask_lists_that_do_not_fit_are_refused():
    counts = torch.ones(1, 1, 2, dtype=torch.int32)
    indices = torch.zeros(1, 1, 2, 2, dtype=torch.int32)
    with pytest.raises(attn.Error, match="lists key block 2"):
        attn.BlockMask.from_kv_blocks(counts, indices + 2, BLOCK_SIZE=16)
    with pytest.raises(attn.Error, match="kv_num_blocks must be in \\[0, 2\\]"):
        attn.BlockMask.from_kv_blocks(counts * 3, indices, BLOCK_SIZE=16)
    with pytest.raises(attn.Error, match="has 2 query blocks but Q_LEN = 70"):
        attn.BlockMask.from_kv_blocks(counts, indices, BLOCK_SIZE=16, seq_lengths=(70, 32))
    with pytest.raises(attn.Error, match="given together"):
        attn.BlockMask.from_kv_blocks(counts, indices, counts, BLOCK_SIZE=16)
    with pytest.raises(attn.Error, match="BLOCK_SIZE is 0"):
        attn.BlockMask.from_kv_blocks(counts, indices, BLOCK_SIZE=0)


def test_block_mask_indexing():
    # mask[b, h] and mask[:, :, i] as PyTorch's (query *blocks*); the result
    # has no usable mask_mod until the caller sets one for its positions.
    flex = torch_flex()
    ours = attn.create_block_mask(causal, 2, 2, SEQ, SEQ, BLOCK_SIZE=16)
    theirs = flex.create_block_mask(causal, 2, 2, SEQ, SEQ, device="cpu", BLOCK_SIZE=16)
    for index in (0, (1, 0), (slice(None), slice(None), 1), (0, 1, slice(2, 5)),
                  (slice(None), slice(None), -1)):
        mine, want = ours[index], theirs[index]
        assert mine.shape == want.shape, index
        assert torch.equal(mine.to_dense(), want.to_dense()), index
    chunk = ours[:, :, 1]  # query rows 16..31
    q, k, v = random_qkv(2, 2, 2, SEQ, SEQ, 16, 16, torch.float32, seed=37)
    rows = q[:, :, 16:32]
    with pytest.raises(attn.Error, match="was indexed"):
        attn.flex_attention(rows, k, v, block_mask=chunk)

    def shifted(b, h, q_idx, kv_idx):
        return q_idx + 16 >= kv_idx

    chunk.mask_mod = shifted
    out = attn.flex_attention(rows, k, v, block_mask=chunk)
    full = attn.flex_attention(q, k, v, block_mask=ours)
    assert relative_error(out, full[:, :, 16:32]) <= TOLERANCE[torch.float32]
    with pytest.raises(attn.Error, match="at most 3 indices"):
        ours[0, 0, 0, 0]


def test_block_mask_adjust_crops_as_pytorch():
    flex = torch_flex()
    ours = attn.create_block_mask(causal, 2, None, SEQ, SEQ, BLOCK_SIZE=16)
    theirs = flex.create_block_mask(causal, 2, None, SEQ, SEQ, device="cpu", BLOCK_SIZE=16)
    cropped = ours._adjust(40, 50)
    assert cropped.shape == theirs._adjust(40, 50).shape == (2, 1, 40, 50)
    assert torch.equal(cropped.to_dense(), theirs._adjust(40, 50).to_dense())
    q, k, v = random_qkv(2, 2, 2, 40, 50, 16, 16, torch.float32, seed=61)
    ref, _ = reference(q, k, v, mask_mod=causal)
    assert relative_error(attn.flex_attention(q, k, v, block_mask=cropped), ref) <= 1e-5
    with pytest.raises(attn.Error, match="cropped, never grown"):
        ours._adjust(SEQ + 1, SEQ)
    with pytest.raises(attn.Error, match="_adjust"):
        attn.flex_attention(q, k, v, block_mask=ours)


def test_block_mask_to_string_and_to():
    flex = torch_flex()
    ours = attn.create_block_mask(document, 1, 6, SEQ, SEQ, BLOCK_SIZE=8)
    theirs = flex.create_block_mask(document, 1, 6, SEQ, SEQ, device="cpu", BLOCK_SIZE=8)
    for grid, limit in (((20, 20), 4), (4, 2), (-1, 1)):
        assert ours.to_string(grid, limit) == theirs.to_string(grid, limit)
    moved = ours.to("cpu")
    assert moved is not ours and torch.equal(moved.kernel_table(), ours.kernel_table())


def test_return_aux():
    flex = torch_flex()
    q, k, v = random_qkv(1, 2, 2, SEQ, SEQ, 16, 16, torch.float32, seed=41)
    out, lse = attn.flex_attention(q, k, v, score_mod=alibi, return_lse=True)
    requests = [attn.AuxRequest(lse=True)]
    if hasattr(flex, "AuxRequest"):  # PyTorch >= 2.9
        requests.append(flex.AuxRequest(lse=True))
    for request in requests:
        got, aux = attn.flex_attention(q, k, v, score_mod=alibi, return_aux=request)
        assert isinstance(aux, attn.AuxOutput) and aux.max_scores is None
        assert torch.equal(got, out) and torch.equal(aux.lse, lse)
    # return_aux takes precedence over return_lse, as in PyTorch.
    got, aux = attn.flex_attention(q, k, v, score_mod=alibi, return_lse=True,
                                   return_aux=attn.AuxRequest())
    assert torch.equal(got, out) and aux == attn.AuxOutput()
    with pytest.raises(attn.Error, match="max_scores is not computed"):
        attn.flex_attention(q, k, v, return_aux=attn.AuxRequest(lse=True, max_scores=True))
    with pytest.raises(attn.Error, match="must be an AuxRequest"):
        attn.flex_attention(q, k, v, return_aux=True)


@pytest.mark.parametrize("mod", [causal, document, prefix_lm, alibi, softcap],
                         ids=lambda f: f.__name__)
def test_create_mask_matches_pytorch(mod):
    flex = torch_flex()

    def masked_score(score, b, h, q_idx, kv_idx):  # a score_mod that masks
        return torch.where(q_idx >= kv_idx, mod(score, b, h, q_idx, kv_idx), float("-inf"))

    fn = masked_score if mod in (alibi, softcap) else mod
    ours = attn.create_mask(fn, 2, HEADS, SEQ, 50)
    theirs = flex.create_mask(fn, 2, HEADS, SEQ, 50, device="cpu")
    assert ours.dtype == torch.bool and torch.equal(ours, theirs)


# Caching by structure ------------------------------------------------------------


def test_new_closure_values_and_lengths_do_not_recompile():
    q, k, v = random_qkv(1, 2, 2, 40, 40, 16, 16, torch.float32, seed=12)

    def with_table(table):
        def bias(score, b, h, q_idx, kv_idx):
            return score + table[h, (kv_idx - q_idx).clamp(-8, 8) + 8]
        return bias

    first = torch.randn(2, 17)
    attn.flex_attention(q, k, v, score_mod=with_table(first))
    before = attn.cache_stats()["compiles"]
    second = torch.randn(2, 17)
    out = attn.flex_attention(q, k, v, score_mod=with_table(second))
    ref, _ = reference(q, k, v, with_table(second))
    assert relative_error(out, ref) <= 1e-5
    q2, k2, v2 = random_qkv(1, 2, 2, 90, 77, 16, 16, torch.float32, seed=13)
    attn.flex_attention(q2, k2, v2, score_mod=with_table(torch.randn(2, 17)))
    assert attn.cache_stats()["compiles"] == before


def test_identity_modifiers_use_the_plain_kernel():
    q, k, v = random_qkv(1, 2, 2, 20, 20, 16, 16, torch.float32)
    out = attn.flex_attention(q, k, v, score_mod=lambda s, b, h, i, j: s,
                              block_mask=attn.create_block_mask(
                                  attn.noop_mask, None, None, 20, 20))
    assert relative_error(out, reference(q, k, v)[0]) <= 1e-5


# What a modifier cannot do ----------------------------------------------------------


@pytest.mark.parametrize("score_mod, message", [
    (lambda s, b, h, i, j: s + torch.sin(s), "torch.sin is not supported"),
    (lambda s, b, h, i, j: s if i > j else -s, "cannot branch on its arguments"),
    (lambda s, b, h, i, j: s + SLOPES[s], "indexed by a float"),
    (lambda s, b, h, i, j: s + TABLE[h], "fewer indices than its 2 dims"),
    (lambda s, b, h, i, j: s + TABLE[h, 0, 1], "indexed by 3 indices"),
    (lambda s, b, h, i, j: s + TABLE[h, -1], "negative constant index"),
    (lambda s, b, h, i, j: s + (i // 0), "division or modulo by zero"),
    (lambda s, b, h, i, j: s ** i, "constant exponent"),
    (lambda s, b, h, i, j: s + math.exp(s), "cannot become a Python number"),
    (lambda s, b, h, i, j: s + float(s), "cannot be traced"),
    (lambda s, b, h, i, j: s + s.new_ones((2,)), "only with size \\(\\)"),
    (lambda s, b, h, i, j: s + torch.full_like(s, s), "value must be a number"),
    ("not a function", "must be a callable"),
], ids=["sin", "if", "float_index", "partial_index", "extra_index", "negative_index",
        "zero_division", "traced_exponent", "python_math", "python_float", "new_ones_shape",
        "full_like_traced", "not_callable"])
def test_unsupported_score_mod(score_mod, message):
    q, k, v = random_qkv(1, 2, 2, 8, 8, 16, 16, torch.float32)
    with pytest.raises(attn.Error, match=message):
        attn.flex_attention(q, k, v, score_mod=score_mod)


def test_mask_mod_must_return_a_bool():
    q, k, v = random_qkv(1, 2, 2, 8, 8, 16, 16, torch.float32)
    mask = attn.create_block_mask(causal, None, None, 8, 8)
    mask.mask_mod = lambda b, h, i, j: i - j
    with pytest.raises(attn.Error, match="must return a bool"):
        attn.flex_attention(q, k, v, block_mask=mask)


def test_kernel_options_are_refused():
    q, k, v = random_qkv(1, 2, 2, 8, 8, 16, 16, torch.float32)
    with pytest.raises(attn.Error, match="kernel_options"):
        attn.flex_attention(q, k, v, kernel_options={"BLOCK_M": 64})


def test_captured_tensor_on_another_device_or_rank():
    q, k, v = random_qkv(1, 2, 2, 8, 8, 16, 16, torch.float32)
    big = torch.zeros(1, 1, 1, 1, 2)
    with pytest.raises(attn.Error, match="at most 4 are supported"):
        attn.flex_attention(q, k, v, score_mod=lambda s, b, h, i, j: s + big[0, 0, 0, 0, h])
    elsewhere = torch.zeros(2, device="meta")
    with pytest.raises(attn.Error, match=r"captures\[0\].*is on meta but query is on cpu"):
        attn.flex_attention(q, k, v, score_mod=lambda s, b, h, i, j: s + elsewhere[h])


def test_block_masks_are_made_on_the_cpu_or_a_gpu():
    # The mask_mod runs where its tensors are (device=); a compiled table
    # is the CPU's; other devices are refused.
    with pytest.raises(attn.Error, match="attn runs on the CPU and on NVIDIA GPUs"):
        attn.create_block_mask(lambda b, h, i, j: i >= j, None, None, 8, 8, device="meta")
    with pytest.raises(attn.Error, match="_compile evaluates the mask_mod in a CPU kernel"):
        attn.create_block_mask(lambda b, h, i, j: i >= j, None, None, 8, 8, device="cuda",
                               _compile=True)
