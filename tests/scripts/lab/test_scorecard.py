"""The scorecard (scripts/lab/scorecard.py and ``scripts.lab.policy_learns --arms ... --seeds ...
[--instances ...]``): each arm's before / after per seed, gains, the rule's own gain and each ratio's bootstrap
interval (scorecard_stats), the targets' verdicts; runs that did not reach their last step refused; the pooled
scorecard over instance folders and its command line; and the experiment that makes it, with the stand-in trainer of
tests/scripts/workflows/test_pipeline.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from scripts.lab import scorecard
from tests.scripts.lab.test_policy_learns import SMALL, calls, needs_model, run
from tests.scripts.workflows.test_pipeline import ROOT, fake  # noqa: F401  (the fixture)

R, W = "#### 7", "#### 9"  # a right and a wrong answer to every question (its reference is 7)


def _dump(folder, step, outputs):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{step}.jsonl"), "w") as f:
        for i, o in enumerate(outputs):
            f.write(json.dumps({"input": f"q{i}", "output": o, "gts": "7", "score": 0.0, "step": step}) + "\n")


def _experiment(out, before: str, runs: dict[str, str], steps: int = 10):
    """One experiment's validation dumps: ``before`` (the first run's step 0) and each run's grades at ``steps``,
    written as 1 (right) / 0 (wrong) per question, e.g. ``"1100"``."""
    first = next(iter(runs))
    _dump(os.path.join(out, f"{first}_val"), 0, [R if c == "1" else W for c in before])
    for name, grades in runs.items():
        _dump(os.path.join(out, f"{name}_val"), steps, [R if c == "1" else W for c in grades])


def test_summarize_and_verdicts(tmp_path):
    _dump(tmp_path / "rule_val", 0, [R, W, W, W])  # before: 0.25
    _dump(tmp_path / "rule_val", 10, [R, R, R, W])  # seed 0: 0.75
    _dump(tmp_path / "rule_s1_val", 10, [R, R, W, W])  # seed 1: 0.5
    _dump(tmp_path / "judge_val", 10, [R, R, R, W])  # 0.75
    _dump(tmp_path / "judge_s1_val", 10, [R, R, R, R])  # 1.0
    _dump(tmp_path / "random_val", 10, [R, W, W, W])  # 0.25: no gain
    _dump(tmp_path / "random_s1_val", 10, [R, W, W, W])
    res = scorecard.summarize(str(tmp_path), ["rule", "judge", "random"], [0, 1], 10)
    assert res["questions"] == 4 and res["bootstrap"] == 2000
    assert res["arms"]["rule"]["seeds"] == {"0": {"before": 0.25, "after": 0.75}, "1": {"before": 0.25, "after": 0.5}}
    assert (
        res["arms"]["rule"]["gain_mean"],
        res["arms"]["judge"]["gain_mean"],
        res["arms"]["random"]["gain_mean"],
    ) == (0.375, 0.625, 0.0)
    assert res["arms"]["judge"]["gain_sd"] == pytest.approx(0.25 / np.sqrt(2))
    assert res["rule_gain"] == res["gain"]["rule"] == {"mean": 0.375, "lo": 0.0, "hi": 0.875}
    assert res["ratios"] == {
        "judge": {"mean": 0.625 / 0.375, "lo": 1.0, "hi": 4.0, "dropped": 254},
        "random": {"mean": 0.0, "lo": 0.0, "hi": 0.0, "dropped": 254},
    }
    # 2 seeds x 4 questions: the rule's own interval reaches 0 (254 of 2000 resamples gain nothing), so no verdict
    why = "rule gain 0.375 (95% interval 0.000 to 0.875): its interval is not above 0, so no ratio to it means anything"
    assert scorecard.verdicts(res) == [
        f"{why} (no verdict)",
        f"judge gain / rule gain 1.667 (95% interval 1.000 to 4.000): no verdict ({why} (no verdict))",
        f"random gain / rule gain 0.000 (95% interval 0.000 to 0.000): no verdict ({why} (no verdict))",
    ]


JUDGE = "target mean >= 0.9 and lower bound >= 0.8"


@pytest.mark.parametrize(
    "runs, lines",
    [
        (  # the rule learns every question on both seeds: an interval of one point, above 0
            {"judge": "1111", "judge_s1": "1111", "random": "0000", "random_s1": "0000"},
            [
                f"judge gain / rule gain 1.000 (95% interval 1.000 to 1.000): {JUDGE} met",
                "random gain / rule gain 0.000 (95% interval 0.000 to 0.000): target upper bound <= 0.3 met",
            ],
        ),
        (
            {"judge": "1111", "judge_s1": "0000", "random": "1100", "random_s1": "1100"},
            [
                f"judge gain / rule gain 0.500 (95% interval 0.000 to 1.000): {JUDGE} NOT met",
                "random gain / rule gain 0.500 (95% interval 0.000 to 1.000): target upper bound <= 0.3: no verdict "
                "(its interval spans 0.3)",
            ],
        ),
        (
            {"judge": "1111", "judge_s1": "0000", "random": "1111", "random_s1": "1111"},
            [
                f"judge gain / rule gain 0.500 (95% interval 0.000 to 1.000): {JUDGE} NOT met",
                "random gain / rule gain 1.000 (95% interval 1.000 to 1.000): target upper bound <= 0.3 NOT met",
            ],
        ),
    ],
)
def test_verdicts_of_a_rule_that_learned(runs, lines, tmp_path):
    _experiment(tmp_path, "0000", {"rule": "1111", "rule_s1": "1111", **runs})
    res = scorecard.summarize(str(tmp_path), ["rule", "judge", "random"], [0, 1], 10)
    assert scorecard.verdicts(res) == ["rule gain 1.000 (95% interval 1.000 to 1.000)", *lines]


@pytest.mark.parametrize(
    "output, grade",
    [
        ("#### 7", 1.0),
        ("So 7 apples.", 0.0),  # the flexible rule would pay it (its last number): the strict one does not
        ("#### 7\nCheck: 3 + 4 = 8", 1.0),  # the flexible rule reads 8
        ("#### 7/2", 0.0),
    ],
)
def test_validation_is_graded_by_the_strict_rule(output, grade, tmp_path):
    _dump(tmp_path / "rule_val", 10, [output])
    assert scorecard.graded(str(tmp_path), "rule", 10) == {"q0": grade}


def _rows(folder, step, rows):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{step}.jsonl"), "w") as f:
        f.writelines(json.dumps({"gts": "7", "score": 0.0, "step": step, **r}) + "\n" for r in rows)


@pytest.mark.parametrize(
    "rows, grades, warned",
    [
        ([{"input": "q0", "output": R}, {"input": "q1", "output": W}], {"q0": 1.0, "q1": 0.0}, []),
        # a later row of the same prompt (here with no answer at all) never replaces the first
        (
            [{"input": "q0", "output": R}, {"input": "q1", "output": W}, {"input": "q0", "output": float("nan")}],
            {"q0": 1.0, "q1": 0.0},
            ["run rule, step 10: 1 row(s) repeat an earlier prompt: left out, each graded by its first answer"],
        ),
        (
            [{"input": "q0", "output": W}, {"input": "q0", "output": R}, {"input": "q0", "output": R}],
            {"q0": 0.0},
            ["run rule, step 10: 2 row(s) repeat an earlier prompt: left out, each graded by its first answer"],
        ),
    ],
)
def test_a_repeated_validation_prompt_keeps_its_first_answer(rows, grades, warned, tmp_path, caplog):
    _rows(tmp_path / "rule_val", 10, rows)
    with caplog.at_level("WARNING", logger="scripts.lab.scorecard"):
        assert scorecard.graded(str(tmp_path), "rule", 10) == grades
    assert [r.getMessage() for r in caplog.records] == warned


def test_summarize_needs_the_start_policy_and_every_run(tmp_path):
    with pytest.raises(ValueError, match="no start-policy validation"):
        scorecard.summarize(str(tmp_path), ["rule"], [0], 5)
    _dump(tmp_path / "rule_val", 0, [R, W])
    _dump(tmp_path / "rule_val", 5, [R])
    with pytest.raises(ValueError, match="run rule: its last validation lacks 1 of the questions"):
        scorecard.summarize(str(tmp_path), ["rule"], [0], 5)


def _refused(out, name, at, steps):
    return (
        f"run {name}: its last validation ({os.path.join(out, name + '_val')}) is at {at}, not at its last step "
        f"{steps} (stopped, crashed or never trained): unusable, refused"
    )


@pytest.mark.parametrize(
    "dumps, name, at",
    [
        ({"rule": [0]}, "rule", "step 0"),  # the first run crashed: only its validation before training
        ({"judge_s1": []}, "judge_s1", "no step"),  # a run that crashed before any validation
        ({"judge": [0]}, "judge", "step 0"),  # a step-0 dump in a run that is not the first
        ({"rule": [0, 10, 20]}, "rule", "step 20"),  # stopped at step 20 of 100
        ({"random_s1": [20]}, "random_s1", "step 20"),
        ({"judge": [100, 120]}, "judge", "step 120"),  # validated past its last step: not this experiment's run
    ],
)
def test_a_run_that_did_not_end_at_its_last_step_is_refused(dumps, name, at, tmp_path):
    """Every run of 3 arms x 2 seeds validated at step 100 but one: summarize refuses that one, naming it (its
    step-0 or step-20 validation is never read as "after")."""
    runs = {n: "1100" for n in ("rule", "judge", "random", "rule_s1", "judge_s1", "random_s1")}
    _experiment(tmp_path, "1000", runs, steps=100)
    for n, steps in dumps.items():
        os.remove(tmp_path / f"{n}_val" / "100.jsonl")  # the first run keeps its step 0 ("before")
        for step in steps:
            if not (tmp_path / f"{n}_val" / f"{step}.jsonl").exists():
                _dump(tmp_path / f"{n}_val", step, [R, R, W, W])
    with pytest.raises(ValueError) as e:
        scorecard.summarize(str(tmp_path), ["rule", "judge", "random"], [0, 1], 100)
    assert str(e.value) == _refused(str(tmp_path), name, at, 100)
    with pytest.raises(ValueError) as e:
        scorecard.last_step(str(tmp_path), name, 100)
    assert str(e.value) == _refused(str(tmp_path), name, at, 100)


@pytest.mark.parametrize("steps", [0, -1])
def test_a_step_0_dump_never_counts_as_after(steps, tmp_path):
    """The first run holds its step-0 validation ("before"); with a last step of 0 (or below) it would be its own
    "after" (a gain of 0 from a run that never trained): refused, whether the run went on (steps 0 and 10) or crashed
    (step 0 only)."""
    _experiment(tmp_path / "ran", "1000", {"rule": "1100"}, steps=10)
    assert scorecard.last_step(str(tmp_path / "ran"), "rule", 10) == 10
    _dump(tmp_path / "crashed" / "rule_val", 0, [R, W])
    for out in ("crashed", "ran"):
        with pytest.raises(ValueError) as e:
            scorecard.last_step(str(tmp_path / out), "rule", steps)
        assert str(e.value) == f"run rule: its last step must be >= 1, got {steps}"
        with pytest.raises(ValueError) as e:
            scorecard.summarize(str(tmp_path / out), ["rule"], [0], steps)
        assert str(e.value) == f"run rule: its last step must be >= 1, got {steps}"


def _seeds(**arms: tuple[str, str]) -> dict[str, str]:
    """``{run name: grades}`` of seeds 0 and 1 of each arm."""
    return {name: g for arm, (g0, g1) in arms.items() for name, g in ((arm, g0), (f"{arm}_s1", g1))}


INSTANCES = {  # two instances x 3 arms x 2 seeds, 4 questions each
    "instance_0": ("1000", _seeds(rule=("1110", "1100"), judge=("1110", "1111"), random=("1000", "1000"))),
    "instance_1": ("0000", _seeds(rule=("1100", "1100"), judge=("1000", "1100"), random=("1000", "0000"))),
}
ARMS, SEEDS = ["rule", "judge", "random"], [0, 1]


def _instances(out):
    for name, (before, runs) in INSTANCES.items():
        _experiment(out / name, before, runs)
    return [str(out / name) for name in INSTANCES]


def test_write_pooled(tmp_path):
    """Instance 0: before 0.25; rule gains 0.375, judge 0.625, random 0. Instance 1: before 0; rule 0.5, judge 0.375,
    random 0.125. Pooled: rule 0.4375, judge 0.5, random 0.0625, each the mean of the two instances'."""
    report = scorecard.write_pooled(str(tmp_path), _instances(tmp_path), ARMS, SEEDS, 10, command=["x"])
    assert json.load(open(tmp_path / "report.json")) == json.loads(json.dumps(report))
    assert (report["arms"], report["seeds"], report["steps"], report["command"]) == (ARMS, SEEDS, 10, ["x"])
    i0, i1 = report["instances"]["instance_0"], report["instances"]["instance_1"]
    assert i0["arms"]["judge"]["seeds"] == {"0": {"before": 0.25, "after": 0.75}, "1": {"before": 0.25, "after": 1.0}}
    assert i1["arms"]["random"]["seeds"] == {"0": {"before": 0.0, "after": 0.25}, "1": {"before": 0.0, "after": 0.0}}
    assert [i0["arms"][a]["gain_mean"] for a in ARMS] == [0.375, 0.625, 0.0]
    assert [i1["arms"][a]["gain_mean"] for a in ARMS] == [0.5, 0.375, 0.125]
    assert list(report["pooled"]) == ["test"]  # no held-out stories in these validations
    p = report["pooled"]["test"]
    assert {a: g["mean"] for a, g in p["gain"].items()} == {"rule": 0.4375, "judge": 0.5, "random": 0.0625}
    assert p["rule_gain"] == p["gain"]["rule"]
    assert {a: r["mean"] for a, r in p["ratios"].items()} == {"judge": 0.5 / 0.4375, "random": 0.0625 / 0.4375}
    assert p["bootstrap"] == 2000 and p["ratios"]["judge"]["lo"] <= p["ratios"]["judge"]["hi"]
    md = (tmp_path / "scorecard.md").read_text()
    g, r = p["gain"]["judge"], p["ratios"]["judge"]
    f = scorecard.fmt
    assert "| arm | pooled gain (95% interval) | pooled / rule gain (95% interval) | instance_0 | instance_1 |" in md
    assert (
        f"| judge | {f(g['mean'])} ({f(g['lo'])} to {f(g['hi'])}) | 1.143 ({f(r['lo'])} to {f(r['hi'])}) "
        "| 0.625 (1.667x) | 0.375 (0.750x) |"
    ) in md
    assert "| random | 0.062 (" in md and "| 0.000 (0.000x) | 0.125 (0.250x) |" in md
    assert md.startswith("# Scorecard over 2 judge instances x 2 seeds\n")
    assert "## Instance instance_0" in md and "## Instance instance_1" in md
    assert (tmp_path / "scorecard.png").stat().st_size > 0


