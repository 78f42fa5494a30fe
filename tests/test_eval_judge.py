"""eval_judge: hand-computed metrics against a scripted OpenAI-compatible judge (exact values)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures", "eval")
for p in (os.path.join(ROOT, "scripts"), FIX):
    if p not in sys.path:
        sys.path.insert(0, p)

import eval_judge  # noqa: E402
from make_fixtures import pairwise_rows, pointwise_row, write_parquet  # noqa: E402
from scripted_server import Reply, ScriptedServer, markers  # noqa: E402

FAST = ["--max-retries", "1", "--timeout", "10", "--no-progress"]


def _verdict(v: str) -> str:
    return f"<think>Compared both.</think><better>{v}</better>"


def _score(s: int) -> str:
    return f"<think>Graded.</think><score>{s}</score>"


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory) -> str:
    """3 pairs x 2 orders: p1, p2 from source s1, p3 from s2. Marker [[pK-AB]] / [[pK-BA]] in the query."""
    rows = []
    for pid, src in (("p1", "s1"), ("p2", "s1"), ("p3", "s2")):
        rows += pairwise_rows(pid, f"Question {pid}?", f"good answer {pid}", f"bad answer {pid}", src, marker=pid)
    return write_parquet(rows, str(tmp_path_factory.mktemp("pw") / "pairs.parquet"))


def _marker(body) -> str:
    return markers(body)[-1]


def _gold(body) -> str:
    return "A" if _marker(body).endswith("-AB") else "B"


MIXED = {  # p1 right in both orders (a verdict inside <think> is ignored), p2 always A, p3: garbage then right
    "p1-AB": "<think>maybe <better>B</better>?</think><better>A</better>",
    "p1-BA": _verdict("B"),
    "p2-AB": _verdict("A"),
    "p2-BA": _verdict("A"),
    "p3-AB": "Both are fine.",
    "p3-BA": _verdict("b"),
}

PAIRWISE_CASES = [
    # name, reply(body), expected overall metrics, expected per-source accuracy
    ("always_A", lambda b: _verdict("A"),
     dict(accuracy=0.5, a_share=1.0, flip_rate=1.0, pair_accuracy=0.0, parse_fail_rate=0.0, pairs_compared=3,
          pairs_both_orders=3, label_a_share=0.5, error_rate=0.0),
     {"s1": 0.5, "s2": 0.5}),
    ("always_B", lambda b: _verdict("B"),
     dict(accuracy=0.5, a_share=0.0, flip_rate=1.0, pair_accuracy=0.0, parse_fail_rate=0.0),
     {"s1": 0.5, "s2": 0.5}),
    ("perfect", lambda b: _verdict(_gold(b)),
     dict(accuracy=1.0, accuracy_parsed=1.0, a_share=0.5, flip_rate=0.0, pair_accuracy=1.0, parse_fail_rate=0.0),
     {"s1": 1.0, "s2": 1.0}),
    ("always_rejected", lambda b: _verdict("B" if _gold(b) == "A" else "A"),
     dict(accuracy=0.0, a_share=0.5, flip_rate=0.0, pair_accuracy=0.0),
     {"s1": 0.0, "s2": 0.0}),
    ("garbage", lambda b: "I think both responses are good.",
     dict(accuracy=0.0, accuracy_parsed=None, a_share=None, flip_rate=None, pair_accuracy=None, parse_fail_rate=1.0,
          n_parse_fail=6, n_parsed=0, pairs_compared=0, pairs_both_orders=3),
     {"s1": 0.0, "s2": 0.0}),
    ("mixed", lambda b: MIXED[_marker(b)],
     dict(n=6, n_parsed=5, accuracy=4 / 6, accuracy_parsed=4 / 5, a_share=3 / 5, parse_fail_rate=1 / 6,
          pairs_compared=2, flip_rate=0.5, pair_accuracy=0.5),
     {"s1": 3 / 4, "s2": 1 / 2}),
]


@pytest.mark.parametrize("name,reply,expected,per_source", PAIRWISE_CASES, ids=[c[0] for c in PAIRWISE_CASES])
def test_pairwise_metrics(pairs_file, tmp_path, capsys, name, reply, expected, per_source):
    with ScriptedServer(reply) as srv:
        rc = eval_judge.main(["--data", pairs_file, "--base-url", srv.url, "--model", "m", "--out", str(tmp_path), *FAST])
    assert rc == 0
    assert len(srv.requests) == 6 and all(r["model"] == "m" for r in srv.requests)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["task"] == "pairwise"
    ov = report["overall"]
    for k, v in expected.items():
        assert ov[k] == (pytest.approx(v) if v is not None else None), k
    assert {s: m["accuracy"] for s, m in report["per_source"].items()} == pytest.approx(per_source)
    for png in ("per_source_accuracy.png", "position_bias.png"):
        data = (tmp_path / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
    preds = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert len(preds) == 6 and "accuracy" in (tmp_path / "report.md").read_text()


def test_requests_are_the_rows_prompts(pairs_file, tmp_path):
    import pyarrow.parquet as pq

    rows = pq.read_table(pairs_file).to_pylist()
    with ScriptedServer(lambda b: _verdict("A")) as srv:
        eval_judge.main(["--data", pairs_file, "--base-url", srv.url, "--model", "m", "--out", str(tmp_path),
                         "--concurrency", "1", "--max-tokens", "77", *FAST])
    sent = sorted(json.dumps(r["messages"]) for r in srv.requests)
    assert sent == sorted(json.dumps(r["prompt"]) for r in rows)
    assert {r["max_tokens"] for r in srv.requests} == {77} and {r["temperature"] for r in srv.requests} == {0.0}


def test_pairs_subsample_keeps_both_orders(pairs_file, tmp_path):
    with ScriptedServer(lambda b: _verdict("A")) as srv:
        eval_judge.main(["--data", pairs_file, "--base-url", srv.url, "--model", "m", "--out", str(tmp_path),
                         "--pairs", "2", "--seed", "1", *FAST])
    ov = json.loads((tmp_path / "report.json").read_text())["overall"]
    assert ov["n"] == 4 and ov["pairs_both_orders"] == 2 and ov["flip_rate"] == 1.0
    sent = Counter(markers(b)[-1].split("-")[0] for b in srv.requests)
    assert len(sent) == 2 and set(sent.values()) == {2}


# ----------------------------------------------------------------------------- pointwise
POINTWISE = [  # (label, reply): pred 0 exact, 2 (|1|), 4 (|2|), 3 exact, 1 (|3|), no verdict
    (0, _score(0)), (1, _score(2)), (2, _score(4)), (3, _score(3)), (4, _score(1)), (4, "It is quite good."),
]


def test_pointwise_metrics(tmp_path):
    rows = [pointwise_row(f"q{i}", f"resp {i}", label, "a" if i < 3 else "b", marker=f"pt{i}")
            for i, (label, _r) in enumerate(POINTWISE)]
    path = write_parquet(rows, str(tmp_path / "pt.parquet"))
    table = {f"pt{i}": r for i, (_l, r) in enumerate(POINTWISE)}
    out = tmp_path / "out"
    with ScriptedServer(lambda b: table[markers(b)[-1]]) as srv:
        rc = eval_judge.main(["--data", path, "--base-url", srv.url, "--model", "m", "--out", str(out), *FAST])
    assert rc == 0
    report = json.loads((out / "report.json").read_text())
    assert report["task"] == "pointwise"
    ov = report["overall"]
    assert (ov["n"], ov["n_parsed"], ov["n_parse_fail"], ov["n_error"]) == (6, 5, 1, 0)
    assert ov["exact"] == pytest.approx(2 / 6) and ov["within1"] == pytest.approx(3 / 6)
    assert ov["mae"] == pytest.approx(6 / 5) and ov["exact_parsed"] == pytest.approx(2 / 5)
    assert ov["within1_parsed"] == pytest.approx(3 / 5) and ov["parse_fail_rate"] == pytest.approx(1 / 6)
    assert ov["confusion"] == [
        [1, 0, 0, 0, 0, 0],
        [0, 0, 1, 0, 0, 0],
        [0, 0, 0, 0, 1, 0],
        [0, 0, 0, 1, 0, 0],
        [0, 1, 0, 0, 0, 1],
    ]
    ps = report["per_source"]
    assert ps["a"]["exact"] == pytest.approx(1 / 3) and ps["a"]["mae"] == pytest.approx(1.0)
    assert ps["b"]["exact"] == pytest.approx(1 / 3) and ps["b"]["mae"] == pytest.approx(1.5)
    assert report["parse_fail_reasons"] == {"missing_tag": 1}
    for png in ("confusion_matrix.png", "per_source_accuracy.png"):
        assert (out / png).stat().st_size > 1000


def test_pointwise_label_coercion_detects_task(tmp_path):
    rows = [pointwise_row("q", "r", 3)]
    rows[0]["reward_model"]["ground_truth"] = "3"  # numeric string labels are pointwise too
    path = write_parquet(rows, str(tmp_path / "pt.parquet"))
    with ScriptedServer(lambda b: _score(3)) as srv:
        assert eval_judge.main(["--data", path, "--base-url", srv.url, "--model", "m", "--out", str(tmp_path / "o"), *FAST]) == 0
    assert json.loads((tmp_path / "o" / "report.json").read_text())["overall"]["exact"] == 1.0


# ----------------------------------------------------------------------------- faults
def test_request_failures_are_counted_not_fatal(pairs_file, tmp_path, capsys):
    """503 forever, a 400, a 200 with a non-JSON body: three errors of distinct kinds, the rest scored."""
    faults = {"p1-AB": Reply(status=503), "p2-AB": Reply(status=400, text="bad request"), "p3-AB": Reply(raw=b"<html>")}

    def reply(body):
        return faults.get(_marker(body)) or _verdict(_gold(body))

    with ScriptedServer(reply) as srv:
        rc = eval_judge.main(["--data", pairs_file, "--base-url", srv.url, "--model", "m", "--out", str(tmp_path),
                              "--max-retries", "1", "--no-progress"])
    assert rc == 0
    report = json.loads((tmp_path / "report.json").read_text())
    ov = report["overall"]
    assert (ov["n_error"], ov["n_parsed"]) == (3, 3)
    assert ov["error_rate"] == 0.5 and ov["accuracy"] == 0.5 and ov["accuracy_parsed"] == 1.0
    assert ov["pairs_compared"] == 0 and ov["flip_rate"] is None
    assert report["error_kinds"] == {"server_error": 1, "client_error": 1, "bad_response": 1}
    # 503 and the bad body are retried once, the 400 is not: 6 + 2 requests
    assert len(srv.requests) == 8
    assert "3/6 judge requests failed" in capsys.readouterr().err


def test_unreachable_endpoint_exit_3(pairs_file, tmp_path, capsys):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens here now
    rc = eval_judge.main(["--data", pairs_file, "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "m",
                          "--out", str(tmp_path), "--max-retries", "0", "--no-progress"])
    assert rc == 3
    assert json.loads((tmp_path / "report.json").read_text())["error_kinds"] == {"connection": 6}
    assert "all 6 judge requests failed" in capsys.readouterr().err


# ----------------------------------------------------------------------------- bad input
def _drop(rows, key):
    for r in rows:
        del r[key]
    return rows


BAD_INPUT = [
    ("missing_file", lambda d: str(d / "nope.parquet"), "input file not found"),
    ("wrong_type", lambda d: (d / "x.csv").write_text("a,b\n") and str(d / "x.csv"), "unsupported file type"),
    ("no_ground_truth", lambda d: write_parquet(_drop(pairwise_rows("p", "q", "a", "b"), "reward_model"), str(d / "a.parquet")),
     "missing column 'reward_model.ground_truth'"),
    ("no_prompt", lambda d: write_parquet(_drop(pairwise_rows("p", "q", "a", "b"), "prompt"), str(d / "b.parquet")),
     "missing column 'prompt'"),
    ("bad_label", lambda d: write_parquet([{**pointwise_row("q", "r", 1), "reward_model": {"style": "rule", "ground_truth": "7"}}],
                                          str(d / "c.parquet")), "neither 'A'/'B'"),
    ("mixed_labels", lambda d: write_parquet([{**pointwise_row("q", "r", 1), "reward_model": {"style": "rule", "ground_truth": g}}
                                              for g in ("A", "2")], str(d / "e.parquet")), "mixes pairwise"),
]


@pytest.mark.parametrize("name,make,message", BAD_INPUT, ids=[c[0] for c in BAD_INPUT])
def test_bad_input_names_the_problem(tmp_path, capsys, name, make, message):
    path = make(tmp_path)
    rc = eval_judge.main(["--data", path, "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--out", str(tmp_path / "o")])
    assert rc == 2
    assert message in capsys.readouterr().err


def test_needs_an_endpoint_and_vllm_is_guarded(pairs_file, tmp_path, capsys):
    assert eval_judge.main(["--data", pairs_file]) == 2
    assert "--base-url and --model" in capsys.readouterr().err
    try:
        import vllm  # noqa: F401
    except ImportError:
        assert eval_judge.main(["--data", pairs_file, "--vllm-offline", str(tmp_path), "--out", str(tmp_path)]) == 2
        assert "needs the 'vllm' package" in capsys.readouterr().err


@pytest.mark.parametrize("script", ["eval_judge.py", "eval_gsm8k.py", "plot_metrics.py"])
def test_help(script):
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", script), "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert re.search(r"usage: \S+", out) and "--out" in out


# ----------------------------------------------------------------------------- a real model, offline
def test_hf_offline_real_model(model_path, pairs_file, tmp_path):
    """SmolLM2-135M through transformers on CPU: replies are produced and parsed (or counted as failures)."""
    out = tmp_path / "hf"
    rc = eval_judge.main(["--data", pairs_file, "--pairs", "1", "--hf-offline", model_path, "--max-tokens", "8",
                          "--batch-size", "2", "--out", str(out), "--no-progress", "--no-plots"])
    assert rc == 0
    report = json.loads((out / "report.json").read_text())
    ov = report["overall"]
    assert (ov["n"], ov["n_error"], ov["n_parsed"] + ov["n_parse_fail"], ov["pairs_both_orders"]) == (2, 0, 2, 1)
    assert report["judge"]["endpoint"] == "transformers offline"
    preds = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert all(isinstance(p["reply"], str) for p in preds)
