"""scripts/compare_evals.py and the --vllm-offline options of scripts/eval_common.py (CPU; vLLM faked)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import types

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import compare_evals  # noqa: E402
import eval_common  # noqa: E402

# ----------------------------------------------------------------------------- compare_evals
CASES = [
    # (before, after, expected rows [metric, before, after, change])
    ({"accuracy": 0.0, "flip_rate": None}, {"accuracy": 0.25, "flip_rate": 0.5},
     [["accuracy", 0.0, 0.25, 0.25], ["flip_rate", None, 0.5, None]]),
    ({"strict_acc": 0.004, "n_samples": 500}, {"strict_acc": 0.0, "n_samples": 500, "new": 1.0},
     [["strict_acc", 0.004, 0.0, -0.004], ["n_samples", 500, 500, 0], ["new", None, 1.0, None]]),
    ({"a": 1.0}, {}, [["a", 1.0, None, None]]),
]


@pytest.mark.parametrize("before,after,rows", CASES)
def test_compare_rows(before, after, rows):
    assert compare_evals.compare(before, after) == rows


def _report(path, rep):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "report.json"), "w") as f:
        json.dump(rep, f)
    return str(path)


def _cli(*args):
    return subprocess.run([sys.executable, "scripts/compare_evals.py", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True)


def test_compare_cli(tmp_path):
    b = _report(tmp_path / "b", {"task": "pairwise", "overall": {"n": 600, "accuracy": 0.0, "a_share": None, "ok": True}})
    a = _report(tmp_path / "a", {"task": "pairwise", "overall": {"n": 600, "accuracy": 0.5, "a_share": 0.75}})
    r = _cli(b, a, "--out", tmp_path / "c.md")
    assert r.returncode == 0, r.stderr
    assert "| accuracy | 0.000 | 0.500 | 0.500 |" in r.stdout and "| a_share | n/a | 0.750 | n/a |" in r.stdout
    assert "| ok |" not in r.stdout  # booleans are not metrics
    assert (tmp_path / "c.md").read_text() == r.stdout
    js = json.loads((tmp_path / "c.json").read_text())
    assert js["rows"][1] == {"metric": "accuracy", "before": 0.0, "after": 0.5, "change": 0.5}
    g = _report(tmp_path / "g", {"policy": {"strict_acc": 0.01}})
    bad = _cli(b, g)
    assert bad.returncode == 2 and "different kinds (overall vs policy)" in bad.stderr
    bad = _cli(b, tmp_path / "nothing")
    assert bad.returncode == 2 and "no report at" in bad.stderr
    junk = _report(tmp_path / "j", {"other": 1})
    bad = _cli(b, junk)
    assert bad.returncode == 2 and "neither an eval_judge" in bad.stderr


# ----------------------------------------------------------------------------- --vllm-offline options
def _args(**kw):
    base = dict(base_url=None, model=None, vllm_offline=None, hf_offline=None, batch_size=8, max_tokens=16,
                temperature=0.0, gpu_memory_utilization=0.9, enforce_eager=False, kv_cache_gb=None)
    return argparse.Namespace(**{**base, **kw})


@pytest.mark.parametrize("kw,expected", [
    ({}, {"gpu_memory_utilization": 0.9, "enforce_eager": False}),
    ({"gpu_memory_utilization": 0.1, "enforce_eager": True, "kv_cache_gb": 4},
     {"gpu_memory_utilization": 0.1, "enforce_eager": True, "kv_cache_memory_bytes": 4 * 2**30}),
    ({"kv_cache_gb": 0.5}, {"gpu_memory_utilization": 0.9, "enforce_eager": False, "kv_cache_memory_bytes": 2**29}),
])
def test_vllm_kwargs(kw, expected):
    assert eval_common.vllm_kwargs(_args(**kw)) == expected


@pytest.mark.parametrize("kw,msg", [
    ({"vllm_offline": "m", "gpu_memory_utilization": 0.0}, "--gpu-memory-utilization must be in (0, 1], got 0.0"),
    ({"vllm_offline": "m", "gpu_memory_utilization": 1.5}, "--gpu-memory-utilization must be in (0, 1], got 1.5"),
    ({"vllm_offline": "m", "kv_cache_gb": 0.0}, "--kv-cache-gb must be > 0, got 0.0"),
])
def test_vllm_options_checked(kw, msg):
    with pytest.raises(eval_common.InputError) as e:
        eval_common.check_backend(_args(**kw), "judge")
    assert str(e.value) == msg


def test_vllm_offline_passes_the_options_to_vllm(tmp_path, monkeypatch):
    seen = {}

    class LLM:
        def __init__(self, **kw):
            seen["llm"] = kw

        def chat(self, convs, params, use_tqdm=True):
            seen["convs"], seen["params"] = convs, params
            return [types.SimpleNamespace(outputs=[types.SimpleNamespace(text=f"reply {i}", finish_reason="stop")])
                    for i in range(len(convs))]

    fake = types.ModuleType("vllm")
    fake.LLM = LLM
    fake.SamplingParams = lambda **kw: kw
    monkeypatch.setitem(sys.modules, "vllm", fake)
    convs = [[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]]
    res, info = eval_common.generate(_args(vllm_offline=str(tmp_path), kv_cache_gb=2, gpu_memory_utilization=0.2), convs)
    assert seen["llm"] == {"model": str(tmp_path), "seed": 0, "gpu_memory_utilization": 0.2, "enforce_eager": False,
                           "kv_cache_memory_bytes": 2 * 2**30}
    assert seen["params"] == {"n": 1, "temperature": 0.0, "max_tokens": 16, "seed": 0}
    assert [[r.text for r in per] for per in res] == [["reply 0"], ["reply 1"]]
    assert info == {"endpoint": "vllm offline", "model": str(tmp_path)}
