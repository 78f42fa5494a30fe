"""scripts/train/hooks.py: step metrics, fail-fast, pair groups, pair sampler; and their wiring into
verl's legacy trainer module (the functions verl's ``fit()`` calls are the patched ones)."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
import torch

import scripts
from scripts.train.hooks import (
    FailFast,
    HackingWatch,
    JudgeSilentError,
    PairSampler,
    RewardHackingError,
    identical_group_share,
    install,
    pair_ids,
    reward_metrics,
)

JUDGE = dict(
    judge_error=[0, 1, 0, 0],
    judge_parse_fail=[0, 0, 1, 0],
    judge_skipped=[0, 0, 0, 0],
    judge_fallback=[0, 1, 0, 0],
    judge_score=[4, -1, -1, 0],
    rule_score=[1, 1, 0, 1],
)


@pytest.mark.parametrize(
    "extras, want",
    [
        # plain rule reward: one mean per extra key, `score` left to verl's critic/score
        ({"score": [1, 0], "acc": [1, 0], "format_ok": [1, 1]}, {"reward/acc/mean": 0.5, "reward/format_ok/mean": 1.0}),
        # the LLM-judge keys: health rates; agreement over the 2 answered samples (4 & rule 1: agree; 0 & rule 1: not)
        (
            JUDGE,
            {
                "reward/judge_error/mean": 0.25,
                "reward/judge_fallback/mean": 0.25,
                "reward/judge_parse_fail/mean": 0.25,
                "reward/judge_score/mean": 0.5,
                "reward/judge_skipped/mean": 0.0,
                "reward/rule_score/mean": 0.75,
                "judge_health/error_rate": 0.25,
                "judge_health/parse_fail_rate": 0.25,
                "judge_health/skipped_rate": 0.0,
                "judge_health/fallback_rate": 0.25,
                "judge_health/answered_rate": 0.5,
                "judge_health/score_mean": 2.0,
                "judge_health/agree_rule": 0.5,
                "judge_health/accept_rule_reject": 0.0,
                "judge_health/reject_rule_accept": 0.5,
            },
        ),
        # a judge that never answers: stable keys, zero agreement and score (nothing answered)
        (
            {"judge_error": [1, 1], "judge_parse_fail": [0, 0], "judge_score": [-1, -1], "rule_score": [1, 0]},
            {
                "reward/judge_error/mean": 1.0,
                "reward/judge_parse_fail/mean": 0.0,
                "reward/judge_score/mean": -1.0,
                "reward/rule_score/mean": 0.5,
                "judge_health/error_rate": 1.0,
                "judge_health/parse_fail_rate": 0.0,
                "judge_health/skipped_rate": 0.0,
                "judge_health/fallback_rate": 1.0,
                "judge_health/answered_rate": 0.0,
                "judge_health/score_mean": 0.0,
                "judge_health/agree_rule": 0.0,
                "judge_health/accept_rule_reject": 0.0,
                "judge_health/reject_rule_accept": 0.0,
            },
        ),
        # verdict 4 on a wrong answer (accepts what the rule rejects), 1 on a right one (the reverse), 2 agreeing
        (
            {
                "judge_error": [0] * 4,
                "judge_parse_fail": [0] * 4,
                "judge_score": [4, 1, 4, 0],
                "rule_score": [0, 1, 1, 0],
            },
            {
                "reward/judge_error/mean": 0.0,
                "reward/judge_parse_fail/mean": 0.0,
                "reward/judge_score/mean": 2.25,
                "reward/rule_score/mean": 0.5,
                "judge_health/error_rate": 0.0,
                "judge_health/parse_fail_rate": 0.0,
                "judge_health/skipped_rate": 0.0,
                "judge_health/fallback_rate": 0.0,
                "judge_health/answered_rate": 1.0,
                "judge_health/score_mean": 2.25,
                "judge_health/agree_rule": 0.5,
                "judge_health/accept_rule_reject": 0.25,
                "judge_health/reject_rule_accept": 0.25,
            },
        ),
        # pairwise judge: verdict A-share over well-formed verdicts only, label A-share over all
        (
            {"acc": [1, 0, 0, 1], "pred_a": [1, 0, 0, 0], "label_a": [1, 1, 0, 0], "format_ok": [1, 1, 0, 1]},
            {
                "reward/acc/mean": 0.5,
                "reward/pred_a/mean": 0.25,
                "reward/label_a/mean": 0.5,
                "reward/format_ok/mean": 0.75,
                "position/verdict_a_share": 1 / 3,
                "position/label_a_share": 0.5,
            },
        ),
        # non-numeric extras are left out
        ({"acc": [1.0], "note": ["x"]}, {"reward/acc/mean": 1.0}),
    ],
)
def test_reward_metrics(extras, want):
    got = reward_metrics(extras)
    assert got.keys() == want.keys()
    for k, v in want.items():
        assert math.isclose(got[k], v), (k, got[k], v)


@pytest.mark.parametrize(
    "scores, groups, want",
    [
        ([1, 1, 0, 1, 0, 0], ["a", "a", "b", "b", "c", "c"], 2 / 3),
        ([1, 0, 1, 0], ["p", "p", "p", "p"], 0.0),  # both orders in one group: no longer identical
        ([1, 1], ["a", "b"], 0.0),  # singleton groups are not counted
        ([0.5, 0.5, 0.5], ["a", "a", "a"], 1.0),
    ],
)
def test_identical_group_share(scores, groups, want):
    assert identical_group_share(scores, groups) == pytest.approx(want)


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


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"window": 2, "min_rise": 0.05, "min_fall": 0.02, "fail": False}, "window must be >= 3"),
        ({"window": 5, "min_rise": 0.0, "min_fall": 0.02, "fail": False}, "must be > 0"),
    ],
)
def test_hacking_watch_rejects_bad_settings(settings, message):
    with pytest.raises(ValueError, match=message):
        HackingWatch(**settings)


def test_install_rejects_unknown_hacking_watch_setting():
    from omegaconf import OmegaConf

    with pytest.raises(ValueError, match=r"unknown setting\(s\) \['windw'\]"):
        install(OmegaConf.create({"data": {"train_batch_size": 2}, "verl_judge": {"hacking_watch": {"windw": 5}}}))


def test_pair_ids_and_sampler():
    assert list(pair_ids([{"pair_id": "p1"}, {"pair_id": "p1"}, {}, None], ["u1", "u2", "u3", "u4"])) == [
        "pair:p1",
        "pair:p1",
        "u3",
        "u4",
    ]

    class Data:
        dataframe = {"extra_info": [{"pair_id": "x"}, {"pair_id": "y"}, {"pair_id": "x"}, {"pair_id": "y"}, {}]}

        def __len__(self):
            return 5

    s = PairSampler(Data(), seed=0)
    first, second = list(s), list(s)
    assert len(s) == 5 and sorted(first) == [0, 1, 2, 3, 4]
    for order in (first, second):  # both orders of a pair are adjacent
        pos = {i: order.index(i) for i in range(5)}
        assert abs(pos[0] - pos[2]) == 1 and abs(pos[1] - pos[3]) == 1
    assert list(PairSampler(Data(), seed=0)) == first  # seeded


class FakeBatch:
    """The parts of verl's DataProto the hooks read."""

    def __init__(self, scores, uids, extra_info, extras):
        self.batch = {"token_level_scores": torch.tensor([[0.0, s] for s in scores])}
        self.non_tensor_batch = {"uid": np.array(uids, dtype=object), "extra_info": np.array(extra_info, dtype=object)}
        self.non_tensor_batch.update({k: np.array(v) for k, v in extras.items()})


