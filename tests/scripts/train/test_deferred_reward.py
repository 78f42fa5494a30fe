"""scripts/train/deferred_reward.py through verl 0.9.1's own ``RayPPOTrainer.fit`` and ``_validate`` on CPU.

The trainer is verl's class with its worker-facing parts replaced (generation, the old and reference log-probs, the
actor update, the checkpoint manager, the logger); the reward is verl's ``RewardLoopManager.compute_rm_score`` over
one in-process worker (``ray.get`` the identity) whose judge is a score table, with abstained samples and a lone
survivor so that the hooks' masking reads the reward. Everything else, the order of the stages, ``extract_reward``,
``compute_advantage`` (GRPO), ``compute_data_metrics`` and the rollout dump, is verl's with the hooks installed.

The order is shown by a recorded call sequence: in a deferred step the judge's reward may only finish once the
reference log-prob stage has run (a gate it opens), so a reward computed in its own stage would stop at the gate.
"""

from __future__ import annotations

import json
import threading
import types

import numpy as np
import pytest
import torch

GATE_S = 60.0  # how long a training reward waits for the log-prob stage to open its gate
#: per sample of the training batch (2 prompts x 4): (score, judge_abstained); prompt 2 keeps one scored sample
TABLE = [(1.0, 0), (0.0, 0), (0.5, 0), (1.0, 0), (1.0, 0), (0.0, 1), (0.0, 1), (0.0, 1)]
N, P, R = 4, 3, 4


class Tok:
    eos_token_id, pad_token_id = 2, 0

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(str(int(i)) for i in ids if int(i))

    def batch_decode(self, rows, skip_special_tokens=True):
        return [self.decode(r) for r in rows]


class Rollout:
    """Generation: sample j's response starts with token 10 + j (the judge's key into TABLE)."""

    def __init__(self, calls):
        self.calls = calls

    def generate_sequences(self, gen_batch):
        from verl import DataProto

        n = len(gen_batch)
        self.calls.append("val_generate" if gen_batch.meta_info.get("validate") else "generate")
        prompts = torch.tensor([[0, 5, 6]] * n)
        responses = torch.tensor([[10 + j, 11, Tok.eos_token_id, 0] for j in range(n)])
        mask = torch.cat([torch.tensor([[0, 1, 1]] * n), torch.tensor([[1, 1, 1, 0]] * n)], dim=1)
        nt = dict(gen_batch.non_tensor_batch)
        nt["multi_modal_inputs"] = np.array([{} for _ in range(n)], dtype=object)
        tensors = dict(
            prompts=prompts,
            responses=responses,
            input_ids=torch.cat([prompts, responses], dim=1),
            attention_mask=mask,
            position_ids=torch.clamp(torch.cumsum(mask, dim=1) - 1, min=0),
        )
        return DataProto.from_dict(tensors=tensors, non_tensors=nt, meta_info={"timing": {}})


class Judge:
    """One reward loop worker in this process: a training chunk waits for the gate, then reads TABLE."""

    def __init__(self, calls, gate, fail=None, hang=None):
        self.calls, self.gate, self.fail, self.hang = calls, gate, fail, hang
        judge = self

        class _Method:
            @staticmethod
            def remote(chunk):
                return judge.score(chunk)

        self.compute_score_batch = _Method

    def score(self, chunk):
        train = chunk.non_tensor_batch["data_source"][0] == "train"
        firsts = chunk.batch["responses"][:, 0].tolist()
        baseline = train and min(firsts) >= 10 + len(TABLE)  # REMAX's greedy answers, generated after the samples
        if self.hang is not None:  # a judge that does not answer (released when the test ends)
            self.hang.wait(GATE_S)
        if train and not baseline and not self.gate.wait(GATE_S):
            raise AssertionError("the reward's gate never opened: no log-prob stage ran while the reward waited")
        self.calls.append("baseline_scored" if baseline else "judge_scored" if train else "val_judge_scored")
        if self.fail:
            raise ValueError(self.fail)
        out = []
        for first in firsts:
            score, abstained = TABLE[(first - 10) % len(TABLE)] if train else (float(first % 2), 0)
            info = {"score": score, "judge_abstained": abstained, "judge_error": 0.0, "judge_parse_fail": 0.0}
            out.append({"reward_score": score, "reward_extra_info": info})
        return out


def _config(model_path, overrides, verl_judge):
    from omegaconf import OmegaConf, open_dict

    from tests.scripts.train.test_verl_reward_loop import compose_config

    cfg = compose_config(model_path, [f"actor_rollout_ref.rollout.n={N}", *overrides])
    with open_dict(cfg):
        cfg.verl_judge = OmegaConf.create(verl_judge)
    return cfg


