"""The judge's verdict kinds (``reward_fns/verdicts.py``): each kind's fields, label detection, and a new kind used
by the evaluator and the warm start's data with no change to either (docs/verdict_kinds.md)."""

from __future__ import annotations

import functools
import types

import pytest

from data_prep import judge_sft
from reward_fns import judge_metrics, pairwise, pointwise, verdicts
from reward_fns._labels import choice_label
from reward_fns.parse import parse_choice
from scripts.eval import judge as eval_judge


@pytest.mark.parametrize(
    "kind, fields",
    [
        (
            verdicts.POINTWISE,
            (
                "pointwise",
                "score",
                "response",
                False,
                pointwise.compute_score,
                judge_metrics.pointwise_metrics,
                ("balanced_accuracy", "precision", "recall", "specificity", "parse_fail_rate", "exact", "n"),
            ),
        ),
        (
            verdicts.PAIRWISE,
            (
                "pairwise",
                "better",
                "response_a",
                True,
                pairwise.compute_score,
                judge_metrics.pairwise_metrics,
                ("accuracy", "pair_accuracy", "flip_rate", "a_share", "parse_fail_rate", "n"),
            ),
        ),
    ],
)
def test_kinds(kind, fields):
    assert (kind.name, kind.tag, kind.marker, kind.paired, kind.reward, kind.metrics, kind.compare_keys) == fields
    assert verdicts.KINDS[kind.name] is kind and eval_judge.TASKS == ("pairwise", "pointwise")
    # the verdict a kind writes is the one its parser and its reward read
    reply = f"<think>x</think><{kind.tag}>{4 if kind is verdicts.POINTWISE else 'B'}</{kind.tag}>"
    assert (
        kind.parse(reply).ok and kind.reward("judge", reply, "4" if kind is verdicts.POINTWISE else "B")["score"] == 1.0
    )


@pytest.mark.parametrize(
    "labels, kind, error",
    [
        (["A", "b", " B "], "pairwise", None),
        ([4, "0", 3.0, "2"], "pointwise", None),
        (
            ["A", "x"],
            None,
            "row 2: reward_model.ground_truth 'x' is neither 'A'/'B' (pairwise) nor an integer 0-4 (pointwise)",
        ),
        (["A", "2"], None, "reward_model.ground_truth mixes pairwise ('A'/'B') and pointwise (an integer 0-4) labels"),
        ([5], None, "row 1: reward_model.ground_truth 5 is neither"),
    ],
)
def test_detect(labels, kind, error):
    if error is None:
        assert verdicts.detect(labels).name == kind
    else:
        with pytest.raises(ValueError) as e:
            verdicts.detect(labels)
        assert str(e.value).startswith(error)


@pytest.mark.parametrize(
    "extra, kind",
    [
        ({"response": "r", "answer": "#### 7"}, "pointwise"),
        ({"response_a": "a", "response_b": "b"}, "pairwise"),
        ({"question": "q"}, None),
    ],
)
def test_of_row(extra, kind):
    got = verdicts.of_row(extra)
    assert (got.name if got else None) == kind


def test_a_new_kind_needs_no_change_elsewhere(monkeypatch):
    """A binary ``<verdict>correct|incorrect</verdict>`` kind, registered here only: the evaluator detects its labels,
    parses its replies and measures them, and the warm start writes its answers."""
    choices = ("CORRECT", "INCORRECT")

    def target(extra, label):
        if str(label).upper() not in choices:
            raise verdicts.NoTarget("label_not_binary")
        return f"<think>Checked.</think><verdict>{str(label).lower()}</verdict>"

    def metrics(recs):
        ok = [r for r in recs if r["status"] == "ok"]
        return {
            "n": len(recs),
            "accuracy": judge_metrics.ratio(sum(r["pred"] == r["label"] for r in ok), len(recs)),
            "accuracy_parsed": judge_metrics.ratio(sum(r["pred"] == r["label"] for r in ok), len(ok)),
            "parse_fail_rate": judge_metrics.ratio(sum(r["status"] == "parse_fail" for r in recs), len(recs)),
            "error_rate": 0.0,
        }

    binary = verdicts.Verdict(
        name="binary",
        tag="verdict",
        marker="verdict_of",
        paired=False,
        label=functools.partial(choice_label, choices=choices),
        labels_are="'correct'/'incorrect'",
        parse=functools.partial(parse_choice, tag="verdict", choices=choices),
        reward=pairwise.compute_score,
        target=target,
        metrics=metrics,
        compare_keys=("accuracy", "parse_fail_rate", "n"),
        report_keys=("n", "accuracy", "accuracy_parsed"),
    )
    monkeypatch.setattr(verdicts, "KINDS", {**verdicts.KINDS, "binary": binary})

    assert eval_judge.detect_task(["correct", "Incorrect"], "d.parquet") == "binary"
    labels = eval_judge.coerce_labels("binary", ["correct", "incorrect", "correct"], "d.parquet")
    assert labels == ["CORRECT", "INCORRECT", "CORRECT"]
    rows = [{"prompt": [{"role": "user", "content": f"q{i}"}], "data_source": "s"} for i in range(3)]
    replies = ["<think>ok</think><verdict>correct</verdict>", "<think>ok</think><verdict>correct</verdict>", "correct"]
    results = [
        types.SimpleNamespace(ok=True, text=t, finish_reason="stop", cached=True, latency_s=0.0) for t in replies
    ]
    recs, report = eval_judge.evaluate("binary", rows, labels, results)
    assert [(r["pred"], r["status"]) for r in recs] == [("CORRECT", "ok"), ("CORRECT", "ok"), (None, "parse_fail")]
    assert report["overall"] == {
        "n": 3,
        "accuracy": 1 / 3,
        "accuracy_parsed": 0.5,
        "parse_fail_rate": 1 / 3,
        "error_rate": 0.0,
    }
    report.update(task="binary", per_source={})
    assert eval_judge.md_keys(report) == ["n", "accuracy", "accuracy_parsed", "parse_fail_rate", "error_rate"]
    row = {"extra_info": {"verdict_of": "a solution"}, "reward_model": {"ground_truth": "correct"}}
    assert judge_sft.target(row) == "<think>Checked.</think><verdict>correct</verdict>"
    with pytest.raises(judge_sft.SkipRow, match="label_not_binary"):
        judge_sft.target({**row, "reward_model": {"ground_truth": "maybe"}})
