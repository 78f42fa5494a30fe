"""The eval CLIs against the fake server's injected faults (tests.doubles.fake_openai) and against the
real CPU judge server (scripts.serve.cpu_judge, SmolLM2-135M through transformers)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

import scripts
from scripts.eval import gsm8k as eval_gsm8k
from scripts.eval import judge as eval_judge
from tests.doubles.fake_openai import FakeOpenAIServer
from tests.doubles.fake_replies import all_text
from tests.fixtures.eval.make_fixtures import gsm8k_row, pairwise_rows, write_parquet

ROOT = scripts.ROOT

# ----------------------------------------------------------------------------- injected faults
# question, reference, policy answer (fault markers travel to the judge inside the candidate)
GSM_FAULTS = [
    ("Ann buys 10 and 8 pens.", "18", "10+8=18\n#### 18"),  # judge 4: TP
    ("Bob has 3 cups.", "3", "FAULT:500\n#### 3"),  # judge: HTTP 500 on every attempt -> server_error
    ("Cid walks 70 km.", "70", "FAULT:malformed_json\n#### 70"),  # judge: 200 with broken JSON -> bad_response
    ("Dee has 5 hats.", "5", "FAULT:429x1\n#### 5"),  # judge: one 429 (Retry-After), then 4: TP
    ("Eve has 7 dogs.", "7", "FAULT:truncated\n#### 7"),  # judge reply cut mid-verdict -> parse failure
    ("Fay has 8 cats.", "8", "JUDGE_SAYS:x\n#### 8"),  # judge <score>x</score> -> parse failure
    ("Gus has 12 eggs.", "12", "#### 13"),  # judge 1, rule wrong: TN
]


def test_gsm8k_judge_faults_are_counted(tmp_path, capsys):
    rows = [gsm8k_row(q, n, f"Worked.\n#### {n}") for q, n, _a in GSM_FAULTS]
    data = write_parquet(rows, str(tmp_path / "g.parquet"))
    answers = {q: a for q, _n, a in GSM_FAULTS}

    def policy(body):
        text = all_text(body)
        return next(a for q, a in answers.items() if q in text)

    with FakeOpenAIServer(policy) as pol, FakeOpenAIServer() as judge:
        rc = eval_gsm8k.main(
            [
                "--data",
                data,
                "--base-url",
                pol.base_url,
                "--model",
                "policy",
                "--judge-base-url",
                judge.base_url,
                "--judge-model",
                "judge",
                "--judge-max-retries",
                "1",
                "--out",
                str(tmp_path / "o"),
                "--no-progress",
            ]
        )
        judge_requests = len(judge.requests)
    assert rc == 0
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["policy"]["strict_acc"] == pytest.approx(6 / 7)
    j = report["judge"]
    assert (j["n_asked"], j["n_error"], j["n_parse_fail"], j["n_graded"]) == (7, 2, 2, 3)
    assert j["error_kinds"] == {"server_error": 1, "bad_response": 1}
    assert (j["tp"], j["fp"], j["fn"], j["tn"]) == (2, 0, 0, 1) and j["agreement"] == 1.0
    assert j["parse_fail_reasons"]["bad_value"] == 1  # <score>x</score>
    # 7 first attempts + one retry each for 500, malformed JSON and 429
    assert judge_requests == 10
    assert "2/7 judge requests failed" in capsys.readouterr().err


def test_pairwise_connection_faults_are_counted(tmp_path):
    """A dropped connection and a hung request (1 s timeout) become counted errors; other rows are scored."""
    rows = []
    for pid, query in (("p1", "Plain question?"), ("p2", "FAULT:drop question?"), ("p3", "FAULT:hang question?")):
        rows += pairwise_rows(pid, query, "good", "bad", "s")
    data = write_parquet(rows, str(tmp_path / "p.parquet"))
    with FakeOpenAIServer(lambda body: "<think>first</think><better>A</better>") as srv:
        rc = eval_judge.main(
            [
                "--data",
                data,
                "--base-url",
                srv.base_url,
                "--model",
                "judge",
                "--timeout",
                "1",
                "--max-retries",
                "0",
                "--out",
                str(tmp_path / "o"),
                "--no-progress",
                "--no-plots",
            ]
        )
    assert rc == 0
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    ov = report["overall"]
    assert (ov["n"], ov["n_error"], ov["n_parsed"]) == (6, 4, 2)
    assert report["error_kinds"] == {"connection": 2, "timeout": 2}
    assert ov["flip_rate"] == 1.0 and ov["pairs_compared"] == 1 and ov["a_share"] == 1.0


# ----------------------------------------------------------------------------- real CPU judge server
@pytest.fixture(scope="module")
def cpu_server(model_path):
    """scripts.serve.cpu_judge (transformers, greedy) on a free port; the served name is the model path."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "scripts.serve.cpu_judge", "--model", model_path, "--port", "0", "--max-batch", "8"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    ready: list[str] = []
    t = threading.Thread(target=lambda: ready.append(proc.stdout.readline()), daemon=True)
    t.start()
    t.join(120)
    line = ready[0] if ready else ""
    if not line.startswith("READY"):
        proc.kill()
        pytest.fail(f"scripts.serve.cpu_judge did not start: {line!r}")
    yield f"http://{line.split()[1]}/v1"
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_eval_judge_on_real_cpu_server(cpu_server, model_path, tmp_path):
    rows = pairwise_rows("p1", "What is 2+2?", "2+2 = 4.", "2+2 = 5.", "toy")
    data = write_parquet(rows, str(tmp_path / "p.parquet"))
    # a 135M model is a poor judge: no parseable verdict is a result here (plumbing, not verdicts, is tested)
    rc = eval_judge.main(
        [
            "--data",
            data,
            "--base-url",
            cpu_server,
            "--model",
            model_path,
            "--max-tokens",
            "16",
            "--out",
            str(tmp_path / "o"),
            "--no-progress",
            "--allow-unparseable",
        ]
    )
    assert rc == 0
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    ov = report["overall"]
    assert (ov["n"], ov["n_error"], ov["n_parsed"] + ov["n_parse_fail"]) == (2, 0, 2)
    assert (tmp_path / "o" / "position_bias.png").stat().st_size > 1000


def test_eval_gsm8k_on_real_cpu_server(cpu_server, model_path, tmp_path):
    rows = [gsm8k_row("Tom has 2 apples and buys 3 more. How many apples?", "5", "2+3=5\n#### 5")]
    data = write_parquet(rows, str(tmp_path / "g.parquet"))
    rc = eval_gsm8k.main(
        [
            "--data",
            data,
            "--base-url",
            cpu_server,
            "--model",
            model_path,
            "--max-tokens",
            "24",
            "--judge-base-url",
            cpu_server,
            "--judge-model",
            model_path,
            "--judge-max-tokens",
            "16",
            "--out",
            str(tmp_path / "o"),
            "--no-progress",
            "--allow-judge-errors",
        ]
    )
    assert rc == 0
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["policy"]["n_error"] == 0 and report["judge"]["n_asked"] == 1 and report["judge"]["n_error"] == 0
