"""reward_fns/judge_health.py: the judge-health step metrics of a pairwise judge's columns, exact values from small
batches of GRPO groups (the pointwise judge's: tests/scripts/train/test_train_hooks.py through hooks.reward_metrics)."""

from __future__ import annotations

import math

import pytest

from reward_fns.judge_health import columns, metrics

# two groups of four answers (pairwise_ref: each against the reference, both orders). Per answer: win share (-1: the
# fallback paid it), flip, tie, parse-failure and guarded shares, error, fallback, calls (0: the rule decided alone),
# seconds, the group's cycle share, the rule's grade and the score paid.
ROWS = [
    # wins flip tie  pf  guard err fb calls secs cycle rule score
    (1.0, 0, 0, 0.0, 0.0, 0, 0, 2, 0.5, 0.25, 1, 1.0),
    (0.5, 1, 1, 0.0, 0.0, 0, 0, 2, 0.25, 0.25, 0, 0.5),  # both orders named the same letter: flip and tie
    (0.5, 0, 1, 0.5, 0.0, 0, 0, 2, 0.25, 0.25, 0, 0.5),  # one order without a verdict: a tie, no flip
    (-1.0, 0, 0, 0.0, 0.0, 1, 1, 2, 1.0, 0.25, 1, 1.0),  # a failed call: the rule's grade as fallback
    (0.0, 0, 0, 0.0, 0.5, 0, 0, 2, 0.5, 0.0, 1, 0.0),  # a right answer the judge rejects; one verdict guarded
    (0.5, 1, 1, 0.0, 0.0, 0, 0, 2, 0.5, 0.0, 0, 0.5),
    (0.0, 0, 0, 0.0, 0.0, 0, 0, 0, 0.0, 0.0, 0, 0.0),  # decided by the rule: no call
    (1.0, 0, 0, 0.0, 0.0, 0, 0, 2, 0.25, 0.0, 1, 1.0),
]
NAMES = (
    "judge_wins judge_flip judge_tie judge_parse_fail judge_guarded judge_error judge_fallback judge_calls "
    "judge_seconds judge_cycle rule_score score"
).split()
UIDS = ["g1"] * 4 + ["g2"] * 4


def extras(rows=ROWS, names=NAMES, **more):
    out = {k: [r[j] for r in rows] for j, k in enumerate(names)}
    out.update(judge_abstained=[0.0] * len(rows), **more)
    return out


# the judge's behaviour over the 7 answers it was asked about; outcomes over all 8
HEALTH = {
    "flip_rate": 2 / 7,
    "tie_rate": 3 / 7,
    "parse_fail_rate": 0.5 / 7,
    "guarded_rate": 0.5 / 7,
    "error_rate": 1 / 8,
    "fallback_rate": 1 / 8,
    "abstained_rate": 0.0,
    "cycle_rate": 0.125,  # (0.25 + 0) / 2 groups
    "calls_per_group": 7.0,  # 14 calls / 2 groups
    "judge_seconds": 3.25,
    "wrong_over_right": 1 / 8,  # g2: the wrong 0.5 above the right 0.0; none in g1 (4 pairs each)
}
# over the 6 judged answers with a win share (not the fallback, not the rule's alone): accept = wins >= 0.5
AGREEMENT = {"agree_rule": 2 / 6, "accept_rule_reject": 3 / 6, "reject_rule_accept": 1 / 6}