BASE = [
    "trainer.use_v1=false",
    "reward.reward_model.enable=true",
    "reward.num_workers=1",
    "algorithm.adv_estimator=grpo",
    "actor_rollout_ref.actor.use_kl_loss=true",
    "trainer.balance_batch=false",
    "trainer.save_freq=-1",
    "trainer.test_freq=-1",
    "trainer.val_before_train=false",
    "trainer.logger=[console]",
    "actor_rollout_ref.rollout.agent.num_workers=1",
]


@pytest.fixture
def patched(monkeypatch):
    """verl's trainer module restored after the test; ``ray.get`` the identity; the logger records."""
    from verl.experimental.reward_loop import reward_loop
    from verl.utils import tracking

    monkeypatch.setattr(reward_loop.ray, "get", lambda refs: refs)
    logged = []

    class Tracking:
        def __init__(self, **kwargs):
            pass

        def log(self, data, step):
            logged.append((step, dict(data)))

    monkeypatch.setattr(tracking, "Tracking", Tracking)
    return logged


def run(cfg, calls, judge, seen, validate=False):
    """verl's ``fit`` for one step (or, ``validate``, its step-0 validation only) with the hooks installed."""
    from verl.experimental.reward_loop.reward_loop import RewardLoopManager
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager
    from verl.trainer import main_ppo_v0
    from verl.trainer.ppo import ray_trainer

    from scripts.train import deferred_reward, seam

    advantage = ray_trainer.compute_advantage

    def compute_advantage(*args, **kwargs):
        calls.append("compute_advantage")
        return advantage(*args, **kwargs)

    ray_trainer.compute_advantage = compute_advantage
    join = deferred_reward.Deferral.join

    def recorded_join(self, timing_raw=None):
        waited = join(self, timing_raw)
        if waited is not None:
            calls.append("reward_joined")
        return waited

    seam.install(cfg)

    from verl import DataProto

    def data_proto(tensors):
        return DataProto.from_dict(tensors={k: v.float() for k, v in tensors.items()})

    def old_log_prob(batch):
        calls.append("old_log_prob")
        zeros = torch.zeros(len(batch), R)
        return data_proto({"old_log_probs": zeros, "entropys": zeros}), 0.0

    def ref_log_prob(batch):
        calls.append("ref_log_prob")
        judge.gate.set()
        return data_proto({"ref_log_prob": torch.zeros(len(batch), R)})

    def update_actor(batch):
        calls.append("update_actor")
        seen["batch"] = batch
        return DataProto(meta_info={"metrics": {}})

    mgr = object.__new__(RewardLoopManager)
    mgr.config = cfg
    mgr.reward_model_manager = types.SimpleNamespace(wake_up=lambda: None, sleep=lambda: calls.append("judge_sleep"))
    mgr.reward_loop_workers = [judge]
    mgr.reward_manager_cls = NaiveRewardManager

    def rows(source, n):
        return {
            "dummy": torch.arange(n),
            "data_source": np.array([source] * n, dtype=object),
            "reward_model": np.array([{"ground_truth": str(i)} for i in range(n)], dtype=object),
            "extra_info": np.array([{"index": i} for i in range(n)], dtype=object),
        }

    t = object.__new__(main_ppo_v0.RayPPOTrainer)  # the hooks' subclass, as verl's task runner builds it
    t.config, t.tokenizer, t.total_training_steps = cfg, Tok(), 1
    t.train_dataloader, t.val_dataloader, t.train_dataset = [rows("train", 2)], [rows("val", 2)], None
    t.actor_rollout_wg, t.async_rollout_manager = types.SimpleNamespace(), Rollout(calls)
    t.checkpoint_manager = types.SimpleNamespace(
        update_weights=lambda step: calls.append("update_weights"), sleep_replicas=lambda: None
    )
    t.resource_pool_manager = types.SimpleNamespace(get_n_gpus=lambda: 1)
    t.use_rm, t.reward_loop_manager, t.use_reference_policy, t.use_critic = True, mgr, True, False
    t._load_checkpoint = t._start_profiling = t._stop_profiling = lambda *a, **k: None
    t._compute_old_log_prob, t._compute_ref_log_prob, t._update_actor = old_log_prob, ref_log_prob, update_actor
    t._init_dump_executor()
    if validate:
        from omegaconf import open_dict

        with open_dict(cfg):
            cfg.trainer.val_before_train, cfg.trainer.val_only = True, True
    deferred_reward.Deferral.join = recorded_join
    try:
        t.fit()
    finally:
        deferred_reward.Deferral.join = join
    return t


