"""scripts/lab/scorecard_stats.py on known grades: the pooled point values, the bootstrap over instances, then
seeds, then questions, and each target's verdict (given only when the rule itself learned; a judge-rewarded arm's
mean and lower bound, a control's upper bound). Every number is exact: the bootstrap is seeded (``seed=0``)."""

from __future__ import annotations

import numpy as np
import pytest

from scripts.lab.scorecard_stats import TARGETS, Instance, bootstrap, rule_learned, verdict

ONES, ZEROS = np.ones, np.zeros


def _inst(before, **after) -> Instance:
    return Instance(np.array(before, dtype=float), {arm: np.array(a, dtype=float) for arm, a in after.items()})


def _learns(n_q: int, learned: int, n_seeds: int = 1) -> np.ndarray:
    """``n_seeds`` rows of ``n_q`` grades from a start of all wrong: the first ``learned`` questions right."""
    row = [1.0] * learned + [0.0] * (n_q - learned)
    return np.array([row] * n_seeds)


def _lost(n_q: int, lost: int) -> np.ndarray:
    """One row of ``n_q`` grades from a start of all right: the first ``lost`` questions now wrong."""
    return np.array([[0.0] * lost + [1.0] * (n_q - lost)])


def test_pooled_point_values_are_the_mean_of_the_instances():
    """Instance A: 4 questions x 2 seeds; B: 2 questions x 1 seed. The pooled gain is the mean of the two instances'
    gains (each instance weighs the same, whatever its number of questions): rule (1 + 0) / 2, judge (0.75 + 0.5) /
    2, random (0 - 0.5) / 2; the ratios are the pooled gains' (0.625 / 0.5, -0.25 / 0.5)."""
    a = _inst(
        [0, 0, 0, 0],
        rule=[[1, 1, 1, 1], [1, 1, 1, 1]],
        judge=[[1, 1, 0, 0], [1, 1, 1, 1]],
        random=[[0, 0, 0, 0], [0, 0, 0, 0]],
    )
    b = _inst([1, 0], rule=[[1, 0]], judge=[[1, 1]], random=[[0, 0]])
    assert [a.gain(x) for x in ("rule", "judge", "random")] == [1.0, 0.75, 0.0]
    assert [b.gain(x) for x in ("rule", "judge", "random")] == [0.0, 0.5, -0.5]
    s = bootstrap([a, b], ["rule", "judge", "random"], n=200)
    assert {arm: g["mean"] for arm, g in s["gain"].items()} == {"rule": 0.5, "judge": 0.625, "random": -0.25}
    assert {arm: r["mean"] for arm, r in s["ratio"].items()} == {"judge": 1.25, "random": -0.5}
    assert s["bootstrap"] == 200 and list(s["ratio"]) == ["judge", "random"]


@pytest.mark.parametrize("copies", [1, 2, 3])
def test_interval_when_every_resample_is_the_same(copies):
    """Every question gains the same on every seed (rule and judge 0 -> 1, random stays 0), in 1, 2 or 3 identical
    instances: every resample gives the same numbers, so each interval is one point, lo == hi exactly."""
    inst = _inst([0, 0, 0, 0], rule=ONES((2, 4)), judge=ONES((2, 4)), random=ZEROS((2, 4)))
    s = bootstrap([inst] * copies, ["rule", "judge", "random"], n=300)
    assert s["gain"] == {
        "rule": {"mean": 1.0, "lo": 1.0, "hi": 1.0},
        "judge": {"mean": 1.0, "lo": 1.0, "hi": 1.0},
        "random": {"mean": 0.0, "lo": 0.0, "hi": 0.0},
    }
    assert s["ratio"] == {
        "judge": {"mean": 1.0, "lo": 1.0, "hi": 1.0, "dropped": 0},
        "random": {"mean": 0.0, "lo": 0.0, "hi": 0.0, "dropped": 0},
    }
    assert [verdict(s, arm)[0] for arm in ("judge", "random")] == ["met", "met"]


NOT_ABOVE_0 = "its interval is not above 0, so no ratio to it means anything (no verdict)"


def test_a_negative_rule_gain_gives_no_verdict():
    """The rule loses 20 of 200 questions (-0.10) and the judge 19 (-0.095): their ratio would be 0.95, above the
    judge's target. Every resample's rule gain is below 0, so no ratio is drawn (all 2000 dropped), the point ratio
    is None, and the verdict is "no verdict", never "met"."""
    s = bootstrap([_inst(ONES(200), rule=_lost(200, 20), judge=_lost(200, 19))], ["rule", "judge"])
    assert s["gain"] == {
        "rule": {"mean": -0.1, "lo": -0.145, "hi": -0.06},
        "judge": {"mean": -0.095, "lo": -0.14, "hi": -0.06},
    }
    assert s["ratio"] == {"judge": {"mean": None, "lo": None, "hi": None, "dropped": 2000}}
    assert rule_learned(s) == (False, f"rule gain -0.100 (95% interval -0.145 to -0.060): {NOT_ABOVE_0}")
    assert verdict(s, "judge") == (
        "no verdict",
        "judge gain / rule gain n/a (95% interval n/a to n/a): no verdict (rule gain -0.100 (95% interval -0.145 to "
        f"-0.060): {NOT_ABOVE_0})",
    )


