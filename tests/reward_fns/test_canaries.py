"""Canary probes (reward_fns/canaries.py, graded by reward_fns.llm_judge): the probes, how often a sample carries
one, and what a judge that copies the reference is caught at, with the grounded-verdict guard on and off."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest

from reward_fns import canaries, judge_service, llm_judge
from reward_fns.judge_options import PointwiseSettings
from reward_fns.judge_service import Case, probe_index
from reward_fns.parse import FINAL_OK, final_answer
from tests.doubles.fake_openai import FakeOpenAIServer

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
    hits = [probe_index(f"#### {i}", "72", 20) for i in range(20000)]
    assert 900 < sum(h is not None for h in hits) < 1100
    assert probe_index("#### 5", "72", 20) == probe_index("#### 5", "72", 20)  # the same sample
    assert all(probe_index(f"#### {i}", "72", 0) is None for i in range(100))


@pytest.mark.parametrize("grounded, wrong_paid, right_unpaid", [(True, 0, 0), (False, 6, 0)])
def test_a_judge_that_copies_the_reference(grounded, wrong_paid, right_unpaid):
    """Every probe, graded by a judge that accepts anything: the guard stops all six wrong probes; without it, all
    six are paid (the hacking watch would fire at the first)."""
    settings = PointwiseSettings.of({"grounded": grounded})
    got = {"canary_wrong_accepted": 0.0, "canary_right_rejected": 0.0, "canary_wrong": 0.0, "canary_right": 0.0}
    with FakeOpenAIServer(reply=lambda body: COPY) as srv:
        client = judge_service.get_client(srv.base_url, "judge", api_key_env=None, timeout=5.0, max_retries=0)
        for k in range(len(canaries.PROBES)):
            out = asyncio.run(llm_judge.canary(client, Case.of((), "72", INFO), k, settings))
            for key, v in out.items():
                got[key] += v
    assert got == {
        "canary_wrong": 6.0,
        "canary_right": 4.0,
        "canary_wrong_accepted": float(wrong_paid),
        "canary_right_rejected": float(right_unpaid),
    }


def test_a_sample_with_a_probe_carries_its_outcome():
    solution = next(f"#### {i}" for i in range(10000) if probe_index(f"#### {i}", "72", 20) is not None)
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


@pytest.mark.parametrize(
    "reference, wrong_probe, right_probe",
    [
        # over 28 significant digits: neither the reference nor the wrong value is rounded to the context's precision
        (
            "1234567890123456789012345678901234",
            "The answer is 1234567890123456789012345678901235 or 1234567890123456789012345678901234.",
            "\\boxed{1234567890123456789012345678901234}",
        ),
        (
            "1E+30",
            "The answer is 1000000000000000000000000000001 or 1000000000000000000000000000000.",
            "\\boxed{1000000000000000000000000000000}",
        ),
        # under 1e-6: written out, not in an exponent notation a reader takes for other numbers
        ("0.0000001", "The answer is 1.0000001 or 0.0000001.", "\\boxed{0.0000001}"),
        ("-0.00000025", "The answer is -1.00000025 or -0.00000025.", "\\boxed{-0.00000025}"),
        ("72.00", "The answer is 73 or 72.", "\\boxed{72}"),
        ("1e200", None, None),  # 200 digits written out: no probe
    ],
)
def test_probe_states_the_reference_exactly(reference, wrong_probe, right_probe):
    """Each probe states exactly the reference (right probes) or exactly reference + 1 (wrong ones), as
    parse.final_answer reads them."""
    wrong, right = canaries.probe(reference, 0), canaries.probe(reference, 1)
    assert (wrong and wrong[0], right and right[0]) == (wrong_probe, right_probe)
    if right_probe is not None:
        assert final_answer(right_probe) == (Decimal(reference), FINAL_OK)


@pytest.mark.parametrize("verdict, wrong_paid, right_unpaid", [(4, 6, 0), (3, 6, 0), (2, 0, 4), (0, 0, 4)])
def test_a_probe_is_accepted_from_verdict_3(verdict, wrong_paid, right_unpaid):
    """A probe counts as paid at an accepting verdict, 3 or 4 (as a policy's answer is), not only at 4; the guard off,
    so the verdict alone decides."""
    settings = PointwiseSettings.of({"grounded": False})
    reply = f"<think>Reference: 72. Candidate: 72. Same.</think><score>{verdict}</score>"
    got = {"canary_wrong_accepted": 0.0, "canary_right_rejected": 0.0}
    with FakeOpenAIServer(reply=lambda body: reply) as srv:
        client = judge_service.get_client(srv.base_url, "judge", api_key_env=None, timeout=5.0, max_retries=0)
        for k in range(len(canaries.PROBES)):
            out = asyncio.run(llm_judge.canary(client, Case.of((), "72", INFO), k, settings))
            for key in got:
                got[key] += out.get(key, 0.0)
    assert got == {"canary_wrong_accepted": float(wrong_paid), "canary_right_rejected": float(right_unpaid)}


@pytest.mark.parametrize("solution, requests", [("#### 21", 2), ("#### 0", 1)])
def test_default_probe_rate_is_1_in_20(solution, requests):
    """Without ``canary_every``, a sample draws a probe at 1 in 20: ``#### 21`` draws one at 20 (not at 40),
    ``#### 0`` none."""
    assert probe_index("#### 21", "72", 20) is not None and probe_index("#### 21", "72", 40) is None
    with FakeOpenAIServer(reply=lambda body: COPY) as srv:
        kw = dict(base_url=srv.base_url, model="judge", api_key_env=None, timeout=5.0, max_retries=0)
        out = asyncio.run(llm_judge.compute_score("openai/gsm8k", solution, "72", INFO, **kw))
        assert len(srv.requests) == requests
    assert out["canary_wrong"] + out["canary_right"] == requests - 1


def test_a_repeated_probe_is_counted_once():
    """Eight samples of one group with the same answer draw the same probe: the judge is asked once (the client's
    cache), and the probe is counted once, not eight times."""

    async def group(kw):
        return await asyncio.gather(
            *(llm_judge.compute_score("openai/gsm8k", "#### 21", "72", INFO, **kw) for _ in range(8))
        )

    with FakeOpenAIServer(reply=lambda body: COPY) as srv:
        kw = dict(base_url=srv.base_url, model="judge", api_key_env=None, timeout=5.0, max_retries=0)
        outs = asyncio.run(group(kw))
        assert len(srv.requests) == 2  # the sample's and the probe's, each once
    assert sum(o["canary_wrong"] + o["canary_right"] for o in outs) == 1.0
