"""The options of ``reward_fns.llm_judge`` (its ``reward_kwargs``) and their rules, in one place.

``llm_judge.compute_score`` raises ``ValueError`` with ``errors(...)``'s messages at each call;
``llm_judge.check_options`` gives the same messages before a run starts (``scripts/launch/verl_config.py``), so a bad
option stops a dry run rather than the first reward call, minutes into training.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from reward_fns import gsm8k
from reward_fns.judge_transport import DEFAULT_MAX_RESPONSE_BYTES

MODES = ("judge", "hybrid", "route")
JUDGE_FAILURES = ("fallback", "abstain")

#: Defaults of every knob besides compute_score's named parameters (all settable through reward_kwargs).
DEFAULTS: dict[str, Any] = {
    "prompt": "gsm8k_grade",
    "prompt_version": "v3",
    "rule_mode": "strict",  # reward_fns.gsm8k mode for rule_score: "strict" (#### N) or "flexible"
    "max_tokens": 512,
    "temperature": 0.0,
    "deadline": 240.0,  # < rate_limited's default reward.timeout (300 s), so we always answer first
    "max_concurrency": 64,
    "cache_size": 4096,
    "cache_ttl": 3600.0,
    "max_response_chars": 12000,
    "extra_body": None,
    "max_response_bytes": DEFAULT_MAX_RESPONSE_BYTES,  # judge reply bodies are read up to this size
    # an accepting verdict (3-4) is checked against the text the judge was shown: its quoted "Candidate: N" must be the
    # candidate's one final answer (parse.final_answer) and the reference's; else it earns a 0's reward (see guard())
    "grounded": True,
    # one canary probe (reward_fns.canaries: an answer whose right verdict is known) beside a judged sample with
    # probability 1/N (a hash of the sample draws it: 1 in N+1 judge calls on average, more in some batches), graded
    # like the sample; its outcome in the sample's canary_* keys; 0: none; 1 is refused (see canary_every_value)
    "canary_every": 20,
    # a transport failure (after the retries): "fallback" (the fallback score) or "abstain" (judge_abstained=1: the
    # trainer's hooks leave the sample out of its GRPO group and of the policy loss, TRL's "reward None")
    "judge_failure": "fallback",
}


def combine(mode: str, judge: int, rule_score: float) -> float:
    """Reward from a 0-4 judge grade: ``judge/4`` (judge and route modes) or, in hybrid mode, ``rule * (0.5 +
    0.5*judge/4)``."""
    if mode in ("judge", "route"):
        return judge / 4.0
    if mode == "hybrid":
        return rule_score * (0.5 + 0.5 * judge / 4.0)
    raise ValueError(f"mode must be one of {MODES}, got {mode!r}")


def fallback_value(fallback: object, rule_score: float) -> float:
    if isinstance(fallback, str) and fallback.strip().lower() == "rule":
        return rule_score
    try:
        value = float(fallback)
    except (TypeError, ValueError):
        raise ValueError(f"fallback must be 'rule' or a number, got {fallback!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"fallback must be finite, got {fallback!r}")
    return value


def parse_fail_value(parse_fail_score: object, mode: str) -> float | None:
    """``None`` for "lowest" (the lowest real verdict's reward), else the validated number."""
    if isinstance(parse_fail_score, str) and parse_fail_score.strip().lower() == "lowest":
        return None
    try:
        value = float(parse_fail_score)
    except (TypeError, ValueError):
        raise ValueError(f"parse_fail_score must be 'lowest' or a number, got {parse_fail_score!r}") from None
    if isinstance(parse_fail_score, bool) or not math.isfinite(value):
        raise ValueError(f"parse_fail_score must be 'lowest' or a finite number, got {parse_fail_score!r}")
    # the lowest reward a real verdict can earn for an answer the judge is asked about
    lowest = combine(mode, 0, 1.0)
    if value > lowest:
        raise ValueError(
            f"parse_fail_score={value} is above the reward of the lowest real verdict in mode {mode!r} ({lowest}): "
            "a policy would learn to break the judge's reply"
        )
    return value


def canary_every_value(value: object) -> int:
    """``canary_every`` as ``compute_score`` reads it (``int``): 0 / None (no probes) or a whole number >= 2 (an int,
    a whole float, digits). 1 is refused: every judged sample would carry a probe, half of all judge calls."""
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    elif isinstance(value, float) and value.is_integer():
        n = int(value)
    elif isinstance(value, str) and re.fullmatch(r"\s*[0-9]+\s*", value):
        n = int(value)
    else:
        raise ValueError(f"canary_every must be a whole number (0: no probes, else >= 2), got {value!r}")
    if n == 1 or n < 0:
        raise ValueError(
            f"canary_every must be 0 (no probes) or >= 2, got {value!r}"
            + (": 1 would send a probe with every judged sample, half of all judge calls" if n == 1 else "")
        )
    return n


def errors(mode: object, fallback: object, parse_fail_score: object, options: Mapping[str, Any]) -> list[str]:
    """One message per invalid option (``options``: the knobs of ``DEFAULTS`` given); [] when all are valid."""
    unknown = options.keys() - DEFAULTS.keys()
    if unknown:
        return [f"llm_judge.compute_score: unknown option(s) {sorted(unknown)}; known: {sorted(DEFAULTS)}"]
    opt = {**DEFAULTS, **options}
    found = []
    if mode not in MODES:
        found.append(f"mode must be one of {MODES}, got {mode!r}")
    if opt["judge_failure"] not in JUDGE_FAILURES:
        found.append(f"judge_failure must be 'fallback' or 'abstain', got {opt['judge_failure']!r}")
    if opt["rule_mode"] not in gsm8k.MODES:
        found.append(f"rule_mode must be one of {gsm8k.MODES}, got {opt['rule_mode']!r}")
    checks = [lambda: fallback_value(fallback, 0.0), lambda: canary_every_value(opt["canary_every"])] + (
        [lambda: parse_fail_value(parse_fail_score, mode)] if mode in MODES else []
    )
    for check in checks:
        try:
            check()
        except ValueError as e:
            found.append(str(e))
    return found