def test_a_near_zero_rule_gain_gives_no_verdict_and_counts_what_it_dropped():
    """The rule and the judge learn the same 1 question of 200 (0.005): every kept resample's ratio is exactly 1, an
    interval that alone would meet the judge's target. But the rule's own interval reaches 0 (a resample that misses
    the question gains nothing: 703 of the 2000, counted in ``dropped``, about 2000 * 0.995^200 = 734), so: no
    verdict."""
    s = bootstrap([_inst(ZEROS(200), rule=_learns(200, 1), judge=_learns(200, 1))], ["rule", "judge"])
    assert s["gain"]["rule"] == {"mean": 0.005, "lo": 0.0, "hi": 0.015}
    assert s["ratio"] == {"judge": {"mean": 1.0, "lo": 1.0, "hi": 1.0, "dropped": 703}}
    assert rule_learned(s) == (False, f"rule gain 0.005 (95% interval 0.000 to 0.015): {NOT_ABOVE_0}")
    assert verdict(s, "judge") == (
        "no verdict",
        f"judge gain / rule gain 1.000 (95% interval 1.000 to 1.000): no verdict (rule gain 0.005 (95% interval 0.000 "
        f"to 0.015): {NOT_ABOVE_0})",
    )
    # the same ratios with the rule's interval above 0 and nothing dropped would be met: only the rule's gain differs
    learned = {**s, "gain": {**s["gain"], "rule": {"mean": 0.5, "lo": 0.4, "hi": 0.6}}}
    learned["ratio"] = {"judge": {**s["ratio"]["judge"], "dropped": 0}}
    assert verdict(learned, "judge")[0] == "met"


@pytest.mark.parametrize(
    "rule, learned, word, rule_line, line",
    [
        # 20 questions; the rule learns 15 (0.75, interval 0.55 to 0.9: it learned), random all 20: it beats the rule
        (15, 20, "NOT met", "0.750 (95% interval 0.550 to 0.900)", "1.333 (95% interval 1.111 to 1.818)"),
        # the rule learns every one (1.0, an interval of one point); random all 20: as good as the rule
        (20, 20, "NOT met", "1.000 (95% interval 1.000 to 1.000)", "1.000 (95% interval 1.000 to 1.000)"),
        (20, 0, "met", "1.000 (95% interval 1.000 to 1.000)", "0.000 (95% interval 0.000 to 0.000)"),
    ],
)
def test_a_control_that_learns_with_the_rule_is_not_met(rule, learned, word, rule_line, line):
    s = bootstrap([_inst(ZEROS(20), rule=_learns(20, rule), random=_learns(20, learned))], ["rule", "random"])
    assert rule_learned(s) == (True, f"rule gain {rule_line}")
    assert verdict(s, "random") == (word, f"random gain / rule gain {line}: target upper bound <= 0.3")


SPANS = "target upper bound <= 0.3: no verdict (its interval spans 0.3)"


@pytest.mark.parametrize(
    "learned, line",
    [
        (10, f"0.500 (95% interval 0.299 to 0.700): {SPANS}"),  # 10 of 20: its lower bound 0.299 is not above 0.3
        (6, f"0.300 (95% interval 0.100 to 0.500): {SPANS}"),  # 6 of 20: the mean at the target, the interval over
    ],
)
def test_a_control_whose_interval_spans_its_target_has_no_verdict(learned, line):
    s = bootstrap([_inst(ZEROS(20), rule=_learns(20, 20), random=_learns(20, learned))], ["rule", "random"])
    assert verdict(s, "random") == ("no verdict", f"random gain / rule gain {line}")


def _stats(arm: str, mean, lo, hi, dropped: int = 0, n: int = 2000, rule=(0.5, 0.4, 0.6)) -> dict:
    """A hand-made ``bootstrap`` result: the rule's gain (mean, lo, hi) and ``arm``'s ratio."""
    gain = {"rule": dict(zip(("mean", "lo", "hi"), rule))}
    return {"gain": gain, "ratio": {arm: {"mean": mean, "lo": lo, "hi": hi, "dropped": dropped}}, "bootstrap": n}