def test_install_wires_verl_trainer(monkeypatch):
    """install() replaces the functions verl's fit() calls: extract_reward records the reward keys,
    compute_advantage sees pair groups as uids, compute_data_metrics adds the step metrics and stops
    a silent judge."""
    from omegaconf import OmegaConf
    from verl.trainer import main_ppo_v0
    from verl.trainer.ppo import ray_trainer

    for name in ("extract_reward", "compute_advantage", "compute_data_metrics"):
        monkeypatch.setattr(ray_trainer, name, getattr(ray_trainer, name))
    monkeypatch.setattr(main_ppo_v0, "create_rl_sampler", main_ppo_v0.create_rl_sampler)
    seen = {}
    monkeypatch.setattr(
        ray_trainer, "extract_reward", lambda b: ("T", {"judge_error": [0, 0], "judge_parse_fail": [1, 1]})
    )
    monkeypatch.setattr(
        ray_trainer, "compute_advantage", lambda d, *a, **k: seen.setdefault("uid", list(d.non_tensor_batch["uid"]))
    )
    monkeypatch.setattr(ray_trainer, "compute_data_metrics", lambda batch, use_critic=True: {"critic/score/mean": 0.0})
    cfg = OmegaConf.create(
        {
            "data": {"train_batch_size": 2},
            "verl_judge": {"pair_groups": True, "fail_fast": {"enable": True, "threshold": 0.5, "steps": 2}},
        }
    )
    install(cfg)
    b = FakeBatch(
        [1.0, 0.0],
        ["u1", "u2"],
        [{"pair_id": "p"}, {"pair_id": "p"}],
        {"judge_error": [0, 0], "judge_parse_fail": [1, 1]},
    )
    assert ray_trainer.extract_reward(b) == ("T", {"judge_error": [0, 0], "judge_parse_fail": [1, 1]})
    ray_trainer.compute_advantage(b)
    assert seen["uid"] == ["pair:p", "pair:p"]
    assert list(b.non_tensor_batch["prompt_uid"]) == ["u1", "u2"]
    m = ray_trainer.compute_data_metrics(batch=b, use_critic=False)
    assert m["judge_health/parse_fail_rate"] == 1.0 and m["grpo/identical_reward_groups"] == 0.0
    with pytest.raises(JudgeSilentError):
        ray_trainer.compute_data_metrics(batch=b, use_critic=False)
    assert isinstance(
        main_ppo_v0.create_rl_sampler(
            OmegaConf.create({"seed": 1}),
            type(
                "D", (), {"dataframe": {"extra_info": [{"pair_id": "a"}, {"pair_id": "a"}]}, "__len__": lambda self: 2}
            )(),
        ),
        PairSampler,
    )


