"""LLM-judge reward for policy training (verl 0.9.1 reward loop), async and fault tolerant: ``compute_score`` asks an
OpenAI-compatible judge to grade the policy's answer 0-4 with the versioned ``gsm8k_grade`` prompt (the one the
pointwise judge recipe trains on) and turns the grade into a reward, in ``mode`` ``judge`` (``judge / 4``), ``hybrid``
(``rule * (0.5 + 0.5 * judge / 4)``: the rule gates correctness) or ``route`` (the judge asked only where the rule
cannot decide). It is a thin policy over ``reward_fns.judge_service`` (the case, the request, the parse, the guard),
read with ``PointwiseSettings`` (``reward_fns.judge_options``: every option, its default and its rule). Deployments,
scores, failures, the returned keys and every knob: README_llm_judge.md. It never raises for network, judge-reply or
model-output problems; it raises ``ValueError`` for an invalid option (``check_options`` lists them before a run) and
``JudgeConfigError`` for an endpoint that rejects the configuration.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Mapping
from typing import Any

from reward_fns import canaries, gsm8k, judge_service
from reward_fns.judge_client import JudgeClient
from reward_fns.judge_errors import JudgeConfigError
from reward_fns.judge_metrics import ACCEPT_AT
from reward_fns.judge_options import Mode, PointwiseSettings, combine, fallback_value
from reward_fns.judge_service import Case, log_failure, probe_index
from reward_fns.parse import FINAL_OK, final_answer
from reward_fns.verdicts import POINTWISE

logger = logging.getLogger(__name__)

__all__ = ["compute_score", "check_options", "build_messages", "canary", "KEYS", "DEFAULTS", "JudgeConfigError"]

#: every sample's keys, in this order (README_llm_judge.md, "Returned keys")
KEYS = (
    *"score judge_score rule_score judge_error judge_parse_fail judge_skipped judge_fallback judge_cached".split(),
    *"judge_attempts rule_format judge_ungrounded judge_contradiction judge_unverified canary_wrong".split(),
    *"canary_wrong_accepted canary_right canary_right_rejected judge_abstained judge_seconds".split(),
)
DEFAULTS = PointwiseSettings.defaults()  # the knobs' defaults (a view of PointwiseSettings)
#: the label check of a data set's ``reward_model.ground_truth`` (the dry run's: scripts/launch/config_paths.py)
check_label = gsm8k.reference_number


def build_messages(
    solution_str: object,
    ground_truth: object = None,
    extra_info: Mapping | None = None,
    *,
    prompt: str = PointwiseSettings.prompt,
    prompt_version: str = PointwiseSettings.prompt_version,
    max_response_chars: int = PointwiseSettings.max_response_chars,
) -> list[dict]:
    """The judge's chat messages for one sample (shared with data prep so training matches use):
    ``judge_service.messages`` for the pointwise kind, the response defused first (``defuse``)."""
    case = Case.of((solution_str,), ground_truth, extra_info)
    shown = dict(prompt=prompt, prompt_version=prompt_version, max_response_chars=max_response_chars)
    return judge_service.messages(POINTWISE, case, case.answers, **shown)


def check_options(**kwargs: Any) -> list[str]:
    """What ``compute_score`` would raise for these ``reward_kwargs`` at a call, one message per problem ([]: none);
    the config check (``scripts/launch/verl_config.py``) asks before a run starts."""
    return PointwiseSettings.problems(kwargs)


async def canary(client: JudgeClient, case: Case, k: int | None, settings: PointwiseSettings) -> dict:
    """Grade canary probe ``k`` (``reward_fns.canaries``; None: none) for this case's question: its ``canary_*``
    keys."""
    made = canaries.probe(case.reference_answer, k) if None not in (k, case.reference_answer) else None
    if made is None:
        return {}
    text, right = made
    answer = await judge_service.ask(client, POINTWISE, case, (text,), **settings.prompt_options)
    if answer.failure or answer.cached:  # no verdict, or one already counted: nothing new learned about the judge
        return {}
    accepted = answer.stands and answer.value >= ACCEPT_AT
    if right:
        return {"canary_right": 1.0, "canary_right_rejected": float(not accepted)}
    return {"canary_wrong": 1.0, "canary_wrong_accepted": float(accepted)}


def _unjudged(solution_str: object, ground_truth: object, s: PointwiseSettings) -> dict:
    """A sample's keys before any judging: the rule's grade, the fallback score, no verdict."""
    rule_score = gsm8k.grade(solution_str, ground_truth, s.rule_mode)
    out = dict.fromkeys(KEYS, 0.0)
    out.update(
        score=fallback_value(s.fallback, rule_score),
        judge_score=-1.0,
        rule_score=rule_score,
        judge_fallback=1.0,
        rule_format=float(gsm8k.extract_answer(solution_str, "strict") is not None),
    )
    return out


def _rule_decides(out: dict, solution_str: object, s: PointwiseSettings) -> bool:
    """Whether the judge is not asked (``out`` then scored): hybrid, a rule-wrong answer earns 0 whatever the judge
    says; route, the rule decides a ``#### N`` answer and one without one final answer."""
    if s.mode == Mode.HYBRID and out["rule_score"] == 0.0:
        out.update(score=0.0, judge_skipped=1.0, judge_fallback=0.0)
        return True
    if s.mode == Mode.ROUTE and (out["rule_format"] or final_answer(solution_str)[1] != FINAL_OK):
        out.update(score=out["rule_score"], judge_skipped=1.0, judge_fallback=0.0)
        return True
    return False