def one_step(model_path, tmp_path, deferred, fail=None, hang=None, calls=None, estimator="grpo"):
    calls = [] if calls is None else calls
    gate = threading.Event()
    if not deferred:
        gate.set()
    cfg = _config(
        model_path,
        [
            *BASE,
            f"algorithm.adv_estimator={estimator}",
            f"trainer.rollout_data_dir={tmp_path / ('deferred' if deferred else 'plain')}",
        ],
        {"deferred_reward": deferred},
    )
    seen = {}
    run(cfg, calls, Judge(calls, gate, fail, hang), seen)
    return calls, seen


STEP_ORDER = {
    # the reward in its own stage, before the log-probs (verl 0.9.1's order)
    False: ["generate", "judge_scored", "judge_sleep", "old_log_prob", "ref_log_prob", "compute_advantage"],
    # started in the reward stage, finished only after the reference log-probs opened its gate, joined before the
    # advantage
    True: [
        "generate",
        "old_log_prob",
        "ref_log_prob",
        "judge_scored",
        "judge_sleep",
        "reward_joined",
        "compute_advantage",
    ],
}


@pytest.mark.parametrize("estimator", ["grpo", "remax"])
def test_deferred_reward_is_joined_after_the_log_probs_and_gives_the_same_step(
    model_path, tmp_path, patched, estimator
):
    """REMAX's greedy-baseline reward, read at once in the generation step, is scored in place, deferral or not."""
    got = {}
    for deferred in (False, True):
        patched.clear()
        calls, seen = one_step(model_path, tmp_path, deferred, estimator=estimator)
        baseline = ["baseline_scored", "judge_sleep"] if estimator == "remax" else []
        order = [STEP_ORDER[deferred][0], *baseline, *STEP_ORDER[deferred][1:]]
        assert calls == ["update_weights", *order, "update_actor", "update_weights"], deferred
        ((step, metrics),) = patched
        got[deferred] = (seen["batch"], metrics)
    (plain, plain_metrics), (late, late_metrics) = got[False], got[True]
    # the advantage, scores and masks the actor is given are the same, value for value
    for key in ("advantages", "returns", "token_level_scores", "token_level_rewards", "response_mask", "rm_scores"):
        assert torch.equal(plain.batch[key], late.batch[key]), key
    adv = [round(a, 5) for a in late.batch["advantages"][:, 0].tolist()]
    if estimator == "grpo":  # prompt 1: GRPO over (1, 0, 0.5, 1); prompt 2: 3 abstained samples out, the survivor 0
        assert adv == [0.78335, -1.30558, -0.26112, 0.78335, 0.0, 0.0, 0.0, 0.0]
    else:  # REMAX: score minus its prompt's greedy answer's (TABLE[0], TABLE[1]: 1, 0); prompt 2 as in GRPO
        assert adv == [0.0, -1.0, -0.5, 0.0, 0.0, 0.0, 0.0, 0.0]
        assert (
            late.batch["reward_baselines"].tolist() == plain.batch["reward_baselines"].tolist() == [1.0] * 4 + [0.0] * 4
        )
    assert late.batch["response_mask"].sum(-1).tolist() == [3, 3, 3, 3, 3, 0, 0, 0]
    for key in ("score", "judge_abstained", "judge_error", "judge_parse_fail"):
        assert plain.non_tensor_batch[key].tolist() == late.non_tensor_batch[key].tolist(), key
    assert late.meta_info["reward_extra_keys"] == ["score", "judge_abstained", "judge_error", "judge_parse_fail"]
    # the step's metrics, the hooks' reward keys and judge health included, are the same; the join's wait is logged
    timing = {k for k in late_metrics if k.startswith(("timing_s/", "timing_per_token_ms/", "perf/"))}
    rest = {k: v for k, v in late_metrics.items() if k not in timing}
    assert rest == {k: v for k, v in plain_metrics.items() if k in rest} and rest.keys() <= plain_metrics.keys()
    assert {"reward/judge_abstained/mean", "judge_health/error_rate", "critic/score/mean"} <= rest.keys()
    assert rest["reward/judge_abstained/mean"] == 0.375
    assert {"timing_s/reward_join", "timing_s/reward_deferred"} <= late_metrics.keys()
    assert "timing_s/reward_join" not in plain_metrics
    # verl's rollout dump (scores and the extra keys of the dict extract_reward gave the step) is the same
    dumps = [
        [json.loads(x) for x in (tmp_path / d / "1.jsonl").read_text().splitlines()] for d in ("plain", "deferred")
    ]
    assert dumps[0] == dumps[1] and dumps[1][5]["judge_abstained"] == 1


