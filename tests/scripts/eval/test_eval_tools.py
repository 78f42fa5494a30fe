"""scripts.report.compare_evals and the backend options of scripts.eval.backends (CPU; vLLM faked)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import types

import pytest

import scripts
from scripts.eval import backends
from scripts.eval import judge as eval_judge
from scripts.eval.cli import InputError, from_args
from scripts.report import compare_evals
from tests.doubles.fake_openai import FakeOpenAIServer
from tests.doubles.fake_replies import markers
from tests.fixtures.eval.make_fixtures import pairwise_rows, pointwise_row, write_parquet

ROOT = scripts.ROOT

# ----------------------------------------------------------------------------- compare_evals
CASES = [
    # (before, after, expected rows [metric, before, after, change])
    (
        {"accuracy": 0.0, "flip_rate": None},
        {"accuracy": 0.25, "flip_rate": 0.5},
        [["accuracy", 0.0, 0.25, 0.25], ["flip_rate", None, 0.5, None]],
    ),
    (
        {"strict_acc": 0.004, "n_samples": 500},
        {"strict_acc": 0.0, "n_samples": 500, "new": 1.0},
        [["strict_acc", 0.004, 0.0, -0.004], ["n_samples", 500, 500, 0], ["new", None, 1.0, None]],
    ),
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
    return subprocess.run(
        [sys.executable, "-m", "scripts.report.compare_evals", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )


def test_compare_cli(tmp_path):
    b = _report(
        tmp_path / "b", {"task": "pairwise", "overall": {"n": 600, "accuracy": 0.0, "a_share": None, "ok": True}}
    )
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
    assert bad.returncode == 2 and "neither a scripts.eval.judge" in bad.stderr


def _eval(tmp_path, name, data, table):
    out = tmp_path / name
    with FakeOpenAIServer(lambda b: table[markers(b)[-1]]) as srv:
        assert (
            eval_judge.main(
                [
                    "--data",
                    data,
                    "--base-url",
                    srv.base_url,
                    "--model",
                    "m",
                    "--out",
                    str(out),
                    "--no-progress",
                    "--no-plots",
                    "--max-retries",
                    "0",
                ]
            )
            == 0
        )
    return out


COMPARED = [
    # name, rows builder, before replies, after replies, expected table lines
    (
        "verification",
        lambda: [
            pointwise_row(f"q{i}", f"s{i}", label, "gsm8k_verify", marker=f"v{i}")
            for i, label in enumerate([4, 4, 0, 0])
        ],
        {"v0": "<score>0</score>", "v1": "<score>1</score>", "v2": "<score>0</score>", "v3": "<score>2</score>"},
        {"v0": "<score>4</score>", "v1": "<score>3</score>", "v2": "<score>0</score>", "v3": "<score>4</score>"},
        [
            "| balanced_accuracy | 0.500 | 0.750 | 0.250 |",
            "| precision | 0.000 | 0.667 | 0.667 |",
            "| recall | 0.000 | 1.000 | 1.000 |",
            "| specificity | 1.000 | 0.500 | -0.500 |",
            "| tp | 0 | 2 | 2 |",
            "| fp | 0 | 1 | 1 |",
            "| tn | 2 | 1 | -1 |",
            "| fn | 2 | 0 | -2 |",
            "| none | 0 | 0 | 0 |",
        ],
    ),
    (
        "pairwise",
        lambda: [r for p in ("p1", "p2") for r in pairwise_rows(p, f"q {p}", "good", "bad", "s", marker=p)],
        dict.fromkeys(["p1-AB", "p1-BA", "p2-AB", "p2-BA"], "<better>A</better>"),
        {
            "p1-AB": "<better>A</better>",
            "p1-BA": "<better>B</better>",
            "p2-AB": "<better>A</better>",
            "p2-BA": "nothing",
        },
        [
            "| accuracy | 0.500 | 0.750 | 0.250 |",
            "| pair_accuracy | 0.000 | 0.500 | 0.500 |",
            "| flip_rate | 1.000 | 0.000 | -1.000 |",
            "| a_share | 1.000 | 0.667 | -0.333 |",
            "| parse_fail_rate | 0.000 | 0.250 | 0.250 |",
        ],
    ),
]


@pytest.mark.parametrize("name,rows,before,after,expected", COMPARED, ids=[c[0] for c in COMPARED])
def test_compare_shows_the_quality_metrics(tmp_path, name, rows, before, after, expected):
    data = write_parquet(rows(), str(tmp_path / "d.parquet"))
    b, a = _eval(tmp_path, "before", data, before), _eval(tmp_path, "after", data, after)
    r = _cli(b, a)
    assert r.returncode == 0, r.stderr
    for line in expected:
        assert line in r.stdout.splitlines(), line
    assert "Warning" not in r.stdout and r.stderr == ""


def test_compare_names_a_partial_report(tmp_path):
    b = _report(tmp_path / "b", {"task": "pairwise", "partial": False, "overall": {"accuracy": 0.5}})
    a = _report(
        tmp_path / "a",
        {
            "task": "pairwise",
            "partial": True,
            "stopped_by": "SIGTERM",
            "progress": {"rows": 40, "done": 12, "reused": 0},
            "overall": {"accuracy": 0.75},
        },
    )
    g = _report(
        tmp_path / "g",
        {"partial": True, "stopped_by": None, "progress": {"samples": 8, "done": 3}, "policy": {"strict_acc": 0.5}},
    )
    r = _cli(b, a, "--out", tmp_path / "c.md")
    assert r.returncode == 0, r.stderr
    note = "partial report: 12 of 40 rows done, stopped by SIGTERM"
    assert f"Warning: after is a {note}; its metrics cover those rows only." in r.stdout
    assert f"warning: after ({a}) is a {note}" in r.stderr
    assert (tmp_path / "c.md").read_text() == r.stdout
    assert json.loads((tmp_path / "c.json").read_text())["partial"] == {"before": False, "after": True}
    r = _cli(g, g)
    assert r.stdout.count("Warning: ") == 2 and "partial report: 3 of 8 policy answers done;" in r.stdout


# ----------------------------------------------------------------------------- --vllm-offline options
def _backend(**kw):
    """The Backend the evaluators parse from ``--max-tokens 16``, with the fields ``kw`` changes."""
    p = argparse.ArgumentParser()
    backends.add_backend_args(p, what="judge")
    return dataclasses.replace(from_args(backends.Backend, p.parse_args(["--max-tokens", "16"])), **kw)


def test_from_args_reads_the_flags_of_a_prefix():
    """A field without a flag keeps its default (the GSM8K judge has no offline flags); ``given`` ones win."""
    flags = dict(
        base_url="h:1", model="j", api_key_env=None, concurrency=2, timeout=3.0, max_retries=0, temperature=0.5
    )
    ns = argparse.Namespace(**{f"judge_{k}": v for k, v in flags.items()}, judge_max_tokens=8, base_url="policy:1")
    b = from_args(backends.Backend, ns, "judge_", max_tokens=9)
    assert b == backends.Backend("h:1", "j", None, 2, 3.0, 0, 9, 0.5)
    assert (b.kind, b.batch_size, b.info()) == (
        "endpoint",
        None,
        {"endpoint": "http://h:1/v1/chat/completions", "model": "j"},
    )
    assert b.settings() == {
        "backend": "endpoint",
        "model": "j",
        "temperature": 0.5,
        "max_tokens": 9,
        "endpoint": "http://h:1/v1/chat/completions",
    }


@pytest.mark.parametrize(
    "kw,expected",
    [
        ({}, {"gpu_memory_utilization": 0.9, "enforce_eager": False}),
        (
            {"gpu_memory_utilization": 0.1, "enforce_eager": True, "kv_cache_gb": 4},
            {"gpu_memory_utilization": 0.1, "enforce_eager": True, "kv_cache_memory_bytes": 4 * 2**30},
        ),
        ({"kv_cache_gb": 0.5}, {"gpu_memory_utilization": 0.9, "enforce_eager": False, "kv_cache_memory_bytes": 2**29}),
    ],
)
def test_vllm_kwargs(kw, expected):
    assert _backend(**kw).vllm_kwargs() == expected


@pytest.mark.parametrize(
    "kw,msg",
    [
        ({"vllm_offline": "m", "gpu_memory_utilization": 0.0}, "--gpu-memory-utilization must be in (0, 1], got 0.0"),
        ({"vllm_offline": "m", "gpu_memory_utilization": 1.5}, "--gpu-memory-utilization must be in (0, 1], got 1.5"),
        ({"vllm_offline": "m", "kv_cache_gb": 0.0}, "--kv-cache-gb must be > 0, got 0.0"),
    ],
)
def test_vllm_options_checked(kw, msg):
    with pytest.raises(InputError) as e:
        _backend(**kw).check("judge")
    assert str(e.value) == msg


def test_vllm_offline_passes_the_options_to_vllm(tmp_path, monkeypatch):
    seen = {}

    class LLM:
        def __init__(self, **kw):
            seen["llm"] = kw

        def chat(self, convs, params, use_tqdm=True):
            seen["convs"], seen["params"] = convs, params
            return [
                types.SimpleNamespace(outputs=[types.SimpleNamespace(text=f"reply {i}", finish_reason="stop")])
                for i in range(len(convs))
            ]

    fake = types.ModuleType("vllm")
    fake.LLM = LLM
    fake.SamplingParams = lambda **kw: kw
    monkeypatch.setitem(sys.modules, "vllm", fake)
    convs = [[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]]
    res, info = backends.generate(
        _backend(vllm_offline=str(tmp_path), kv_cache_gb=2, gpu_memory_utilization=0.2), convs
    )
    assert seen["llm"] == {
        "model": str(tmp_path),
        "seed": 0,
        "gpu_memory_utilization": 0.2,
        "enforce_eager": False,
        "kv_cache_memory_bytes": 2 * 2**30,
    }
    assert seen["params"] == {"n": 1, "temperature": 0.0, "max_tokens": 16, "seed": 0}
    assert [[r.text for r in per] for per in res] == [["reply 0"], ["reply 1"]]
    assert info == {"endpoint": "vllm offline", "model": str(tmp_path)}


@pytest.mark.parametrize("given", [0, 1, 3])
def test_vllm_offline_pads_missing_completions_with_errors(tmp_path, monkeypatch, given):
    """vLLM returning fewer than n completions of a conversation: the rest are bad_response errors, n in all."""
    reply = types.SimpleNamespace(text="r", finish_reason="stop")
    fake = types.ModuleType("vllm")
    fake.LLM = lambda **kw: types.SimpleNamespace(
        chat=lambda convs, params, use_tqdm: [types.SimpleNamespace(outputs=[reply] * given) for _ in convs]
    )
    fake.SamplingParams = lambda **kw: kw
    monkeypatch.setitem(sys.modules, "vllm", fake)
    (per,), _ = backends.generate(_backend(vllm_offline=str(tmp_path)), [[{"role": "user", "content": "a"}]], n=3)
    missing = (None, "bad_response: vLLM returned fewer completions than n")
    assert [(r.text, r.error and str(r.error)) for r in per] == [("r", None)] * given + [missing] * (3 - given)