def test_install_rejects_odd_batch_with_pair_groups():
    from omegaconf import OmegaConf

    with pytest.raises(ValueError, match="even data.train_batch_size"):
        install(OmegaConf.create({"data": {"train_batch_size": 3}, "verl_judge": {"pair_groups": True}}))


# A judge-rewarded run that was gamed (scripts.workflows.policy_learns on one H100, 2026-11-25;
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


# ----------------------------------------------------------------------------------------- the judge server gate
@pytest.mark.parametrize(
    "answers_after, limit, waited, stops",
    [
        (None, 600, None, False),  # no judge server: nothing to wait for
        (0, 600, 0.0, False),  # answering already
        (3, 600, 6.0, False),  # answers at the 4th look, 2 s apart
        (400, 10, None, True),  # never within wait_for_timeout + start_timeout: the run stops, naming the server
    ],
)
def test_wait_for_judge(answers_after, limit, waited, stops, monkeypatch):
    from scripts.launch import judge_server
    from scripts.train.hooks import StopRun, wait_for_judge

    clock = {"t": 0.0, "looks": 0}

    def ready(url, name):
        assert (url, name) == ("http://127.0.0.1:4321/v1", "judge")
        clock["looks"] += 1
        return clock["looks"] > answers_after

    monkeypatch.setattr(judge_server, "ready", ready)
    opts = (
        {}
        if answers_after is None
        else {"judge_server": {"enable": True, "port": 4321, "wait_for_timeout": 0, "start_timeout": limit}}
    )
    said = []
    kw = dict(
        clock=lambda: clock["t"],
        sleep=lambda s: clock.__setitem__("t", clock["t"] + s),
        say=lambda msg, flush: said.append(msg),
    )
    if stops:
        with pytest.raises(StopRun, match=r"the judge server at http://127.0.0.1:4321/v1 did not answer within 10s"):
            wait_for_judge(opts, **kw)
        return
    assert wait_for_judge(opts, **kw) == waited
    assert said == (
        []
        if waited is None
        else [f"[train] the judge server at http://127.0.0.1:4321/v1 answers ({waited:.0f}s waited); training"]
    )


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


