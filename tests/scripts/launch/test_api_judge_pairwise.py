"""recipes/gsm8k_api_judge with verdict=pairwise, end to end on CPU: the recipe's config composed as the launcher
composes it with the README's override sets (``scripts/lab/arms.py``: ``PAIRWISE_REF``, ``TOURNAMENT``) and
``JUDGE_BASE_URL`` pointing at the fake OpenAI server, then verl 0.9.1's own ``RewardLoopWorker`` (in-process, as a
Ray actor runs it) loads the recipe's reward manager and ``reward_fns/pairwise_judge.py`` with the composed
``reward_kwargs`` and scores a batch. Exact rewards for scripted judges: truthful (both orders asked), biased to A,
tying everything (``<better>tie</better>``: no verdict), and a cycle of three in a tournament.
"""

from __future__ import annotations

import numpy as np
import pytest
from omegaconf import OmegaConf

from reward_fns.pairwise_judge import KEYS
from scripts.lab import arms
from scripts.launch.config_compose import compose
from tests.doubles.fake_openai import FakeOpenAIServer
from tests.reward_fns.test_pairwise_judge import INFO, REFERENCE, RIGHT, WRONG, always, garbled, row, shown, truthful

pytest.importorskip("verl")

#: three right answers, written differently (each states 72: the guard lets a pick between them stand)
R1, R2, R3 = "#### 72", "6 * 12 = 72\n#### 72", "Twelve sixes: 72.\n#### 72"


def cyclic(body: dict) -> str:
    """R1 beats R2, R2 beats R3, R3 beats R1, in either order: a cycle of three, no position bias."""
    a, b, ref = shown(body)
    first = (a, b) in {(R1, R2), (R2, R3), (R3, R1)}
    return f"<think>Reference: {ref}. A: 72. B: 72.</think><better>{'A' if first else 'B'}</better>"


