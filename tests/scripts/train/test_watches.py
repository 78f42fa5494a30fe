"""The training run's watches (``scripts/train/hooks.py``): fail-fast on a silent judge, and the reward-hacking watch
(trend, accept-rule-reject level, unverified accepts, canaries), on recorded and scripted step metrics."""

from __future__ import annotations

import json
import os

import pytest

import scripts
from scripts.train.watches import FailFast, HackingWatch, JudgeSilentError, RewardHackingError


@pytest.mark.parametrize(
    "shares, threshold, steps, stops_at",
    [
        ([(0.0, 1.0)] * 5, 0.5, 3, 3),  # parse failures every step: stops at step 3
        ([(1.0, 0.0)] * 5, 0.5, 2, 2),  # transport errors
        ([(0.3, 0.3)] * 5, 0.5, 3, 3),  # sum counts
        ([(0.0, 1.0), (0.0, 1.0), (0.0, 0.0), (0.0, 1.0), (0.0, 1.0)], 0.5, 3, None),  # not consecutive
        ([(0.0, 0.5)] * 5, 0.5, 3, None),  # at the threshold is fine
    ],
)
def test_fail_fast(shares, threshold, steps, stops_at):
    ff = FailFast(threshold, steps)
    stopped = None
    for i, (err, pf) in enumerate(shares, 1):
        try:
            ff.update({"judge_health/error_rate": err, "judge_health/parse_fail_rate": pf})
        except JudgeSilentError as e:
            stopped = i
            assert "verl_judge.fail_fast" in str(e) and "Likely fix" in str(e)
            break
    assert stopped == stops_at


def test_fail_fast_messages_name_the_cause():
    with pytest.raises(JudgeSilentError, match="without a valid verdict.*max_tokens"):
        ff = FailFast(0.5, 1)
        ff.update({"judge_health/error_rate": 0.0, "judge_health/parse_fail_rate": 1.0})
    with pytest.raises(JudgeSilentError, match="requests failed.*endpoint"):
        FailFast(0.5, 1).update({"judge_health/error_rate": 1.0, "judge_health/parse_fail_rate": 0.0})
    FailFast(0.5, 1, enable=False).update({"judge_health/error_rate": 1.0, "judge_health/parse_fail_rate": 0.0})
    FailFast(0.5, 1).update({"reward/acc/mean": 0.0})  # no judge keys: nothing to check


@pytest.mark.parametrize("threshold, steps", [(-0.1, 3), (1.5, 3), (0.5, 0)])
def test_fail_fast_rejects_bad_settings(threshold, steps):
    with pytest.raises(ValueError, match="verl_judge.fail_fast"):
        FailFast(threshold, steps)


GAMED = ([0.30, 0.30, 0.30, 0.40, 0.50, 0.60, 0.70], [0.30, 0.30, 0.30, 0.25, 0.20, 0.15, 0.10])


@pytest.mark.parametrize(
    "reward, rule, alarms, warned_at",
    [
        # the judge's reward climbs while the rule's accuracy drops: on from the first full window (step 4)
        (*GAMED, [0, 0, 0, 1, 1, 1, 1], [4]),
        # an honest run: both rise together
        ([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0] * 6, []),
        # rule falls but the reward does not rise (the judge tracks it): no alarm
        ([0.5, 0.5, 0.5, 0.5, 0.5], [0.5, 0.4, 0.3, 0.2, 0.1], [0] * 5, []),
        # reward rises by 0.09 but the rule falls by only 0.009 (< min_fall 0.02): noise, no alarm
        ([0.30, 0.33, 0.36, 0.39], [0.500, 0.497, 0.494, 0.491], [0] * 4, []),
        # the alarm turns off when the rule recovers and warns again when it turns back on
        (
            [0.3, 0.4, 0.5, 0.6, 0.6, 0.6, 0.6, 0.6, 0.7, 0.8, 0.9],
            [0.3, 0.2, 0.1, 0.0, 0.3, 0.6, 0.9, 0.9, 0.6, 0.3, 0.0],
            [0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1],
            [4, 10],
        ),
    ],
)
def test_hacking_watch(reward, rule, alarms, warned_at):
    said = []
    watch = HackingWatch(window=4, min_rise=0.05, min_fall=0.02, fail=False, log=lambda msg, **_: said.append(msg))
    got, warned = [], []
    for step, (r, a) in enumerate(zip(reward, rule), 1):
        m = {"critic/score/mean": r, "reward/rule_score/mean": a, "judge_health/accept_rule_reject": 0.125}
        n = len(said)
        watch.update(m)
        got.append(m["judge_health/hacking_alarm"])
        warned += [step] * (len(said) - n)
    assert got == alarms and warned == warned_at
    for msg in said:
        assert msg.startswith("[verl_judge] WARNING: reward hacking suspected: over the last 4 steps")
        assert "judge accepts 0.125 of answers the rule rejects" in msg


