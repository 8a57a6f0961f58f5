"""Calls that cannot run raise attn.Error (a ValueError) with the runtime's
(or the compiler's) message, never crash or return garbage."""

import numpy as np
import pytest
import torch

import attn
from conftest import random_qkv


def test_error_is_a_value_error():
    assert issubclass(attn.Error, ValueError)


def test_key_head_dim_mismatch_has_the_runtimes_message():
    q, k, v = random_qkv(d=32)
    with pytest.raises(attn.Error, match=r"key: dim 3 \(D\) is 16 but kernel 'attn_sdpa' "
                                         r"was compiled for D=32"):
        attn.scaled_dot_product_attention(q, k[..., :16], v)


def test_batch_mismatch():
    q, k, v = random_qkv()
    with pytest.raises(attn.Error, match=r"key: dim 0 \(B\) is 1 but query's B=2"):
        attn.scaled_dot_product_attention(q, k[:1], v[:1])


def test_value_length_mismatch():
    q, k, v = random_qkv()
    with pytest.raises(attn.Error, match=r"value: dim 2 \(Sk\) is 44 but key's Sk=45"):
        attn.scaled_dot_product_attention(q, k, v[:, :, :44])


def test_heads_not_a_multiple():
    q, k, v = random_qkv(heads_q=6, heads_kv=4)
    with pytest.raises(attn.Error, match=r"Hq=6 is not a multiple"):
        attn.scaled_dot_product_attention(q, k, v, enable_gqa=True)


def test_gqa_needs_enable_gqa_as_in_pytorch():
    q, k, v = random_qkv(heads_q=8, heads_kv=2)
    with pytest.raises(attn.Error, match="enable_gqa=True"):
        attn.scaled_dot_product_attention(q, k, v)


def test_mask_of_the_wrong_length():
    q, k, v = random_qkv()
    mask = torch.ones(37, 44, dtype=torch.bool)
    with pytest.raises(attn.Error, match=r"mask: dim 3 \(Sk\) is 44 but key's Sk=45"):
        attn.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def test_mask_of_another_float_type():
    q, k, v = random_qkv(dtype=torch.bfloat16)
    with pytest.raises(attn.Error, match="mask: element type is f32"):
        attn.scaled_dot_product_attention(q, k, v, attn_mask=torch.zeros(37, 45))


def test_mixed_element_types():
    q, k, v = random_qkv()
    with pytest.raises(attn.Error, match="key: element type is f16"):
        attn.scaled_dot_product_attention(q, k.half(), v)


def test_unsupported_element_type():
    q, k, v = random_qkv(dtype=torch.float64)
    with pytest.raises(attn.Error, match="float64 is not supported"):
        attn.scaled_dot_product_attention(q, k, v)


def test_wrong_rank():
    q, k, v = random_qkv()
    with pytest.raises(attn.Error, match="query: rank is 2"):
        attn.scaled_dot_product_attention(q[0, 0], k, v)


def test_bad_options():
    q, k, v = random_qkv()
    # 1 - 1e-9 is 1 in float32, the kernels' type: refused by the kernels
    # and by dropout_mask alike, not a mask that drops everything.
    for p in (1.0, -0.1, 1.5, float("nan"), 1 - 1e-9, True, "0.5", np.array([0.5])):
        with pytest.raises(attn.Error, match="dropout_p"):
            attn.scaled_dot_product_attention(q, k, v, dropout_p=p)
        with pytest.raises(attn.Error, match="dropout_p"):
            attn.dropout_mask(1, 1, 4, 8, p, 1)
    # A probability held by a NumPy scalar or a 0-d array is one.
    for p in (np.float32(0.25), np.array(0.25)):
        attn.scaled_dot_product_attention(q, k, v, dropout_p=p, dropout_seed=3)
        assert attn.dropout_mask(1, 1, 4, 8, p, 1).shape == (1, 1, 4, 8)
    with pytest.raises(attn.Error, match="causal_alignment"):
        attn.scaled_dot_product_attention(q, k, v, causal_alignment="middle")
    with pytest.raises(attn.Error, match="window"):
        attn.scaled_dot_product_attention(q, k, v, window=(-1, 0))
    with pytest.raises(attn.Error, match="softcap"):
        attn.scaled_dot_product_attention(q, k, v, softcap=-1.0)


def test_numpy_errors_too():
    q = np.zeros((1, 2, 4, 8), np.float32)
    with pytest.raises(attn.Error, match=r"key: dim 3 \(D\) is 4 but kernel"):
        attn.scaled_dot_product_attention(q, q[..., :4], q)


def test_low_level_kernel_checks_outputs():
    kernel = attn.kernel("name=attn_sdpa,dtype=f32,d=8,dv=8")
    q = np.zeros((1, 2, 4, 8), np.float32)
    out = np.zeros((1, 2, 4, 4), np.float32)
    with pytest.raises(attn.Error, match=r"output: dim 3 \(Dv\) is 4 but kernel 'attn_sdpa' "
                                         r"was compiled for Dv=8"):
        kernel.run(q, q, q, None, out, None)
    with pytest.raises(attn.Error, match="output overlaps query"):
        kernel.run(q, q.copy(), q.copy(), None, q, None)


