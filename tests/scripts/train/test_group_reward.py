"""The group reward manager (``scripts/train/group_reward.py``) through verl 0.9.1's own registry and reward-loop
worker, on CPU, with the pairwise judge's tournament as its group reward (``reward_fns.pairwise_judge.compute_score``,
``mode=tournament``, bound as verl's ``get_custom_reward_fn`` binds it): the samples of each ``uid`` are scored
together against the fake OpenAI server, whatever order they arrive in; a short group is scored as it stands after
the timeout; the score lands on the last valid response token of verl's ``rm_scores``.
"""

from __future__ import annotations

import asyncio
import logging
import os

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

import scripts
from reward_fns.pairwise_judge import KEYS
from scripts.train import group_reward
from scripts.train.group_reward import GroupRewardManager
from tests.doubles.fake_openai import FakeOpenAIServer
from tests.reward_fns.test_pairwise_judge import INFO, REFERENCE, RIGHT, WRONG, truthful

PATH = os.path.join(scripts.ROOT, "scripts", "train", "group_reward.py")
#: (uid, response) in arrival order: two groups of three, interleaved
SAMPLES = [("q1", RIGHT), ("q2", WRONG), ("q1", WRONG), ("q2", RIGHT), ("q1", "#### 70"), ("q2", REFERENCE)]
#: all pairs, truthful judge (it says A when both or neither are right): per sample (score, judge_flip, rule_score).
#: The guard (on by default) voids a pick between two wrong answers (its quote is not the reference): q1's two wrong
#: answers win nothing; q2's two right ones tie (a win for both), and flips count only between different answers
EXPECTED = [(1.0, 0.0, 1.0), (0.0, 0.0, 0.0), (0.0, 0.5, 0.0), (1.0, 0.0, 1.0), (0.0, 0.5, 0.0), (1.0, 0.0, 1.0)]
#: the group's keys after pairwise_judge's: its tournament stats, then the manager's group size
GROUP_KEYS = ("judge_group_flip_rate", "judge_group_tie_rate", "judge_group_cycle_rate", "judge_group_calls")
GROUP_KEYS += ("judge_group_size",)
#: per group: flip rate (letters, voided or not), tie rate (verdicts that stand), cycle rate, calls, judge_group_size
GROUP = {"q1": (1 / 3, 0.0, 0.0, 6.0, 3.0), "q2": (0.0, 0.0, 0.0, 6.0, 3.0)}


class CharTokenizer:
    """One token per character (ids are code points): decode is exact."""

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(int(i)) for i in ids if int(i))


def batch(samples, prompt_len=4, response_len=48):
    from verl import DataProto

    n = len(samples)
    responses = torch.zeros((n, response_len), dtype=torch.long)
    mask = torch.zeros((n, prompt_len + response_len), dtype=torch.long)
    mask[:, :prompt_len] = 1
    for i, (_, text) in enumerate(samples):
        responses[i, : len(text)] = torch.tensor([ord(c) for c in text])
        mask[i, prompt_len : prompt_len + len(text)] = 1
    return DataProto.from_dict(
        tensors={
            "prompts": torch.ones((n, prompt_len), dtype=torch.long),
            "responses": responses,
            "attention_mask": mask,
        },
        non_tensors={
            "uid": np.array([u for u, _ in samples], dtype=object),
            "reward_model": np.array([{"ground_truth": "72"}] * n, dtype=object),
            "extra_info": np.array([dict(INFO)] * n, dtype=object),
        },
    )


def config(base_url, n=3, **group):
    kwargs = dict(base_url=base_url, model="judge", mode="tournament", scheme="all_pairs", timeout=2.0, max_retries=0)
    fn = {"path": "pkg://reward_fns.pairwise_judge", "name": "compute_score", "reward_kwargs": kwargs}
    return OmegaConf.create(
        {
            "actor_rollout_ref": {"rollout": {"n": n}},
            "reward": {"custom_reward_function": fn},
            "verl_judge": {"group_reward": group},
        }
    )


def manager_for(cfg, cls=GroupRewardManager):
    """The manager as verl's ``load_reward_manager`` builds it: the custom function with its reward_kwargs bound."""
    from verl.trainer.ppo.reward import get_custom_reward_fn

    return cls(config=cfg, tokenizer=CharTokenizer(), compute_score=get_custom_reward_fn(cfg))


def group_overrides(base_url: str, **kwargs) -> list[str]:
    """verl's reward loop with the group manager (loaded by path) and pairwise_judge, all pairs, against ``base_url``;
    three answers a prompt; ``kwargs``: more reward_kwargs."""
    kwargs = dict(base_url=base_url, model="judge", scheme="all_pairs", max_retries=0, **kwargs)
    return [
        "reward.num_workers=1",
        "actor_rollout_ref.rollout.n=3",
        "reward.reward_manager.source=importlib",
        "reward.reward_manager.name=GroupRewardManager",
        f"reward.reward_manager.module.path={PATH}",
        f"reward.custom_reward_function.path={os.path.join(scripts.ROOT, 'reward_fns', 'pairwise_judge.py')}",
        "reward.custom_reward_function.name=compute_score",
        *(f"+reward.custom_reward_function.reward_kwargs.{k}={v}" for k, v in kwargs.items()),
    ]


