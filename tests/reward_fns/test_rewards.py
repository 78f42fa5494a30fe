"""Table-driven tests of the three rule rewards: exact scores and the exact key set for every sample."""

import numpy as np
import pytest

from reward_fns import gsm8k, pairwise, pointwise

GOOD = "<think>ok</think><score>{}</score>"

POINTWISE_CASES = [
    # (solution, ground_truth, score, acc, pred, label, format_ok)
    # labels 0 and 1: exact match or nothing
    (GOOD.format(0), 0, 1.0, 1.0, 0, 0, 1.0),
    (GOOD.format(1), 0, 0.0, 0.0, 1, 0, 1.0),
    (GOOD.format(4), 0, 0.0, 0.0, 4, 0, 1.0),
    (GOOD.format(1), 1, 1.0, 1.0, 1, 1, 1.0),
    (GOOD.format(0), 1, 0.0, 0.0, 0, 1, 1.0),
    (GOOD.format(2), 1, 0.0, 0.0, 2, 1, 1.0),
    # labels 2-4: 1 - |d|/4
    (GOOD.format(2), 2, 1.0, 1.0, 2, 2, 1.0),
    (GOOD.format(0), 2, 0.5, 0.0, 0, 2, 1.0),
    (GOOD.format(4), 2, 0.5, 0.0, 4, 2, 1.0),
    (GOOD.format(3), 2, 0.75, 0.0, 3, 2, 1.0),
    (GOOD.format(3), 3, 1.0, 1.0, 3, 3, 1.0),
    (GOOD.format(0), 3, 0.25, 0.0, 0, 3, 1.0),
    (GOOD.format(4), 4, 1.0, 1.0, 4, 4, 1.0),
    (GOOD.format(3), 4, 0.75, 0.0, 3, 4, 1.0),
    (GOOD.format(0), 4, 0.0, 0.0, 0, 4, 1.0),
    # ground-truth forms
    (GOOD.format(3), "3", 1.0, 1.0, 3, 3, 1.0),
    (GOOD.format(3), " 3 ", 1.0, 1.0, 3, 3, 1.0),
    (GOOD.format(3), {"score": 3}, 1.0, 1.0, 3, 3, 1.0),
    (GOOD.format(3), {"helpfulness": 4}, 0.75, 0.0, 3, 4, 1.0),
    (GOOD.format(3), np.int64(2), 0.75, 0.0, 3, 2, 1.0),
    (GOOD.format(3), 3.0, 1.0, 1.0, 3, 3, 1.0),
    # malformed: always the penalty, whatever the label (garbage never earns on label 0)
    ("", 0, -1.0, 0.0, -1, 0, 0.0),
    ("garbage", 0, -1.0, 0.0, -1, 0, 0.0),
    ("<score>0", 0, -1.0, 0.0, -1, 0, 0.0),
    ("<think>x<score>0</score>", 0, -1.0, 0.0, -1, 0, 0.0),
    ("<score>0</score><score>0</score>", 0, -1.0, 0.0, -1, 0, 0.0),
    ("<score>5</score>", 4, -1.0, 0.0, -1, 4, 0.0),
    ("<score>2.5</score>", 2, -1.0, 0.0, -1, 2, 0.0),
    ("<think>x</think>", 2, -1.0, 0.0, -1, 2, 0.0),
    # no reasoning: a bare verdict, or an empty think block, is malformed (require_think, default true)
    ("<score>4</score>", 4, -1.0, 0.0, -1, 4, 0.0),
    ("junk<score>4</score>", 4, -1.0, 0.0, -1, 4, 0.0),
    ("<think> </think><score>4</score>", 4, -1.0, 0.0, -1, 4, 0.0),
]


@pytest.mark.parametrize("solution, gt, score, acc, pred, label, fmt", POINTWISE_CASES)
def test_pointwise(solution, gt, score, acc, pred, label, fmt):
    out = pointwise.compute_score("judge", solution, gt, {})
    assert list(out) == ["score", "acc", "pred", "label", "format_ok"]
    assert out == {"score": score, "acc": acc, "pred": pred, "label": label, "format_ok": fmt}
    assert isinstance(out["score"], float)


@pytest.mark.parametrize(
    "module, reply, label", [(pointwise, "<score>4</score>", 4), (pairwise, "<better>B</better>", "B")]
)
def test_a_bare_verdict_is_well_formed_only_when_thinking_is_not_required(module, reply, label):
    assert module.compute_score("judge", reply, label)["score"] == -1.0
    assert module.compute_score("judge", reply, label, require_think=False)["score"] == 1.0
    assert module.check_options(require_think="no") == ["require_think must be true or false, got 'no'"]
    assert module.check_options(require_think=False) == []