RULE = "rule gain 0.500 (95% interval 0.400 to 0.600)"
JUDGE = "target mean >= 0.9 and lower bound >= 0.8"


@pytest.mark.parametrize(
    "stats, arm, word, why",
    [
        # a control is judged on its interval, not its mean: a mean of 0.2 whose interval reaches 0.632
        (_stats("random", 0.2, -0.636, 0.632), "random", "no verdict", SPANS),
        (_stats("format", 0.2, -0.636, 0.3), "format", "met", "target upper bound <= 0.3"),  # the bound is <=
        (_stats("random", 0.2, -0.636, 0.301), "random", "no verdict", SPANS),
        (_stats("random", 0.5, 0.3, 0.7), "random", "no verdict", SPANS),  # lower bound at the target: not above
        (_stats("random", 0.5, 0.301, 0.7), "random", "NOT met", "target upper bound <= 0.3"),
        # the pairwise arms have the judge's target
        (_stats("pairwise_ref", 0.2, 0.1, 0.3), "pairwise_ref", "NOT met", JUDGE),
        (_stats("tournament", 0.04, 0.0, 0.1), "tournament", "NOT met", JUDGE),
        (_stats("tournament", 0.95, 0.85, 1.0), "tournament", "met", JUDGE),
        # more than 2.5% of the resamples without a rule gain above 0: no verdict, though the rule's interval is above
        # 0 (at 2,000 resamples such an interval drops at most 50; at 1,999 it may drop 50)
        (
            _stats("judge", 0.95, 0.85, 1.0, dropped=51),
            "judge",
            "no verdict",
            "no verdict (51 of 2000 resamples had no rule gain above 0, over 2.5%)",
        ),
        (_stats("judge", 0.95, 0.85, 1.0, dropped=50), "judge", "met", JUDGE),
        (
            _stats("judge", 0.95, 0.85, 1.0, dropped=50, n=1999),
            "judge",
            "no verdict",
            "no verdict (50 of 1999 resamples had no rule gain above 0, over 2.5%)",
        ),
    ],
)
def test_verdict_on_hand_made_stats(stats, arm, word, why):
    r = stats["ratio"][arm]
    line = f"{arm} gain / rule gain {r['mean']:.3f} (95% interval {r['lo']:.3f} to {r['hi']:.3f}): {why}"
    assert rule_learned(stats) == (True, RULE)
    assert verdict(stats, arm) == (word, line)


@pytest.mark.parametrize(
    "n_q, learned, word, interval",
    [
        # 9 of 10: mean 0.9 meets the mean, upper bound 1.0 >= 0.8, lower bound 0.7 < 0.8: NOT met
        (10, 9, "NOT met", "0.900 (95% interval 0.700 to 1.000)"),
        # 38 of 40: mean 0.95, lower bound 0.875 >= 0.8: met
        (40, 38, "met", "0.950 (95% interval 0.875 to 1.000)"),
    ],
)
@pytest.mark.parametrize("arm", ["judge", "route", "pairwise_ref", "tournament"])
def test_a_judge_verdict_reads_the_lower_bound(arm, n_q, learned, word, interval):
    assert TARGETS[arm] == (0.9, 0.8)  # every judge-rewarded arm's, the pairwise ones' too
    s = bootstrap([_inst(ZEROS(n_q), rule=_learns(n_q, n_q), **{arm: _learns(n_q, learned)})], ["rule", arm])
    assert verdict(s, arm) == (
        word,
        f"{arm} gain / rule gain {interval}: target mean >= 0.9 and lower bound >= 0.8",
    )


def test_resampling_instances_spans_an_instance_that_learns_and_one_that_does_not():
    """Within each instance every resample is the same (A: the judge learns as the rule does, ratio 1; B: it learns
    nothing, ratio 0). Only instances differ, so only resampling them moves the pooled ratio: 0, 0.5 or 1 (both B,
    one each, both A; a chance of 1/4, 1/2, 1/4), whose 2.5% and 97.5% points are 0 and 1."""
    a = _inst(ZEROS(4), rule=ONES((2, 4)), judge=ONES((2, 4)))
    b = _inst(ZEROS(4), rule=ONES((2, 4)), judge=ZEROS((2, 4)))
    assert bootstrap([a], ["rule", "judge"], n=300)["ratio"]["judge"] == {
        "mean": 1.0,
        "lo": 1.0,
        "hi": 1.0,
        "dropped": 0,
    }
    assert bootstrap([b], ["rule", "judge"], n=300)["ratio"]["judge"] == {
        "mean": 0.0,
        "lo": 0.0,
        "hi": 0.0,
        "dropped": 0,
    }
    s = bootstrap([a, b], ["rule", "judge"])
    assert s["gain"]["judge"] == {"mean": 0.5, "lo": 0.0, "hi": 1.0}
    assert s["ratio"]["judge"] == {"mean": 0.5, "lo": 0.0, "hi": 1.0, "dropped": 0}
    assert verdict(s, "judge") == (
        "NOT met",
        "judge gain / rule gain 0.500 (95% interval 0.000 to 1.000): target mean >= 0.9 and lower bound >= 0.8",
    )