def run(manager, data):
    async def main():
        return await asyncio.gather(*(manager.run_single(data[i : i + 1]) for i in range(len(data))))

    return asyncio.run(main())


def summary(outs):
    return [
        (o["reward_score"], o["reward_extra_info"]["judge_flip"], o["reward_extra_info"]["rule_score"]) for o in outs
    ]


def test_the_registry_holds_it_once_also_when_loaded_by_path():
    from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls
    from verl.trainer.ppo.reward import resolve_reward_manager_cls

    assert get_reward_manager_cls("pairwise_group") is GroupRewardManager
    by_path = resolve_reward_manager_cls(
        OmegaConf.create(
            {
                "reward": {
                    "reward_manager": {"source": "importlib", "name": "GroupRewardManager", "module": {"path": PATH}}
                }
            }
        )  # fmt: skip
    )
    assert by_path.__name__ == "GroupRewardManager" and by_path is not GroupRewardManager
    assert get_reward_manager_cls(group_reward.NAME) is GroupRewardManager


def test_each_uid_is_scored_as_one_group():
    from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls

    with FakeOpenAIServer(truthful) as srv:
        cls = get_reward_manager_cls("pairwise_group")
        manager = manager_for(config(srv.base_url), cls)
        data = batch(SAMPLES)
        outs = run(manager, data)
        # 6 comparisons a group; RIGHT vs WRONG (both orders) is in both: the client sends those once
        assert len(srv.requests) == 10
    assert [round(x, 12) for s in summary(outs) for x in s] == [round(x, 12) for s in EXPECTED for x in s]
    for (uid, _), o in zip(SAMPLES, outs):
        assert list(o["reward_extra_info"]) == list(KEYS) + list(GROUP_KEYS)
        assert [round(o["reward_extra_info"][k], 12) for k in GROUP_KEYS] == [round(x, 12) for x in GROUP[uid]]
    assert manager.groups == {}
    scores = cls.assemble_rm_scores(data, [o["reward_score"] for o in outs])
    last = data.batch["attention_mask"][:, 4:].sum(-1) - 1
    assert scores[torch.arange(6), last].tolist() == [e[0] for e in EXPECTED]
    assert float(scores.abs().sum()) == sum(e[0] for e in EXPECTED)


def test_a_short_group_is_scored_as_it_stands_after_the_timeout(caplog):
    with FakeOpenAIServer(truthful) as srv:
        manager = manager_for(config(srv.base_url, timeout=0.2))
        with caplog.at_level(logging.WARNING, logger=group_reward.__name__):
            outs = run(manager, batch([("q1", WRONG), ("q1", RIGHT)]))  # 2 of the 3 rollout.n answers
        assert len(srv.requests) == 2
    assert summary(outs) == [(0.0, 0.0, 0.0), (1.0, 0.0, 1.0)]
    assert [o["reward_extra_info"]["judge_group_size"] for o in outs] == [2.0, 2.0]
    # both samples timed out; the group is named once, with what it held, what it waited for and the setting
    assert [r.getMessage() for r in caplog.records if r.name == group_reward.__name__] == [
        "group_reward: group q1 scored with 2 of 3 answers after waiting 0s for the rest "
        "(verl_judge.group_reward.timeout; short groups so far: 1)"
    ]


SHORT_Q1 = (
    "group_reward: group q1 scored with {} of 3 answers after waiting 0s for the rest "
    "(verl_judge.group_reward.timeout; short groups so far: 1)"
)
ALONE = "group_reward: a sample {}: scored alone, at once (samples scored alone so far: {})"
LATE_Q1 = "of group q1 came after the group was scored short"


