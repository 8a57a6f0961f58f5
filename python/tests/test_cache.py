"""The kernel caches: compile on first use, then memory, then disk; two
processes filling one cache folder at once."""

import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch

import attn
from conftest import naive_attention, random_qkv, relative_error


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_CACHE_DIR", str(tmp_path / "cache"))
    attn.clear_memory_cache()
    yield tmp_path / "cache"
    attn.clear_memory_cache()


def test_second_call_does_not_recompile(fresh_cache):
    q, k, v = random_qkv(d=24)
    before = attn.cache_stats()
    attn.scaled_dot_product_attention(q, k, v, is_causal=True)
    first = attn.cache_stats()
    assert first["compiles"] == before["compiles"] + 1
    out = attn.scaled_dot_product_attention(q, k, v, is_causal=True)
    second = attn.cache_stats()
    assert second["compiles"] == first["compiles"]
    assert second["memory_hits"] == first["memory_hits"] + 1
    assert relative_error(out, naive_attention(q, k, v, is_causal=True)[0]) <= 1e-5
    # A new process (here: an emptied memory cache) loads it from disk.
    attn.clear_memory_cache()
    attn.scaled_dot_product_attention(q, k, v, is_causal=True)
    third = attn.cache_stats()
    assert third["compiles"] == first["compiles"]
    assert third["disk_hits"] == second["disk_hits"] + 1
    assert [p.suffix for p in fresh_cache.iterdir()] == [".so"]


def test_cache_folder_is_chosen_by_the_environment(fresh_cache):
    assert attn.cache_dir() == fresh_cache


def test_a_damaged_cache_entry_is_compiled_again(fresh_cache):
    q, k, v = random_qkv(d=24)
    attn.scaled_dot_product_attention(q, k, v)
    (entry,) = fresh_cache.iterdir()
    attn.clear_memory_cache()
    # A new file (never rewrite a loaded library in place: it is mapped).
    entry.unlink()
    entry.write_bytes(b"not a library")
    compiles = attn.cache_stats()["compiles"]
    out = attn.scaled_dot_product_attention(q, k, v)
    assert attn.cache_stats()["compiles"] == compiles + 1
    assert relative_error(out, naive_attention(q, k, v)[0]) <= 1e-5


WORKER = textwrap.dedent(
    """
    import json, os, sys, time
    import numpy as np
    import attn
    go = sys.argv[1]
    while not os.path.exists(go):
        time.sleep(0.001)
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 2, 16, 40)).astype(np.float32) for _ in range(3))
    out = attn.scaled_dot_product_attention(q, k, v, is_causal=True)
    print(json.dumps({"stats": attn.cache_stats(), "sum": float(out.astype(np.float64).sum())}))
    """
)


def test_two_processes_fill_the_cache_at_once(fresh_cache, tmp_path):
    go = tmp_path / "go"
    env = dict(os.environ, ATTN_CACHE_DIR=str(fresh_cache))
    workers = [
        subprocess.Popen([sys.executable, "-c", WORKER, str(go)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    time.sleep(1.0)  # both imported and waiting
    go.touch()
    results = []
    for worker in workers:
        stdout, stderr = worker.communicate(timeout=300)
        assert worker.returncode == 0, stderr
        results.append(json.loads(stdout))
    # Each compiled it or found the other's finished library; the folder
    # holds one complete kernel and nothing half-written.
    assert all(r["stats"]["compiles"] + r["stats"]["disk_hits"] == 1 for r in results)
    assert results[0]["sum"] == results[1]["sum"]
    assert [p.name.endswith(".so") for p in fresh_cache.iterdir()] == [True]
    # A third process finds it on disk.
    third = subprocess.run([sys.executable, "-c", WORKER, str(go)], env=env,
                           capture_output=True, text=True, timeout=300)
    assert third.returncode == 0, third.stderr
    stats = json.loads(third.stdout)["stats"]
    assert stats["compiles"] == 0 and stats["disk_hits"] == 1
