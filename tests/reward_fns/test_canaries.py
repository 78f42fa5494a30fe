"""Canary probes (reward_fns/canaries.py, graded by reward_fns.llm_judge): the probes, how often a sample carries
one, and what a judge that copies the reference is caught at, with the grounded-verdict guard on and off."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest

from reward_fns import canaries, llm_judge
from reward_fns.parse import FINAL_OK, final_answer
from scripts.serve.fake_openai import FakeOpenAIServer

COPY = "<think>Reference: 72. Candidate: 72. Same.</think><score>4</score>"  # accepts anything, quoting the reference
INFO = {"question": "How many clips?", "answer": "48 + 24 = 72\n#### 72"}


@pytest.mark.parametrize(
    "k, text, right",
    [
        (0, "The answer is 73 or 72.", False),
        (1, "\\boxed{72}", True),
        (3, "So the total is 72.", True),
        (4, "#### 73\nCandidate: 72", False),
        (10, "The answer is 73 or 72.", False),  # the probes cycle
    ],
)
def test_probe(k, text, right):
    assert canaries.probe("72", k) == (text, right)


@pytest.mark.parametrize(
    "reference, k, text",
    [
        ("-5", 0, "The answer is -6 or -5."),
        ("1,000", 0, "The answer is 1001 or 1000."),
        ("2.5", 0, "The answer is 3.5 or 2.5."),
        ("unknown", 0, None),
    ],
)
def test_probe_values(reference, k, text):
    made = canaries.probe(reference, k)
    assert (made[0] if made else None) == text


def test_every_probe_states_the_answer_it_should():
    """Right probes state the reference as their one final answer; wrong probes never do."""
    for k, (_, right) in enumerate(canaries.PROBES):
        text, _ = canaries.probe("72", k)
        value, status = final_answer(text)
        assert ((value, status) == (Decimal(72), FINAL_OK)) is right, text


def test_about_one_sample_in_every_carries_a_probe():
    hits = [llm_judge.probe_index(f"#### {i}", "72", 20) for i in range(20000)]
    assert 900 < sum(h is not None for h in hits) < 1100
    assert llm_judge.probe_index("#### 5", "72", 20) == llm_judge.probe_index("#### 5", "72", 20)  # the same sample
    assert all(llm_judge.probe_index(f"#### {i}", "72", 0) is None for i in range(100))


@pytest.mark.parametrize("grounded, wrong_paid, right_unpaid", [(True, 0, 0), (False, 6, 0)])
def test_a_judge_that_copies_the_reference(grounded, wrong_paid, right_unpaid):
    """Every probe, graded by a judge that accepts anything: the guard stops all six wrong probes; without it, all
    six are paid (the hacking watch would fire at the first)."""
    opt = {**llm_judge.DEFAULTS, "grounded": grounded}
    got = {"canary_wrong_accepted": 0.0, "canary_right_rejected": 0.0, "canary_wrong": 0.0, "canary_right": 0.0}
    with FakeOpenAIServer(reply=lambda body: COPY) as srv:
        client = llm_judge.get_client(srv.base_url, "judge", api_key_env=None, timeout=5.0, max_retries=0)
        for k in range(len(canaries.PROBES)):
            out = asyncio.run(llm_judge._canary(client, k, "72", "72", INFO, opt))
            for key, v in out.items():
                got[key] += v
    assert got == {
        "canary_wrong": 6.0,
        "canary_right": 4.0,
        "canary_wrong_accepted": float(wrong_paid),
        "canary_right_rejected": float(right_unpaid),
    }


def test_a_sample_with_a_probe_carries_its_outcome():
    solution = next(f"#### {i}" for i in range(10000) if llm_judge.probe_index(f"#### {i}", "72", 20) is not None)
    with FakeOpenAIServer(reply=lambda body: COPY) as srv:
        out = asyncio.run(
            llm_judge.compute_score(
                "openai/gsm8k",
                solution,
                "72",
                INFO,
                base_url=srv.base_url,
                model="judge",
                api_key_env=None,
                timeout=5.0,
                max_retries=0,
            )
        )
        assert len(srv.requests) == 2  # the sample's and the probe's
    assert out["canary_wrong"] + out["canary_right"] == 1.0 and out["canary_wrong_accepted"] == 0.0
    assert list(out) == list(llm_judge.KEYS)
