"""Pairwise canaries (``reward_fns.pairwise_judge`` with ``reward_fns.canaries.pair``): about 1 sample in
``canary_every`` (a hash of the sample) carries a probe, a known-wrong answer (the reference + 1) against the right
one in both orders; each order counts as one wrong and one right probe in the pointwise judge's ``canary_*`` keys;
beside it two right answers written differently (``canaries.tie``), both orders, each one right probe rejected unless
the comparison is a tie that pays both; and
``scripts/train/hooks.reward_metrics`` turns them into ``judge_health/canary_accept`` / ``canary_reject``. Exact
counts against the fake OpenAI server for an honest judge, one that always says A, one that always ties, one that
names the bigger number; probes answered from the cache or failed are not counted.
"""

from __future__ import annotations

import asyncio

import pytest

from reward_fns import canaries
from reward_fns.judge_service import probe_index
from reward_fns.pairwise_judge import KEYS, compute_score, score_group
from scripts.train.hooks import reward_metrics
from tests.doubles.fake_openai import FakeOpenAIServer
from tests.doubles.fake_replies import Reply
from tests.reward_fns.test_pairwise_judge import (
    INFO,
    REFERENCE,
    RIGHT,
    WRONG,
    always,
    garbled,
    num,
    says,
    shown,
    truthful,
)

FAST = dict(timeout=2.0, max_retries=0)
#: with canary_every=2, "#### 72" draws probe k = 1 (mod 3) and "#### 5" k = 0; "#### 96" draws none
PROBE_72 = ("The answer is 73.", "The answer is 72.")
PROBE_5 = ("#### 73", "#### 72")
TIE_72 = ("The answer is 72.", "So the total is 72.\n#### 72")  # canaries.tie for k = 1
TIE_5 = ("#### 72", "The answer is 72.")  # and k = 0


def bigger(body: dict) -> str:
    """Names the response with the bigger last number, quoting both truthfully."""
    a, b, _ = shown(body)
    return says("A" if int(num(a)) > int(num(b)) else "B", body)


def canary(out: dict) -> tuple:
    return tuple(out[k] for k in canaries.KEYS)


def test_the_draw_is_the_pointwise_judges():
    assert [probe_index(t, "72", 2) is not None for t in (RIGHT, WRONG, "#### 5")] == [True, False, True]
    assert canaries.pair("72", probe_index(RIGHT, "72", 2)) == PROBE_72
    assert canaries.pair("72", probe_index("#### 5", "72", 2)) == PROBE_5
    assert canaries.pair("1,000", 2) == ("So the total is 1001.\n#### 1001", "So the total is 1000.\n#### 1000")
    assert canaries.pair("seventy", 0) is None
    assert (canaries.tie("72", 1), canaries.tie("72", 0), canaries.tie("seventy", 0)) == (TIE_72, TIE_5, None)
    assert list(KEYS[-4:]) == ["canary_wrong", "canary_wrong_accepted", "canary_right", "canary_right_rejected"]


# (judge, options, (canary_wrong, canary_wrong_accepted, canary_right, canary_right_rejected)) for the sample "#### 72":
# two orders of the wrong-vs-right probe (2 wrong, 2 right probes) and two of the tie probe (2 right probes)
JUDGES = {
    "honest": (truthful, {}, (2.0, 0.0, 4.0, 0.0)),
    # names the wrong probe where it is A; the guard voids that verdict (its quote is 73, not the reference's 72), so
    # nothing wrong is paid, and the right probe goes unpaid in that order; the tie probe is paid either way
    "always A": (always("A"), {}, (2.0, 0.0, 4.0, 1.0)),
    "always A, guard off": (always("A"), {"grounded": False}, (2.0, 1.0, 4.0, 1.0)),
    "always B, guard off": (always("B"), {"grounded": False}, (2.0, 1.0, 4.0, 1.0)),
    "always ties (no verdict)": (garbled, {}, (2.0, 0.0, 4.0, 4.0)),
    "names the bigger number": (bigger, {}, (2.0, 0.0, 4.0, 2.0)),
    "names the bigger number, guard off": (bigger, {"grounded": False}, (2.0, 2.0, 4.0, 2.0)),
    # quotes no answer: every verdict voided, and the tie probe's two right answers are not read as the reference's
    "quotes none": (
        lambda body: "<think>Reference: 72. A: none. B: none.</think><better>A</better>",
        {},
        (2.0, 0.0, 4.0, 4.0),
    ),
}


