"""scripts.eval.judge: hand-computed metrics against a scripted fake OpenAI-compatible judge (exact values)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter

import pytest

import scripts
from reward_fns.judge_client import JudgeResult
from reward_fns.judge_errors import JudgeError
from reward_fns.llm_judge import DEFAULTS as _JUDGE_DEFAULTS
from scripts.eval import judge as eval_judge
from tests.doubles.fake_openai import FakeOpenAIServer
from tests.doubles.fake_replies import Reply, markers
from tests.fixtures.eval.make_fixtures import pairwise_rows, pointwise_row, write_parquet
from tests.fixtures.eval.stoppable import Gate, run_and_signal

ROOT = scripts.ROOT

JUDGE_PROMPT_VERSION = _JUDGE_DEFAULTS["prompt_version"]

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

NO_VERDICT = "no reply had a parseable verdict (6 unparseable, 0 failed of 6)"

PAIRWISE_CASES = [
    # name, reply(body), extra args, exit status, expected overall metrics, expected per-source accuracy
    (
        "always_A",
        lambda b: _verdict("A"),
        [],
        0,
        dict(
            accuracy=0.5,
            a_share=1.0,
            flip_rate=1.0,
            pair_accuracy=0.0,
            parse_fail_rate=0.0,
            pairs_compared=3,
            pairs_both_orders=3,
            label_a_share=0.5,
            error_rate=0.0,
        ),
        {"s1": 0.5, "s2": 0.5},
    ),
    (
        "always_B",
        lambda b: _verdict("B"),
        [],
        0,
        dict(accuracy=0.5, a_share=0.0, flip_rate=1.0, pair_accuracy=0.0, parse_fail_rate=0.0),
        {"s1": 0.5, "s2": 0.5},
    ),
    (
        "perfect",
        lambda b: _verdict(_gold(b)),
        [],
        0,
        dict(accuracy=1.0, accuracy_parsed=1.0, a_share=0.5, flip_rate=0.0, pair_accuracy=1.0, parse_fail_rate=0.0),
        {"s1": 1.0, "s2": 1.0},
    ),
    (
        "always_rejected",
        lambda b: _verdict("B" if _gold(b) == "A" else "A"),
        [],
        0,
        dict(accuracy=0.0, a_share=0.5, flip_rate=0.0, pair_accuracy=0.0),
        {"s1": 0.0, "s2": 0.0},
    ),
    # no verdict at all: the run measured nothing -> exit 4 (reports still written), pairs count as wrong
    (
        "garbage",
        lambda b: "I think both responses are good.",
        [],
        4,
        dict(
            accuracy=0.0,
            accuracy_parsed=None,
            a_share=None,
            flip_rate=None,
            pair_accuracy=0.0,
            parse_fail_rate=1.0,
            n_parse_fail=6,
            n_parsed=0,
            pairs_compared=0,
            pairs_both_orders=3,
        ),
        {"s1": 0.0, "s2": 0.0},
    ),
    (
        "garbage_allowed",
        lambda b: "I think both responses are good.",
        ["--allow-unparseable"],
        0,
        dict(accuracy=0.0, pair_accuracy=0.0, parse_fail_rate=1.0, n_parsed=0),
        {"s1": 0.0, "s2": 0.0},
    ),
    # p1 right in both orders; p2 right in one; p3 unparseable in one order: pair_accuracy 1/3 (of the
    # 3 pairs present in both orders), flip_rate 1/2 (of the 2 pairs with a verdict in both orders)
    (
        "mixed",
        lambda b: MIXED[_marker(b)],
        [],
        0,
        dict(
            n=6,
            n_parsed=5,
            accuracy=4 / 6,
            accuracy_parsed=4 / 5,
            a_share=3 / 5,
            parse_fail_rate=1 / 6,
            pairs_both_orders=3,
            pairs_compared=2,
            flip_rate=0.5,
            pair_accuracy=1 / 3,
        ),
        {"s1": 3 / 4, "s2": 1 / 2},
    ),
]


@pytest.mark.parametrize(
    "name,reply,extra,status,expected,per_source", PAIRWISE_CASES, ids=[c[0] for c in PAIRWISE_CASES]
)
def test_pairwise_metrics(pairs_file, tmp_path, capsys, name, reply, extra, status, expected, per_source):
    with FakeOpenAIServer(reply) as srv:
        rc = eval_judge.main(
            ["--data", pairs_file, "--base-url", srv.base_url, "--model", "m", "--out", str(tmp_path), *FAST, *extra]
        )
    assert rc == status
    assert (NO_VERDICT in capsys.readouterr().err) == (status == 4)
    assert len(srv.bodies) == 6 and all(r["model"] == "m" for r in srv.bodies)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["task"] == "pairwise"
    assert (report["partial"], report["stopped_by"], report["progress"]) == (
        False,
        None,
        {"rows": 6, "done": 6, "reused": 0},
    )
    ov = report["overall"]
    for k, v in expected.items():
        assert ov[k] == (pytest.approx(v) if v is not None else None), k
    assert {s: m["accuracy"] for s, m in report["per_source"].items()} == pytest.approx(per_source)
    for png in ("per_source_accuracy.png", "position_bias.png"):
        data = (tmp_path / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
    preds = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert [p["row"] for p in preds] == list(range(6)) and len({p["row_id"] for p in preds}) == 6
    md = (tmp_path / "report.md").read_text()
    assert f"| pair_accuracy | {eval_judge.fmt(ov['pair_accuracy'])} |" in md
    assert f"| flip_rate | {eval_judge.fmt(ov['flip_rate'])} |" in md
    # both metrics are defined in the report itself
    assert "- `flip_rate`: pairs with a verdict in both orders (pairs_compared) where the verdict picks a " in md
    assert "- `pair_accuracy`: pairs present in both orders (same extra_info.pair_id) judged right in BOTH orders" in md


def test_requests_are_the_rows_prompts(pairs_file, tmp_path):
    import pyarrow.parquet as pq

    rows = pq.read_table(pairs_file).to_pylist()
    with FakeOpenAIServer(lambda b: _verdict("A")) as srv:
        eval_judge.main(
            [
                "--data",
                pairs_file,
                "--base-url",
                srv.base_url,
                "--model",
                "m",
                "--out",
                str(tmp_path),
                "--concurrency",
                "1",
                "--max-tokens",
                "77",
                *FAST,
            ]
        )
    sent = sorted(json.dumps(r["messages"]) for r in srv.bodies)
    assert sent == sorted(json.dumps(r["prompt"]) for r in rows)
    assert {r["max_tokens"] for r in srv.bodies} == {77} and {r["temperature"] for r in srv.bodies} == {0.0}


def test_pairs_subsample_keeps_both_orders(pairs_file, tmp_path):
    with FakeOpenAIServer(lambda b: _verdict("A")) as srv:
        eval_judge.main(
            [
                "--data",
                pairs_file,
                "--base-url",
                srv.base_url,
                "--model",
                "m",
                "--out",
                str(tmp_path),
                "--pairs",
                "2",
                "--seed",
                "1",
                *FAST,
            ]
        )
    ov = json.loads((tmp_path / "report.json").read_text())["overall"]
    assert ov["n"] == 4 and ov["pairs_both_orders"] == 2 and ov["flip_rate"] == 1.0
    sent = Counter(markers(b)[-1].split("-")[0] for b in srv.bodies)
    assert len(sent) == 2 and set(sent.values()) == {2}


# ----------------------------------------------------------------------------- pointwise
POINTWISE = [  # (label, reply): pred 0 exact, 2 (|1|), 4 (|2|), 3 exact, 1 (|3|), no verdict
    (0, _score(0)),
    (1, _score(2)),
    (2, _score(4)),
    (3, _score(3)),
    (4, _score(1)),
    (4, "It is quite good."),
]


def test_pointwise_metrics(tmp_path):
    rows = [
        pointwise_row(f"q{i}", f"resp {i}", label, "a" if i < 3 else "b", marker=f"pt{i}")
        for i, (label, _r) in enumerate(POINTWISE)
    ]
    path = write_parquet(rows, str(tmp_path / "pt.parquet"))
    table = {f"pt{i}": r for i, (_l, r) in enumerate(POINTWISE)}
    out = tmp_path / "out"
    with FakeOpenAIServer(lambda b: table[markers(b)[-1]]) as srv:
        rc = eval_judge.main(["--data", path, "--base-url", srv.base_url, "--model", "m", "--out", str(out), *FAST])
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
    with FakeOpenAIServer(lambda b: _score(3)) as srv:
        assert (
            eval_judge.main(
                ["--data", path, "--base-url", srv.base_url, "--model", "m", "--out", str(tmp_path / "o"), *FAST]
            )
            == 0
        )
    assert json.loads((tmp_path / "o" / "report.json").read_text())["overall"]["exact"] == 1.0


# ----------------------------------------------------------------------------- verification (labels 0 / 4)
G = "It looks fine to me."  # no verdict
VERIFY_CASES = [
    # name, rows (data_source, label, reply), extra args, exit status, expected overall, expected per source
    (
        "every_outcome",
        [
            ("v", 4, _score(4)),
            ("v", 4, _score(3)),
            ("v", 4, _score(2)),
            ("v", 0, _score(0)),
            ("v", 0, _score(3)),
            ("v", 0, G),
        ],
        [],
        0,
        dict(
            tp=2,
            fn=1,
            tn=1,
            fp=1,
            none=1,
            n_label4=3,
            n_label0=3,
            recall=2 / 3,
            specificity=1 / 3,
            balanced_accuracy=0.5,
            precision=2 / 3,
            exact=2 / 6,
            within1=3 / 6,
            mae=6 / 5,
            parse_fail_rate=1 / 6,
            confusion=[[1, 0, 0, 1, 0, 1], [0] * 6, [0] * 6, [0] * 6, [0, 0, 1, 1, 1, 0]],
        ),
        {"v": dict(balanced_accuracy=0.5, precision=2 / 3)},
    ),
    (
        "nothing_accepted",
        [("v", 4, _score(0)), ("v", 4, _score(2)), ("v", 0, _score(1)), ("v", 0, _score(0))],
        [],
        0,
        dict(tp=0, fn=2, tn=2, fp=0, none=0, recall=0.0, specificity=1.0, balanced_accuracy=0.5, precision=0.0),
        {"v": dict(precision=0.0)},
    ),
    (
        "everything_accepted",
        [("v", 4, _score(4)), ("v", 0, _score(4)), ("v", 0, _score(3))],
        [],
        0,
        dict(tp=1, fn=0, tn=0, fp=2, none=0, recall=1.0, specificity=0.0, balanced_accuracy=0.5, precision=1 / 3),
        {"v": dict(recall=1.0)},
    ),
    (
        "no_verdict_is_wrong_in_its_class",
        [("v", 4, G), ("v", 0, G)],
        ["--allow-unparseable"],
        0,
        dict(tp=0, fn=0, tn=0, fp=0, none=2, recall=0.0, specificity=0.0, balanced_accuracy=0.0, precision=0.0),
        {"v": dict(none=2)},
    ),
    ("no_verdict_exits_4", [("v", 4, G), ("v", 0, G)], [], 4, dict(none=2, balanced_accuracy=0.0), {}),
    # a source with other labels has no verification metrics; so has the whole file then
    (
        "per_source",
        [
            ("gsm8k_verify", 4, _score(3)),
            ("gsm8k_verify", 0, _score(1)),
            ("gsm8k_verify", 0, _score(4)),
            ("helpsteer", 1, _score(1)),
            ("helpsteer", 3, _score(4)),
        ],
        [],
        0,
        dict(balanced_accuracy=None, precision=None, recall=None, specificity=None, tp=None, none=None, exact=1 / 5),
        {
            "gsm8k_verify": dict(
                tp=1,
                fp=1,
                tn=1,
                fn=0,
                none=0,
                recall=1.0,
                specificity=0.5,
                balanced_accuracy=0.75,
                precision=0.5,
                exact=0.0,
            ),
            "helpsteer": dict(balanced_accuracy=None, precision=None, tp=None, exact=0.5),
        },
    ),
]


@pytest.mark.parametrize("name,rows,extra,status,expected,per_source", VERIFY_CASES, ids=[c[0] for c in VERIFY_CASES])
def test_verification_metrics(tmp_path, name, rows, extra, status, expected, per_source):
    data = write_parquet(
        [
            pointwise_row(f"Is solution {i} right?", f"solution {i}", label, src, marker=f"v{i}")
            for i, (src, label, _r) in enumerate(rows)
        ],
        str(tmp_path / "v.parquet"),
    )
    table = {f"v{i}": r for i, (_s, _l, r) in enumerate(rows)}
    out = tmp_path / "out"
    with FakeOpenAIServer(lambda b: table[markers(b)[-1]]) as srv:
        rc = eval_judge.main(
            ["--data", data, "--base-url", srv.base_url, "--model", "m", "--out", str(out), *FAST, *extra]
        )
    assert rc == status
    report = json.loads((out / "report.json").read_text())
    ov = report["overall"]
    for k, v in expected.items():
        assert ov[k] == (pytest.approx(v) if isinstance(v, float) else v), k
    for src, exp in per_source.items():
        for k, v in exp.items():
            assert report["per_source"][src][k] == (pytest.approx(v) if isinstance(v, float) else v), (src, k)
    md = (out / "report.md").read_text()
    if ov["balanced_accuracy"] is not None:
        assert f"| balanced_accuracy | {eval_judge.fmt(ov['balanced_accuracy'])} |" in md
        assert (
            f"Verification (labels 0 and 4; accept = score >= 3): tp {ov['tp']}, fp {ov['fp']}, tn {ov['tn']}, "
            f"fn {ov['fn']}, none {ov['none']}"
        ) in md
        assert "- `specificity`: label-0 rows rejected (score <= 2) / all label-0 rows" in md
    else:
        assert "Verification (" not in md


def test_prompt_is_sent_as_the_parquet_has_it(tmp_path):
    """Any template: a pairwise prompt with a reference solution and a custom pointwise prompt are sent as
    they are; labels come from reward_model.ground_truth and pairs from extra_info.pair_id."""

    def row(messages, gt, pid=None):
        return {
            "data_source": "custom",
            "prompt": messages,
            "ability": "judge",
            "reward_model": {"style": "rule", "ground_truth": gt},
            "extra_info": {"split": "test", "index": 0, **({"pair_id": pid} if pid else {})},
        }

    def ref_prompt(first, second, tag):
        return [
            {"role": "system", "content": "Grade two candidate solutions against the reference."},
            {"role": "user", "content": f"Problem: 2+2? [[{tag}]]\nReference: 4\nFirst: {first}\nSecond: {second}"},
        ]

    pairs = [row(ref_prompt("4", "5", "r-AB"), "A", "r"), row(ref_prompt("5", "4", "r-BA"), "B", "r")]
    points = [
        row([{"role": "user", "content": f"Check: {x} [[c{i}]]"}], gt) for i, (x, gt) in enumerate([("4", 4), ("5", 0)])
    ]
    replies = {"r-AB": _verdict("A"), "r-BA": _verdict("B"), "c0": _score(4), "c1": _score(0)}
    for name, rows, key, value in (
        ("pairs", pairs, "pair_accuracy", 1.0),
        ("points", points, "balanced_accuracy", 1.0),
    ):
        data = write_parquet(rows, str(tmp_path / f"{name}.parquet"))
        with FakeOpenAIServer(lambda b: replies[markers(b)[-1]]) as srv:
            assert (
                eval_judge.main(
                    ["--data", data, "--base-url", srv.base_url, "--model", "m", "--out", str(tmp_path / name), *FAST]
                )
                == 0
            )
        assert sorted(json.dumps(r["messages"]) for r in srv.bodies) == sorted(json.dumps(r["prompt"]) for r in rows)
        assert json.loads((tmp_path / name / "report.json").read_text())["overall"][key] == value


# ----------------------------------------------------------------------------- faults
def test_request_failures_are_counted_not_fatal(pairs_file, tmp_path, capsys):
    """503 forever, a 400, a 200 with a non-JSON body: three errors of distinct kinds, the rest scored."""
    faults = {"p1-AB": Reply(status=503), "p2-AB": Reply(status=400, text="bad request"), "p3-AB": Reply(raw=b"<html>")}

    def reply(body):
        return faults.get(_marker(body)) or _verdict(_gold(body))

    with FakeOpenAIServer(reply) as srv:
        rc = eval_judge.main(
            [
                "--data",
                pairs_file,
                "--base-url",
                srv.base_url,
                "--model",
                "m",
                "--out",
                str(tmp_path),
                "--max-retries",
                "1",
                "--no-progress",
            ]
        )
    assert rc == 0
    report = json.loads((tmp_path / "report.json").read_text())
    ov = report["overall"]
    assert (ov["n_error"], ov["n_parsed"]) == (3, 3)
    assert ov["error_rate"] == 0.5 and ov["accuracy"] == 0.5 and ov["accuracy_parsed"] == 1.0
    assert ov["pairs_compared"] == 0 and ov["flip_rate"] is None
    assert report["error_kinds"] == {"server_error": 1, "client_error": 1, "bad_response": 1}
    # 503 and the bad body are retried once, the 400 is not: 6 + 2 requests
    assert len(srv.bodies) == 8
    assert "3/6 judge requests failed" in capsys.readouterr().err


def test_unreachable_endpoint_exit_3(pairs_file, tmp_path, capsys):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens here now
    rc = eval_judge.main(
        [
            "--data",
            pairs_file,
            "--base-url",
            f"http://127.0.0.1:{port}/v1",
            "--model",
            "m",
            "--out",
            str(tmp_path),
            "--max-retries",
            "0",
            "--no-progress",
        ]
    )
    assert rc == 3
    assert json.loads((tmp_path / "report.json").read_text())["error_kinds"] == {"connection": 6}
    assert "all 6 judge requests failed" in capsys.readouterr().err


# ----------------------------------------------------------------------------- results survive the run
def _not_a_folder(d):
    (d / "file").write_text("x")
    return d / "file"


UNWRITABLE = [  # --out, the start of the message (root can write anywhere, so the paths are impossible ones)
    ("out_is_a_file", lambda d: _not_a_folder(d), "--out {}: exists and is not a folder"),
    ("parent_is_a_file", lambda d: _not_a_folder(d) / "out", "--out {}: cannot create the folder"),
]


@pytest.mark.parametrize("name,make,message", UNWRITABLE, ids=[c[0] for c in UNWRITABLE])
def test_unwritable_out_fails_before_any_request(pairs_file, tmp_path, capsys, name, make, message):
    out = make(tmp_path)
    with FakeOpenAIServer(lambda b: _verdict("A")) as srv:
        rc = eval_judge.main(
            ["--data", pairs_file, "--base-url", srv.base_url, "--model", "m", "--out", str(out), *FAST]
        )
    assert rc == 2 and srv.bodies == []
    assert f"error: {message.format(out)}" in capsys.readouterr().err


def _cmd(data, url, out, *extra):
    return [
        sys.executable,
        "-m",
        "scripts.eval.judge",
        "--data",
        data,
        "--base-url",
        url,
        "--model",
        "m",
        "--out",
        str(out),
        "--concurrency",
        "1",
        "--no-plots",
        *FAST,
        *extra,
    ]


@pytest.mark.parametrize("sig,status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"])
def test_stop_signal_writes_partial_reports_and_a_rerun_resumes(pairs_file, tmp_path, sig, status):
    """3 of 6 rows answered, the 4th request held: the signal stops the run, the reports cover the 3 rows;
    the same command again requests only the other 3."""
    out = tmp_path / "out"
    gate = Gate(lambda b: _verdict(_gold(b)), open_for=3)
    with FakeOpenAIServer(gate) as srv:
        try:
            rc, stdout, stderr = run_and_signal(
                _cmd(pairs_file, srv.base_url, out), ROOT, str(out / "predictions.jsonl"), 3, sig
            )
        finally:
            gate.release()
    assert rc == status, stderr
    name = signal.Signals(sig).name
    assert f"error: stopped by {name} after 3 of 6 rows" in stderr
    report = json.loads((out / "report.json").read_text())
    assert (report["partial"], report["stopped_by"], report["progress"]) == (
        True,
        name,
        {"rows": 6, "done": 3, "reused": 0},
    )
    assert (report["overall"]["n"], report["overall"]["accuracy"]) == (3, 1.0)
    assert (out / "report.md").read_text().startswith("# Judge evaluation: pairwise (PARTIAL: 3 of 6 rows)")
    first = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert [p["row"] for p in first] == [0, 1, 2] and {p["status"] for p in first} == {"ok"}
    assert sorted(os.listdir(out)) == ["predictions.jsonl", "report.json", "report.md", "run.json"]

    with FakeOpenAIServer(lambda b: _verdict(_gold(b)), port=srv.port) as srv:  # the same endpoint: resume needs it
        r = subprocess.run(
            _cmd(pairs_file, srv.base_url, out)[:-1], cwd=ROOT, capture_output=True, text=True, timeout=120
        )
    assert r.returncode == 0, r.stderr
    assert sorted(_marker(b) for b in srv.bodies) == ["p2-BA", "p3-AB", "p3-BA"]
    assert f"resume: 3 of 6 rows reused from {out / 'predictions.jsonl'}, 3 to request" in r.stderr
    assert "judge pairwise: 100%" in r.stderr and "6/6" in r.stderr  # the bar counts the reused rows
    report = json.loads((out / "report.json").read_text())
    assert (report["partial"], report["stopped_by"], report["progress"]) == (
        False,
        None,
        {"rows": 6, "done": 6, "reused": 3},
    )
    assert (report["overall"]["n"], report["overall"]["accuracy"], report["overall"]["pair_accuracy"]) == (6, 1.0, 1.0)
    assert "- resumed: 3 rows reused from predictions.jsonl, 3 answered in this run" in (out / "report.md").read_text()
    final = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert [p["row"] for p in final] == list(range(6)) and final[:3] == first


def test_rerun_requests_failed_rows_again(pairs_file, tmp_path, capsys):
    out = tmp_path / "out"
    fail = {"p2-AB", "p3-BA"}
    with FakeOpenAIServer(lambda b: Reply(status=400) if _marker(b) in fail else _verdict(_gold(b))) as srv:
        assert (
            eval_judge.main(
                ["--data", pairs_file, "--base-url", srv.base_url, "--model", "m", "--out", str(out), *FAST]
            )
            == 0
        )
    assert json.loads((out / "report.json").read_text())["overall"]["n_error"] == 2
    with FakeOpenAIServer(lambda b: _verdict(_gold(b)), port=srv.port) as srv:  # the same endpoint: resume needs it
        assert (
            eval_judge.main(
                ["--data", pairs_file, "--base-url", srv.base_url, "--model", "m", "--out", str(out), *FAST]
            )
            == 0
        )
    assert sorted(_marker(b) for b in srv.bodies) == sorted(fail)
    report = json.loads((out / "report.json").read_text())
    assert (report["overall"]["n_error"], report["overall"]["accuracy"], report["progress"]["reused"]) == (0, 1.0, 4)
    assert "resume: 4 of 6 rows reused" in capsys.readouterr().err


CHANGED = [  # a rerun in the same --out with other judge settings: refused before any request
    ("model", ["--model", "other"], "model: 'm' -> 'other'"),
    ("max_tokens", ["--max-tokens", "99"], "max_tokens: 512 -> 99"),
    ("temperature", ["--temperature", "0.7"], "temperature: 0.0 -> 0.7"),
]


@pytest.mark.parametrize("name,args,diff", CHANGED, ids=[c[0] for c in CHANGED])
def test_rerun_with_other_settings_is_refused(pairs_file, tmp_path, capsys, name, args, diff):
    out = tmp_path / "out"
    with FakeOpenAIServer(lambda b: _verdict("A")) as srv:
        base = ["--data", pairs_file, "--base-url", srv.base_url, "--model", "m", "--out", str(out), *FAST]
        assert eval_judge.main(base) == 0
        capsys.readouterr()
        assert eval_judge.main(base + args) == 2
        assert len(srv.bodies) == 6
        err = capsys.readouterr().err
        assert f"holds judge predictions made with other settings ({diff}); use another --out, or --no-resume" in err
        assert eval_judge.main(base + args + ["--no-resume"]) == 0
        assert len(srv.bodies) == 12
    assert (
        json.loads((out / "run.json").read_text())["settings"]["judge"][name]
        == json.loads((out / "report.json").read_text())["judge"][name]
    )


# ----------------------------------------------------------------------------- bad input
def _drop(rows, key):
    for r in rows:
        del r[key]
    return rows


BAD_INPUT = [
    ("missing_file", lambda d: str(d / "nope.parquet"), "input file not found"),
    ("wrong_type", lambda d: (d / "x.csv").write_text("a,b\n") and str(d / "x.csv"), "unsupported file type"),
    (
        "no_ground_truth",
        lambda d: write_parquet(_drop(pairwise_rows("p", "q", "a", "b"), "reward_model"), str(d / "a.parquet")),
        "missing column 'reward_model.ground_truth'",
    ),
    (
        "no_prompt",
        lambda d: write_parquet(_drop(pairwise_rows("p", "q", "a", "b"), "prompt"), str(d / "b.parquet")),
        "missing column 'prompt'",
    ),
    (
        "bad_label",
        lambda d: write_parquet(
            [{**pointwise_row("q", "r", 1), "reward_model": {"style": "rule", "ground_truth": "7"}}],
            str(d / "c.parquet"),
        ),
        "neither 'A'/'B'",
    ),
    (
        "mixed_labels",
        lambda d: write_parquet(
            [{**pointwise_row("q", "r", 1), "reward_model": {"style": "rule", "ground_truth": g}} for g in ("A", "2")],
            str(d / "e.parquet"),
        ),
        "mixes pairwise",
    ),
]


@pytest.mark.parametrize("name,make,message", BAD_INPUT, ids=[c[0] for c in BAD_INPUT])
def test_bad_input_names_the_problem(tmp_path, capsys, name, make, message):
    path = make(tmp_path)
    rc = eval_judge.main(
        ["--data", path, "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--out", str(tmp_path / "o")]
    )
    assert rc == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "flag, message",
    [
        ("--concurrency", "error: concurrency must be >= 1, got 0"),
        ("--max-tokens", "error: max tokens must be >= 1, got 0"),
    ],
)
def test_bad_endpoint_flags_name_the_flag(pairs_file, tmp_path, capsys, flag, message):
    rc = eval_judge.main(
        ["--data", pairs_file, "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--out", str(tmp_path), flag, "0"]
    )
    assert (rc, capsys.readouterr().err.strip().splitlines()[-1]) == (2, message)


def test_needs_an_endpoint_and_vllm_is_guarded(pairs_file, tmp_path, capsys):
    assert eval_judge.main(["--data", pairs_file]) == 2
    assert "--base-url and --model" in capsys.readouterr().err
    try:
        import vllm  # noqa: F401
    except ImportError:
        assert eval_judge.main(["--data", pairs_file, "--vllm-offline", str(tmp_path), "--out", str(tmp_path)]) == 2
        assert "needs the 'vllm' package" in capsys.readouterr().err


@pytest.mark.parametrize(
    "module,mentions",
    [
        (
            "scripts.eval.judge",
            [
                "--allow-unparseable",
                "--no-resume",
                "balanced_accuracy",
                "pair_accuracy",
                "flip_rate",
                "4 no reply had a parseable",
                "130 / 143 stopped by SIGINT / SIGTERM",
                "predictions.jsonl",
            ],
        ),
        (
            "scripts.eval.gsm8k",
            [
                "--allow-judge-errors",
                "--no-resume",
                "4 the judge gave no",
                "130 / 143 stopped by SIGINT",
                "predictions.jsonl",
                f"template version (default {JUDGE_PROMPT_VERSION})",
            ],
        ),
        (
            "scripts.report.plot_metrics",
            ["judge_health/fallback_rate", "position/verdict_a_share", "grpo/identical_reward_groups"],
        ),
    ],
)
def test_help(module, mentions):
    out = subprocess.run(
        [sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith(f"usage: python -m {module} ") and "--out" in out
    flat = " ".join(out.split())
    for m in mentions:
        assert m in flat, m


# ----------------------------------------------------------------------------- a real model, offline
@pytest.mark.slow
def test_hf_offline_real_model(model_path, pairs_file, tmp_path):
    """SmolLM2-135M through transformers on CPU: replies are produced and parsed (or counted as failures)."""
    out = tmp_path / "hf"
    rc = eval_judge.main(
        [
            "--data",
            pairs_file,
            "--pairs",
            "1",
            "--hf-offline",
            model_path,
            "--max-tokens",
            "8",
            "--batch-size",
            "2",
            "--out",
            str(out),
            "--no-progress",
            "--no-plots",
            "--allow-unparseable",
        ]
    )
    assert rc == 0
    report = json.loads((out / "report.json").read_text())
    ov = report["overall"]
    assert (ov["n"], ov["n_error"], ov["n_parsed"] + ov["n_parse_fail"], ov["pairs_both_orders"]) == (2, 0, 2, 1)
    assert report["judge"]["endpoint"] == "transformers offline"
    preds = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert all(isinstance(p["reply"], str) for p in preds)


@pytest.mark.parametrize("status", [401, 403])
def test_a_rejected_key_stops_the_evaluation(pairs_file, tmp_path, capsys, status):
    """D7: 401 / 403 stop the evaluator at once with exit 2 and the cause, instead of scoring every row as failed."""
    with FakeOpenAIServer(lambda b: Reply(status=status, raw=b'{"error": {"message": "invalid api key"}}')) as srv:
        rc = eval_judge.main(
            ["--data", pairs_file, "--base-url", srv.base_url, "--model", "m", "--out", str(tmp_path), *FAST]
        )
    err = capsys.readouterr().err
    assert rc == 2 and f"HTTP {status}" in err, err[-2000:]
    assert not (tmp_path / "report.json").exists()


def test_resume_needs_the_same_endpoint(pairs_file, tmp_path, capsys):
    """D3: predictions saved from one server are not merged with another's, though both serve model "m"."""
    with FakeOpenAIServer(lambda b: _verdict("A")) as a:
        assert eval_judge.main(
            ["--data", pairs_file, "--base-url", a.base_url, "--model", "m", "--out", str(tmp_path), *FAST]
        ) in (0, 4)
    with FakeOpenAIServer(lambda b: _verdict("A")) as b:
        rc = eval_judge.main(
            ["--data", pairs_file, "--base-url", b.base_url, "--model", "m", "--out", str(tmp_path), *FAST]
        )
    assert rc == 2 and "made with other settings" in capsys.readouterr().err and b.bodies == []


