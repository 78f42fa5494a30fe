"""scripts/lab/report.summarize: held-out accuracy before / after each run, read from verl's validation
dumps (``<run>_val/<step>.jsonl``). "Before" is step 0 of the rule run (else of the first run that has one); "after"
is a run's last validation, and never a step-0 one: a run that crashed after its start policy's validation has no
"after" and no gain (a step-0 "after" would be a gain of 0 from a run that never trained, and a ratio to it).

Every question's reference is 7; an answer is ``R`` (``#### 7``: right by both rules), ``F`` (``so 7``: right only by
the flexible rule, the last number) or ``W`` (``#### 9``: wrong)."""

from __future__ import annotations

import json
import os

import pytest

from scripts.lab import report as policy_learns

ANSWERS = {"R": "#### 7", "F": "so 7", "W": "#### 9"}


def _dump(out, name, step, grades):
    folder = os.path.join(out, f"{name}_val")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{step}.jsonl"), "w") as f:
        for i, g in enumerate(grades):
            f.write(json.dumps({"input": f"q{i}", "output": ANSWERS[g], "gts": "7", "score": 0.0, "step": step}) + "\n")


def _acc(strict, flexible, step):
    return {"strict": strict, "flexible": flexible, "n": 4, "step": step}


@pytest.mark.parametrize(
    "dumps, names, before, after, gains, ratio",
    [
        # both runs trained to step 3: rule 0.25 -> 0.5 strict (0.5 -> 1.0 flexible), judge 0.25 -> 0.75 (-> 0.75)
        (
            {"rule": {0: "RFWW", 3: "RRFF"}, "judge": {3: "RRRW"}},
            ["rule", "judge"],
            _acc(0.25, 0.5, 0),
            {"rule": _acc(0.5, 1.0, 3), "judge": _acc(0.75, 0.75, 3)},
            {"rule": (0.25, 0.5), "judge": (0.5, 0.25)},
            {"strict": 2.0, "flexible": 0.5},
        ),
        # the judge run crashed after its step-0 validation: no "after", no gain, no ratio
        (
            {"rule": {0: "RFWW", 3: "RRFF"}, "judge": {0: "RFWW"}},
            ["rule", "judge"],
            _acc(0.25, 0.5, 0),
            {"rule": _acc(0.5, 1.0, 3), "judge": {}},
            {"rule": (0.25, 0.5), "judge": (None, None)},
            None,
        ),
        # the judge run alone (no rule run): its step 0 is "before", and with nothing past it there is no "after"
        (
            {"judge": {0: "RRWW"}},
            ["judge"],
            _acc(0.5, 0.5, 0),
            {"judge": {}},
            {"judge": (None, None)},
            None,
        ),
        # the rule run stopped at step 0 while the judge trained: the judge has a gain, the rule none, and no ratio
        (
            {"rule": {0: "WWWW"}, "judge": {2: "RFFW"}},
            ["rule", "judge"],
            _acc(0.0, 0.0, 0),
            {"rule": {}, "judge": _acc(0.25, 0.75, 2)},
            {"rule": (None, None), "judge": (0.25, 0.75)},
            None,
        ),
    ],
    ids=["both_trained", "judge_crashed_after_step_0", "judge_alone_step_0_only", "rule_stopped_at_step_0"],
)
def test_a_step_0_validation_is_never_an_after(dumps, names, before, after, gains, ratio, tmp_path):
    for name, steps in dumps.items():
        for step, grades in steps.items():
            _dump(tmp_path, name, step, grades)
    res = policy_learns.summarize(str(tmp_path), names)
    assert res["before"] == before
    assert {n: r["after"] for n, r in res["runs"].items()} == after
    assert {n: (r["gain_strict"], r["gain_flexible"]) for n, r in res["runs"].items()} == gains
    assert res.get("judge_gain_over_rule_gain") == ratio
