"""The scorecard (scripts/report/scorecard.py and ``scripts.workflows.policy_learns --arms ... --seeds ...``): each
arm's before / after per seed, gains, the gain ratio's bootstrap interval, the targets' verdicts; and the experiment
that makes it, with the stand-in trainer of tests/scripts/workflows/test_pipeline.py."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from scripts.report import scorecard
from tests.scripts.workflows.test_pipeline import fake  # noqa: F401  (the fixture)
from tests.scripts.workflows.test_policy_learns import SMALL, calls, needs_model, run


@pytest.mark.parametrize(
    "judge, point, lo, hi",
    [
        ([[1, 1, 1, 1], [1, 1, 1, 1]], 1.0, 1.0, 1.0),  # the judge teaches as the rule does, on every seed and question
        (
            [[1, 1, 1, 1], [0, 0, 0, 0]],
            0.5,
            0.0,
            1.0,
        ),  # one seed learns, one does not: resampled seeds give 0, 0.5 or 1
        ([[0, 0, 0, 0], [0, 0, 0, 0]], 0.0, 0.0, 0.0),
    ],
)
def test_interval(judge, point, lo, hi):
    before = np.zeros(4)
    after = {"rule": np.ones((2, 4)), "judge": np.array(judge, dtype=float)}
    r = scorecard.interval(before, after, "judge", n=500)
    assert (r["mean"], r["lo"], r["hi"], r["bootstrap"]) == (point, lo, hi, 500)


def _dump(folder, step, outputs):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{step}.jsonl"), "w") as f:
        for i, o in enumerate(outputs):
            f.write(json.dumps({"input": f"q{i}", "output": o, "gts": "7", "score": 0.0, "step": step}) + "\n")


def test_summarize_and_verdicts(tmp_path):
    R, W = "#### 7", "#### 9"
    _dump(tmp_path / "rule_val", 0, [R, W, W, W])  # before: 0.25
    _dump(tmp_path / "rule_val", 10, [R, R, R, W])  # seed 0: 0.75
    _dump(tmp_path / "rule_s1_val", 10, [R, R, W, W])  # seed 1: 0.5
    _dump(tmp_path / "judge_val", 10, [R, R, R, W])  # 0.75
    _dump(tmp_path / "judge_s1_val", 10, [R, R, R, R])  # 1.0
    _dump(tmp_path / "random_val", 10, [R, W, W, W])  # 0.25: no gain
    _dump(tmp_path / "random_s1_val", 10, [R, W, W, W])
    res = scorecard.summarize(str(tmp_path), ["rule", "judge", "random"], [0, 1])
    assert res["questions"] == 4
    assert res["arms"]["rule"]["seeds"] == {"0": {"before": 0.25, "after": 0.75}, "1": {"before": 0.25, "after": 0.5}}
    assert (
        res["arms"]["rule"]["gain_mean"],
        res["arms"]["judge"]["gain_mean"],
        res["arms"]["random"]["gain_mean"],
    ) == (0.375, 0.625, 0.0)
    assert res["arms"]["judge"]["gain_sd"] == pytest.approx(0.25 / np.sqrt(2))
    assert res["ratios"]["judge"]["mean"] == pytest.approx(0.625 / 0.375)
    assert res["ratios"]["random"]["mean"] == 0.0 and res["ratios"]["random"]["hi"] == 0.0
    lines = scorecard.verdicts(res)
    assert lines[0].startswith("judge gain / rule gain 1.667 (95% interval ") and lines[0].endswith(
        "target mean >= 0.9 and lower bound >= 0.8 " + ("met" if res["ratios"]["judge"]["lo"] >= 0.8 else "NOT met")
    )
    assert lines[1] == "random control gain / rule gain 0.000 (95% interval 0.000 to 0.000): target <= 0.3 met"


def test_summarize_needs_the_start_policy_and_every_run(tmp_path):
    with pytest.raises(ValueError, match="no start-policy validation"):
        scorecard.summarize(str(tmp_path), ["rule"], [0])
    _dump(tmp_path / "rule_val", 0, ["#### 7", "#### 9"])
    _dump(tmp_path / "rule_val", 5, ["#### 7"])
    with pytest.raises(ValueError, match="run rule: its last validation lacks 1 of the questions"):
        scorecard.summarize(str(tmp_path), ["rule"], [0])


@pytest.mark.slow
@needs_model
def test_scorecard_experiment(fake):
    """Four arms x two seeds in two chains: the testbed, the warm start and the judge once; each run its seed and
    reward; the scorecard in report.json and scorecard.md."""
    tmp, env = fake
    env.pop("GSM8K_DIR")
    out = tmp / "card"
    r = run(env, "--out", str(out), *SMALL, "--arms", "rule,judge,random,format", "--seeds", "0,1", "--parallel", "2")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    trains = [c for c in calls(tmp) if c[1] == "scripts.train"]
    names = sorted(next(a.split("-", 1)[1] for a in c if a.startswith("trainer.experiment_name=")) for c in trains)
    assert names == sorted(["rule", "judge", "random", "format", "rule_s1", "judge_s1", "random_s1", "format_s1"])
    seeds = {
        next(a.split("-", 1)[1] for a in c if a.startswith("trainer.experiment_name=")): next(
            a for a in c if a.startswith("data.seed=")
        )
        for c in trains
    }
    assert seeds["rule_s1"] == "data.seed=1" and seeds["format"] == "data.seed=0"
    fn = {
        n: [a for a in c if a.startswith("reward.custom_reward_function.name=")]
        for n, c in (
            (next(a.split("-", 1)[1] for a in c if a.startswith("trainer.experiment_name=")), c) for c in trains
        )
    }
    assert fn["random_s1"] == ["reward.custom_reward_function.name=random_reward"] and fn["rule"] == []
    assert [c for c in trains if "trainer.val_before_train=true" in c] == [
        c for c in trains if "trainer.experiment_name=policy_learns-rule" in c
    ]
    res = json.load(open(out / "report.json"))
    assert res["arms"]["judge"]["seeds"]["1"] == {"before": 0.25, "after": 0.75}
    assert [res["arms"][a]["gain_mean"] for a in ("rule", "judge", "random", "format")] == [0.25, 0.5, 0.0, 0.0]
    assert res["ratios"]["judge"]["mean"] == 2.0 and res["ratios"]["format"]["mean"] == 0.0
    assert "# Scorecard: 4 arms x 2 seeds" in (out / "scorecard.md").read_text()
    held = res["heldout"]  # the testbed's held-out stories, beside the test split
    assert held["questions"] == 4 and held["arms"]["judge"]["seeds"]["1"] == {"before": 0.0, "after": 0.5}
    assert [held["arms"][a]["gain_mean"] for a in ("rule", "judge")] == [0.25, 0.5] and held["ratios"]["judge"][
        "mean"
    ] == 2.0
    assert "## Held-out stories: 4 questions" in (out / "scorecard.md").read_text()
    assert (out / "scorecard.png").stat().st_size > 0
    # --reuse: another experiment links this one's stages and makes only its runs (here the route arm beside the rule)
    (tmp / "calls.jsonl").unlink()
    cost = tmp / "cost"
    r = run(env, "--out", str(cost), *SMALL, "--reuse", str(out), "--arms", "rule,route", "--parallel", "1")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert sorted(c[1] for c in calls(tmp)) == ["scripts.train", "scripts.train"]  # no data, no SFT, no judge stages
    assert os.path.realpath(cost / "testbed") == str(out / "testbed") and (cost / ".judge_model.done").exists()
    assert not (cost / ".judge.done").exists() or (cost / "judge_metrics.jsonl").exists()  # runs are not linked
    route = next(c for c in calls(tmp) if "trainer.experiment_name=policy_learns-route" in c)
    assert "++reward.custom_reward_function.reward_kwargs.mode=route" in route
    assert f"reward.reward_model.model_path={cost}/judge_model" in route
    assert route[route.index("--config-path") + 1].endswith("recipes/gsm8k_local_judge")
    assert "stages reused from " in r.stdout and "judge_model" in r.stdout
    r = run(env, "--out", str(tmp / "x"), "--reuse", str(tmp / "nowhere"))
    assert r.returncode == 2 and "no finished experiment there" in r.stderr


def test_interval_is_the_central_95_percent():
    """40 seeds, the judge learns on every other one: resampled seeds make the ratio a Binomial(40, 1/2) / 40, whose
    2.5% and 97.5% points are 14/40 and 26/40 (the 5% and 95% points would be 15/40 and 25/40)."""
    before = np.zeros(4)
    after = {"rule": np.ones((40, 4)), "judge": np.array([[float(s % 2 == 0)] * 4 for s in range(40)])}
    r = scorecard.interval(before, after, "judge", n=4000)
    assert (r["mean"], r["lo"], r["hi"]) == (0.5, 0.35, 0.65)
