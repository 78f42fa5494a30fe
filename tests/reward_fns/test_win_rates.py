"""The pairwise arithmetic (``reward_fns.win_rates``) alone (``comparisons``, ``win_rates``): win rates, flip,
tie and cycle rates from given verdicts, no judge and no server; a verdict the guard voided is a loss for the answer
it picked alone, a failed comparison counts for neither answer, and two right answers tie.
"""

from __future__ import annotations

import pytest

from reward_fns.win_rates import FAILED, REFUSED, comparisons, win_rates
from tests.reward_fns.test_pairwise_judge import rounded

PURE = {
    "both orders say A (position)": (2, "all_pairs", {(0, 1): "A", (1, 0): "A"}, None,
        dict(win_rate=[0.5, 0.5], flip=[1.0, 1.0], tie=[1.0, 1.0], parse_fail=[0.0, 0.0], flip_rate=1.0, tie_rate=1.0)),
    "consistent": (2, "all_pairs", {(0, 1): "A", (1, 0): "B"}, None,
        dict(win_rate=[1.0, 0.0], flip=[0.0, 0.0], tie=[0.0, 0.0], parse_fail=[0.0, 0.0], flip_rate=0.0, tie_rate=0.0)),
    "one order without a verdict": (2, "all_pairs", {(0, 1): None, (1, 0): "B"}, None,
        dict(win_rate=[0.5, 0.0], flip=[0.0, 0.0], tie=[1.0, 0.0], parse_fail=[0.5, 0.5], error=[0.0, 0.0],
             flip_rate=0.0, tie_rate=0.5)),
    "one order refused": (2, "all_pairs", {(0, 1): REFUSED, (1, 0): "B"}, None,
        dict(win_rate=[0.5, 0.0], parse_fail=[0.0, 0.0], error=[1.0, 1.0], failed=[False, False])),
    "one order failed": (2, "all_pairs", {(0, 1): FAILED, (1, 0): "B"}, None,
        dict(win_rate=[1.0, 0.0], played=[1, 1], error=[1.0, 1.0], failed=[False, False], tie_rate=0.0)),
    "both orders failed": (2, "all_pairs", {(0, 1): FAILED, (1, 0): FAILED}, None,
        dict(win_rate=[None, None], played=[0, 0], error=[1.0, 1.0], failed=[True, True])),
    "one failed in four: the others' win rates": (4, "circular",
        {(0, 1): "A", (1, 0): "B", (1, 2): FAILED, (2, 1): "A", (2, 3): "A", (3, 2): "B", (3, 0): "B", (0, 3): "A"},
        None, dict(win_rate=[1.0, 0.0, 1.0, 0.0], played=[4, 3, 3, 4], error=[0.0, 1.0, 1.0, 0.0],
                   failed=[False] * 4)),
    "decided by the rule": (2, "all_pairs", {}, {(0, 1): "B", (1, 0): "A"},
        dict(win_rate=[0.0, 1.0], calls=[0, 0], flip_rate=0.0, tie_rate=0.0, parse_fail=[0.0, 0.0])),
    "a cycle, circular over 3": (3, "circular",
        {(0, 1): "A", (1, 0): "B", (1, 2): "A", (2, 1): "B", (2, 0): "A", (0, 2): "B"}, None,
        dict(win_rate=[0.5] * 3, cycle_rate=1.0, triples_decided=1, cycles=1, calls=[2, 2, 2])),
    "transitive, circular over 3": (3, "circular",
        {(0, 1): "A", (1, 0): "B", (1, 2): "A", (2, 1): "B", (2, 0): "B", (0, 2): "A"}, None,
        dict(win_rate=[1.0, 0.5, 0.0], cycle_rate=0.0, triples_decided=1, cycles=0)),
    "a split pair leaves its triple undecided": (3, "circular",
        {(0, 1): "A", (1, 0): "B", (1, 2): "A", (2, 1): "B", (2, 0): "A", (0, 2): "A"}, None,
        dict(win_rate=[0.75, 0.5, 0.25], cycle_rate=0.0, triples_decided=0, flip_rate=1 / 3)),
}  # fmt: skip


def answers(n: int) -> list[str]:
    """``n`` answers with different final answers (flips and splits count only between those)."""
    return [f"#### {i}" for i in range(n)]


@pytest.mark.parametrize("n, scheme, verdicts, decided, expected", PURE.values(), ids=PURE.keys())
def test_tournament_arithmetic(n, scheme, verdicts, decided, expected):
    t = win_rates(answers(n), verdicts, scheme, decided)
    assert rounded({k: t[k] for k in expected}) == rounded(expected)


