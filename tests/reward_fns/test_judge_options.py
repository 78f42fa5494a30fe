"""reward_fns/judge_options.py: ``canary_every`` is checked before a run (``llm_judge.check_options``, the config
check) and at every call, so a value ``compute_score`` cannot read stops a dry run, not the first judged sample."""

from __future__ import annotations

import asyncio

import pytest

from reward_fns import llm_judge

WHOLE = "canary_every must be a whole number (0: no probes, else >= 2), got "


@pytest.mark.parametrize(
    "value, errors",
    [
        (20, []),
        (2, []),
        (0, []),
        (None, []),
        (40.0, []),
        ("20", []),
        ("abc", [WHOLE + "'abc'"]),
        ("inf", [WHOLE + "'inf'"]),
        (float("inf"), [WHOLE + "inf"]),
        (float("nan"), [WHOLE + "nan"]),
        ("nan", [WHOLE + "'nan'"]),
        (2.5, [WHOLE + "2.5"]),
        (True, [WHOLE + "True"]),
        ("", [WHOLE + "''"]),
        (
            1,
            [
                "canary_every must be 0 (no probes) or >= 2, got 1: 1 would send a probe with every judged sample, "
                "half of all judge calls"
            ],
        ),
        (-3, ["canary_every must be 0 (no probes) or >= 2, got -3"]),
    ],
)
def test_canary_every_is_checked_before_the_run(value, errors):
    assert llm_judge.check_options(base_url="http://127.0.0.1:9/v1", model="j", canary_every=value) == errors


@pytest.mark.parametrize("value, n", [(20, 20), (None, 0), (0, 0), (40.0, 40), (" 7 ", 7)])
def test_accepted_values_read_as_compute_score_reads_them(value, n):
    from reward_fns.judge_options import canary_every_value

    assert canary_every_value(value) == n == int(value or 0)


@pytest.mark.parametrize("value", ["abc", "inf", "nan", 1])
def test_a_call_with_a_bad_canary_every_raises_before_asking(value):
    """compute_score refuses the value at once (a ValueError naming it), not after the sample's judge call."""
    with pytest.raises(ValueError, match="canary_every must be"):
        asyncio.run(
            llm_judge.compute_score(
                "openai/gsm8k", "#### 21", "72", None, base_url="http://127.0.0.1:9/v1", model="j", canary_every=value
            )
        )