def test_pooled_needs_every_instance_to_have_a_split(tmp_path, monkeypatch):
    """Two instances, only instance_0 with held-out stories: no pooled held-out split (one instance's is no pool),
    the test split pooled over both."""
    folders = _instances(tmp_path)
    held = {str(tmp_path / "instance_0"): ("q0", "q1")}  # its questions q0 and q1 are the held-out stories'
    monkeypatch.setattr(scorecard, "heldout_questions", lambda out: held.get(out, ()))
    res = scorecard.pooled(folders, ARMS, SEEDS, 10)
    assert "heldout" in res["instances"]["instance_0"] and "heldout" not in res["instances"]["instance_1"]
    assert list(res["pooled"]) == ["test"]
    assert res["instances"]["instance_0"]["questions"] == 2 and res["instances"]["instance_1"]["questions"] == 4


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "scripts.lab.scorecard", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def test_command_line_pooled(tmp_path):
    _instances(tmp_path)
    r = _cli(str(tmp_path), "--instances", "0,1", "--steps", "10", "--arms", "rule,judge,random", "--seeds", "0,1")
    assert r.returncode == 0, r.stderr
    report = json.load(open(tmp_path / "report.json"))
    assert r.stdout == scorecard.pooled_console(report) + "\n"
    assert r.stdout.startswith("test: rule gain 0.438 (95% interval ")
    assert report["pooled"]["test"]["gain"]["judge"]["mean"] == 0.5
    assert (tmp_path / "scorecard.md").exists() and (tmp_path / "scorecard.png").exists()