def test_judge_health_guard_and_canary_rates():
    n = 8
    extras = {k: [0.0] * n for k in ("judge_error", "judge_parse_fail", "judge_skipped", "judge_fallback")}
    extras.update(
        judge_score=[4.0] * n,
        rule_score=[1.0] * n,
        judge_ungrounded=[1, 0, 0, 0, 0, 0, 0, 0],
        judge_contradiction=[1, 1, 0, 0, 0, 0, 0, 0],
        judge_unverified=[1, 1, 1, 0, 0, 0, 0, 0],
        canary_wrong=[1, 1, 1, 0, 0, 0, 0, 0],
        canary_wrong_accepted=[1, 0, 0, 0, 0, 0, 0, 0],
        canary_right=[0, 0, 0, 1, 1, 0, 0, 0],
        canary_right_rejected=[0, 0, 0, 0, 1, 0, 0, 0],
    )
    m = reward_metrics(extras)
    assert (
        m["judge_health/ungrounded_rate"],
        m["judge_health/contradiction_rate"],
        m["judge_health/unverified_rate"],
    ) == (0.125, 0.25, 0.375)
    assert (m["judge_health/canary_accept"], m["judge_health/canary_accept_n"]) == (1 / 3, 3.0)
    assert (m["judge_health/canary_reject"], m["judge_health/canary_reject_n"]) == (0.5, 2.0)


# ----------------------------------------------------------------------------------------- abstained samples
def _grpo_batch(scores, uids, abstained):
    from verl import DataProto

    n, length = len(scores), 3
    rewards = torch.zeros(n, length)
    rewards[:, -1] = torch.tensor(scores)
    return DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": torch.ones(n, length)},
        non_tensors={"uid": np.array(uids, dtype=object), "judge_abstained": np.array(abstained, dtype=np.float64)},
    )


@pytest.mark.parametrize(
    "scores, abstained, advantages",
    [
        # group "a" of 4: one abstains; the other three (1, 0, 0) give its mean 1/3 and std; the abstainer gets 0
        ([1.0, 0.0, 0.0, 0.0], [0, 0, 0, 1], [1.1547, -0.5774, -0.5774, 0.0]),
        # without abstention the same scores give a group of four
        ([1.0, 0.0, 0.0, 0.0], [0, 0, 0, 0], [1.5, -0.5, -0.5, -0.5]),
        # every sample but one abstains: the one left is a group of one (verl: mean 0, std 1), the rest 0
        ([1.0, 1.0, 0.0, 0.0], [0, 1, 1, 1], [1.0, 0.0, 0.0, 0.0]),
    ],
)
def test_abstained_samples_leave_their_group_and_the_loss(scores, abstained, advantages, monkeypatch):
    """verl's own GRPO advantage through the installed hook: an abstained sample is out of its group's mean and std,
    and its advantage and response mask are 0 (it adds nothing to the policy loss)."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo import ray_trainer

    for name in ("extract_reward", "compute_advantage", "compute_data_metrics"):
        monkeypatch.setattr(ray_trainer, name, getattr(ray_trainer, name))
    monkeypatch.setattr(ray_trainer.RayPPOTrainer, "fit", ray_trainer.RayPPOTrainer.fit)
    install(OmegaConf.create({"data": {"train_batch_size": 1}, "verl_judge": {}}))
    data = _grpo_batch(scores, ["a"] * 4, abstained)
    out = ray_trainer.compute_advantage(data, adv_estimator="grpo", norm_adv_by_std_in_grpo=True)
    adv = out.batch["advantages"][:, -1].tolist()
    assert adv == pytest.approx(advantages, abs=1e-4)
    assert out.batch["response_mask"].sum(-1).tolist() == [0.0 if a else 3.0 for a in abstained]
    assert list(out.non_tensor_batch["uid"]) == ["a"] * 4  # the groups as they were, for the step metrics
