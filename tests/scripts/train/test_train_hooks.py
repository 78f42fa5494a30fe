"""scripts/train/hooks.py: step metrics, fail-fast, pair groups, pair sampler; and their wiring into verl's legacy
trainer (scripts/train/seam.py: the trainer subclass verl's task runner builds, the functions ``fit()`` calls)."""

from __future__ import annotations

import math
import types

import numpy as np
import pytest
import torch

from scripts.train.hooks import (
    PairSampler,
    identical_group_share,
    pair_id,
    pair_ids,
    reward_metrics,
)
from scripts.train.seam import install
from scripts.train.watches import JudgeSilentError

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
        # accept is verdict >= 3: 2 rejects, 3 accepts (on a wrong and a right answer)
        (
            {
                "judge_error": [0] * 4,
                "judge_parse_fail": [0] * 4,
                "judge_score": [2, 3, 2, 3],
                "rule_score": [0, 0, 1, 1],
            },
            {
                "reward/judge_error/mean": 0.0,
                "reward/judge_parse_fail/mean": 0.0,
                "reward/judge_score/mean": 2.5,
                "reward/rule_score/mean": 0.5,
                "judge_health/error_rate": 0.0,
                "judge_health/parse_fail_rate": 0.0,
                "judge_health/skipped_rate": 0.0,
                "judge_health/fallback_rate": 0.0,
                "judge_health/answered_rate": 1.0,
                "judge_health/score_mean": 2.5,
                "judge_health/agree_rule": 0.5,
                "judge_health/accept_rule_reject": 0.25,
                "judge_health/reject_rule_accept": 0.25,
            },
        ),
        # skipped samples (the rule decided; no call) are not answered: health over the two the judge graded
        (
            {
                "judge_error": [0] * 4,
                "judge_parse_fail": [0] * 4,
                "judge_skipped": [1, 1, 0, 0],
                "judge_fallback": [0] * 4,
                "judge_score": [-1, -1, 4, 0],
                "rule_score": [1, 0, 1, 1],
            },
            {
                "reward/judge_error/mean": 0.0,
                "reward/judge_parse_fail/mean": 0.0,
                "reward/judge_skipped/mean": 0.5,
                "reward/judge_fallback/mean": 0.0,
                "reward/judge_score/mean": 0.5,
                "reward/rule_score/mean": 0.75,
                "judge_health/error_rate": 0.0,
                "judge_health/parse_fail_rate": 0.0,
                "judge_health/skipped_rate": 0.5,
                "judge_health/fallback_rate": 0.0,
                "judge_health/answered_rate": 0.5,
                "judge_health/score_mean": 2.0,
                "judge_health/agree_rule": 0.5,
                "judge_health/accept_rule_reject": 0.0,
                "judge_health/reject_rule_accept": 0.5,
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


def test_install_rejects_unknown_hacking_watch_setting():
    from omegaconf import OmegaConf

    with pytest.raises(ValueError, match=r"unknown setting\(s\) \['windw'\]"):
        install(OmegaConf.create({"data": {"train_batch_size": 2}, "verl_judge": {"hacking_watch": {"windw": 5}}}))


@pytest.mark.parametrize(
    "extra_info, want", [({"pair_id": "p1"}, "p1"), ({"pair_id": ""}, ""), ({}, None), (None, None), ("p1", None)]
)
def test_pair_id(extra_info, want):
    assert pair_id(extra_info) == want


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
    """The parts of verl's DataProto the hooks read (``meta_info``: the reward's keys, as verl's union leaves them)."""

    def __init__(self, scores, uids, extra_info, extras):
        self.batch = {"token_level_scores": torch.tensor([[0.0, s] for s in scores])}
        self.non_tensor_batch = {"uid": np.array(uids, dtype=object), "extra_info": np.array(extra_info, dtype=object)}
        self.non_tensor_batch.update({k: np.array(v) for k, v in extras.items()})
        self.meta_info = {"reward_extra_keys": list(extras)}


def test_install_wires_verl_trainer(monkeypatch):
    """install() replaces the functions verl's fit() calls: compute_advantage sees pair groups as uids,
    compute_data_metrics adds the step metrics for the reward's keys and stops a silent judge."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo import ray_trainer

    seen = {}
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
    ray_trainer.compute_advantage(b)
    assert seen["uid"] == ["pair:p", "pair:p"]
    assert list(b.non_tensor_batch["prompt_uid"]) == ["u1", "u2"]
    from scripts.train import seam

    monkeypatch.setattr(seam, "time", types.SimpleNamespace(time=lambda: 1234.5))  # the seam's clock, fixed
    m = ray_trainer.compute_data_metrics(batch=b, use_critic=False)
    assert m["perf/step_end_unix_s"] == 1234.5  # the clock as the metrics are computed (cost_report.span)
    assert m["judge_health/parse_fail_rate"] == 1.0 and m["grpo/identical_reward_groups"] == 0.0
    assert m["reward/judge_parse_fail/mean"] == 1.0
    with pytest.raises(JudgeSilentError):
        ray_trainer.compute_data_metrics(batch=b, use_critic=False)


@pytest.mark.parametrize("pair_groups", [True, False])
def test_the_trainer_verl_builds_takes_the_pair_sampler(pair_groups, monkeypatch):
    """verl's task runner builds ``main_ppo_v0.RayPPOTrainer``: after install, the hooks' subclass, which hands verl's
    ``__init__`` a ``PairSampler`` over the train dataset with ``verl_judge.pair_groups``, else verl's own sampler."""
    from omegaconf import OmegaConf
    from verl.trainer import main_ppo_v0
    from verl.trainer.ppo import ray_trainer

    seen = {}
    monkeypatch.setattr(ray_trainer.RayPPOTrainer, "__init__", lambda self, **kw: seen.update(kw))
    cfg = {"data": {"train_batch_size": 2, "seed": 7}, "verl_judge": {"pair_groups": pair_groups}}
    install(OmegaConf.create(cfg))
    assert issubclass(main_ppo_v0.RayPPOTrainer, ray_trainer.RayPPOTrainer)
    data = type("D", (), {"dataframe": {"extra_info": [{"pair_id": "a"}, {"pair_id": "a"}]}, "__len__": lambda _: 2})()
    main_ppo_v0.RayPPOTrainer(train_dataset=data, train_sampler="verl's")
    if pair_groups:
        assert isinstance(seen["train_sampler"], PairSampler) and seen["train_sampler"].seed == 7
    else:
        assert seen["train_sampler"] == "verl's"


def test_install_rejects_odd_batch_with_pair_groups():
    from omegaconf import OmegaConf

    with pytest.raises(ValueError, match="even data.train_batch_size"):
        install(OmegaConf.create({"data": {"train_batch_size": 3}, "verl_judge": {"pair_groups": True}}))


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
    assert m["judge_health/unverified_accepts"] == 3.0
    assert (m["judge_health/canary_accept"], m["judge_health/canary_accept_n"]) == (1 / 3, 3.0)
    assert (m["judge_health/canary_reject"], m["judge_health/canary_reject_n"]) == (0.5, 2.0)


@pytest.mark.parametrize(
    "unverified, verdicts, count",
    [
        ([1, 1, 0, 0], [4, 3, 4, 1], 2.0),
        ([0, 0, 0, 0], [4, 4, 4, 4], 0.0),
        ([1, 0, 0, 0], [2, 4, 4, 4], 0.0),  # the flag on a verdict that does not accept is no accept
        (None, [4, 4, 4, 4], None),  # a reward without the guard: no key
    ],
)
def test_unverified_accepts_are_counted(unverified, verdicts, count):
    n = len(verdicts)
    extras = {"judge_error": [0] * n, "judge_parse_fail": [0] * n, "judge_score": verdicts, "rule_score": [1] * n}
    if unverified is not None:
        extras["judge_unverified"] = unverified
    assert reward_metrics(extras).get("judge_health/unverified_accepts") == count


# ----------------------------------------------------------------------------------------- route mode
class CharTokenizer:
    """Token id = the character's code point; 0 pads."""

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(int(i)) for i in ids if int(i))


# response text, judge_score, rule_score (strict), judge_skipped: in mode=route the judge is asked only about an answer
# without "#### N" (so the strict rule rejects every judged sample); reference 72
ROUTED = [
    ("Natalia sold 72 clips in total.", 4, 0, 0),  # accepted, right by the flexible reading: agrees
    ("So the answer is 71.", 4, 0, 0),  # accepted, wrong: what a gamed judge pays
    ("The total is 72.", 1, 0, 0),  # rejected, right
    ("48 + 24 = 72\n#### 72", -1, 1, 1),  # the rule decided: not judged
]


def _routed_batch(rows, pad: int = 4):
    length = max(len(text) for text, *_ in rows) + pad
    responses = torch.zeros(len(rows), length, dtype=torch.long)
    attention = torch.zeros(len(rows), 2 + length, dtype=torch.long)
    attention[:, :2] = 1  # the prompt's two tokens
    for i, (text, *_) in enumerate(rows):
        responses[i, : len(text)] = torch.tensor([ord(c) for c in text])
        attention[i, 2 : 2 + len(text)] = 1
    extras = {
        "judge_error": [0] * len(rows),
        "judge_parse_fail": [0] * len(rows),
        "judge_score": [r[1] for r in rows],
        "rule_score": [r[2] for r in rows],
        "judge_skipped": [r[3] for r in rows],
        "judge_fallback": [0] * len(rows),
    }
    b = FakeBatch([0.0] * len(rows), [f"u{i}" for i in range(len(rows))], [{}] * len(rows), extras)
    b.batch.update(responses=responses, attention_mask=attention)
    b.non_tensor_batch["reward_model"] = np.array([{"ground_truth": "72"}] * len(rows), dtype=object)
    return b, extras


@pytest.mark.parametrize(
    "mode, tokenizer, agree, accept_rule_reject, reject_rule_accept",
    [
        # route: the three judged samples against the flexible reading (last number): 72 right, 71 wrong, 72 right
        ("route", True, 1 / 3, 1 / 3, 1 / 3),
        # judge mode: the strict rule's reading, as the reward gave it (no "#### N": all three wrong)
        ("judge", True, 1 / 3, 2 / 3, 0.0),
        # route without the responses' text (no tokenizer): the routed samples are left out of the agreement
        ("route", False, 0.0, 0.0, 0.0),
    ],
)
def test_route_mode_measures_judged_samples_against_the_flexible_reading(
    mode, tokenizer, agree, accept_rule_reject, reject_rule_accept, monkeypatch
):
    from omegaconf import OmegaConf
    from verl.trainer import main_ppo_v0
    from verl.trainer.ppo import ray_trainer

    monkeypatch.setattr(ray_trainer.RayPPOTrainer, "fit", lambda self, *a, **k: None)
    batch, extras = _routed_batch(ROUTED)
    monkeypatch.setattr(ray_trainer, "compute_data_metrics", lambda batch, use_critic=True: {"critic/score/mean": 0.0})
    reward = {"custom_reward_function": {"path": "pkg://reward_fns.llm_judge", "reward_kwargs": {"mode": mode}}}
    install(OmegaConf.create({"data": {"train_batch_size": 1}, "reward": reward, "verl_judge": {}}))
    trainer = object.__new__(main_ppo_v0.RayPPOTrainer)  # the hooks' subclass: its fit keeps the tokenizer
    trainer.tokenizer = CharTokenizer() if tokenizer else None
    trainer.fit()
    m = ray_trainer.compute_data_metrics(batch=batch, use_critic=False)
    got = [m[f"judge_health/{k}"] for k in ("agree_rule", "accept_rule_reject", "reject_rule_accept")]
    assert got == pytest.approx([agree, accept_rule_reject, reject_rule_accept], abs=1e-12)
    assert m["judge_health/answered_rate"] == 0.75 and m["reward/rule_score/mean"] == 0.25


def test_route_reading_of_a_rollout_batch_as_verl_builds_it(tokenizer):
    """A rollout DataProto as verl's fit() holds it (left-padded prompts, right-padded responses ending in EOS, the
    attention mask over both) with the real tokenizer: the judged samples read by their last number, the rest keep
    the rule's grade."""
    from scripts.train.hooks import route_reading
    from tests.reward_fns.test_llm_judge_verl import make_batch

    batch = make_batch(tokenizer, [(text, "72", None) for text, *_ in ROUTED])
    batch.non_tensor_batch["rule_score"] = np.array([r[2] for r in ROUTED], dtype=np.float64)
    batch.non_tensor_batch["judge_skipped"] = np.array([r[3] for r in ROUTED], dtype=np.float64)
    assert route_reading(batch, tokenizer).tolist() == [1.0, 0.0, 1.0, 1.0]
    batch.non_tensor_batch["reward_model"][1] = {"ground_truth": "seventy-two"}  # no number to compare with
    assert np.isnan(route_reading(batch, tokenizer)).tolist() == [False, True, False, False]


@pytest.mark.parametrize("deferred", [False, True], ids=["hooks", "hooks + deferred_reward"])
def test_patched_lists_exactly_what_install_replaces(deferred):
    """``seam.PATCHED`` names every attribute of verl's modules that ``install`` replaces, and nothing else (the
    deferred reward's two only with its switch on; ``fast_logprobs``' own is loaded in the workers): the tests'
    conftest restores them from this table."""
    from omegaconf import OmegaConf
    from verl.trainer import main_ppo_v0
    from verl.trainer.ppo import ray_trainer

    from scripts.train import seam

    owners = {"verl.trainer.ppo.ray_trainer": ray_trainer, "verl.trainer.main_ppo_v0": main_ppo_v0}

    def snapshot():
        return {(m, n): v for m, o in owners.items() for n, v in list(vars(o).items())}

    before = snapshot()
    cfg = {"data": {"train_batch_size": 2}, "verl_judge": {"deferred_reward": deferred}}
    if deferred:
        cfg["reward"] = {"reward_model": {"enable": True}}
    seam.install(OmegaConf.create(cfg))
    after = snapshot()
    changed = {key for key in after if before.get(key) is not after[key]}
    want = {(m, n) for m, names in seam.PATCHED.items() if m in owners for n in names}
    if not deferred:
        want -= {("verl.trainer.ppo.ray_trainer", "marked_timer"), ("verl.trainer.ppo.ray_trainer", "extract_reward")}
    assert changed == want
    assert all(len(why) > 40 for names in seam.PATCHED.values() for why in names.values())  # each with its reason


def test_verls_task_runner_builds_its_trainer_by_the_name_the_seam_replaces():
    """What the seam rests on, read from verl 0.9.1's source: the legacy task runner builds its trainer by the module
    name ``RayPPOTrainer`` (so the subclass put there is what trains) and hands it the sampler by keyword (which the
    subclass swaps for the pair sampler); ``fit`` and ``_validate`` call the wrapped functions by module name."""
    import inspect

    from verl.trainer import main_ppo_v0
    from verl.trainer.ppo import ray_trainer

    run = inspect.getsource(main_ppo_v0.TaskRunner.__ray_actor_class__.run)
    assert "trainer = RayPPOTrainer(" in run and "train_sampler=train_sampler," in run
    assert "train_dataset=train_dataset," in run
    fit = inspect.getsource(ray_trainer.RayPPOTrainer.fit)
    for call in ("compute_advantage(", "compute_data_metrics(", "extract_reward(", 'marked_timer("adv"'):
        assert call in fit, call
    assert "pad_dataproto_to_divisor(" in inspect.getsource(ray_trainer.RayPPOTrainer._validate)
