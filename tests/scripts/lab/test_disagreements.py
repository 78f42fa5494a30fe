"""Where the judge's reward and the strict rule part ways (scripts/lab/disagreements.py): each sample's class,
the counts and rates of a dump, a run's rollouts and last validation, an arm's seeds and instances together, the
command line and its errors, and the scorecard's ``disagreements`` (report.json and scorecard.md)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys

import pytest

from scripts.lab import disagreements as dis
from scripts.lab import scorecard
from tests.scripts.workflows.test_pipeline import ROOT

GUARD0 = dict.fromkeys(dis.GUARD, 0.0)


def row(output, paid, rule, verdict, gts="7", **flags):
    """A reward_fns.llm_judge row as verl dumps it (the keys the analysis reads)."""
    return {
        "input": "q",
        "output": output,
        "gts": gts,
        "score": float(paid),
        "rule_score": float(rule),
        "judge_score": float(verdict),
        "judge_abstained": 0.0,
        **GUARD0,
        **flags,
    }


# one sample of each kind, reference 7
OTHER = row("3 + 4 = 7 apples.", 1, 0, 4)  # (a) paid, no #### line, its one final answer is 7
WRONG = row("#### 9", 1, 0, 4)  # (b) paid a wrong answer
HEDGE = row("The answer is 7 or 9", 1, 0, 4)  # (b) two final answers, the last 9: no rule pays it
REFUSED = row("#### 7", 0, 1, 0)  # (c) refused a right answer
NO_VERDICT = row("#### 7", 0, 1, -1, judge_parse_fail=1.0)  # (c) refused: no verdict (earns what a 0 earns)
VOID_WRONG = row("#### 9", 0, 0, 4, judge_contradiction=1.0)  # (d) the guard stopped a wrong pay
VOID_RIGHT = row("#### 7 (3 + 4)", 0, 1, 4, judge_ungrounded=1.0)  # (d) the guard took a right answer away
AGREE_PAID = row("#### 7", 1, 1, 4)
AGREE_REFUSED = row("#### 9", 0, 0, 0)
FAIL_OPEN = row("#### 9", 1, 0, 4, judge_unverified=1.0)  # an older guard let it stand: paid, so (b)
ROUTED = row("#### 9", 0, 0, -1, judge_skipped=1.0)  # route mode: the rule decided
ABSTAINED = row("#### 7", 0, 1, -1, judge_abstained=1.0)  # no reward at all: not a sample


@pytest.mark.parametrize(
    "sample, cls",
    [
        (OTHER, "other_form"),
        (WRONG, "paid_wrong"),
        (HEDGE, "paid_wrong"),
        (REFUSED, "refused_right"),
        (NO_VERDICT, "refused_right"),
        (VOID_WRONG, "guard_voided"),
        (VOID_RIGHT, "guard_voided"),
        (AGREE_PAID, None),
        (AGREE_REFUSED, None),
        (FAIL_OPEN, "paid_wrong"),
        (ROUTED, None),
        (row("Eighteen: 18.", 0.5, 0, 2, gts="18"), "other_form"),  # a partial verdict pays too
        # graded by the rules, not the guard's reader: a `####` token that is no plain number is no answer to the
        # strict rule, and the flexible one reads its last number
        (row("#### 18/5", 1, 0, 4, gts="18"), "paid_wrong"),
        (row("#### 18^2", 1, 0, 4, gts="18"), "paid_wrong"),
        (row("#### 18e2", 1, 0, 4, gts="18"), "paid_wrong"),
        (row("#### 18-20", 1, 0, 4, gts="18"), "paid_wrong"),
        (row("#### 18:30", 1, 0, 4, gts="18"), "paid_wrong"),
        (row("#### 1/2", 1, 0, 4, gts="1"), "paid_wrong"),
        (row("#### 18 (10 + 8)", 1, 1, 4, gts="18"), None),  # the strict rule reads 18
        (row("The answer is 9 or 7", 1, 0, 4), "other_form"),  # the flexible rule pays a hedge ending in 7
        (row("#### 18/5", 0, 0, 4, gts="18", judge_ungrounded=1.0), "guard_voided"),
    ],
)
def test_classify(sample, cls):
    assert dis.classify(sample) == cls


def pair_row(output, paid, rule, wins, guarded=0.0, gts="7", **keys):
    """A reward_fns.pairwise_judge row as verl dumps it (the keys the analysis reads)."""
    base = {"input": "q", "output": output, "gts": gts, "score": float(paid), "judge_wins": float(wins)}
    return {**base, "judge_abstained": 0.0, "rule_score": float(rule), "judge_guarded": float(guarded), **keys}


PAIR_WRONG = pair_row("#### 18/5", 0.5, 0, 0.5, gts="18")  # (b) one order paid a wrong answer
PAIR_OTHER = pair_row("So 7 apples.", 1, 0, 1)  # (a)
PAIR_REFUSED = pair_row("#### 7", 0, 1, 0)  # (c)
PAIR_FALLBACK = pair_row("#### 7", 0, 1, -1, judge_fallback=1.0)  # (c) no win share: the fallback's 0
PAIR_VOID_RIGHT = pair_row("#### 7", 0, 1, 0, guarded=0.5)  # (d) right: a verdict voided and nothing paid
PAIR_VOID_WRONG = pair_row("#### 9", 0, 0, 0, guarded=1.0)  # (d) wrong
PAIR_AGREE = pair_row("#### 7", 0.5, 1, 0.5, guarded=0.5)  # paid: a voided comparison is no disagreement
PAIR_ABSTAINED = pair_row("#### 7", 0, 1, -1, judge_abstained=1.0)


@pytest.mark.parametrize(
    "sample, cls",
    [
        (PAIR_WRONG, "paid_wrong"),
        (PAIR_OTHER, "other_form"),
        (PAIR_REFUSED, "refused_right"),
        (PAIR_FALLBACK, "refused_right"),
        (PAIR_VOID_RIGHT, "guard_voided"),
        (PAIR_VOID_WRONG, "guard_voided"),
        (PAIR_AGREE, None),
        (pair_row("#### 9", 0, 0, 0), None),
    ],
)
def test_classify_pairwise(sample, cls):
    assert dis.classify(sample) == cls


def test_tally_pairwise():
    """A pairwise judge's samples: no verdict is no win share; (d) names judge_guarded; the example its wins."""
    rows = [PAIR_WRONG, PAIR_OTHER, PAIR_REFUSED, PAIR_FALLBACK, PAIR_VOID_RIGHT, PAIR_VOID_WRONG, PAIR_AGREE]
    s = dis.tally([(4, rows + [PAIR_ABSTAINED])])
    assert (s["samples"], s["abstained"], s["no_verdict"], s["paid"], s["rule_paid"]) == (7, 1, 1, 3, 4)
    assert {c: v["count"] for c, v in s["classes"].items()} == {
        "other_form": 1,
        "paid_wrong": 1,
        "refused_right": 2,
        "guard_voided": 2,
    }
    assert s["classes"]["refused_right"]["no_verdict"] == 1 and s["disagree"] == {"count": 6, "rate": 6 / 7}
    assert s["examples"]["paid_wrong"] == [
        {
            "step": 4,
            "reference": "18",
            "strict": "none",
            "flexible": "5",
            "score": 0.5,
            "judge_wins": 0.5,
            "rule_score": 0.0,
            "output": "#### 18/5",
        }
    ]
    assert [e["guard"] for e in s["examples"]["guard_voided"]] == [["judge_guarded"], ["judge_guarded"]]