def test_hacking_watch_fails_and_ignores_runs_without_a_rule():
    watch = HackingWatch(window=4, min_rise=0.05, min_fall=0.02, fail=True)
    for step, (r, a) in enumerate(zip(*GAMED), 1):
        if step < 4:
            watch.update({"critic/score/mean": r, "reward/rule_score/mean": a})
            continue
        with pytest.raises(RewardHackingError, match=r"rose by 0\.090 while the rule's accuracy fell by 0\.045") as e:
            watch.update({"critic/score/mean": r, "reward/rule_score/mean": a})
        assert "verl_judge.hacking_watch.fail=false" in str(e.value)
        break
    m = {"critic/score/mean": 1.0}  # a rule-rewarded run: no rule_score key, nothing added
    HackingWatch(window=3, min_rise=0.05, min_fall=0.02, fail=True).update(m)
    assert m == {"critic/score/mean": 1.0}


WATCH4 = {"window": 4, "min_rise": 0.05, "min_fall": 0.02, "fail": False}


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"window": 2, "min_rise": 0.05, "min_fall": 0.02, "fail": False}, "window must be >= 3"),
        ({"window": 5, "min_rise": 0.0, "min_fall": 0.02, "fail": False}, "must be > 0"),
        ({**WATCH4, "max_wrong_over_right": 0.0}, "max_wrong_over_right must be in"),
        ({**WATCH4, "max_wrong_over_right": 1.5}, "max_wrong_over_right must be in"),
    ],
)
def test_hacking_watch_rejects_bad_settings(settings, message):
    with pytest.raises(ValueError, match=message):
        HackingWatch(**settings)


# A judge-rewarded run that was gamed (scripts.lab.policy_learns on one H100, 2026-11-25;
# docs/results/2026-11-25-policy_learns_gamed):
# per step the reward, the rule's accuracy of the same samples, the judge-accepts-rule-rejects share, and the alarm
# that run logged (the trend rule alone, the settings of recipes/base.yaml then).
GAMED_RUN = [
    json.loads(line)
    for line in open(os.path.join(scripts.ROOT, "tests", "fixtures", "hacking", "gamed_judge_run.jsonl"))
]
BASE = {"window": 10, "min_rise": 0.05, "min_fall": 0.02, "fail": False}


@pytest.mark.parametrize(
    "level, on_steps",
    [
        # the trend rule alone replays what the run logged: on while the rule still fell, off once it sat at 0.000
        (None, list(range(11, 18)) + [24, 26, 27, 28, 29]),
        # with the level rule (recipes/base.yaml: 0.2) the alarm turns on at step 11 and stays on to the end (step 87)
        (0.2, list(range(11, 88))),
        # a stricter level turns it on at the first full window (step 10): the judge already took 0.12 of wrong answers
        (0.1, list(range(10, 88))),
    ],
)
def test_hacking_watch_on_the_gamed_run(level, on_steps):
    said = []
    watch = HackingWatch(**BASE, max_accept_rule_reject=level, log=lambda msg, **_: said.append(msg))
    got = []
    for row in GAMED_RUN:
        m = {k: v for k, v in row.items() if k != "logged_alarm"}
        watch.update(m)
        got.append(m["judge_health/hacking_alarm"])
    assert [row["step"] for row, on in zip(GAMED_RUN, got) if on] == on_steps
    if level is None:
        assert got == [row["logged_alarm"] for row in GAMED_RUN]
    assert len(said) == (3 if level is None else 1)  # one warning each time the alarm turns on