@pytest.mark.parametrize("judge, kw, expected", JUDGES.values(), ids=JUDGES.keys())
def test_pairwise_ref_probe(judge, kw, expected):
    with FakeOpenAIServer(judge) as srv:
        out = asyncio.run(
            compute_score(
                "openai/gsm8k", RIGHT, "72", INFO, base_url=srv.base_url, model="judge", canary_every=2, **FAST, **kw
            )
        )
        sent = sorted(shown(b)[:2] for b in srv.bodies)
    assert canary(out) == expected
    assert sent == sorted([(RIGHT, REFERENCE), (REFERENCE, RIGHT), PROBE_72, PROBE_72[::-1], TIE_72, TIE_72[::-1]])
    assert out["judge_calls"] == 2.0  # the sample's own comparisons only


@pytest.mark.parametrize("candidate, every, calls", [(WRONG, 2, 2), (RIGHT, 0, 2), (RIGHT, 2, 6)])
def test_only_a_drawn_sample_probes(candidate, every, calls):
    with FakeOpenAIServer(truthful) as srv:
        out = asyncio.run(
            compute_score(
                "openai/gsm8k", candidate, "72", INFO, base_url=srv.base_url, model="judge", canary_every=every, **FAST
            )
        )
        assert len(srv.requests) == calls
    assert canary(out) == ((2.0, 0.0, 4.0, 0.0) if calls == 6 else (0.0,) * 4)


def test_a_cached_probe_is_not_counted_twice():
    with FakeOpenAIServer(truthful) as srv:
        score = lambda: asyncio.run(  # noqa: E731
            compute_score(
                "openai/gsm8k", RIGHT, "72", INFO, base_url=srv.base_url, model="judge", canary_every=2, **FAST
            )
        )
        first, second = score(), score()
        assert len(srv.requests) == 6
    assert (canary(first), canary(second)) == ((2.0, 0.0, 4.0, 0.0), (0.0,) * 4)
    assert second["score"] == first["score"] == 1.0


def test_a_failed_probe_order_is_not_counted():
    def down_on_probe_first(body):
        a, _, _ = shown(body)
        return Reply(text="overloaded", status=503) if a == PROBE_72[0] else always("A")(body)

    with FakeOpenAIServer(down_on_probe_first) as srv:
        out = asyncio.run(
            compute_score(
                "openai/gsm8k",
                RIGHT,
                "72",
                INFO,
                base_url=srv.base_url,
                model="judge",
                canary_every=2,
                grounded=False,
                **FAST,
            )
        )
    # of the wrong-vs-right probe only the order with the right probe as A was answered: the judge named it; both
    # orders of the tie probe were answered
    assert (canary(out), out["score"], out["judge_error"]) == ((1.0, 0.0, 3.0, 0.0), 1.0, 0.0)


def test_tournament_probes_per_answer_and_once_per_probe():
    with FakeOpenAIServer(always("A")) as srv:
        rows = asyncio.run(
            score_group(
                [RIGHT, WRONG, "#### 5", RIGHT], "72", INFO, base_url=srv.base_url, model="judge", canary_every=2,
                grounded=False, **FAST,
            )
        )  # fmt: skip
        probes = sorted(shown(b)[:2] for b in srv.bodies if set(shown(b)[:2]) in ({*PROBE_72}, {*PROBE_5}))
    assert probes == sorted([PROBE_72, PROBE_72[::-1], PROBE_5, PROBE_5[::-1]])  # the two "#### 72" share one probe
    assert [canary(r) for r in rows][1:3] == [(0.0,) * 4, (2.0, 1.0, 4.0, 1.0)]
    assert sorted(canary(r) for r in (rows[0], rows[3])) == [(0.0,) * 4, (2.0, 1.0, 4.0, 1.0)]
    assert [r["judge_calls"] for r in rows] == [2.0] * 4  # circular over 4: each answer twice as A


def test_the_loops_health_metrics_read_them():
    with FakeOpenAIServer(always("A")) as srv:
        rows = asyncio.run(
            score_group(
                [RIGHT, WRONG, "#### 5"], "72", INFO, mode="pairwise_ref", base_url=srv.base_url, model="judge",
                canary_every=2, grounded=False, **FAST,
            )
        )  # fmt: skip
    metrics = reward_metrics({k: [r[k] for r in rows] for k in KEYS})
    got = {k: metrics[f"judge_health/{k}"] for k in ("canary_accept", "canary_accept_n", "canary_reject")}
    assert got == {"canary_accept": 0.5, "canary_accept_n": 4.0, "canary_reject": 0.25}