def test_tally_counts_rates_and_examples():
    """10 samples and an abstained one: 1 + 2 + 2 + 2 in the classes, 3 agreeing."""
    rows = [OTHER, WRONG, HEDGE, REFUSED, NO_VERDICT, VOID_WRONG, VOID_RIGHT, AGREE_PAID, AGREE_REFUSED, ROUTED]
    s = dis.tally([(5, rows[:6]), (3, rows[6:] + [ABSTAINED])])
    assert {k: s[k] for k in ("steps", "files", "samples", "abstained", "no_verdict", "paid", "rule_paid")} == {
        "steps": [3, 5],
        "files": 2,
        "samples": 10,
        "abstained": 1,
        "no_verdict": 2,
        "paid": 4,
        "rule_paid": 4,
    }
    assert s["classes"] == {
        "other_form": {"count": 1, "rate": 0.1},
        "paid_wrong": {"count": 2, "rate": 0.2},
        "refused_right": {"count": 2, "no_verdict": 1, "rate": 0.2},
        "guard_voided": {"count": 2, "right": 1, "wrong": 1, "rate": 0.2},
    }
    assert s["disagree"] == {"count": 7, "rate": 0.7}
    assert s["examples"]["guard_voided"] == [
        {
            "step": 5,
            "reference": "7",
            "strict": "9",
            "flexible": "9",
            "score": 0.0,
            "judge_score": 4.0,
            "rule_score": 0.0,
            "output": "#### 9",
            "guard": ["judge_contradiction"],
        },
        {
            "step": 3,
            "reference": "7",
            "strict": "7",
            "flexible": "4",
            "score": 0.0,
            "judge_score": 4.0,
            "rule_score": 1.0,
            "output": "#### 7 (3 + 4)",
            "guard": ["judge_ungrounded"],
        },
    ]
    assert [(e["strict"], e["flexible"]) for e in s["examples"]["paid_wrong"]] == [("9", "9"), ("none", "9")]