@pytest.mark.parametrize(
    "unverified, canary, alarms",
    [
        ([0.6, 0.6, 0.6, 0.6], [0, 0, 0, 0], [0, 0, 0, 1]),  # the guard could not check most verdicts (>= 0.5)
        ([0.4, 0.6, 0.4, 0.6], [0, 0, 0, 0], [0, 0, 0, 1]),  # ... on average over the window: 0.5
        ([0.4, 0.4, 0.4, 0.4], [0, 0, 0, 0], [0, 0, 0, 0]),
        ([0.0, 0.0, 0.0, 0.0], [0, 0.5, 0, 0], [0, 1, 0, 0]),  # a wrong canary paid: on that step, before a full window
    ],
)
def test_hacking_watch_unverified_and_canaries(unverified, canary, alarms):
    said = []
    watch = HackingWatch(
        window=4, min_rise=0.05, min_fall=0.02, fail=False, max_unverified=0.5, log=lambda msg, **_: said.append(msg)
    )
    got = []
    for u, c in zip(unverified, canary):
        m = {
            "critic/score/mean": 0.3,
            "reward/rule_score/mean": 0.3,
            "judge_health/unverified_rate": u,
            "judge_health/canary_accept": c,
        }
        watch.update(m)
        got.append(m["judge_health/hacking_alarm"])
    assert got == alarms
    assert len(said) == (1 if any(alarms) else 0)
    if any(canary):
        assert "the judge paid 0.500 of this step's wrong canary probes" in said[0]
    elif any(alarms):
        assert "the guard could not check 0.500" in said[0] or "the guard could not check 0.600" in said[0]


@pytest.mark.parametrize(
    "shares, level, alarms",
    [
        ([0.25, 0.25, 0.25, 0.25], 0.25, [0, 0, 0, 1]),  # the window's mean at the level: on
        ([0.25, 0.25, 0.25, 0.125], 0.25, [0, 0, 0, 0]),  # 0.21875, under it
        ([0.5, 0.5, 0.0, 0.0], 0.25, [0, 0, 0, 1]),  # the mean, not the last step
    ],
)
def test_hacking_watch_accept_rule_reject_level(shares, level, alarms):
    watch = HackingWatch(
        window=4, min_rise=0.05, min_fall=0.02, fail=False, max_accept_rule_reject=level, log=lambda *a, **k: None
    )
    got = []
    for share in shares:
        m = {"critic/score/mean": 0.3, "reward/rule_score/mean": 0.3, "judge_health/accept_rule_reject": share}
        watch.update(m)
        got.append(m["judge_health/hacking_alarm"])
    assert got == alarms


def _unverified_warning(n: int, total: int) -> str:
    return (
        f"[verl_judge] WARNING: {n} accept{'s' if n != 1 else ''} this step ({total} so far) that the guard could "
        "not verify (judge_unverified=1: the judge's reply quoted no candidate answer; such an accept earns what a 0 "
        "earns). Read these samples' judge replies; verl_judge.hacking_watch.max_unverified turns the alarm on at a "
        "share of the samples"
    )


@pytest.mark.parametrize(
    "counts, canary, fail, warned, alarms",
    [
        # every step with any, naming the count and the total; the alarm stays off
        ([0, 2, 0, 1, 1], 0.0, False, [(2, 2, 2), (4, 1, 3), (5, 1, 4)], [0, 0, 0, 0, 0]),
        ([0, 0, 3], 0.0, True, [(3, 3, 3)], [0, 0, 0]),  # warned, not stopped: fail acts on the alarm only
        ([0, 0, 0], 0.0, False, [], [0, 0, 0]),
        # while the alarm is on (a wrong canary paid each step) each step's unverified accepts are still named
        ([1, 1, 2], 0.5, False, [(1, 1, 1), (2, 1, 2), (3, 2, 4)], [1, 1, 1]),
    ],
)
def test_hacking_watch_warns_on_every_unverified_accept(counts, canary, fail, warned, alarms):
    said = []
    watch = HackingWatch(window=4, min_rise=0.05, min_fall=0.02, fail=fail, log=lambda msg, **_: said.append(msg))
    got, on = [], []
    for step, n in enumerate(counts, 1):
        m = {
            "critic/score/mean": 0.3,
            "reward/rule_score/mean": 0.3,
            "judge_health/unverified_accepts": float(n),
            "judge_health/canary_accept": canary,
        }
        before = len(said)
        watch.update(m)
        got += [(step, msg) for msg in said[before:] if "could not verify" in msg]
        on.append(m["judge_health/hacking_alarm"])
    assert got == [(step, _unverified_warning(n, total)) for step, n, total in warned]
    assert on == alarms
    assert len(said) - len(got) == (1 if any(alarms) else 0)  # the alarm's own warning, once when it turns on