@pytest.mark.parametrize("penalty", [-0.5, -2.0])
def test_pointwise_penalty_kwarg(penalty):
    assert pointwise.compute_score("j", "nope", 0, format_penalty=penalty)["score"] == penalty
    assert pairwise.compute_score("j", "nope", "A", format_penalty=penalty)["score"] == penalty


@pytest.mark.parametrize("penalty", [0.0, 0.5, "x"])
def test_penalty_must_be_negative(penalty):
    with pytest.raises(ValueError):
        pointwise.compute_score("j", GOOD.format(1), 1, format_penalty=penalty)


@pytest.mark.parametrize("gt", [5, -1, "2.5", "x", {"other": 1}, True, None, 2.5])
def test_pointwise_bad_ground_truth(gt):
    with pytest.raises(ValueError):
        pointwise.compute_score("j", GOOD.format(1), gt)


PAIRWISE_CASES = [
    # (solution, gt, score, acc, pred_a, label_a, format_ok)
    ("<think>x</think><better>A</better>", "A", 1.0, 1.0, 1.0, 1.0, 1.0),
    ("<think>x</think><better>B</better>", "A", 0.0, 0.0, 0.0, 1.0, 1.0),
    ("<think>x</think><better>b</better>", "B", 1.0, 1.0, 0.0, 0.0, 1.0),
    ("<think>x</think><better> a </better>", "b", 0.0, 0.0, 1.0, 0.0, 1.0),
    ("<think>x</think><better>A</better>", {"preference": "A"}, 1.0, 1.0, 1.0, 1.0, 1.0),
    ("<better>B</better>", "B", -1.0, 0.0, 0.0, 0.0, 0.0),  # no reasoning: malformed (require_think)
    ("<better>A or B</better>", "A", -1.0, 0.0, 0.0, 1.0, 0.0),
    ("<better>Assistant B</better>", "B", -1.0, 0.0, 0.0, 0.0, 0.0),
    ("<better>tie</better>", "A", -1.0, 0.0, 0.0, 1.0, 0.0),
    ("Response A is better.", "A", -1.0, 0.0, 0.0, 1.0, 0.0),
    ("<better>A</better><better>B</better>", "A", -1.0, 0.0, 0.0, 1.0, 0.0),
    ("<think>hmm <better>A</better>", "A", -1.0, 0.0, 0.0, 1.0, 0.0),
    ("", "B", -1.0, 0.0, 0.0, 0.0, 0.0),
]


@pytest.mark.parametrize("solution, gt, score, acc, pred_a, label_a, fmt", PAIRWISE_CASES)
def test_pairwise(solution, gt, score, acc, pred_a, label_a, fmt):
    out = pairwise.compute_score("judge", solution, gt, {})
    assert list(out) == ["score", "acc", "pred_a", "label_a", "format_ok"]
    assert out == {"score": score, "acc": acc, "pred_a": pred_a, "label_a": label_a, "format_ok": fmt}


@pytest.mark.parametrize("gt", ["C", "tie", "", None, 1, {"pref": "A"}])
def test_pairwise_bad_ground_truth(gt):
    with pytest.raises(ValueError):
        pairwise.compute_score("j", "<better>A</better>", gt)