def test_at_most_three_examples_each_clipped_to_200_characters():
    long = row("x " * 300 + "#### 9", 1, 0, 4)
    s = dis.tally([(1, [long] * 5)])
    assert s["classes"]["paid_wrong"]["count"] == 5 and len(s["examples"]["paid_wrong"]) == 3
    out = s["examples"]["paid_wrong"][0]["output"]
    assert len(out) == 200 and out.startswith("x x ") and out.endswith(" #### 9") and " … " in out
    assert dis.clip("#### 9") == "#### 9" and len(dis.clip("y" * 201)) == 200


def dump(folder, step, rows, gz=False):
    os.makedirs(folder, exist_ok=True)
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if gz:
        with gzip.open(os.path.join(folder, f"{step}.jsonl.gz"), "wt") as f:
            f.write(text)
    else:
        with open(os.path.join(folder, f"{step}.jsonl"), "w") as f:
            f.write(text)


def experiment(out, val_dir=""):
    """judge: val at steps 0 and 10 (only 10 counts), rollouts at 1 and 2; judge_s1: gzipped val only; rule: val
    without judge grades (left out); ``val_dir``: the kept layout's ``val/``."""
    dump(out / val_dir / "judge_val", 0, [WRONG, WRONG, WRONG])
    dump(out / val_dir / "judge_val", 10, [OTHER, AGREE_PAID])
    dump(out / "judge_rollouts", 1, [WRONG, REFUSED, AGREE_REFUSED, ABSTAINED])
    dump(out / "judge_rollouts", 2, [VOID_RIGHT, AGREE_PAID])
    dump(out / val_dir / "judge_s1_val", 10, [NO_VERDICT, AGREE_PAID, AGREE_PAID, AGREE_PAID], gz=True)
    dump(out / val_dir / "rule_val", 10, [{"input": "q", "output": "#### 7", "gts": "7", "score": 1.0}])