def test_every_request_has_a_deadline():
    """D2: a server that sends a byte now and then (each resets the read timeout) cannot hold an evaluation: each
    request's whole time is bounded, retries and backoff included."""
    from scripts.eval.backends import Backend
    from scripts.eval.endpoint import make_client, request_deadline

    c = make_client(
        Backend(
            "http://127.0.0.1:9/v1", "m", None, concurrency=2, timeout=3.0, max_retries=1, max_tokens=8, temperature=0.0
        )
    )
    assert c.deadline == request_deadline(3.0, 1) == 14.0


ROW_KEYS = ["kind", "row", "row_id", "data_source", "label", "pred", "status", "reason", "pair_id", "reply"]


@pytest.mark.parametrize(
    "res, keys",
    [
        (JudgeResult(_verdict("A"), finish_reason="stop", latency_s=0.5), [*ROW_KEYS, "finish_reason", "latency_s"]),
        (JudgeResult("no verdict", cached=True), ROW_KEYS),
        (JudgeResult(None, JudgeError("timeout", "read timed out")), [*ROW_KEYS, "error"]),
    ],
    ids=["ok", "parse_fail", "error"],
)
def test_a_record_keeps_its_key_order(res, keys):
    """predictions.jsonl records keep one key order, whatever the reply."""
    row = {"data_source": "s", "extra_info": {"pair_id": "p1"}}
    assert list(eval_judge.make_record("pairwise", 3, "id3", row, "A", res)) == keys