GSM8K_CASES = [
    # (solution, ground_truth, mode, score, format_ok)
    ("3 + 4 = 7\n#### 7", "7", "strict", 1.0, 1.0),
    ("#### 18.00", "18", "strict", 1.0, 1.0),
    ("#### $18", "18", "strict", 1.0, 1.0),
    ("#### 1,234", "1234", "strict", 1.0, 1.0),
    ("#### 1234.", "1,234", "strict", 1.0, 1.0),
    ("#### -5", "-5", "strict", 1.0, 1.0),
    ("#### 5", "-5", "strict", 0.0, 1.0),
    ("#### 6 wait #### 7", "7", "strict", 1.0, 1.0),  # the last marker counts
    ("#### 7 wait #### 6", "7", "strict", 0.0, 1.0),
    ("The answer is 7", "7", "strict", 0.0, 0.0),  # no marker: strict finds nothing
    ("#### seven", "7", "strict", 0.0, 0.0),
    ("The answer is 7", "7", "flexible", 1.0, 1.0),
    ("1 then 2 then $1,234.", "1234", "flexible", 1.0, 1.0),
    ("it costs -3 dollars", "-3", "flexible", 1.0, 1.0),
    ("#### 7\nbut really 8", "7", "flexible", 0.0, 1.0),
    ("no number", "7", "flexible", 0.0, 0.0),
    # ground truth as a full GSM8K solution
    ("#### 72", "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n48+24 = <<48+24=72>>72\n#### 72", "strict", 1.0, 1.0),
    ("#### 1,000", "... #### 1000", "strict", 1.0, 1.0),
    ("#### 7", 7, "strict", 1.0, 1.0),
    # a wrong answer whose #### line reads as the reference's number: the line makes it an expression or another
    # magnitude, or a superscript makes it a power; the strict rule reads no number there
    ("#### 18 ** 2", "18", "strict", 0.0, 0.0),
    ("#### 18 \u2212 5", "18", "strict", 0.0, 0.0),
    ("#### 18 \u2013 5", "18", "strict", 0.0, 0.0),
    ("#### 18 \\div 5", "18", "strict", 0.0, 0.0),
    ("#### 18 times 5", "18", "strict", 0.0, 0.0),
    ("#### 18 plus 1", "18", "strict", 0.0, 0.0),
    ("#### 18 1/2", "18", "strict", 0.0, 0.0),
    ("#### 18 million", "18", "strict", 1.0, 1.0),  # a unit: GSM8K asks "how many million"
    ("#### 5 dozen", "5", "strict", 1.0, 1.0),
    ("#### 18 squared", "18", "strict", 0.0, 0.0),
    ("#### 13\u00b2", "132", "strict", 0.0, 0.0),
    ("#### 18 - that's it", "18", "strict", 1.0, 1.0),  # a dash before words is no operator
    ("#### 18 apples for 3 kids", "18", "strict", 1.0, 1.0),
]


@pytest.mark.parametrize("solution, gt, mode, score, fmt", GSM8K_CASES)
def test_gsm8k(solution, gt, mode, score, fmt):
    out = gsm8k.compute_score("openai/gsm8k", solution, gt, {}, mode=mode)
    assert list(out) == ["score", "acc", "format_ok"]
    assert out == {"score": score, "acc": score, "format_ok": fmt}


def test_gsm8k_default_mode_is_strict():
    assert gsm8k.compute_score("g", "The answer is 7", "7")["score"] == 0.0


@pytest.mark.parametrize("gt", ["seven", "", None, "#### x"])
def test_gsm8k_bad_ground_truth(gt):
    with pytest.raises(ValueError):
        gsm8k.compute_score("g", "#### 7", gt)


def test_gsm8k_bad_mode():
    with pytest.raises(ValueError):
        gsm8k.compute_score("g", "#### 7", "7", mode="lenient")


@pytest.mark.parametrize(
    "module",
    [
        "reward_fns.controls",
        "reward_fns.canaries",
        "reward_fns.guard",
        "reward_fns.redact",
        "reward_fns.judge_errors",
        "reward_fns.judge_options",
        "reward_fns.pointwise",
        "reward_fns.pairwise",
        "reward_fns.win_rates",
        "reward_fns.gsm8k",
        "reward_fns.parse",
        "reward_fns.verdicts",
        "reward_fns.judge_metrics",
        "reward_fns.llm_judge",
        "scripts.launch.judge_server",
    ],
)
def test_doc_examples(module):
    """The modules' >>> examples run as written."""
    import doctest
    import importlib

    failed, tried = doctest.testmod(importlib.import_module(module))
    assert (failed, tried > 0) == (0, True)


@pytest.mark.parametrize(
    "solution, gt, score, rule",
    [
        ("3 + 4 = 7\n#### 9", "7", 1.0, 0.0),  # format-only pays a well-formed wrong answer
        ("#### 7", "7", 1.0, 1.0),
        ("The answer is 7.", "7", 0.0, 0.0),  # ... and not a right one without the format
        ("#### seven", "7", 0.0, 0.0),
    ],
)
def test_format_only(solution, gt, score, rule):
    from reward_fns import controls

    assert controls.format_only("openai/gsm8k", solution, gt) == {"score": score, "rule_score": rule}


def test_random_reward_pays_half_whatever_the_answer_says():
    from reward_fns import controls

    paid = [controls.random_reward("openai/gsm8k", f"#### {i}", "7")["score"] for i in range(2000)]
    assert set(paid) == {0.0, 1.0} and 900 < sum(paid) < 1100
    assert controls.random_reward("x", "#### 7", "7", seed=1) == controls.random_reward("x", "#### 7", "7", seed=1)
    right = [controls.random_reward("x", "#### 7", "7", seed=s)["score"] for s in range(2000)]  # the right answer too
    assert 900 < sum(right) < 1100
