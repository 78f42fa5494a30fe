"""``verl_judge``'s abstained samples (``judge_failure="abstain"``) through verl's own GRPO advantage: out of their
group's mean and std and out of the policy loss; a group that abstention leaves with fewer than two scored samples
gives no advantage (verl would give a group of one its raw score: a push without a baseline)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from scripts.train.seam import install


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
    ],
)
def test_abstained_samples_leave_their_group_and_the_loss(scores, abstained, advantages, monkeypatch):
    """verl's own GRPO advantage through the installed hook: an abstained sample is out of its group's mean and std,
    and its advantage and response mask are 0 (it adds nothing to the policy loss)."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo import ray_trainer

    install(OmegaConf.create({"data": {"train_batch_size": 1}, "verl_judge": {}}))
    data = _grpo_batch(scores, ["a"] * 4, abstained)
    out = ray_trainer.compute_advantage(data, adv_estimator="grpo", norm_adv_by_std_in_grpo=True)
    adv = out.batch["advantages"][:, -1].tolist()
    assert adv == pytest.approx(advantages, abs=1e-4)
    assert out.batch["response_mask"].sum(-1).tolist() == [0.0 if a else 3.0 for a in abstained]
    assert list(out.non_tensor_batch["uid"]) == ["a"] * 4  # the groups as they were, for the step metrics


H = 0.5 / (math.sqrt(0.5) + 1e-6)  # a group of two scored 1 and 0: (1 - 0.5) / (std + verl's epsilon)


def _advantages(monkeypatch, uids, scores, abstained, **kwargs):
    from omegaconf import OmegaConf
    from verl.trainer.ppo import ray_trainer

    install(OmegaConf.create({"data": {"train_batch_size": 1}, "verl_judge": {}}))
    return ray_trainer.compute_advantage(_grpo_batch(scores, uids, abstained), **kwargs)


@pytest.mark.parametrize(
    "uids, scores, abstained, norm, advantages",
    [
        # the case: three of a group of four abstain; the one left gets 0, not its raw score 1.0
        (["a"] * 4, [1.0, 0.0, 0.0, 0.0], [0, 1, 1, 1], True, [0.0, 0.0, 0.0, 0.0]),
        (["a"] * 4, [1.0, 0.0, 0.0, 0.0], [0, 1, 1, 1], False, [0.0, 0.0, 0.0, 0.0]),  # Dr.GRPO (no std) alike
        (["a"] * 4, [0.0, 0.0, 0.0, 0.0], [1, 1, 1, 0], True, [0.0, 0.0, 0.0, 0.0]),
        # a lone survivor beside a whole group: that group keeps its advantages
        (["a", "a", "b", "b"], [1.0, 0.0, 1.0, 0.0], [0, 1, 0, 0], True, [0.0, 0.0, H, -H]),
        # two survivors are a group: their own mean and std
        (["a"] * 4, [1.0, 0.0, 1.0, 0.0], [0, 0, 1, 1], True, [H, -H, 0.0, 0.0]),
        (["a"] * 4, [1.0, 0.0, 1.0, 0.0], [0, 0, 1, 1], False, [0.5, -0.5, 0.0, 0.0]),
        # a whole group abstains: nothing for it, the other group as without abstention
        (["a", "a", "b", "b"], [1.0, 0.0, 1.0, 0.0], [1, 1, 0, 0], True, [0.0, 0.0, H, -H]),
        # a prompt sampled once (rollout.n=1) that no abstention touched keeps verl's own reading of a group of one
        (["a", "b", "b"], [1.0, 1.0, 0.0], [0, 0, 1], True, [1 / (1 + 1e-6), 0.0, 0.0]),
    ],
)
def test_abstain_leaves_no_lone_survivor_a_push(uids, scores, abstained, norm, advantages, monkeypatch):
    out = _advantages(monkeypatch, uids, scores, abstained, adv_estimator="grpo", norm_adv_by_std_in_grpo=norm)
    assert out.batch["advantages"][:, -1].tolist() == pytest.approx(advantages, abs=1e-7)
    assert out.batch["returns"][:, -1].tolist() == pytest.approx(advantages, abs=1e-7)
    assert out.batch["response_mask"].sum(-1).tolist() == [0.0 if a else 3.0 for a in abstained]  # survivors stay