def test_compiler_errors_carry_its_message():
    with pytest.raises(attn.Error, match="attn-compile could not compile spec"):
        attn.kernel("name=attn_sdpa,dtype=f32,d=8,bogus=1")


def test_missing_compiler_names_where_it_looked(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTN_COMPILE", str(tmp_path / "no-such-compiler"))
    with pytest.raises(attn.Error, match="ATTN_COMPILE is '.*no-such-compiler', which is not"):
        attn.find_compiler()
    monkeypatch.delenv("ATTN_COMPILE")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(attn._cache, "compiler_search_path", lambda: [
        ("$ATTN_COMPILE", None), ("the package", tmp_path / "a"), ("$PATH", None),
        ("the source checkout", tmp_path / "b")])
    with pytest.raises(attn.Error, match=r"attn-compile was not found.*1\. \$ATTN_COMPILE: "
                                         r"\(unset\); 2\. the package: "):
        attn.find_compiler()


def test_non_tensors():
    with pytest.raises(attn.Error, match="query: a list is not a tensor"):
        attn.scaled_dot_product_attention([1.0], [1.0], [1.0])


def test_python_m_attn_reports_its_setup():
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "attn", "--compile", "d=8"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "compiler: " in result.stdout and "kernel cache: " in result.stdout
    assert "compiled: d=8 -> attention" in result.stdout
    version = subprocess.run([sys.executable, "-m", "attn", "--version"],
                             capture_output=True, text=True, timeout=60)
    assert version.stdout.startswith("attn 0.1.0")


def test_bad_scale_is_refused_before_compiling(monkeypatch):
    # No compiler at all: the check must come first.
    monkeypatch.setenv("ATTN_COMPILE", "/nonexistent/attn-compile")
    q, k, v = random_qkv()
    for scale in (float("nan"), float("inf"), 1e39, "big"):
        with pytest.raises(attn.Error, match="scale is .* but must be"):
            attn.scaled_dot_product_attention(q, k, v, scale=scale)
    with pytest.raises(attn.Error, match="softcap is nan but must be a finite number"):
        attn.scaled_dot_product_attention(q, k, v, softcap=float("nan"))


def _fake_compiler(tmp_path, body):
    script = tmp_path / "attn-compile"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    return script


def test_a_silent_failing_compiler_is_described(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTN_CACHE_DIR", str(tmp_path / "cache"))
    attn.clear_memory_cache()
    # --version works; compiling exits 3, or dies of a signal, printing nothing.
    compiler = _fake_compiler(
        tmp_path, 'case "$1" in --version) echo fake;; *) exit 3;; esac')
    monkeypatch.setenv("ATTN_COMPILE", str(compiler))
    with pytest.raises(attn.Error, match=r"could not compile spec '.*': .*attn-compile "
                                         r"exited with status 3 and printed nothing"):
        attn.kernel("name=attn_sdpa,dtype=f32,d=8")
    compiler.write_text('#!/bin/sh\ncase "$1" in --version) echo fake2;; *) kill -SEGV $$;; esac\n')
    with pytest.raises(attn.Error, match=r"was killed by SIGSEGV and printed nothing"):
        attn.kernel("name=attn_sdpa,dtype=f32,d=8")


def test_an_unwritable_cache_folder_is_an_attn_error(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("ATTN_CACHE_DIR", str(blocker / "cache"))
    attn.clear_memory_cache()
    with pytest.raises(attn.Error, match=r"cannot write compiled kernels to '.*' "
                                         r"\(\$ATTN_CACHE_DIR\): .*set \$ATTN_CACHE_DIR"):
        attn.kernel("name=attn_sdpa,dtype=f32,d=8,dv=4")
    attn.clear_memory_cache()


def test_a_slow_compile_says_what_it_compiles(monkeypatch, tmp_path, capfd):
    monkeypatch.setenv("ATTN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(attn._cache, "STATUS_DELAY_SECONDS", 0.0)
    attn.clear_memory_cache()
    attn.kernel("name=attn_sdpa,dtype=f32,d=8,dv=4")
    err = capfd.readouterr().err
    assert "attn: compiling kernel name=attn_sdpa,dtype=f32,d=8,dv=4" in err
    assert "done in" in err
    # Silenced by the environment, and by the function.
    attn.clear_memory_cache()
    monkeypatch.setenv("ATTN_CACHE_DIR", str(tmp_path / "cache2"))
    monkeypatch.setenv("ATTN_COMPILE_STATUS", "0")
    attn.kernel("name=attn_sdpa,dtype=f32,d=8,dv=4")
    assert "attn: compiling" not in capfd.readouterr().err
    monkeypatch.delenv("ATTN_COMPILE_STATUS")
    attn.set_compile_status(False)
    try:
        attn.clear_memory_cache()
        monkeypatch.setenv("ATTN_CACHE_DIR", str(tmp_path / "cache3"))
        attn.kernel("name=attn_sdpa,dtype=f32,d=8,dv=4")
        assert "attn: compiling" not in capfd.readouterr().err
    finally:
        attn.set_compile_status(None)
        attn.clear_memory_cache()