@pytest.mark.parametrize(
    "ext, uids, want",
    [
        pytest.param(extras(), UIDS, {**HEALTH, **AGREEMENT}, id="pairwise_ref"),
        # win rates against group mates (the rows carry their group's cycle rate, a tournament's): no agreement
        pytest.param(extras(judge_group_cycle_rate=[0.25] * 4 + [0.0] * 4), UIDS, HEALTH, id="against mates"),
        # without uids: no groups; the cycle share averaged over answers
        pytest.param(
            extras(),
            None,
            {k: v for k, v in {**HEALTH, **AGREEMENT}.items() if k not in ("calls_per_group", "wrong_over_right")},
            id="no uids",
        ),
        # groups of 3 and 1: the cycle rate is a mean over groups (1 and 0), not over answers (3/4)
        pytest.param(
            {"judge_wins": [0.5, 0.5, 0.5, 1.0], "judge_cycle": [1.0, 1.0, 1.0, 0.0], "judge_calls": [2, 2, 2, 0]},
            ["a", "a", "a", "b"],
            {"cycle_rate": 0.5, "calls_per_group": 3.0},
            id="unequal groups",
        ),
        # scripts/train/group_reward.py's group key when the per-answer one is absent
        pytest.param(
            {"judge_wins": [0.5, 0.5, 0.5, 1.0], "judge_group_cycle_rate": [1 / 3, 1 / 3, 1 / 3, 0.0]},
            ["a", "a", "a", "b"],
            {"cycle_rate": 1 / 6},
            id="group key",
        ),
        # a key the reward does not return is not reported; a failed call is no win share: agreement over 2 of 3
        pytest.param(
            {"judge_wins": [1.0, -1.0, 0.0], "rule_score": [0.0, 1.0, 0.0]},
            ["a", "a", "a"],
            {"agree_rule": 0.5, "accept_rule_reject": 0.5, "reject_rule_accept": 0.0},
            id="few keys",
        ),
        # pairwise canaries: the same keys as the pointwise judge's
        pytest.param(
            {
                "judge_wins": [0.0, 1.0, 0.5, 0.0],
                "canary_wrong": [1, 1, 0, 0],
                "canary_wrong_accepted": [0, 1, 0, 0],
                "canary_right": [0, 0, 1, 0],
                "canary_right_rejected": [0, 0, 0, 0],
            },
            None,
            {"canary_accept": 0.5, "canary_accept_n": 2.0, "canary_reject": 0.0, "canary_reject_n": 1.0},
            id="canaries",
        ),
        # no judge's keys: nothing
        pytest.param({"score": [1.0, 0.0], "acc": [1.0, 0.0]}, ["a", "a"], {}, id="no judge"),
    ],
)
def test_pairwise_health(ext, uids, want):
    got = metrics(columns(ext), uids=uids)
    assert sorted(got) == sorted(f"judge_health/{k}" for k in want)
    for k, v in want.items():
        assert math.isclose(got[f"judge_health/{k}"], v, abs_tol=1e-12), (k, got[f"judge_health/{k}"], v)


def test_pairwise_columns_get_no_pointwise_metrics():
    """``judge_error`` and ``judge_parse_fail`` are in both judges' keys; the pairwise ones (``judge_wins``) decide:
    no verdict mean, answered or skipped rate from a win share."""
    got = metrics(columns(extras()), uids=UIDS)
    assert not {"score_mean", "answered_rate", "skipped_rate"} & {k.split("/")[1] for k in got}


@pytest.mark.parametrize(
    "score, rule, uids, extra, reading, want",
    [
        # g1: the wrong answer paid 1.0 above both right ones (0.0, 1.0 -> above 0.0 only): 1 of 2 pairs; g2: no pair
        ([1.0, 0.0, 1.0, 0.0, 0.0], [0.0, 1.0, 1.0, 0.0, 0.0], ["g1", "g1", "g1", "g2", "g2"], {}, None, 0.5),
        ([0.0, 1.0, 1.0], [0.0, 1.0, 1.0], ["g", "g", "g"], {}, None, 0.0),  # a truthful judge
        # no (wrong, right) pair on the step: not reported, so the watch's window averages the steps that had one
        ([0.0, 0.0], [1.0, 1.0], ["g", "g"], {}, None, None),
        ([1.0, 0.0], [0.0, 1.0], ["a", "b"], {}, None, None),  # groups of one
        ([1.0, 0.0], [0.0, 1.0], None, {}, None, None),  # no groups: not reported
        # an abstained right answer (paid 0, out of its group and the loss) is no pair: 0, not 1/4
        ([0.0, 0.5, 1.0, 0.0], [1.0, 0.0, 1.0, 0.0], ["g"] * 4, {"judge_abstained": [1, 0, 0, 0]}, None, 0.0),
        # route mode: the flexible reading, not the strict rule (sample 1 right by it, paid 0.5 below wrong sample 2)
        ([1.0, 0.5, 1.0], [1.0, 0.0, 0.0], ["g"] * 3, {}, [1.0, 1.0, 0.0], 0.5),
        ([1.0, 0.5, 1.0], [1.0, 0.0, 0.0], ["g"] * 3, {}, [1.0, float("nan"), 0.0], 0.0),  # NaN: left out
    ],
)
def test_wrong_over_right(score, rule, uids, extra, reading, want):
    """Both kinds' steps get ``wrong_over_right`` (the pointwise judge's here), so they can be compared."""
    n = len(score)
    ext = {"score": score, "judge_score": [4 * s for s in score], "judge_error": [0] * n, "judge_parse_fail": [0] * n}
    got = metrics(columns({**ext, "rule_score": rule, **extra}), reading=reading, uids=uids)
    assert got.get("judge_health/wrong_over_right") == want