@functools.cache
def _say_no_endpoint() -> None:
    """Said once a process: no judge to ask, the fallback score."""
    logger.warning("llm_judge: no base_url and no reward_router_address: no judge to ask, using the fallback")


async def _ask(out: dict, client: JudgeClient, case: Case, k: int | None, s: PointwiseSettings):
    """The judge's answer for the case (a data problem here is a config problem: raised), canary probe ``k`` beside
    it (None: none); the call's keys and the probe's into ``out``."""
    started = time.perf_counter()
    asked = judge_service.ask(client, POINTWISE, case, case.answers, **s.prompt_options)
    answer, probed = await asyncio.gather(asked, canary(client, case, k, s))
    out.update(probed, judge_seconds=time.perf_counter() - started, judge_attempts=float(answer.attempts))
    out["judge_cached"] = float(answer.cached)
    return answer


def _failed(out: dict, answer, url: str, s: PointwiseSettings) -> dict:
    """A call without a verdict (a configuration error has raised ``JudgeConfigError``)."""
    out["judge_error"] = 1.0
    if answer.failure == "fallback" and s.judge_failure == "abstain":  # no reward: left out
        log_failure(answer, url, "abstaining")
        out.update(score=0.0, judge_fallback=0.0, judge_abstained=1.0)
    elif answer.failure == "fallback":  # the answer cannot cause these: the documented fallback
        log_failure(answer, url, "using the fallback")
    else:  # a refusal this request can cause
        log_failure(answer, url, "scored as the lowest verdict")
        out.update(score=s.no_verdict(out["rule_score"]), judge_fallback=0.0)
    return out


def _verdict(out: dict, answer, s: PointwiseSettings) -> dict:
    """The reply's verdict as the score (none in the reply, or a paying one the guard voids: what a 0 earns)."""
    rule_score = out["rule_score"]
    out["judge_fallback"] = 0.0
    if answer.value is None:
        out.update(score=s.no_verdict(rule_score), judge_parse_fail=1.0)
        return out
    out.update(judge_score=float(answer.value), score=combine(s.mode, answer.value, rule_score))
    if answer.problem is not None:
        out.update({answer.problem: 1.0, "score": s.no_verdict(rule_score)})
    return out


async def compute_score(
    data_source=None,
    solution_str="",
    ground_truth=None,
    extra_info=None,
    *,
    reward_router_address: str | None = None,
    reward_model_tokenizer: Any = None,
    **reward_kwargs: Any,
) -> dict:
    """verl custom reward function; see the module docstring. ``reward_kwargs``: ``PointwiseSettings``; the router
    arguments are verl's (``reward.reward_model.enable=True``).

    Every sample gets the same keys, ``score`` first. In route mode (``Mode.ROUTE``) the rule decides an answer with a
    ``#### N`` line without asking the judge (``judge_skipped`` 1.0; no request is made here):

    >>> r = asyncio.run(compute_score("openai/gsm8k", "48 + 24 = 72\\n#### 72", "72", {"question": "How many?"},
    ...                               base_url="http://127.0.0.1:9/v1", model="judge", mode=Mode.ROUTE, canary_every=0))
    >>> list(r)[:6], len(r)
    (['score', 'judge_score', 'rule_score', 'judge_error', 'judge_parse_fail', 'judge_skipped'], 19)
    >>> (r["score"], r["rule_score"], r["judge_skipped"])
    (1.0, 1.0, 1.0)
    """
    s = PointwiseSettings.of(reward_kwargs)
    out = _unjudged(solution_str, ground_truth, s)
    if _rule_decides(out, solution_str, s):
        return out
    client = s.client(reward_router_address, reward_model_tokenizer)
    if client is None:
        _say_no_endpoint()
        return {**out, "judge_skipped": 1.0}
    case = Case.of((solution_str,), ground_truth, extra_info)
    answer = await _ask(out, client, case, probe_index(solution_str, ground_truth, s.canary_every), s)
    return _failed(out, answer, client.url, s) if answer.failure else _verdict(out, answer, s)