@pytest.mark.parametrize("val_dir", ["", "val"])
def test_instance(val_dir, tmp_path):
    experiment(tmp_path, val_dir)
    res = dis.instance(str(tmp_path))
    assert list(res["runs"]) == ["judge", "judge_s1"] and list(res["arms"]) == ["judge"]
    run = res["runs"]["judge"]
    assert (run["val"]["steps"], run["val"]["samples"], run["val"]["disagree"]) == (
        [10, 10],
        2,
        {"count": 1, "rate": 0.5},
    )
    assert (run["rollouts"]["steps"], run["rollouts"]["samples"], run["rollouts"]["abstained"]) == ([1, 2], 5, 1)
    assert "examples" not in run["val"]
    val, roll = res["arms"]["judge"]["val"], res["arms"]["judge"]["rollouts"]
    assert (val["files"], val["samples"], val["no_verdict"]) == (2, 6, 1)
    assert {c: v["count"] for c, v in val["classes"].items()} == {
        "other_form": 1,
        "paid_wrong": 0,
        "refused_right": 1,
        "guard_voided": 0,
    }
    assert val["disagree"] == {"count": 2, "rate": 2 / 6}
    assert {c: v["count"] for c, v in roll["classes"].items()} == {
        "other_form": 0,
        "paid_wrong": 1,
        "refused_right": 1,
        "guard_voided": 1,
    }
    assert roll["classes"]["guard_voided"] == {"count": 1, "right": 1, "wrong": 0, "rate": 0.2}
    assert dis.instance(str(tmp_path), ["judge"], [1])["runs"].keys() == {"judge_s1"}
    assert dis.instance(str(tmp_path), ["rule"], [0]) == {"runs": {}, "arms": {}}


def test_pooled_over_instances(tmp_path):
    for k in (0, 1):
        experiment(tmp_path / f"instance_{k}")
    res = dis.analyse([str(tmp_path)])
    assert list(res["instances"]) == [str(tmp_path / "instance_0"), str(tmp_path / "instance_1")]
    val = res["arms"]["judge"]["val"]
    assert (val["files"], val["samples"], val["steps"], val["disagree"]) == (
        4,
        12,
        [10, 10],
        {"count": 4, "rate": 4 / 12},
    )
    assert len(val["examples"]["other_form"]) == 2 and len(val["examples"]["refused_right"]) == 2


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "scripts.lab.disagreements", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_command_line(tmp_path):
    experiment(tmp_path / "a")
    r = cli(str(tmp_path / "a"), "--out", str(tmp_path / "d.json"), "--md", str(tmp_path / "d.md"))
    assert r.returncode == 0, r.stderr
    got = json.load(open(tmp_path / "d.json"))
    assert got["command"][3:] == [
        str(tmp_path / "a"),
        "--out",
        str(tmp_path / "d.json"),
        "--md",
        str(tmp_path / "d.md"),
    ]
    assert got["arms"]["judge"]["val"]["disagree"] == {"count": 2, "rate": 2 / 6}
    md = (tmp_path / "d.md").read_text()
    assert r.stdout == md
    assert (
        f"| {tmp_path / 'a'} | judge | val | 2 | 10 | 6 | 1 | 1 (16.67%) | 0 (0.00%) | 1 (16.67%; 1 no verdict) " in md
    )
    assert (
        "| judge | rollouts | 1 | 1-2 | 5 | 0 | 0 (0.00%) | 1 (20.00%) | 1 (20.00%) "
        "| 1 (20.00%; 1 right / 0 wrong) " in md
    )
    example = "- judge val step 10, (a) paid, rule refuses, right in another form: reference 7, strict none, "
    assert example + "flexible 7, verdict 4.0, rule 0.0, paid 1.0: `3 + 4 = 7 apples.`" in md
    assert cli("--help").returncode == 0 and "right in another form" in cli("--help").stdout


BAD = {
    "not json": "{oops\n",
    "no rule_score": json.dumps({k: v for k, v in REFUSED.items() if k != "rule_score"}) + "\n",
    "judge_score a string": json.dumps({**REFUSED, "judge_score": "4"}) + "\n",
    "reference no number": json.dumps({**REFUSED, "gts": "seven"}) + "\n",
}


