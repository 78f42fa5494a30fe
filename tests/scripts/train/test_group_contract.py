"""A group reward as a user writes it (``tests/fixtures/group_rewards.py``: the README's example) through verl 0.9.1's
own ``RewardLoopWorker``, in-process on CPU: verl loads the group manager by path and the function with its
``reward_kwargs``, fans the batch out one sample at a time, and each ``uid`` is scored by one call with every answer
of its group; a function that breaks the contract stops with an error naming it.
"""

from __future__ import annotations

import asyncio
import os

import numpy as np
import pytest
import torch

import scripts

FUNCTIONS = "pkg://tests.fixtures.group_rewards"
#: (uid, response) in arrival order, two groups of three interleaved; the reference is 72
SAMPLES = [
    ("q1", "The answer is 72.\n#### 72"),
    ("q2", "It is 72\n#### 72"),
    ("q1", "#### 70"),
    ("q2", "6 * 12 = 72\n#### 72"),
    ("q1", "#### 72"),
    ("q2", "#### 72"),
]
#: shortest_right_first, per sample: (score, rule_score, judge_group_size): q1's right answers by length 2nd and 1st,
#: q2's three right ones 2nd, 3rd and 1st
EXPECTED = [(0.5, 1.0, 3.0), (0.5, 1.0, 3.0), (0.0, 0.0, 3.0), (1 / 3, 1.0, 3.0), (1.0, 1.0, 3.0), (1.0, 1.0, 3.0)]


def worker(model_path, name, **kwargs):
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    from tests.scripts.train.test_verl_reward_loop import compose_config

    manager = os.path.join(scripts.ROOT, "scripts", "train", "group_reward.py")
    overrides = [
        "reward.num_workers=1",
        "actor_rollout_ref.rollout.n=3",
        "reward.reward_manager.source=importlib",
        "reward.reward_manager.name=GroupRewardManager",
        f"reward.reward_manager.module.path={manager}",
        f"reward.custom_reward_function.path={FUNCTIONS}",
        f"reward.custom_reward_function.name={name}",
        "+verl_judge.group_reward.timeout=5",
        *(f"+reward.custom_reward_function.reward_kwargs.{k}={v}" for k, v in kwargs.items()),
    ]
    return RewardLoopWorker(compose_config(model_path, overrides))


def score(reward_worker, tokenizer, samples):
    from tests.scripts.train.test_verl_reward_loop import make_batch, user

    rows = [{"prompt": user("What is 6 * 12?"), "response": r, "data_source": "gsm8k", "gt": "72"} for _, r in samples]
    data, valid = make_batch(tokenizer, rows)
    data.non_tensor_batch["uid"] = np.array([u for u, _ in samples], dtype=object)
    return data, valid, asyncio.run(reward_worker.compute_score_batch(data))


@pytest.mark.parametrize("name", ["shortest_right_first", "shortest_right_first_async"])
def test_a_users_group_reward_through_verls_reward_loop(name, model_path, tokenizer):
    reward_worker = worker(model_path, name)
    data, valid, outs = score(reward_worker, tokenizer, SAMPLES)
    info = [o["reward_extra_info"] for o in outs]
    assert [(o["reward_score"], i["rule_score"], i["judge_group_size"]) for o, i in zip(outs, info)] == EXPECTED
    assert [list(i) for i in info] == [["score", "rule_score", "judge_group_size"]] * len(SAMPLES)
    assert reward_worker.reward_manager.groups == {}
    scores = type(reward_worker.reward_manager).assemble_rm_scores(data, [o["reward_score"] for o in outs])
    assert scores[torch.arange(len(SAMPLES)), torch.tensor(valid) - 1].tolist() == [
        float(np.float32(e[0])) for e in EXPECTED
    ]


NAMED = "group reward broken of pkg://tests.fixtures.group_rewards: "


@pytest.mark.parametrize(
    "breaks, message",
    [
        ("a_dict_short", "returned 2 rows for a group of 3 answers; it must return one dict each"),
        ("one_dict", "returned dict for a group of 3 answers; it must return one dict each"),
        (
            "keys_differ",
            "answer 2's keys ['score', 'length', 'extra'] differ from answer 0's ['score', 'length']; every "
            "answer must get the same keys",
        ),
        ("no_score", "answer 0's reward must be a dict with 'score' first, got {'length': 7.0}"),
        ("score_not_first", "answer 0's reward must be a dict with 'score' first, got {'length': 7.0, 'score': 1.0}"),
        ("score_none", "answer 1's score must be a number, got None"),
        ("score_text", "answer 1's score must be a number, got '1'"),
        ("score_bool", "answer 1's score must be a number, got True"),
        ("score_nan", "answer 1's score must be a number, got nan"),
    ],
)
def test_a_broken_contract_stops_naming_the_function(breaks, message, model_path, tokenizer):
    reward_worker = worker(model_path, "broken", breaks=breaks)
    samples = [("q1", "#### 72"), ("q1", "#### 72"), ("q1", "#### 72")]
    with pytest.raises(ValueError) as raised:
        score(reward_worker, tokenizer, samples)
    assert str(raised.value) == NAMED + message
