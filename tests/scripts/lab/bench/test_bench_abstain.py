"""scripts/lab/bench/abstain.py: a judge outage replayed on rollout dumps, through verl's own GRPO advantage."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import scripts
from scripts.lab.bench import abstain

ROOT = scripts.ROOT
STEP = [{"input": "a", "score": s, "rule_score": s} for s in (1.0, 0.0, 0.0, 1.0)]


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("fallback=rule", [0.866, -0.866, -0.866, 0.866]),  # the rule agrees: nothing changes
        ("fallback=0", [-0.5, -0.5, -0.5, 1.5]),  # a right answer paid 0: its sign flips, the others shift
        ("abstain", [0.0, -0.577, -0.577, 1.155]),  # left out of its group, no gradient; the rest re-normalised
    ],
)
def test_replay_one_failed_call(mode, expected):
    adv, ref = abstain.replay(STEP, np.array([True, False, False, False]), mode)
    assert [round(float(x), 3) for x in adv] == expected
    assert [round(float(x), 3) for x in ref] == [0.866, -0.866, -0.866, 0.866]


def test_replay_zeroes_a_lone_survivor():
    """Three of four calls fail: the one scored sample left has no baseline, and the trainer gives it advantage 0
    (``hooks.lone_survivors``), not its raw score."""
    adv, _ = abstain.replay(STEP, np.array([True, True, True, False]), "abstain")
    assert [round(float(x), 3) for x in adv] == [0.0, 0.0, 0.0, 0.0]


def test_measure_counts_lost_and_flipped_signal():
    """All calls fail: the rule fallback keeps every sign, a 0 fallback leaves no signal (all paid 0), abstain too."""
    res = abstain.measure([STEP], fail=1.0)
    assert res["fallback=rule"] == {
        "gradient": 1.0,
        "lost": 0.0,
        "flipped": 0.0,
        "abs_error": pytest.approx(0.0, abs=1e-5),
    }
    assert res["fallback=0"] == {"gradient": 0.0, "lost": 1.0, "flipped": 0.0, "abs_error": 0.0}
    assert res["abstain"] == {"gradient": 0.0, "lost": 1.0, "flipped": 0.0, "abs_error": 0.0}
    assert (res["reference_gradient"], res["failed_share"]) == (1.0, 1.0)


def test_cli(tmp_path, capsys):
    with open(tmp_path / "3.jsonl", "w") as f:
        f.writelines(json.dumps(s) + "\n" for s in STEP)
    assert abstain.main([str(tmp_path), "--fail", "0", "--json", str(tmp_path / "r.json")]) == 0
    assert "| abstain | 1.000 | 0.000 | 0.000 | 0.000 |" in capsys.readouterr().out
    assert json.load(open(tmp_path / "r.json"))["failed_share"] == 0.0
    with pytest.raises(SystemExit) as e:
        abstain.main([str(tmp_path), "--fail", "1.5"])
    assert e.value.code == 2


def test_kept_replay_numbers_are_quoted():
    """docs/results/2026-11-26-abstain_replay and reward_fns/README_llm_judge.md quote these."""
    d = os.path.join(ROOT, "docs", "results", "2026-11-26-abstain_replay")
    res = {s: json.load(open(os.path.join(d, f"judge{s}.json"))) for s in ("", "_s1", "_s2")}
    lost = [round(r["abstain"]["lost"], 2) for r in res.values()]
    flipped = [round(r["fallback=0"]["flipped"], 2) for r in res.values()]
    rule = [round(r["fallback=rule"]["flipped"], 3) for r in res.values()]
    assert (lost, flipped, rule) == ([0.26, 0.26, 0.27], [0.04, 0.04, 0.04], [0.002, 0.003, 0.002])
    text = " ".join(open(os.path.join(ROOT, "reward_fns", "README_llm_judge.md")).read().split())
    assert "abstain lost the signal of 26-27% of the samples that had one and flipped none" in text
