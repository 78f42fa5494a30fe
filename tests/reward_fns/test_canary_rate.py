"""The canary probe rate the docs state (reward_fns/README_llm_judge.md, reward_fns/canaries.py) is the one the hash
draw gives: a probe beside a judged sample with probability 1/``canary_every`` (default 20), so 1 in 21 judge calls
on average but not at most: per batch of 128 judged samples the count is binomial (6.4 expected; about 1 batch in 9
has 10 or more, 7.2% or more of its calls)."""

from __future__ import annotations

import os
from math import comb

import pytest

from reward_fns import llm_judge

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BATCH, MANY = 128, 10  # the docs' batch of judged samples, and "10 or more" probes in it


def _rates(every: int) -> dict[str, str]:
    """What the docs say, computed from the draw: the probe share of judge calls, the expected probes per batch, how
    many batches have MANY or more (1 in N), and those probes' share of that batch's calls."""
    p = 1 / every
    tail = sum(comb(BATCH, k) * p**k * (1 - p) ** (BATCH - k) for k in range(MANY, BATCH + 1))
    return {
        "share": f"1 in {round((1 + p) / p)}",
        "expected": f"{BATCH * p:g}",
        "batches": f"1 batch in {round(1 / tail)}",
        "calls": f"{100 * MANY / (BATCH + MANY):.1f}%",
    }


def test_the_draw_gives_the_rates_the_docs_state():
    assert llm_judge.DEFAULTS["canary_every"] == 20
    assert _rates(20) == {"share": "1 in 21", "expected": "6.4", "batches": "1 batch in 9", "calls": "7.2%"}


STATED = ["1 in 21 judge calls on average, not at most", "6.4 probes", "1 batch in 9", "7.2% or more"]


@pytest.mark.parametrize("path", ["reward_fns/README_llm_judge.md", "reward_fns/canaries.py"])
def test_the_docs_state_the_drawn_rate(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        text = " ".join(f.read().split())  # as read, whatever the line breaks
    assert [s for s in STATED if s not in text] == []
    assert "at most 1 in" not in text  # the draw is per sample: a batch may have more
    r = _rates(llm_judge.DEFAULTS["canary_every"])
    assert [v for v in r.values() if v not in " ".join(STATED)] == []