@pytest.mark.parametrize(
    "first, then, want, logs",
    [
        # no uid: no mate can come (it waited the whole timeout alone, then the fallback)
        ([], [(None, RIGHT)], [(1.0, 1.0)], [ALONE.format("without a uid", 1)]),
        (
            [],
            [(None, WRONG), (None, RIGHT)],
            [(0.0, 1.0), (1.0, 1.0)],
            [ALONE.format("without a uid", n) for n in (1, 2)],
        ),
        # a late answer of a group scored short (2 of 3): alone, at once (it waited the timeout for a group of its own)
        ([("q1", WRONG), ("q1", RIGHT)], [("q1", RIGHT)], [(1.0, 1.0)], [SHORT_Q1.format(2), ALONE.format(LATE_Q1, 1)]),
        (  # both missing answers of a group scored with 1 of 3
            [("q1", WRONG)],
            [("q1", RIGHT), ("q1", WRONG)],
            [(1.0, 1.0), (0.0, 1.0)],
            [SHORT_Q1.format(1), ALONE.format(LATE_Q1, 1), ALONE.format(LATE_Q1, 2)],
        ),
    ],
    ids=["no_uid", "two_without_uid", "late_answer", "both_late_answers"],
)
def test_a_sample_no_mate_can_join_is_scored_alone_without_waiting(first, then, want, logs, caplog):
    """Scored at once as a group of one (no mate: the judge_failure fallback, the rule's grade): no timeout passes
    for it (``short`` counts the groups scored after one) and the warning says why."""
    with FakeOpenAIServer(truthful) as srv:
        manager = manager_for(config(srv.base_url, timeout=0.2))
        with caplog.at_level(logging.WARNING, logger=group_reward.__name__):
            if first:
                run(manager, batch(first))
            data = batch([("-" if u is None else u, text) for u, text in then])
            if then[0][0] is None:
                del data.non_tensor_batch["uid"]
            outs = run(manager, data)
        assert len(srv.requests) == (2 if len(first) == 2 else 0)  # the short group's one pair, both orders
    assert [(o["reward_score"], o["reward_extra_info"]["judge_group_size"]) for o in outs] == want
    assert (manager.short, manager.groups) == (1 if first else 0, {})
    assert [r.getMessage() for r in caplog.records if r.name == group_reward.__name__] == logs
    assert manager.late == {}  # every missing answer came


def test_validation_groups_wait_for_their_own_size(monkeypatch, caplog):
    """In validation verl repeats each prompt ``val_kwargs.n`` times before ``_get_gen_batch`` (``fit`` repeats
    ``rollout.n`` times after it): the installed hooks give each sample its uid's count there, and the manager waits
    for that many answers, not ``rollout.n`` (a group of one: scored at once, no timeout). Outside ``_validate``, no
    count: the manager's size."""
    from verl.trainer import main_ppo_v0
    from verl.trainer.ppo import ray_trainer

    from scripts.train.hooks import GROUP_EXPECTED
    from scripts.train.seam import install

    def validate(self, val_n):  # the lines of verl's _validate that lead to the rollout's input
        test_batch = batch([("v1", WRONG), ("v2", RIGHT)]).repeat(repeat_times=val_n, interleave=True)
        return self._get_gen_batch(test_batch)

    monkeypatch.setattr(ray_trainer.RayPPOTrainer, "_validate", validate)
    install(OmegaConf.create({"data": {"train_batch_size": 2}, "verl_judge": {}}))
    trainer = main_ppo_v0.RayPPOTrainer  # the hooks' subclass, which verl's task runner builds
    me = object.__new__(trainer)
    assert GROUP_EXPECTED not in trainer._get_gen_batch(me, batch(SAMPLES)).non_tensor_batch  # training
    assert trainer._validate(me, 2).non_tensor_batch[GROUP_EXPECTED].tolist() == [2, 2, 2, 2]
    gen = trainer._validate(me, 1)
    assert gen.non_tensor_batch[GROUP_EXPECTED].tolist() == [1, 1]
    # the rollout's answers, with the gen batch's non-tensor columns (the agent loop's kwargs, per sample)
    answers = batch([("v1", WRONG), ("v2", RIGHT)])
    answers.non_tensor_batch.update(gen.non_tensor_batch)
    with FakeOpenAIServer(truthful) as srv:
        manager = manager_for(config(srv.base_url, n=8, timeout=5.0))
        with caplog.at_level(logging.WARNING, logger=group_reward.__name__):
            outs = run(manager, answers)
        assert srv.requests == []  # a group of one has no mate
    assert [(o["reward_score"], o["reward_extra_info"]["judge_group_size"]) for o in outs] == [(0.0, 1.0), (1.0, 1.0)]
    assert [r for r in caplog.records if r.name == group_reward.__name__] == [] and manager.short == 0


def test_the_group_size_setting_and_a_bad_one():
    with FakeOpenAIServer(truthful) as srv:
        manager = manager_for(config(srv.base_url, n=8, size=2, timeout=0.2))
        outs = run(manager, batch([("q1", WRONG), ("q1", RIGHT), ("q1", RIGHT)]))  # a third: a group of its own
    assert [(o["reward_score"], o["reward_extra_info"]["judge_group_size"]) for o in outs] == [
        (0.0, 2.0),
        (1.0, 2.0),
        (1.0, 1.0),  # a group of one has no mate: the rule's grade
    ]
    with pytest.raises(ValueError, match="size must be"):
        manager_for(config("http://127.0.0.1:9/v1", size=0))
    bad = config("http://127.0.0.1:9/v1", n=1)  # a bad option of the function: refused at its first group
    bad.reward.custom_reward_function.reward_kwargs.scheme = "knockout"
    with pytest.raises(ValueError, match="scheme must be"):
        run(manager_for(bad), batch([("q1", WRONG)]))


