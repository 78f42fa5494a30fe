"""The LLM-judge reward with a share of its calls failing in transport: a judge outage on demand, to measure
``judge_failure=fallback`` against ``abstain`` in a real run.

    python -m scripts.lab.policy_learns --out runs/outage --reuse runs/card \\
        --arms flaky_fallback,flaky_abstain --seeds 0,1,2

As a reward function (``reward.custom_reward_function.path=pkg://scripts.lab.bench.flaky_judge``), it takes every
``reward_fns.llm_judge`` option plus ``fail_share`` (default 0.2). A sample is picked to fail by a hash of its text,
so the same answer always fails or never does; its call goes to a closed local port with no retries, so it fails
as a refused connection does, and ``judge_failure`` decides what the sample is paid. Every other sample is judged as
``llm_judge`` judges it. The keys returned are ``llm_judge``'s.
"""

from __future__ import annotations

import hashlib

from reward_fns import llm_judge

CLOSED = "http://127.0.0.1:9/v1"  # the discard port: nothing listens there, so a connection is refused at once


def fails(solution_str: object, share: float) -> bool:
    """Whether this answer's call fails: a hash of its text below ``share``."""
    h = int.from_bytes(hashlib.sha256(str(solution_str).encode("utf-8")).digest()[:8], "big") / 2**64
    return h < share


def check_options(fail_share: float = 0.2, **kwargs) -> list[str]:
    """``llm_judge``'s checks, and ``fail_share`` in [0, 1]."""
    bad = (
        []
        if isinstance(fail_share, (int, float)) and 0 <= fail_share <= 1
        else [f"fail_share must be a number in [0, 1], got {fail_share!r}"]
    )
    return bad + llm_judge.check_options(**kwargs)


async def compute_score(
    data_source=None, solution_str="", ground_truth=None, extra_info=None, *, fail_share: float = 0.2, **kwargs
) -> dict:
    """``llm_judge.compute_score``, with the call of a ``fail_share`` of the answers sent where nothing answers."""
    if not 0 <= fail_share <= 1:
        raise ValueError(f"fail_share must be a number in [0, 1], got {fail_share!r}")
    if fails(solution_str, fail_share):
        kwargs = {**kwargs, "base_url": CLOSED, "max_retries": 0, "reward_router_address": None, "cache_size": 0}
        kwargs.setdefault("model", "judge")
    return await llm_judge.compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)