@pytest.mark.parametrize(
    "case, message",
    [
        ("missing", "nowhere: no such folder"),
        ("empty", "no <run>_val or <run>_rollouts folder with <step>.jsonl[.gz] dumps in "),
        ("rule only", "holds per-sample judge and rule grades (judge_score or judge_wins, rule_score): only a judge-"),
        ("not json", "judge_rollouts/3.jsonl: line 2: invalid JSON"),
        ("no rule_score", "judge_rollouts/3.jsonl: row 2: no rule_score (a pointwise judge's dump has output, "),
        ("judge_score a string", "judge_rollouts/3.jsonl: row 2: judge_score is not a number: '4'"),
        ("reference no number", "judge_rollouts/3.jsonl: row 2: GSM8K ground truth is not a number"),
        ("twice", "judge_rollouts: step 3 dumped twice (3.jsonl and 3.jsonl.gz)"),
    ],
)
def test_command_line_errors(case, message, tmp_path):
    """Each is one line of error (exit 2), no traceback, nothing written."""
    out = tmp_path / "x"
    os.makedirs(out)
    if case == "rule only":
        dump(out / "rule_val", 10, [{"input": "q", "output": "#### 7", "gts": "7", "score": 1.0}])
    if case in BAD or case == "twice":
        dump(out / "judge_rollouts", 3, [AGREE_PAID])
        with open(out / "judge_rollouts" / "3.jsonl", "a") as f:
            f.write(BAD.get(case, ""))
    if case == "twice":
        dump(out / "judge_rollouts", 3, [AGREE_PAID], gz=True)
    r = cli(str(tmp_path / "nowhere" if case == "missing" else out), "--out", str(tmp_path / "d.json"))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("python -m scripts.lab.disagreements: error: ") and message in last, last
    assert not (tmp_path / "d.json").exists()


def scorecard_instance(out, judge_val):
    """rule and judge, one seed, 2 questions (reference 7): before both wrong, the rule both right; the judge's
    validation ``judge_val`` and one rollout step."""
    dump(out / "rule_val", 0, [{"input": f"q{i}", "output": "#### 9", "gts": "7", "score": 0.0} for i in range(2)])
    dump(out / "rule_val", 10, [{"input": f"q{i}", "output": "#### 7", "gts": "7", "score": 1.0} for i in range(2)])
    dump(out / "judge_val", 10, [{**r, "input": f"q{i}"} for i, r in enumerate(judge_val)])
    dump(out / "judge_rollouts", 1, [WRONG, AGREE_PAID, AGREE_PAID, AGREE_PAID])


def test_scorecard_reports_disagreements(tmp_path):
    """report.json: each instance's ``disagreements`` and every instance's; scorecard.md: one table."""
    scorecard_instance(tmp_path / "instance_0", [OTHER, AGREE_PAID])
    scorecard_instance(tmp_path / "instance_1", [REFUSED, AGREE_PAID])
    folders = [str(tmp_path / "instance_0"), str(tmp_path / "instance_1")]
    report = scorecard.write_pooled(str(tmp_path), folders, ["rule", "judge"], [0], 10, command=["x"])
    i0, i1 = (report["instances"][f"instance_{k}"]["disagreements"]["arms"]["judge"] for k in (0, 1))
    assert i0["val"]["classes"]["other_form"]["count"] == 1 and i1["val"]["classes"]["refused_right"]["count"] == 1
    assert i0["rollouts"]["classes"]["paid_wrong"] == {"count": 1, "rate": 0.25}
    assert report["disagreements"]["judge"]["val"]["disagree"] == {"count": 2, "rate": 0.5}
    assert report["disagreements"]["judge"]["rollouts"]["disagree"] == {"count": 2, "rate": 0.25}
    md = (tmp_path / "scorecard.md").read_text()
    assert md.count("## Where the judge's reward and the strict rule part ways") == 1
    assert "| instance_0 | judge | val | 1 | 10 | 2 | 0 | 1 (50.00%) | 0 (0.00%) | 0 (0.00%) |" in md
    assert "| all | judge | rollouts | 2 | 1 | 8 | 0 | 0 (0.00%) | 2 (25.00%) | 0 (0.00%) |" in md


