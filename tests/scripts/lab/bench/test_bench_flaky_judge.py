"""scripts/lab/bench/flaky_judge.py: the judge reward with a share of its calls failing, for the outage arms of
``scripts.lab.policy_learns`` (``flaky_fallback``, ``flaky_abstain``)."""

from __future__ import annotations

import asyncio
import os

import pytest

from scripts.lab.bench import flaky_judge
from tests.doubles.fake_openai import FakeOpenAIServer

INFO = {"question": "How many?", "answer": "36 + 36 = 72\n#### 72"}
ANSWERS = [f"Working {i}.\n#### 72" for i in range(200)]


@pytest.mark.parametrize("share, failing", [(0.0, 0), (0.2, 47), (1.0, 200)])
def test_share_of_answers_that_fail(share, failing):
    """A hash of the text picks them: about ``share`` of distinct answers, the same ones every time."""
    picked = [a for a in ANSWERS if flaky_judge.fails(a, share)]
    assert len(picked) == failing and picked == [a for a in ANSWERS if flaky_judge.fails(a, share)]


@pytest.mark.parametrize(
    "failure, expected",
    [
        (
            "fallback",
            {"score": 1.0, "judge_error": 1.0, "judge_fallback": 1.0, "judge_abstained": 0.0},
        ),  # the rule's grade
        ("abstain", {"score": 0.0, "judge_error": 1.0, "judge_fallback": 0.0, "judge_abstained": 1.0}),
    ],
)
def test_a_failing_call_is_paid_as_judge_failure_says(failure, expected):
    with FakeOpenAIServer() as srv:
        kw = dict(base_url=srv.base_url, model="judge", judge_failure=failure, canary_every=0)
        down = asyncio.run(flaky_judge.compute_score("gsm8k", "#### 72", "72", INFO, fail_share=1.0, **kw))
        up = asyncio.run(flaky_judge.compute_score("gsm8k", "#### 72", "72", INFO, fail_share=0.0, **kw))
        assert len(srv.requests) == 1  # the failing call never reached the judge
    assert {k: down[k] for k in expected} == expected and down["judge_attempts"] == 1.0
    assert (up["score"], up["judge_error"], up["judge_score"]) == (1.0, 0.0, 4.0)


def test_options_are_checked_before_a_run():
    assert flaky_judge.check_options(fail_share=0.2, judge_failure="abstain") == []
    assert flaky_judge.check_options(fail_share=1.5) == ["fail_share must be a number in [0, 1], got 1.5"]
    assert flaky_judge.check_options(judge_failure="skip") == [
        "judge_failure must be 'fallback' or 'abstain', got 'skip'"
    ]


def test_outage_arms_compose(tmp_path):
    """The two outage arms' settings pass the launcher's config check (the reward's options included)."""
    from scripts.lab import policy_learns
    from scripts.launch import launcher as launch

    for arm in ("flaky_fallback", "flaky_abstain"):
        cfg = launch.compose(
            "gsm8k_local_judge", policy_learns.ARMS[arm] + policy_learns.JUDGE_SERVER_RUN, dict(os.environ)
        )
        kwargs = cfg.reward.custom_reward_function.reward_kwargs
        assert (
            cfg.reward.custom_reward_function.path == "pkg://scripts.lab.bench.flaky_judge" and kwargs.fail_share == 0.2
        )
        assert kwargs.get("judge_failure", "fallback") == ("abstain" if arm == "flaky_abstain" else "fallback")
        from scripts.launch.config_paths import reward_option_errors

        assert reward_option_errors(cfg) == []
    assert set(policy_learns.JUDGED) >= {"flaky_fallback", "flaky_abstain"}