def run(overrides, reply, responses, model_path, tokenizer, monkeypatch, uid=None):
    """Compose the recipe with ``overrides`` against a fake judge answering ``reply``; verl's worker scores
    ``responses``. Returns (the reward_kwargs verl hands the reward, each sample's reward_extra_info with
    ``judge_seconds`` read as 1.0 when a call took time, the bodies the judge received)."""
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    from tests.scripts.train.test_verl_reward_loop import make_batch, user

    with FakeOpenAIServer(reply) as srv:
        monkeypatch.setenv("JUDGE_BASE_URL", srv.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-recipe-test")
        cfg = compose([*overrides, f"actor_rollout_ref.model.path={model_path}"], "gsm8k_api_judge")
        kwargs = OmegaConf.to_container(cfg.reward.custom_reward_function.reward_kwargs, resolve=True)
        worker = RewardLoopWorker(cfg)
        rows = [{"prompt": user(INFO["question"]), "response": r, "data_source": "openai/gsm8k", "gt": "72"}
                for r in responses]  # fmt: skip
        data, _ = make_batch(tokenizer, rows)
        data.non_tensor_batch["extra_info"] = np.array([dict(INFO) for _ in rows], dtype=object)
        if uid is not None:
            data.non_tensor_batch["uid"] = np.array([uid] * len(rows), dtype=object)
        # as in a Ray actor: the worker's coroutines run on the loop it captured at construction
        outs = worker.loop.run_until_complete(worker.compute_score_batch(data))
        infos = [o["reward_extra_info"] for o in outs]
        assert [o["reward_score"] for o in outs] == [i["score"] for i in infos]
        assert {r.headers.get("Authorization") for r in srv.requests} == {"Bearer sk-recipe-test"}
        timed = [{**i, "judge_seconds": float(i["judge_seconds"] > 0)} for i in infos]
        return kwargs, timed, srv.bodies


# judge -> the rewards of RIGHT and WRONG against the reference solution (pairwise_ref: 2 calls a sample)
PAIRWISE_REF = {
    # a right answer ties with the reference: paid in full by any verdict
    "truthful": (truthful, [row(1.0, 1.0, rule=1.0), row(0.0, 0.0)]),
    "biased to A": (always("A"), [row(1.0, 1.0, rule=1.0), row(0.0, 0.0, flip=1.0, guarded=0.5)]),
    "ties everything": (garbled, [row(0.0, 0.0, parse_fail=1.0, rule=1.0), row(0.0, 0.0, parse_fail=1.0)]),
}


@pytest.mark.parametrize("judge, expected", PAIRWISE_REF.values(), ids=PAIRWISE_REF.keys())
def test_pairwise_ref_through_the_recipe(judge, expected, model_path, tokenizer, monkeypatch):
    kwargs, infos, bodies = run(arms.PAIRWISE_REF, judge, [RIGHT, WRONG], model_path, tokenizer, monkeypatch)
    assert kwargs == {"base_url": kwargs["base_url"], "mode": "pairwise_ref"} and kwargs["base_url"].startswith("http")
    assert [list(i) for i in infos] == [list(KEYS)] * 2
    assert infos == expected
    # both orders of each answer against the reference solution, nothing else (no canary drawn for these two)
    assert sorted(shown(b)[:2] for b in bodies) == sorted(
        [(RIGHT, REFERENCE), (REFERENCE, RIGHT), (WRONG, REFERENCE), (REFERENCE, WRONG)]
    )
    assert {b["model"] for b in bodies} == {"gpt-4o-mini"}  # llm_judge's default remote model, the one default


#: the group's keys: its size (the group manager's), flip, tie and cycle rates and calls (pairwise_judge's tournament)
GROUP_KEYS = ("judge_group_size", *(f"judge_group_{k}" for k in ("flip_rate", "tie_rate", "cycle_rate", "calls")))
# judge -> per answer (score, judge_flip, judge_tie, judge_cycle, judge_calls, judge_parse_fail); group keys. Three
# right answers tie whatever the letters (a win for both of each pair); flips count only between different answers
TOURNAMENT = {
    "a judge that cycles": (cyclic, [(1.0, 0.0, 0.0, 0.0, 2.0, 0.0)] * 3, (3.0, 0.0, 0.0, 0.0, 6.0)),
    "biased to A": (always("A"), [(1.0, 0.0, 0.0, 0.0, 2.0, 0.0)] * 3, (3.0, 0.0, 0.0, 0.0, 6.0)),
    "ties everything": (garbled, [(0.0, 0.0, 0.0, 0.0, 2.0, 1.0)] * 3, (3.0, 0.0, 0.0, 0.0, 6.0)),
}


@pytest.mark.parametrize("judge, expected, group", TOURNAMENT.values(), ids=TOURNAMENT.keys())
def test_tournament_through_the_recipe(judge, expected, group, model_path, tokenizer, monkeypatch):
    """One GRPO group of three right answers (``rollout.n=3``), circular: every pair in both orders, 6 calls."""
    overrides = [*arms.TOURNAMENT, "actor_rollout_ref.rollout.n=3"]
    kwargs, infos, bodies = run(overrides, judge, [R1, R2, R3], model_path, tokenizer, monkeypatch, uid="q1")
    assert kwargs == {"base_url": kwargs["base_url"], "mode": "tournament"}
    keys = ("score", "judge_flip", "judge_tie", "judge_cycle", "judge_calls", "judge_parse_fail")
    assert [tuple(round(i[k], 12) for k in keys) for i in infos] == expected
    assert {tuple(round(i[k], 12) for k in GROUP_KEYS) for i in infos} == {group}
    assert [list(i) for i in infos] == [[*KEYS, *GROUP_KEYS[1:], GROUP_KEYS[0]]] * 3
    asked = sorted(shown(b)[:2] for b in bodies)
    assert asked == sorted((a, b) for a in (R1, R2, R3) for b in (R1, R2, R3) if a != b)