def test_scorecard_stands_when_a_dump_is_unreadable(tmp_path):
    scorecard_instance(tmp_path, [OTHER, AGREE_PAID])
    with open(tmp_path / "judge_rollouts" / "1.jsonl", "a") as f:
        f.write("[1]\n")
    report = scorecard.write(str(tmp_path), ["rule", "judge"], [0], 10, log=lambda _: None, command=["x"])
    assert report["ratios"]["judge"]["mean"] == 0.5 and report["disagreements"]["arms"] == {}
    errors = report["disagreements"]["errors"]
    assert list(errors) == ["judge"]
    assert errors["judge"].endswith("judge_rollouts/1.jsonl: line 5: expected a JSON object, got list")
    md = (tmp_path / "scorecard.md").read_text()
    assert f"- {tmp_path.name}, run judge: not read: " in md and "line 5: expected a JSON object" in md


def test_scorecard_without_judge_grades_says_so(tmp_path):
    scorecard_instance(tmp_path, [AGREE_PAID, AGREE_PAID])
    for f in ("judge_val", "judge_rollouts"):
        for name in os.listdir(tmp_path / f):
            rows = [{k: v for k, v in json.loads(x).items() if k != "judge_score"} for x in open(tmp_path / f / name)]
            dump(tmp_path / f, int(name.split(".")[0]), rows)
    report = scorecard.write(str(tmp_path), ["rule", "judge"], [0], 10, log=lambda _: None, command=["x"])
    assert report["disagreements"] == {"runs": {}, "arms": {}}
    assert "no dump of these runs holds per-sample judge and rule grades" in (tmp_path / "scorecard.md").read_text()


def test_one_unreadable_run_leaves_the_others_in_the_scorecard(tmp_path):
    """A run with a torn dump is left out of the disagreement table and named; the instance's other runs stay."""
    scorecard_instance(tmp_path, [OTHER, AGREE_PAID])
    for f in os.listdir(tmp_path):
        if f.startswith("judge_"):
            shutil.copytree(tmp_path / f, tmp_path / f.replace("judge_", "judge_s1_"))
    with open(tmp_path / "judge_rollouts" / "1.jsonl", "a") as f:
        f.write("[1]\n")
    found = scorecard.disagreed(str(tmp_path), ["judge"], [0, 1])
    assert list(found["runs"]) == ["judge_s1"] and list(found["errors"]) == ["judge"]
    assert found["arms"]["judge"]["val"]["runs"] == 1


@pytest.mark.parametrize(
    "first, message",
    [
        # the first row without the verdict key: the dump is still judge-graded, and that row is named
        (
            {k: v for k, v in AGREE_PAID.items() if k != "judge_score"},
            "judge_rollouts/3.jsonl: row 1: no judge_score (a pointwise judge's dump has output, gts, score, "
            "rule_score, judge_score)",
        ),
        (
            {k: v for k, v in PAIR_AGREE.items() if k != "judge_guarded"},
            "judge_rollouts/3.jsonl: rows of a pointwise (judge_score) and a pairwise (judge_wins) judge in one dump",
        ),
    ],
)
def test_a_dump_is_read_row_by_row(first, message, tmp_path):
    dump(tmp_path / "judge_rollouts", 3, [first, AGREE_PAID])
    r = cli(str(tmp_path), "--out", str(tmp_path / "d.json"))
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].endswith(message), r.stderr
    dump(tmp_path / "judge_rollouts", 3, [{k: v for k, v in AGREE_PAID.items() if k != "judge_score"}] * 2)
    with pytest.raises(ValueError, match="holds per-sample judge and rule grades"):  # no row has one: no judge dump
        dis.analyse([str(tmp_path)])