def test_through_verls_reward_loop_worker(model_path, tokenizer):
    """verl's own worker (``RewardLoopWorker``, as a Ray actor runs it in training, here in-process) loads the manager
    by path (``reward.reward_manager.source=importlib``) and the custom reward, fans the batch out one sample at a time
    (``compute_score_batch``), and each uid still comes back scored as one group."""
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    from tests.scripts.train.test_verl_reward_loop import compose_config, make_batch, user

    with FakeOpenAIServer(truthful) as srv:
        cfg = compose_config(model_path, group_overrides(srv.base_url, mode="tournament"))
        worker = RewardLoopWorker(cfg)
        assert type(worker.reward_manager).__name__ == "GroupRewardManager"
        rows = [
            {"prompt": user(INFO["question"]), "response": r, "data_source": "openai/gsm8k", "gt": "72"}
            for _, r in SAMPLES
        ]
        data, valid = make_batch(tokenizer, rows)
        data.non_tensor_batch["uid"] = np.array([u for u, _ in SAMPLES], dtype=object)
        data.non_tensor_batch["extra_info"] = np.array([dict(INFO) for _ in SAMPLES], dtype=object)
        outs = asyncio.run(worker.compute_score_batch(data))
    assert [round(x, 12) for s in summary(outs) for x in s] == [round(x, 12) for s in EXPECTED for x in s]
    scores = type(worker.reward_manager).assemble_rm_scores(data, [o["reward_score"] for o in outs])
    assert scores[torch.arange(6), torch.tensor(valid) - 1].tolist() == [e[0] for e in EXPECTED]


def test_validation_padding_is_no_group_mate(caplog, monkeypatch):
    """verl's ``_validate`` pads the generation batch to a multiple of the agent workers with copies of its first
    rows (``pad_dataproto_to_divisor``). Installed, the hooks give each copy a uid of its own and a group size of 1:
    no group waits for a copy, and no real answer is scored against one, whatever order the answers arrive in."""
    from verl.trainer import main_ppo_v0
    from verl.trainer.ppo import ray_trainer

    from scripts.train.hooks import GROUP_EXPECTED
    from scripts.train.seam import install

    def validate(self):  # the lines of verl's _validate up to the rollout's input: 2 prompts, val_kwargs.n=2
        gen = self._get_gen_batch(batch([("v1", RIGHT), ("v2", WRONG)]).repeat(repeat_times=2, interleave=True))
        return ray_trainer.pad_dataproto_to_divisor(gen, 3)

    monkeypatch.setattr(ray_trainer.RayPPOTrainer, "_validate", validate)
    install(OmegaConf.create({"data": {"train_batch_size": 2}, "verl_judge": {}}))
    trainer = main_ppo_v0.RayPPOTrainer  # the hooks' subclass, which verl's task runner builds
    padded, pad = trainer._validate(object.__new__(trainer))
    nt = padded.non_tensor_batch
    assert pad == 2
    assert list(nt["uid"]) == ["v1", "v1", "v2", "v2", "v1#pad0", "v1#pad1"]
    assert nt[GROUP_EXPECTED].tolist() == [2, 2, 2, 2, 1, 1]
    # v1's two answers are right and v2's wrong; the copies (right) arrive first
    answers = batch([("v1", RIGHT), ("v1", RIGHT), ("v2", WRONG), ("v2", WRONG), ("v1", RIGHT), ("v1", RIGHT)])
    answers.non_tensor_batch.update(nt)
    order = [4, 5, 0, 1, 2, 3]
    with FakeOpenAIServer(truthful) as srv:
        manager = manager_for(config(srv.base_url, n=8, timeout=30.0))
        with caplog.at_level(logging.WARNING, logger=group_reward.__name__):
            outs = run(manager, answers[order])
    got = {int(i): (o["reward_score"], o["reward_extra_info"]["judge_group_size"]) for i, o in zip(order, outs)}
    # a right pair ties (0.5 each), a wrong pair's picks are voided (0); each copy alone (no mate: the rule's grade)
    assert got == {0: (1.0, 2.0), 1: (1.0, 2.0), 2: (0.0, 2.0), 3: (0.0, 2.0), 4: (1.0, 1.0), 5: (1.0, 1.0)}
    assert [r for r in caplog.records if r.name == group_reward.__name__] == [] and manager.short == 0
    # outside validation the pad is verl's own
    assert list(ray_trainer.pad_dataproto_to_divisor(batch([("t", RIGHT)]), 2)[0].non_tensor_batch["uid"]) == ["t"] * 2
