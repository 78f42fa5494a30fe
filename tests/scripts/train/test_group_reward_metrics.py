"""The group reward manager's per-sample keys reach a training step's metrics as the pointwise judge's do, through
verl 0.9.1's own code on CPU: ``RewardLoopManager.compute_rm_score`` (its one Ray worker replaced by verl's
``RewardLoopWorker`` run in-process, ``ray.get`` by the identity) assembles ``rm_scores`` and the extra-info columns
with ``reward_extra_keys``; then the steps of the legacy trainer's ``fit`` that lead to the step metrics, with the
functions ``scripts.train.seam.install`` put on ``verl.trainer.ppo.ray_trainer``: ``batch.union``,
``extract_reward``, the extras into ``non_tensor_batch``, GRPO ``compute_advantage``, ``compute_data_metrics``.
"""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

from tests.doubles.fake_openai import FakeOpenAIServer
from tests.reward_fns.test_pairwise_judge import INFO, truthful
from tests.scripts.train.test_group_reward import EXPECTED, SAMPLES, group_overrides

pytestmark = pytest.mark.slow

#: two groups of three, all pairs, a truthful judge (tests/scripts/train/test_group_reward.py): per answer (flip, tie)
#: q1 (right, wrong, wrong): (0, 0), (1/2, 0), (1/2, 0) (the guard voids a pick between the two wrong answers, so
#: there is no split to count); q2 (wrong, right, right): (0, 0) each (the two right answers tie: a win for both, and
#: flips count only between different final answers); two calls with each answer as A
HEALTH = {
    "judge_health/flip_rate": 1 / 6,
    "judge_health/tie_rate": 0.0,
    "judge_health/parse_fail_rate": 0.0,
    "judge_health/error_rate": 0.0,
    "judge_health/fallback_rate": 0.0,
    "judge_health/abstained_rate": 0.0,
    "judge_health/cycle_rate": 0.0,
    "judge_health/calls_per_group": 6.0,  # all pairs of 3: 6 comparisons
    "judge_health/wrong_over_right": 0.0,
    "critic/score/mean": float(np.float32(3 / 6)),  # win rates (1 + 0 + 0 + 1 + 0 + 1) / 6, in float32
    "reward/rule_score/mean": 0.5,
    "reward/judge_group_size/mean": 3.0,
    "reward/judge_group_calls/mean": 6.0,
    "grpo/identical_reward_groups": 0.0,
}


class _Remote:
    def __init__(self, worker):
        self.worker = worker

    @property
    def compute_score_batch(self):
        worker = self.worker

        class _Method:
            @staticmethod
            def remote(chunk):
                return asyncio.run(worker.compute_score_batch(chunk))

        return _Method


def compose(model_path, base_url, mode_override):
    from tests.scripts.train.test_verl_reward_loop import compose_config

    return compose_config(model_path, ["algorithm.adv_estimator=grpo", *group_overrides(base_url, **mode_override)])


@pytest.fixture
def patched(monkeypatch):
    """verl's trainer functions restored after the test; ``ray.get`` in the reward loop module the identity."""
    from verl.experimental.reward_loop import reward_loop

    monkeypatch.setattr(reward_loop.ray, "get", lambda refs: refs)


def step(cfg, tokenizer):
    """One training step from the reward on (verl's fit order); returns (metrics, extras)."""
    from omegaconf import OmegaConf, open_dict
    from verl.experimental.reward_loop.reward_loop import RewardLoopManager, RewardLoopWorker
    from verl.trainer.ppo import ray_trainer
    from verl.trainer.ppo.ray_trainer import compute_response_mask
    from verl.trainer.ppo.utils import need_critic

    from scripts.train.seam import install
    from tests.scripts.train.test_verl_reward_loop import make_batch, user

    with open_dict(cfg):
        cfg.verl_judge = OmegaConf.create({"fail_fast": {"enable": False}})
    install(cfg)
    mgr = object.__new__(RewardLoopManager)  # its __init__ starts Ray actors: here one worker in this process
    mgr.config, mgr.reward_model_manager = cfg, None
    mgr.reward_loop_workers = [_Remote(RewardLoopWorker(cfg))]
    mgr.reward_manager_cls = type(mgr.reward_loop_workers[0].worker.reward_manager)
    rows = [
        {"prompt": user(INFO["question"]), "response": r, "data_source": "openai/gsm8k", "gt": "72"} for _, r in SAMPLES
    ]
    batch, _ = make_batch(tokenizer, rows)
    batch.non_tensor_batch["uid"] = np.array([u for u, _ in SAMPLES], dtype=object)
    batch.non_tensor_batch["extra_info"] = np.array([dict(INFO) for _ in SAMPLES], dtype=object)
    batch.batch["response_mask"] = compute_response_mask(batch)
    batch = batch.union(mgr.compute_rm_score(batch))  # RayPPOTrainer._compute_reward_colocate
    reward_tensor, extras = ray_trainer.extract_reward(batch)
    batch.batch["token_level_scores"] = reward_tensor
    batch.non_tensor_batch.update({k: np.array(v) for k, v in extras.items()})
    batch.batch["token_level_rewards"] = reward_tensor
    batch = ray_trainer.compute_advantage(
        batch,
        adv_estimator=cfg.algorithm.adv_estimator,
        gamma=cfg.algorithm.gamma,
        lam=cfg.algorithm.lam,
        num_repeat=3,
        norm_adv_by_std_in_grpo=True,
        config=cfg.algorithm,
    )
    return ray_trainer.compute_data_metrics(batch=batch, use_critic=need_critic(cfg)), extras


@pytest.mark.parametrize(
    "mode_override",
    [
        pytest.param({"mode": "tournament"}, id="mode=tournament"),
        pytest.param({}, id="no mode: the group manager's default, a tournament"),
    ],
)
def test_group_keys_reach_the_step_metrics(mode_override, model_path, tokenizer, patched):
    with FakeOpenAIServer(truthful) as srv:
        metrics, extras = step(compose(model_path, srv.base_url, mode_override), tokenizer)
    assert [round(float(s), 12) for s in extras["score"]] == [e[0] for e in EXPECTED]
    for key, value in HEALTH.items():
        assert math.isclose(metrics[key], value, abs_tol=1e-12), (key, metrics[key], value)
    assert metrics["judge_health/judge_seconds"] == pytest.approx(float(np.sum(extras["judge_seconds"])))
    assert "judge_health/agree_rule" not in metrics  # a win rate against group mates is no verdict on the answer
    assert not {"judge_health/score_mean", "judge_health/answered_rate"} & metrics.keys()
