"""eval_gsm8k: strict / flexible accuracy and judge-vs-rule numbers on a hand-computed case."""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from collections import defaultdict

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures", "eval")
for p in (os.path.join(ROOT, "scripts"), FIX):
    if p not in sys.path:
        sys.path.insert(0, p)

import eval_gsm8k  # noqa: E402
from make_fixtures import gsm8k_row, write_parquet  # noqa: E402
from scripted_server import Reply, ScriptedServer, all_text  # noqa: E402

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
    path.write_text("".join(json.dumps({"question": q, "answer": f"Worked solution.\n#### {n}"}) + "\n" for q, n, *_ in CASES))
    return str(path)


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_policy_and_judge_numbers(tmp_path, fmt):
    data = _write(tmp_path, fmt)
    out = tmp_path / "out"
    with ScriptedServer(reply) as srv:
        rc = eval_gsm8k.main(["--data", data, "--base-url", srv.url, "--model", "policy", "--judge-base-url", srv.url,
                              "--judge-model", "judge", "--out", str(out), *FAST])
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
    judge_reqs = [r for r in srv.requests if r["model"] == "judge"]
    assert len(judge_reqs) == 8
    assert all("strict math grader" in r["messages"][0]["content"] and "#### " in r["messages"][1]["content"]
               for r in judge_reqs)
    # the policy saw the gsm8k_policy template (from the parquet or rendered for raw rows)
    assert all("#### <number>" in r["messages"][-1]["content"] for r in srv.requests if r["model"] == "policy")
    for png in ("gsm8k_accuracy.png", "judge_vs_rule.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG" and (out / png).stat().st_size > 1000
    assert len((out / "samples.jsonl").read_text().splitlines()) == N
    assert "precision" in (out / "report.md").read_text()


def test_flexible_rule_and_threshold(tmp_path):
    data = _write(tmp_path, "parquet")
    with ScriptedServer(reply) as srv:
        eval_gsm8k.main(["--data", data, "--base-url", srv.url, "--model", "policy", "--judge-base-url", srv.url,
                         "--judge-model", "judge", "--rule-mode", "flexible", "--judge-threshold", "4",
                         "--out", str(tmp_path / "o"), *FAST])
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
    with ScriptedServer(policy) as srv:
        rc = eval_gsm8k.main(["--data", data, "--base-url", srv.url, "--model", "policy", "--n-samples", "2",
                              "--temperature", "1.0", "--out", str(tmp_path / "o"), "--no-progress"])
    assert rc == 0 and len(srv.requests) == 4
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
    with ScriptedServer(faulty) as srv:
        rc = eval_gsm8k.main(["--data", data, "--base-url", srv.url, "--model", "policy", "--judge-base-url", srv.url,
                              "--judge-model", "judge", "--out", str(tmp_path / "o"), *FAST])
    assert rc == 0
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    p, j = report["policy"], report["judge"]
    assert p["n_error"] == 1 and p["strict_acc"] == pytest.approx(4 / 8)  # Ann's correct answer is lost
    assert (j["n_asked"], j["n_error"], j["n_parse_fail"], j["n_graded"]) == (7, 1, 1, 5)
    assert j["error_kinds"] == {"server_error": 1}
    err = capsys.readouterr().err
    assert "1/8 policy requests failed" in err and "1/7 judge requests failed" in err


BAD = [
    ("missing", lambda d: str(d / "none.jsonl"), "input file not found"),
    ("no_columns", lambda d: (d / "x.jsonl").write_text('{"q": 1}\n') and str(d / "x.jsonl"), "missing column 'prompt'"),
    ("no_answer", lambda d: (d / "y.jsonl").write_text('{"question": "q"}\n') and str(d / "y.jsonl"), "missing column 'answer'"),
    ("bad_json", lambda d: (d / "z.jsonl").write_text('{"question": \n') and str(d / "z.jsonl"), "line 1: invalid JSON"),
    ("no_number", lambda d: (d / "w.jsonl").write_text('{"question": "q", "answer": "none"}\n') and str(d / "w.jsonl"),
     "no final '#### <number>'"),
]


@pytest.mark.parametrize("name,make,message", BAD, ids=[b[0] for b in BAD])
def test_bad_input(tmp_path, capsys, name, make, message):
    rc = eval_gsm8k.main(["--data", make(tmp_path), "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                          "--out", str(tmp_path / "o")])
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


def test_hf_offline_real_policy(model_path, tmp_path):
    data = _write(tmp_path, "jsonl")
    out = tmp_path / "hf"
    rc = eval_gsm8k.main(["--data", data, "--limit", "2", "--hf-offline", model_path, "--max-tokens", "12",
                          "--out", str(out), "--no-progress", "--no-plots"])
    assert rc == 0
    p = json.loads((out / "report.json").read_text())["policy"]
    assert (p["n_questions"], p["n_samples"], p["n_error"]) == (2, 2, 0)
    assert 0.0 <= p["strict_acc"] <= p["strict_format_rate"] <= 1.0
