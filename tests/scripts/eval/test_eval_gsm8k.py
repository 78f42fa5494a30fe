"""scripts.eval.gsm8k: strict / flexible accuracy and judge-vs-rule numbers on a hand-computed case."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
from collections import defaultdict

import pytest

import scripts
from scripts.eval import gsm8k as eval_gsm8k
from scripts.eval import gsm8k_grading
from tests.doubles.fake_openai import FakeOpenAIServer
from tests.doubles.fake_replies import Reply, all_text
from tests.fixtures.eval.make_fixtures import gsm8k_row, write_parquet
from tests.fixtures.eval.stoppable import Gate, run_and_signal

ROOT = scripts.ROOT

FAST = ["--max-retries", "1", "--judge-max-retries", "1", "--no-progress"]

# question, reference number, policy answer, strict ok, flexible ok, judge reply (rule = strict)
CASES = [
    ("Ann has 10 pens and buys 8. How many?", "18", "10+8=18.\n#### 18", 1, 1, "<score>4</score>"),  # TP
    ("Bob has 1 cup and gets 2. How many?", "3", "The answer is 3.", 0, 1, "<think>ok</think><score>3</score>"),  # FP
    ("Cid walks 7 km for 10 days. Total?", "70", "#### 1\nActually it is 70", 0, 1, "<score>4</score>"),  # FP
    ("Dee has 5 hats. How many hats?", "5", "I don't know.", 0, 0, "<score>0</score>"),  # TN
    ("Eve earns 1234 dollars. How much?", "1234", "She earns it all.\n#### $1,234.00", 1, 1, "<score>2</score>"),  # FN
    ("Fay has 7 dogs. How many dogs?", "7", "#### 7", 1, 1, "It looks correct to me."),  # judge parse failure
    ("Gus buys 3 packs of 4. How many?", "12", "3*4 = 12\n#### 12", 1, 1, "<score> 4 </score>"),  # TP
    ("Hal sells 540 apples. How many?", "540", "#### 540\nCheck: 12 boxes", 1, 0, "<score>4</score>"),  # TP
]
N = len(CASES)
STRICT = sum(c[3] for c in CASES) / N  # 5/8
FLEXIBLE = sum(c[4] for c in CASES) / N  # 6/8
POLICY = {q: a for q, _n, a, *_ in CASES}
JUDGE = {a: j for _q, _n, a, _s, _f, j in CASES}
CANDIDATE = re.compile(r"<candidate>\n(.*)\n</candidate>", re.DOTALL)


def reply(body):
    """model 'policy': the scripted answer of the question in the prompt; model 'judge': the scripted grade."""
    text = all_text(body)
    if body["model"] == "policy":
        return next(a for q, a in POLICY.items() if q in text)
    return JUDGE[CANDIDATE.search(text).group(1)]


def _write(tmp_path, fmt: str) -> str:
    if fmt == "parquet":
        rows = [gsm8k_row(q, n, f"Worked solution.\n#### {n}") for q, n, *_ in CASES]
        return write_parquet(rows, str(tmp_path / "gsm8k.parquet"))
    path = tmp_path / "gsm8k.jsonl"
    path.write_text(
        "".join(json.dumps({"question": q, "answer": f"Worked solution.\n#### {n}"}) + "\n" for q, n, *_ in CASES)
    )
    return str(path)


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_policy_and_judge_numbers(tmp_path, fmt):
    data = _write(tmp_path, fmt)
    out = tmp_path / "out"
    with FakeOpenAIServer(reply) as srv:
        rc = eval_gsm8k.main(
            [
                "--data",
                data,
                "--base-url",
                srv.base_url,
                "--model",
                "policy",
                "--judge-base-url",
                srv.base_url,
                "--judge-model",
                "judge",
                "--out",
                str(out),
                *FAST,
            ]
        )
    assert rc == 0
    report = json.loads((out / "report.json").read_text())
    p = report["policy"]
    assert (p["n_questions"], p["n_samples"], p["n_error"]) == (N, N, 0)
    assert p["strict_acc"] == pytest.approx(STRICT) == pytest.approx(5 / 8)
    assert p["flexible_acc"] == pytest.approx(FLEXIBLE) == pytest.approx(6 / 8)
    j = report["judge"]
    assert (j["n_asked"], j["n_graded"], j["n_parse_fail"], j["n_error"]) == (8, 7, 1, 0)
    assert (j["tp"], j["fp"], j["fn"], j["tn"]) == (3, 2, 1, 1)
    assert j["precision"] == pytest.approx(3 / 5) and j["recall"] == pytest.approx(3 / 4)
    assert j["f1"] == pytest.approx(2 / 3) and j["agreement"] == pytest.approx(4 / 7)
    assert j["parse_fail_rate"] == pytest.approx(1 / 8)
    assert j["mean_score_rule_correct"] == pytest.approx((4 + 2 + 4 + 4) / 4)
    assert j["score_histogram"]["rule_wrong"] == {"0": 1, "1": 0, "2": 0, "3": 1, "4": 1}
    # the judge saw the LLM-judge reward's own prompt (gsm8k_grade) with question and reference
    judge_reqs = [r for r in srv.bodies if r["model"] == "judge"]
    assert len(judge_reqs) == 8
    assert all(
        "strict math grader" in r["messages"][0]["content"] and "#### " in r["messages"][1]["content"]
        for r in judge_reqs
    )
    # the policy saw the gsm8k_policy template (from the parquet or rendered for raw rows)
    assert all("#### <number>" in r["messages"][-1]["content"] for r in srv.bodies if r["model"] == "policy")
    for png in ("gsm8k_accuracy.png", "judge_vs_rule.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG" and (out / png).stat().st_size > 1000
    assert len((out / "samples.jsonl").read_text().splitlines()) == N
    assert "precision" in (out / "report.md").read_text()
    preds = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert [(p["kind"], p["question_idx"]) for p in preds] == (
        [("policy", i) for i in range(N)] + [("judge", i) for i in range(N)]
    )
    assert (report["partial"], report["progress"]) == (
        False,
        {"samples": N, "done": N, "reused": 0, "judge_total": N, "judge_done": N, "judge_reused": 0},
    )


def test_flexible_rule_and_threshold(tmp_path):
    data = _write(tmp_path, "parquet")
    with FakeOpenAIServer(reply) as srv:
        eval_gsm8k.main(
            [
                "--data",
                data,
                "--base-url",
                srv.base_url,
                "--model",
                "policy",
                "--judge-base-url",
                srv.base_url,
                "--judge-model",
                "judge",
                "--rule-mode",
                "flexible",
                "--judge-threshold",
                "4",
                "--out",
                str(tmp_path / "o"),
                *FAST,
            ]
        )
    j = json.loads((tmp_path / "o" / "report.json").read_text())["judge"]
    # flexible rule: rows 1,2,3,5,7 correct among the graded; judge >= 4: rows 1,3,7,8
    assert (j["tp"], j["fp"], j["fn"], j["tn"]) == (3, 1, 2, 1)
    assert j["rule"] == "flexible" and j["threshold"] == 4


def test_n_samples_are_separate_requests(tmp_path):
    """n=2: every sample is sent (no cache); q1 answers right then wrong, q2 always wrong."""
    calls = defaultdict(int)
    lock = threading.Lock()
    answers = {"Ann": ["#### 18", "#### 17"], "Bob": ["#### 4", "#### 5"]}

    def policy(body):
        text = all_text(body)
        name = "Ann" if "Ann" in text else "Bob"
        with lock:
            k = calls[name]
            calls[name] += 1
        return answers[name][k % 2]

    rows = [gsm8k_row(CASES[0][0], "18"), gsm8k_row(CASES[1][0], "3")]
    data = write_parquet(rows, str(tmp_path / "d.parquet"))
    with FakeOpenAIServer(policy) as srv:
        rc = eval_gsm8k.main(
            [
                "--data",
                data,
                "--base-url",
                srv.base_url,
                "--model",
                "policy",
                "--n-samples",
                "2",
                "--temperature",
                "1.0",
                "--out",
                str(tmp_path / "o"),
                "--no-progress",
            ]
        )
    assert rc == 0 and len(srv.bodies) == 4
    p = json.loads((tmp_path / "o" / "report.json").read_text())["policy"]
    assert p["strict_acc"] == pytest.approx(1 / 4) and p["strict_pass@2"] == pytest.approx(1 / 2)
    assert not (tmp_path / "o" / "judge_vs_rule.png").exists()


def test_policy_and_judge_failures_are_counted(tmp_path, capsys):
    def faulty(body):
        text = all_text(body)
        if body["model"] == "policy" and "Ann" in text:
            return Reply(status=400, text="context too long")
        if body["model"] == "judge" and "Bob" in text:
            return Reply(status=503)
        return reply(body)

    data = _write(tmp_path, "parquet")
    with FakeOpenAIServer(faulty) as srv:
        rc = eval_gsm8k.main(
            [
                "--data",
                data,
                "--base-url",
                srv.base_url,
                "--model",
                "policy",
                "--judge-base-url",
                srv.base_url,
                "--judge-model",
                "judge",
                "--out",
                str(tmp_path / "o"),
                *FAST,
            ]
        )
    assert rc == 0
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    p, j = report["policy"], report["judge"]
    assert p["n_error"] == 1 and p["strict_acc"] == pytest.approx(4 / 8)  # Ann's correct answer is lost
    assert (j["n_asked"], j["n_error"], j["n_parse_fail"], j["n_graded"]) == (7, 1, 1, 5)
    assert j["error_kinds"] == {"server_error": 1}
    err = capsys.readouterr().err
    assert "1/8 policy requests failed" in err and "1/7 judge requests failed" in err


def _judge_all(judge_reply):
    def fn(body):
        return reply(body) if body["model"] == "policy" else judge_reply(body)

    return fn


JUDGE_OUTCOMES = [
    # name, judge reply, extra args, exit status, stderr line
    (
        "all_judge_requests_fail",
        lambda b: Reply(status=503),
        [],
        4,
        "error: all 8 judge requests failed; see http://127.0.0.1:",
    ),
    ("all_fail_allowed", lambda b: Reply(status=503), ["--allow-judge-errors"], 0, None),
    (
        "all_unparseable",
        lambda b: "Looks right to me.",
        [],
        4,
        "error: no judge reply had a parseable score (8 unparseable, 0 failed of 8)",
    ),
    ("one_verdict_measures", lambda b: "<score>4</score>" if "Ann" in all_text(b) else Reply(status=503), [], 0, None),
]


@pytest.mark.parametrize("name,judge,extra,status,message", JUDGE_OUTCOMES, ids=[c[0] for c in JUDGE_OUTCOMES])
def test_a_judge_without_any_verdict_fails_the_run(tmp_path, capsys, name, judge, extra, status, message):
    data = _write(tmp_path, "parquet")
    out = tmp_path / "o"
    with FakeOpenAIServer(_judge_all(judge)) as srv:
        rc = eval_gsm8k.main(
            [
                "--data",
                data,
                "--base-url",
                srv.base_url,
                "--model",
                "policy",
                "--judge-base-url",
                srv.base_url,
                "--judge-model",
                "judge",
                "--out",
                str(out),
                *FAST,
                *extra,
            ]
        )
    assert rc == status
    err = capsys.readouterr().err
    assert (message in err) if message else ("error:" not in err)
    if status == 4:
        assert "the judge measured nothing (--allow-judge-errors accepts this" in err
    report = json.loads((out / "report.json").read_text())  # the report exists whatever the status
    assert report["policy"]["strict_acc"] == pytest.approx(STRICT) and report["judge"]["n_asked"] == N


def _file_named(d):
    (d / "f").write_text("x")
    return d / "f"


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda d: _file_named(d), "exists and is not a folder"),
        (lambda d: _file_named(d) / "out", "cannot create the folder"),
    ],
    ids=["out_is_a_file", "parent_is_a_file"],
)
def test_unwritable_out_fails_before_any_request(tmp_path, capsys, make, message):
    data = _write(tmp_path, "parquet")
    out = make(tmp_path)
    with FakeOpenAIServer(reply) as srv:
        rc = eval_gsm8k.main(
            [
                "--data",
                data,
                "--base-url",
                srv.base_url,
                "--model",
                "policy",
                "--judge-base-url",
                srv.base_url,
                "--judge-model",
                "judge",
                "--out",
                str(out),
                *FAST,
            ]
        )
    assert rc == 2 and srv.bodies == []
    assert f"error: --out {out}: {message}" in capsys.readouterr().err


@pytest.mark.parametrize("sig,status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"])
def test_stop_signal_then_resume(tmp_path, sig, status):
    """3 of 8 answers, the 4th held: the signal stops the run (no judge request), the reports cover the 3;
    the same command again asks the policy the 5 others and the judge all 8."""
    data = _write(tmp_path, "parquet")
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "scripts.eval.gsm8k",
        "--data",
        data,
        "--model",
        "policy",
        "--judge-model",
        "judge",
        "--out",
        str(out),
        "--concurrency",
        "1",
        "--no-plots",
        *FAST,
    ]
    gate = Gate(reply, open_for=3)
    with FakeOpenAIServer(gate) as srv:
        try:
            rc, _out, err = run_and_signal(
                cmd + ["--base-url", srv.base_url, "--judge-base-url", srv.base_url],
                ROOT,
                str(out / "predictions.jsonl"),
                3,
                sig,
            )
        finally:
            gate.release()
    assert rc == status, err
    name = signal.Signals(sig).name
    assert f"error: stopped by {name} after 3 of 8 answers and 0 of 3 judge grades" in err
    assert {r["model"] for r in srv.bodies} == {"policy"}
    report = json.loads((out / "report.json").read_text())
    assert (report["partial"], report["stopped_by"]) == (True, name)
    assert report["progress"] == {
        "samples": 8,
        "done": 3,
        "reused": 0,
        "judge_total": 3,
        "judge_done": 0,
        "judge_reused": 0,
    }
    assert (report["policy"]["n_samples"], report["policy"]["strict_acc"]) == (3, pytest.approx(1 / 3))
    assert (
        (out / "report.md").read_text().startswith("# GSM8K evaluation (PARTIAL: 3 of 8 answers, 0 of 3 judge grades)")
    )
    assert len((out / "samples.jsonl").read_text().splitlines()) == 3

    with FakeOpenAIServer(reply, port=srv.port) as srv:  # the same endpoint: resume needs it
        r = subprocess.run(
            cmd + ["--base-url", srv.base_url, "--judge-base-url", srv.base_url],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert r.returncode == 0, r.stderr
    assert "resume: 3 of 8 answers and 0 judge grades reused" in r.stderr
    asked = [next(q for q in POLICY if q in all_text(b)) for b in srv.bodies if b["model"] == "policy"]
    assert asked == [c[0] for c in CASES[3:]] and sum(b["model"] == "judge" for b in srv.bodies) == N
    report = json.loads((out / "report.json").read_text())
    assert (report["partial"], report["progress"]["reused"], report["policy"]["n_samples"]) == (False, 3, N)
    assert report["policy"]["strict_acc"] == pytest.approx(STRICT)
    j = report["judge"]
    assert (j["tp"], j["fp"], j["fn"], j["tn"], j["n_parse_fail"]) == (3, 2, 1, 1, 1)


def test_a_judge_added_on_rerun_reuses_the_answers(tmp_path, capsys):
    data = _write(tmp_path, "parquet")
    out = tmp_path / "o"
    with FakeOpenAIServer(reply) as srv:
        base = ["--data", data, "--base-url", srv.base_url, "--model", "policy", "--out", str(out), *FAST]
        assert eval_gsm8k.main(base) == 0
        assert eval_gsm8k.main(base + ["--judge-base-url", srv.base_url, "--judge-model", "judge"]) == 0
        # a third run has nothing left to ask
        assert eval_gsm8k.main(base + ["--judge-base-url", srv.base_url, "--judge-model", "judge"]) == 0
    assert [b["model"] for b in srv.bodies] == ["policy"] * N + ["judge"] * N
    err = capsys.readouterr().err
    assert f"resume: {N} of {N} answers and 0 judge grades reused" in err
    assert f"resume: {N} of {N} answers and {N} judge grades reused" in err
    report = json.loads((out / "report.json").read_text())
    assert report["progress"] == {
        "samples": N,
        "done": N,
        "reused": N,
        "judge_total": N,
        "judge_done": N,
        "judge_reused": N,
    }
    assert (report["judge"]["tp"], report["judge"]["agreement"]) == (3, pytest.approx(4 / 7))


BAD = [
    ("missing", lambda d: str(d / "none.jsonl"), "input file not found"),
    (
        "no_columns",
        lambda d: (d / "x.jsonl").write_text('{"q": 1}\n') and str(d / "x.jsonl"),
        "missing column 'prompt'",
    ),
    (
        "no_answer",
        lambda d: (d / "y.jsonl").write_text('{"question": "q"}\n') and str(d / "y.jsonl"),
        "missing column 'answer'",
    ),
    (
        "bad_json",
        lambda d: (d / "z.jsonl").write_text('{"question": \n') and str(d / "z.jsonl"),
        "line 1: invalid JSON",
    ),
    (
        "no_number",
        lambda d: (d / "w.jsonl").write_text('{"question": "q", "answer": "none"}\n') and str(d / "w.jsonl"),
        "no final '#### <number>'",
    ),
]


@pytest.mark.parametrize("name,make,message", BAD, ids=[b[0] for b in BAD])
def test_bad_input(tmp_path, capsys, name, make, message):
    rc = eval_gsm8k.main(
        ["--data", make(tmp_path), "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--out", str(tmp_path / "o")]
    )
    assert rc == 2 and message in capsys.readouterr().err


def test_judge_needs_question_and_both_flags(tmp_path, capsys):
    rows = [gsm8k_row("q?", "1")]
    rows[0]["extra_info"]["question"] = ""
    data = write_parquet(rows, str(tmp_path / "d.parquet"))
    base = ["--data", data, "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--out", str(tmp_path / "o")]
    assert eval_gsm8k.main(base + ["--judge-model", "j"]) == 2
    assert "both --judge-base-url and --judge-model" in capsys.readouterr().err
    assert eval_gsm8k.main(base + ["--judge-model", "j", "--judge-base-url", "http://127.0.0.1:9/v1"]) == 2
    assert "missing column 'extra_info.question'" in capsys.readouterr().err


@pytest.mark.slow
def test_hf_offline_real_policy(model_path, tmp_path):
    data = _write(tmp_path, "jsonl")
    out = tmp_path / "hf"
    rc = eval_gsm8k.main(
        [
            "--data",
            data,
            "--limit",
            "2",
            "--hf-offline",
            model_path,
            "--max-tokens",
            "12",
            "--out",
            str(out),
            "--no-progress",
            "--no-plots",
        ]
    )
    assert rc == 0
    p = json.loads((out / "report.json").read_text())["policy"]
    assert (p["n_questions"], p["n_samples"], p["n_error"]) == (2, 2, 0)
    assert 0.0 <= p["strict_acc"] <= p["strict_format_rate"] <= 1.0


@pytest.mark.parametrize(
    "prec, grade, record",
    [
        (
            {"question_idx": 0, "sample": 1, "status": "ok", "response": "#### 18", "finish_reason": "stop"},
            {"judge_score": 4, "row_id": "r"},
            dict(
                response="#### 18",
                strict=1.0,
                flexible=1.0,
                strict_format=True,
                flexible_format=True,
                finish_reason="stop",
                judge_score=4,
            ),
        ),
        (
            {"question_idx": 0, "sample": 1, "status": "error", "error": "timeout: read timed out"},
            None,
            dict(
                error="timeout: read timed out",
                response=None,
                strict=0.0,
                flexible=0.0,
                strict_format=0.0,
                flexible_format=0.0,
            ),
        ),
    ],
    ids=["ok", "error"],
)
def test_a_sample_record_keeps_its_columns_in_order(prec, grade, record):
    """samples.jsonl columns: the row's, then strict, flexible, strict_format, flexible_format, then the judge's."""
    item = {"question": "Ann has 10 pens and buys 8. How many?", "answer": "10+8=18\n#### 18", "ground_truth": "18"}
    rec = gsm8k_grading.score_record(item, prec, grade)
    expected = {"question_idx": 0, "sample": 1, "ground_truth": "18", "status": prec["status"]}
    expected |= {"question": item["question"], "answer": item["answer"], **record}
    assert list(rec.items()) == list(expected.items())
