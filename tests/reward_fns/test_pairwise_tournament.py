"""The tournament arithmetic of ``reward_fns.pairwise_judge`` alone (``comparisons``, ``tournament``): win rates, flip,
tie and cycle rates from given verdicts, no judge and no server; a verdict the guard voided gives no win.
"""

from __future__ import annotations

import pytest

from reward_fns.pairwise_judge import FAILED, REFUSED, comparisons, tournament
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
        dict(win_rate=[None, None], played=[1, 1], error=[1.0, 1.0], failed=[True, True], tie_rate=0.0)),
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


@pytest.mark.parametrize("n, scheme, verdicts, decided, expected", PURE.values(), ids=PURE.keys())
def test_tournament_arithmetic(n, scheme, verdicts, decided, expected):
    t = tournament(["x"] * n, verdicts, scheme, decided)
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
        tournament(["x", "y"], verdicts, scheme, decided)


# (verdicts, voided, expected): a voided verdict is a loss for both answers; its letter still counts for the flip
VOIDED = {
    "one order voided": ({(0, 1): "A", (1, 0): "B"}, [(0, 1)],
        dict(win_rate=[0.5, 0.0], guarded=[0.5, 0.5], parse_fail=[0.0, 0.0], flip=[0.0, 0.0], tie=[1.0, 0.0])),
    "both orders voided, same letter": ({(0, 1): "A", (1, 0): "A"}, [(0, 1), (1, 0)],
        dict(win_rate=[0.0, 0.0], guarded=[1.0, 1.0], flip=[1.0, 1.0], tie=[0.0, 0.0], flip_rate=1.0, tie_rate=0.0)),
    "nothing voided": ({(0, 1): "A", (1, 0): "A"}, [],
        dict(win_rate=[0.5, 0.5], guarded=[0.0, 0.0], flip=[1.0, 1.0], tie=[1.0, 1.0])),
}  # fmt: skip


@pytest.mark.parametrize("verdicts, voided, expected", VOIDED.values(), ids=VOIDED.keys())
def test_a_voided_verdict_gives_no_win(verdicts, voided, expected):
    t = tournament(["x", "y"], verdicts, "all_pairs", None, voided)
    assert rounded({k: t[k] for k in expected}) == rounded(expected)


@pytest.mark.parametrize("voided", [[(0, 1)], [(0, 2)]])
def test_only_a_judged_verdict_a_or_b_can_be_voided(voided):
    with pytest.raises(ValueError, match="voided must name"):
        tournament(["x", "y"], {(0, 1): None, (1, 0): "A"}, "all_pairs", None, voided)