def _seeds_then_questions(inst: Instance, arms: list[str], n: int, seed: int) -> dict:
    """The bootstrap of one instance written out: each resample draws its seeds, then its questions."""
    rng = np.random.default_rng(seed)
    n_seeds, n_q = inst.after[arms[0]].shape
    draws = {arm: [] for arm in arms}
    for _ in range(n):
        s_idx, q_idx = rng.integers(0, n_seeds, n_seeds), rng.integers(0, n_q, n_q)
        for arm in arms:
            draws[arm].append(inst.gain(arm, s_idx, q_idx))
    rule = np.array(draws["rule"])
    ratio = {arm: np.array(draws[arm])[rule > 0] / rule[rule > 0] for arm in arms if arm != "rule"}
    return {
        "gain": {arm: [float(x) for x in np.percentile(v, [2.5, 97.5])] for arm, v in draws.items()},
        "ratio": {arm: [float(x) for x in np.percentile(v, [2.5, 97.5])] for arm, v in ratio.items()},
        "dropped": int((rule <= 0).sum()),
    }


@pytest.mark.parametrize("seed", [0, 7])
def test_one_instance_resampling_is_the_identity(seed):
    """With one instance, the bootstrap is seeds then questions alone: the same draws, the same intervals, as
    resampling without the instance level (no draw spent on it)."""
    inst = _inst(
        [0, 1, 0, 0, 1, 0],
        rule=[[1, 1, 1, 0, 1, 0], [1, 1, 0, 1, 1, 1], [0, 1, 1, 0, 1, 0]],
        judge=[[1, 0, 1, 0, 1, 0], [1, 1, 1, 1, 1, 0], [0, 1, 0, 0, 1, 0]],
        random=[[0, 1, 0, 0, 0, 1], [0, 1, 0, 1, 1, 0], [1, 1, 0, 0, 0, 0]],
    )
    arms = ["rule", "judge", "random"]
    s = bootstrap([inst], arms, n=500, seed=seed)
    want = _seeds_then_questions(inst, arms, 500, seed)
    assert {arm: [g["lo"], g["hi"]] for arm, g in s["gain"].items()} == want["gain"]
    assert {arm: [r["lo"], r["hi"]] for arm, r in s["ratio"].items()} == want["ratio"]
    assert s["ratio"]["judge"]["dropped"] == want["dropped"] > 0


@pytest.mark.parametrize(
    "judge, point, lo, hi",
    [
        ([[1, 1, 1, 1], [1, 1, 1, 1]], 1.0, 1.0, 1.0),  # the judge teaches as the rule does, on every seed and question
        ([[1, 1, 1, 1], [0, 0, 0, 0]], 0.5, 0.0, 1.0),  # one seed learns, one does not: resampled seeds: 0, 0.5 or 1
        ([[0, 0, 0, 0], [0, 0, 0, 0]], 0.0, 0.0, 0.0),
    ],
)
def test_one_instance_seeds(judge, point, lo, hi):
    s = bootstrap([_inst(ZEROS(4), rule=ONES((2, 4)), judge=judge)], ["rule", "judge"], n=500)
    assert s["ratio"]["judge"] == {"mean": point, "lo": lo, "hi": hi, "dropped": 0} and s["bootstrap"] == 500


def test_interval_is_the_central_95_percent():
    """40 seeds, the judge learns on every other one: resampled seeds make the ratio a Binomial(40, 1/2) / 40, whose
    2.5% and 97.5% points are 14/40 and 26/40 (the 5% and 95% points would be 15/40 and 25/40)."""
    judge = np.array([[float(s % 2 == 0)] * 4 for s in range(40)])
    s = bootstrap([_inst(ZEROS(4), rule=ONES((40, 4)), judge=judge)], ["rule", "judge"], n=4000)
    r = s["ratio"]["judge"]
    assert (r["mean"], r["lo"], r["hi"]) == (0.5, 0.35, 0.65)


def test_no_rule_arm_no_ratio():
    s = bootstrap([_inst(ZEROS(2), judge=ONES((1, 2)))], ["judge"], n=50)
    assert s["ratio"] == {} and rule_learned(s) == (False, "no rule arm: no ratio")
    assert verdict(s, "judge") == ("no target", "judge: no target")