def test_a_reward_that_raises_surfaces_at_the_join_with_its_message(model_path, tmp_path, patched):
    calls = []
    with pytest.raises(ValueError, match="judge exploded: HTTP 503") as err:
        one_step(model_path, tmp_path, True, fail="judge exploded: HTTP 503", calls=calls)
    # raised by the reward after the log-prob stages; the step went no further than the join
    assert calls == ["update_weights", "generate", "old_log_prob", "ref_log_prob", "judge_scored"]
    assert any("surfaced at its join before the advantage" in n for n in err.value.__notes__)
    assert any(
        "the deferred reward of step 1 (RewardLoopManager.compute_rm_score over 8" in n for n in err.value.__notes__
    )


def test_a_reward_that_never_finishes_stops_the_run_at_the_deadline_naming_it(
    model_path, tmp_path, patched, monkeypatch
):
    from scripts.train import deferred_reward

    monkeypatch.setattr(deferred_reward, "DEADLINE_S", 0.5)
    hang = threading.Event()
    try:
        with pytest.raises(TimeoutError) as err:
            one_step(model_path, tmp_path, True, hang=hang)
    finally:
        hang.set()
    assert str(err.value).startswith(
        "the deferred reward of step 1 (RewardLoopManager.compute_rm_score over 8 samples, started in the 'reward' "
        "stage) did not finish within 0.5s of waiting at the 'adv' stage"
    )


@pytest.mark.parametrize("deferred", [False, True])
def test_validation_waits_for_its_reward(model_path, patched, deferred):
    """verl's step-0 validation (``_validate``) scores in place, before it wakes the policy again, with the switch on
    as off: its reward is never deferred."""
    calls, gate, seen = [], threading.Event(), {}
    cfg = _config(model_path, BASE, {"deferred_reward": deferred})
    run(cfg, calls, Judge(calls, gate), seen, validate=True)
    assert calls == ["update_weights", "val_generate", "val_judge_scored", "judge_sleep", "update_weights"]
    ((step, metrics),) = patched
    assert step == 0 and metrics["val-core/val/reward/mean@1"] == 0.5
    assert metrics["val-aux/val/judge_error/mean@1"] == 0.0


# (overrides, verl_judge.deferred_reward, the message's start; None: accepted)
SETTINGS = [
    ([], False, None),
    (["reward.reward_model.enable=false"], False, None),  # off: any placement
    ([], True, None),  # judge_placement=colocated
    (["reward.reward_model.rollout.free_cache_engine=true"], True, None),  # woken and put to sleep within the call
    (
        ["reward.reward_model.enable=false"],
        True,
        "verl_judge.deferred_reward=true needs a reward model colocated with the policy",
    ),
    (
        ["reward.reward_model.enable_resource_pool=true", "reward.reward_model.n_gpus_per_node=1"],
        True,
        "verl_judge.deferred_reward=true needs the judge colocated with the policy",
    ),
    (
        ["algorithm.rollout_correction.bypass_mode=true", "actor_rollout_ref.actor.use_kl_loss=false"],
        True,
        "verl_judge.deferred_reward=true has no stage to overlap",
    ),
    (["algorithm.rollout_correction.bypass_mode=true"], True, None),  # the reference log-probs are still there
    (["trainer.use_v1=true"], True, "verl_judge.deferred_reward=true needs verl's legacy trainer"),
    ([], "yes", "verl_judge.deferred_reward must be true or false, got 'yes'"),
]


@pytest.mark.parametrize("overrides, deferred, message", SETTINGS)
def test_the_settings_check_refuses_what_cannot_be_deferred(model_path, overrides, deferred, message):
    from scripts.train.hooks import settings_errors

    cfg = _config(model_path, [*BASE, *overrides], {"deferred_reward": deferred})
    errors = settings_errors(cfg)
    assert [e[: len(message)] for e in errors] == ([] if message is None else [message])


@pytest.mark.parametrize(
    "stages, validating, defers",
    [
        (["step", "reward"], False, True),  # the training step's reward stage
        (["step", "reward"], True, False),  # a reward stage entered while validating is never deferred
        ([], False, False),
        (["reward", "adv"], False, False),  # the innermost stage decides
        (["gen"], False, False),
    ],
)
def test_defers_only_the_training_steps_reward_stage(stages, validating, defers):
    """verl 0.9.1's ``_validate`` enters no ``reward`` stage, so its reward never reaches ``defers`` with that stage
    open; the ``validating`` flag is what keeps a validation reward from being deferred on a verl that does."""
    from scripts.train.deferred_reward import Deferral

    d = Deferral(lambda: validating)
    d.stages = list(stages)
    assert d.defers() is defers