@pytest.mark.parametrize(
    "n, scheme, expected",
    [
        (0, "circular", []),
        (1, "circular", []),
        (1, "all_pairs", []),
        (2, "circular", [(0, 1), (1, 0)]),
        (3, "all_pairs", [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]),
        (4, "circular", [(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2), (3, 0), (0, 3)]),
    ],
)
def test_comparisons(n, scheme, expected):
    assert comparisons(n, scheme) == expected
    assert len(comparisons(8, "circular")) == 16 and len(comparisons(8, "all_pairs")) == 56


@pytest.mark.parametrize(
    "verdicts, decided, scheme, match",
    [
        ({(0, 1): "A"}, None, "all_pairs", "each comparison"),  # (1, 0) missing
        ({(0, 1): "A", (1, 0): "A", (0, 2): "A"}, None, "all_pairs", "each comparison"),  # not in the plan
        ({(0, 1): "A", (1, 0): "A"}, {(0, 1): "A"}, "all_pairs", "each comparison"),  # in both
        ({(0, 1): "C", (1, 0): "A"}, None, "all_pairs", "unknown verdicts"),
        ({(0, 1): "A"}, {(1, 0): None}, "all_pairs", "unknown verdicts"),  # the rule always decides
        ({(0, 1): "A", (1, 0): "A"}, None, "knockout", "scheme must be"),
    ],
)
def test_tournament_refuses_incomplete_or_unknown_verdicts(verdicts, decided, scheme, match):
    with pytest.raises(ValueError, match=match):
        win_rates(["x", "y"], verdicts, scheme, decided)


# (verdicts, voided, expected): a voided verdict is a loss for the answer it picked and no loss for the other; its
# letter still counts for the flip
VOIDED = {
    "one order voided": ({(0, 1): "A", (1, 0): "B"}, [(0, 1)],
        dict(win_rate=[0.5, 0.0], guarded=[0.5, 0.5], parse_fail=[0.0, 0.0], flip=[0.0, 0.0], tie=[1.0, 0.0])),
    "both orders voided, same letter": ({(0, 1): "A", (1, 0): "A"}, [(0, 1), (1, 0)],
        dict(win_rate=[0.0, 0.0], guarded=[1.0, 1.0], flip=[1.0, 1.0], tie=[0.0, 0.0], flip_rate=1.0, tie_rate=0.0)),
    "nothing voided": ({(0, 1): "A", (1, 0): "A"}, [],
        dict(win_rate=[0.5, 0.5], guarded=[0.0, 0.0], flip=[1.0, 1.0], tie=[1.0, 1.0])),
    "the picked answer's voided win costs its mate nothing": ({(0, 1): "A", (1, 0): "A"}, [(0, 1)],
        dict(win_rate=[0.0, 1.0], played=[2, 1], guarded=[0.5, 0.5], flip=[1.0, 1.0])),
}  # fmt: skip


@pytest.mark.parametrize("verdicts, voided, expected", VOIDED.values(), ids=VOIDED.keys())
def test_a_voided_verdict_is_a_loss_for_the_answer_picked(verdicts, voided, expected):
    t = win_rates(answers(2), verdicts, "all_pairs", None, voided)
    assert rounded({k: t[k] for k in expected}) == rounded(expected)


# (texts, verdicts, ties, expected): two answers with the reference's final answer tie: a win for both, whatever the
# letters; flips and splits count only between answers whose final answers differ
TIES = {
    "right vs right, always A": (["#### 18", "The answer is 18."], {(0, 1): "A", (1, 0): "A"}, [(0, 1), (1, 0)],
        dict(win_rate=[1.0, 1.0], flip=[0.0, 0.0], tie=[0.0, 0.0], flip_rate=0.0, tie_rate=0.0)),
    "right vs right, one order tied": (["#### 18", "#### 18"], {(0, 1): "B", (1, 0): None}, [(0, 1)],
        dict(win_rate=[0.5, 0.5], parse_fail=[0.5, 0.5], flip_rate=0.0)),
    "three right, circular: no mate decides a rate": (["#### 18"] * 3,
        {p: "A" for p in comparisons(3, "circular")}, comparisons(3, "circular"),
        dict(win_rate=[1.0] * 3, cycle_rate=0.0, triples_decided=0)),
}  # fmt: skip


@pytest.mark.parametrize("texts, verdicts, ties, expected", TIES.values(), ids=TIES.keys())
def test_two_right_answers_tie(texts, verdicts, ties, expected):
    t = win_rates(texts, verdicts, "all_pairs" if len(texts) == 2 else "circular", None, (), ties)
    assert rounded({k: t[k] for k in expected}) == rounded(expected)


@pytest.mark.parametrize(
    "voided, ties",
    [([(0, 1)], []), ([(0, 2)], []), ([], [(0, 1)]), ([(1, 0)], [(1, 0)])],
)
def test_only_a_judged_verdict_a_or_b_can_be_voided_or_tied(voided, ties):
    with pytest.raises(ValueError, match="must name judged comparisons"):
        win_rates(["x", "y"], {(0, 1): None, (1, 0): "A"}, "all_pairs", None, voided, ties)