@pytest.mark.parametrize(
    "case, args, message",
    [
        ("list", [], "report.json: not a report (a JSON object), got a list; move it away"),
        ("broken", [], "report.json: not a report (Expecting value: line 1 column 1 (char 0)); move it away"),
        ("ok", ["--steps", "20"], "run rule: its last validation ("),
        ("ok", ["--steps", "0"], "run rule: its last step must be >= 1, got 0"),
        ("ok", ["--instances", "0"], "no start-policy validation (step 0) in "),
        ("ok", ["--arms", ""], "--arms needs at least one value, got ''"),
        ("ok", ["--arms", ","], "--arms needs at least one value, got ','"),
        ("ok", ["--seeds", ""], "--seeds needs at least one value, got ''"),
        ("ok", ["--seeds", "0,x"], "--seeds: comma-separated int values, got '0,x'"),
        ("ok", ["--arms", "rule,judge,judge"], "--arms: judge listed more than once in 'rule,judge,judge': list each"),
        ("ok", ["--seeds", "0,0"], "--seeds: 0 listed more than once in '0,0': list each once"),
        ("ok", ["--seeds", "1,0,1,0"], "--seeds: 1, 0 listed more than once in '1,0,1,0': list each once"),
        ("ok", ["--instances", "0,0,0"], "--instances: 0 listed more than once in '0,0,0': list each once"),
        ("ok", ["--instances", ""], "--instances needs at least one value, got ''"),
    ],
)
def test_command_line_errors(case, args, message, tmp_path):
    """Each is one line of error (exit 2), no traceback; a report.json that is not a JSON object is not replaced."""
    _experiment(tmp_path, "1000", {"rule": "1100", "judge": "1110"})
    content = {"list": "[1, 2]", "broken": "", "ok": None}[case]
    if content is not None:
        (tmp_path / "report.json").write_text(content)
    r = _cli(str(tmp_path), "--arms", "rule,judge", "--seeds", "0", "--steps", "10", *args)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("python -m scripts.lab.scorecard: error: ") and message in last, last
    if content is not None:
        assert (tmp_path / "report.json").read_text() == content
    assert not (tmp_path / "scorecard.md").exists()


def test_command_line_one_experiment(tmp_path):
    _experiment(tmp_path, "1000", {"rule": "1100", "judge": "1110"})
    (tmp_path / "report.json").write_text('{"before": {"step": 0}}')
    r = _cli(str(tmp_path), "--arms", "rule,judge", "--seeds", "0", "--steps", "10")
    assert r.returncode == 0, r.stderr
    report = json.load(open(tmp_path / "report.json"))
    assert report["before"] == {"step": 0} and report["ratios"]["judge"]["mean"] == 2.0  # added to, not replaced
    assert "# Scorecard: 2 arms x 1 seeds" in (tmp_path / "scorecard.md").read_text()


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
    seeded = {  # the random control's coin is seeded by its run's seed: the two seeds' runs pay different samples
        n: [a.rsplit("=", 1)[1] for a in c if a.startswith("++reward.custom_reward_function.reward_kwargs.seed=")]
        for n, c in (
            (next(a.split("-", 1)[1] for a in c if a.startswith("trainer.experiment_name=")), c) for c in trains
        )
    }
    assert seeded == {n: {"random": ["0"], "random_s1": ["1"]}.get(n, []) for n in names}
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