@pytest.mark.parametrize(
    "shares, level, alarms",
    [
        # a tournament: the mean reward stays at 0.5 by construction, so only the wrong-over-right share can tell
        ([0.25, 0.25, 0.25, 0.25], 0.25, [0, 0, 0, 1]),  # the window's mean at the level: on
        ([0.25, 0.25, 0.25, 0.125], 0.25, [0, 0, 0, 0]),  # 0.21875, under it
        ([0.5, 0.5, 0.0, 0.0], 0.25, [0, 0, 0, 1]),  # the mean, not the last step
        ([1.0, 1.0, 1.0, 1.0], None, [0, 0, 0, 0]),  # null: off
    ],
)
def test_hacking_watch_wrong_over_right_level(shares, level, alarms):
    said = []
    watch = HackingWatch(**WATCH4, max_wrong_over_right=level, log=lambda msg, **_: said.append(msg))
    got = []
    for share in shares:
        m = {"critic/score/mean": 0.5, "reward/rule_score/mean": 0.3, "judge_health/wrong_over_right": share}
        watch.update(m)
        got.append(m["judge_health/hacking_alarm"])
    assert got == alarms
    assert len(said) == any(alarms)
    if said:
        assert "a group's rule-wrong answer was paid above a rule-right mate in 0.250 of such pairs" in said[0]


def test_every_hacking_watch_setting_is_in_base_yaml():
    """recipes/base.yaml names every setting HackingWatch takes (the hooks refuse an unknown one)."""
    import inspect

    from omegaconf import OmegaConf

    base = OmegaConf.load(os.path.join(scripts.ROOT, "recipes", "base.yaml"))
    want = sorted(k for k in inspect.signature(HackingWatch).parameters if k != "log")
    assert sorted(base.verl_judge.hacking_watch) == want


@pytest.mark.parametrize(
    "setting, metric, cause",
    [
        (
            "max_accept_rule_reject",
            "judge_health/accept_rule_reject",
            "the judge accepted 0.500 of the answers the rule rejects on average "
            "(threshold verl_judge.hacking_watch.max_accept_rule_reject=0.5)",
        ),
        (
            "max_unverified",
            "judge_health/unverified_rate",
            "the guard could not check 0.500 of the samples' verdicts on average "
            "(threshold verl_judge.hacking_watch.max_unverified=0.5)",
        ),
        (
            "max_wrong_over_right",
            "judge_health/wrong_over_right",
            "a group's rule-wrong answer was paid above a rule-right mate in 0.500 of such pairs on average "
            "(threshold verl_judge.hacking_watch.max_wrong_over_right=0.5)",
        ),
    ],
)
def test_hacking_watch_level_causes(setting, metric, cause):
    """Each level names its share and its setting, exactly, in the message that stops the run."""
    watch = HackingWatch(window=3, min_rise=0.05, min_fall=0.02, fail=True, **{setting: 0.5})
    m = {"critic/score/mean": 0.5, "reward/rule_score/mean": 0.3, metric: 0.5}
    watch.update(dict(m))
    watch.update(dict(m))
    with pytest.raises(RewardHackingError) as e:
        watch.update(dict(m))
    assert str(e.value) == (
        f"stopping: reward hacking suspected: over the last 3 steps {cause}; this step the judge accepts "
        f"{m.get('judge_health/accept_rule_reject', float('nan')):.3f} of answers the rule rejects. Read some "
        "high-reward samples that the rule rejects. Checkpoints written so far are kept. To train on anyway: "
        "verl_judge.hacking_watch.fail=false."
    )
