"""scripts/lab/report.audit and its report line: what the judge paid for that the strict rule did not, split
into right answers in another format and wrong answers. The fixture (tests/fixtures/report/judge_rollouts, two dumped
steps of ground truth 7) has 5 right answers and 2 wrong ones among the 7 paid rule rejects, so the two counts
cannot trade places unnoticed.

Step 1: ``#### 7`` (paid, the rule accepts it: not counted), ``The answer is 7.``, ``so 7`` (paid, right), ``I think
9`` (paid, wrong), ``#### 9`` (not paid). Step 2: ``7 apples``, ``it is 7`` (verdict 3), ``answer 7`` (verdict 2,
score 0.5) (paid, right), ``maybe 8`` (paid, wrong), ``no idea`` and ``The answer is 7`` (not paid; the second is
right: paying disagrees with the flexible rule)."""

from __future__ import annotations

import pathlib
import shutil

from scripts.lab import report as policy_learns

FIXTURE = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "report"


def test_paid_rule_rejects_split_into_right_and_wrong():
    assert policy_learns.audit(str(FIXTURE), "judge") == {
        "steps": 2,
        "samples": 11,
        "paid_rule_rejects": 7,
        "paid_flexible_right": 5,
        "paid_wrong": 2,
        "paid_wrong_share": 2 / 11,
        "paid_wrong_max_step_share": 1 / 5,  # step 1: 1 of 5; step 2: 1 of 6
        "paid_agree_flexible_min": 4 / 6,  # step 1: 4 of 5 agree; step 2: 4 of 6
    }
    assert policy_learns.audit(str(FIXTURE), "rule") is None  # no dump: no audit


def test_report_states_the_paid_counts(tmp_path, monkeypatch):
    out = tmp_path / "pl"
    shutil.copytree(FIXTURE, out)
    monkeypatch.setattr(policy_learns, "figure", lambda res, path: path)  # no plot needed here
    res = policy_learns.write(str(out), ["judge"], log=lambda text: None)
    assert res["judge_paid_audit"]["paid_flexible_right"] == 5 and res["judge_paid_audit"]["paid_wrong"] == 2
    report = (out / "report.md").read_text()
    assert (
        "What the judge paid for and the strict rule did not (11 samples, 2 dumped steps): 7; right answers in "
        "another format (the flexible rule: the last number) 5; wrong answers 2 (a share of 0.1818; at most 0.2000 "
        "in one step). Paid or not agrees with the flexible rule on at least 0.667 of every step's samples."
    ) in report
    assert (
        "Judge run, step 2: samples the judge accepted and the rule rejected (first 3):\n\n"
        '- ground truth 7, verdict 4: `"7 apples"`\n- ground truth 7, verdict 3: `"it is 7"`\n'
        '- ground truth 7, verdict 4: `"maybe 8"`'
    ) in report