@pytest.mark.parametrize(
    "out, md, message",
    [
        ("reports", None, "--out {t}/reports: a folder; give the file to write"),
        ("d.json", "reports", "--md {t}/reports: a folder; give the file to write"),
        ("d.json", "d.json", "--out and --md name the same file ({t}/d.json): one report would replace the other"),
        ("d.json", "./x/../d.json", "--out and --md name the same file ({t}/d.json): one report would replace"),
        (
            "x/judge_val/12.jsonl",
            None,
            "--out {t}/x/judge_val/12.jsonl: in the dump folder (judge_val), whose files are read as dumps: write it "
            "elsewhere",
        ),
        ("d.json", "x/val/judge_rollouts/d.md", "--md {t}/x/val/judge_rollouts/d.md: in the dump folder (judge_roll"),
    ],
)
def test_output_paths_are_checked_first(out, md, message, tmp_path):
    """A folder, one file named twice, or a file where a later read takes it for a dump: exit 2, nothing written."""
    experiment(tmp_path / "x")
    (tmp_path / "reports").mkdir()
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    args = ["--out", str(tmp_path / out), *(["--md", str(tmp_path / md)] if md else [])]
    r = cli(str(tmp_path / "x"), *args)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert message.format(t=tmp_path) in r.stderr.strip().splitlines()[-1], r.stderr
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_pairwise_arms_are_tallied(tmp_path):
    """pairwise_ref and tournament runs' dumps are judge-graded ones: each arm in the instance's and the scorecard's
    disagreements, and each arm's verdict against the judge's target."""
    scorecard_instance(tmp_path, [AGREE_PAID, AGREE_PAID])
    pair = [{**r, "input": f"q{i}"} for i, r in enumerate([pair_row("#### 9", 0, 0, 0), PAIR_REFUSED])]
    dump(tmp_path / "pairwise_ref_val", 10, pair)
    dump(tmp_path / "pairwise_ref_rollouts", 1, [PAIR_WRONG, PAIR_OTHER, PAIR_AGREE, PAIR_ABSTAINED])
    dump(tmp_path / "tournament_val", 10, [{**r, "input": f"q{i}"} for i, r in enumerate([PAIR_AGREE, PAIR_AGREE])])
    dump(tmp_path / "tournament_rollouts", 1, [PAIR_VOID_WRONG, PAIR_VOID_RIGHT, PAIR_AGREE])
    res = dis.instance(str(tmp_path))
    assert list(res["arms"]) == ["judge", "pairwise_ref", "tournament"]
    ref, tour = res["arms"]["pairwise_ref"], res["arms"]["tournament"]
    assert [ref["rollouts"]["classes"][c]["count"] for c in dis.CLASSES] == [1, 1, 0, 0]
    assert (ref["rollouts"]["samples"], ref["rollouts"]["abstained"]) == (3, 1)
    assert ref["val"]["classes"]["refused_right"] == {"count": 1, "no_verdict": 0, "rate": 0.5}
    assert tour["rollouts"]["classes"]["guard_voided"] == {"count": 2, "right": 1, "wrong": 1, "rate": 2 / 3}
    arms = ["rule", "judge", "pairwise_ref", "tournament"]
    report = scorecard.write(str(tmp_path), arms, [0], 10, log=lambda _: None, command=["x"])
    assert list(report["disagreements"]["arms"]) == ["judge", "pairwise_ref", "tournament"]
    md = (tmp_path / "scorecard.md").read_text()
    assert f"| {tmp_path.name} | tournament | rollouts | 1 | 1 | 3 | 0 | 0 (0.00%) | 0 (0.00%) | 0 (0.00%) " in md
    assert "| 2 (66.67%; 1 right / 1 wrong) | 2 (66.67%) |" in md
    # their verdicts: the judge's target (the rule gains 1.0; pairwise_ref 0.5, tournament 1.0)
    target = "target mean >= 0.9 and lower bound >= 0.8"
    assert f"- pairwise_ref gain / rule gain 0.500 (95% interval 0.000 to 1.000): {target} NOT met\n" in md
    assert f"- tournament gain / rule gain 1.000 (95% interval 1.000 to 1.000): {target} met\n" in md