def _step_batch(scores, abstained, lengths):
    """A step's batch as verl's ``compute_data_metrics`` reads it: prompts of 2 tokens, responses of up to 3
    (``lengths``: 0 is an aborted sample, which verl leaves out of ``critic/score/*``)."""
    from verl import DataProto

    n, prompt, length = len(scores), 2, 3
    scored = torch.zeros(n, length)
    scored[:, -1] = torch.tensor(scores)
    mask = torch.zeros(n, prompt + length, dtype=torch.long)
    mask[:, :prompt] = 1
    for i, k in enumerate(lengths):
        mask[i, prompt : prompt + k] = 1
    return DataProto.from_dict(
        tensors={
            "token_level_scores": scored,
            "token_level_rewards": scored.clone(),
            "advantages": torch.zeros(n, length),
            "returns": torch.zeros(n, length),
            "response_mask": mask[:, prompt:].clone(),
            "prompts": torch.ones(n, prompt, dtype=torch.long),
            "responses": torch.ones(n, length, dtype=torch.long),
            "attention_mask": mask,
        },
        non_tensors={
            "uid": np.array(["a"] * n, dtype=object),
            "judge_abstained": np.array(abstained, dtype=np.float64),
        },
    )


F32 = float(np.float32(2 / 3))  # verl's means are float32


@pytest.mark.parametrize(
    "scores, abstained, lengths, want",
    [
        # one of four abstains (its 0 is no grade): the mean of the three graded, 2/3 (verl's own: 0.5)
        ([1.0, 0.0, 1.0, 0.0], [0, 1, 0, 0], [3, 3, 3, 3], (F32, 1.0, 0.0)),
        # the abstainer was the only 0: the graded samples are all right (verl's own: 0.75, 1, 0)
        ([1.0, 0.0, 1.0, 1.0], [0, 1, 0, 0], [3, 3, 3, 3], (1.0, 1.0, 1.0)),
        # no abstention: verl's own
        ([1.0, 0.0, 1.0, 0.0], [0, 0, 0, 0], [3, 3, 3, 3], (0.5, 1.0, 0.0)),
        # an aborted sample (no response) stays out, as verl leaves it out: 2 graded samples left, 1 and 0
        ([1.0, 0.0, 1.0, 0.0], [0, 1, 0, 0], [3, 3, 0, 3], (0.5, 1.0, 0.0)),
        # every sample abstained: no grade to average
        ([0.0, 0.0], [1, 1], [3, 3], ("nan", "nan", "nan")),
    ],
    ids=["one-abstains", "the-only-zero-abstains", "none-abstains", "with-an-aborted-sample", "all-abstain"],
)
def test_the_score_series_leaves_abstained_samples_out(scores, abstained, lengths, want):
    """``critic/score/*`` through verl's own ``compute_data_metrics`` and the installed hook: over the samples the judge
    graded (the hacking watch fits ``critic/score/mean``); the rest of verl's metrics as verl computes them."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo import metric_utils, ray_trainer

    assert ray_trainer.compute_data_metrics is metric_utils.compute_data_metrics  # verl's own (conftest.py)
    install(OmegaConf.create({"data": {"train_batch_size": 1}, "verl_judge": {}}))
    batch = _step_batch(scores, abstained, lengths)
    metrics = ray_trainer.compute_data_metrics(batch=batch, use_critic=False)
    got = tuple(metrics[f"critic/score/{k}"] for k in ("mean", "max", "min"))
    assert tuple("nan" if math.isnan(v) else v for v in got) == want
    verls = metric_utils.compute_data_metrics(batch=batch, use_critic=False)
    assert metrics["critic/rewards/mean"] == verls["critic/rewards/mean"]
