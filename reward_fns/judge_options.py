"""The judge rewards' settings: one frozen ``JudgeSettings`` per reward kind (``PointwiseSettings`` for
``reward_fns.llm_judge``, ``PairwiseSettings`` for ``reward_fns.pairwise_judge``), the one home of every option's
default and rule. ``Kind.of(reward_kwargs)`` builds and checks it once per distinct ``reward_kwargs`` (cached: a reward
is called once per sample) and raises ``ValueError`` naming every bad key and value; ``Kind.problems(reward_kwargs)``
lists the same messages without raising, for the config check before a run (``scripts/launch/verl_config.py``).

    >>> PointwiseSettings.of({"mode": "hybrid"}).mode, PointwiseSettings.of({}) is PointwiseSettings.of({})
    ('hybrid', True)
    >>> PairwiseSettings.problems({"scheme": "knockout"})
    ["scheme must be one of ('circular', 'all_pairs'), got 'knockout'"]
"""

from __future__ import annotations

import copy
import difflib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from omegaconf import OmegaConf

from reward_fns import gsm8k, judge_service
from reward_fns.judge_client import DEFAULT_MAX_RESPONSE_BYTES
from reward_fns.judge_errors import JudgeConfigError
from reward_fns.verdicts import PAIRWISE, POINTWISE, Verdict
from reward_fns.win_rates import SCHEMES


class Mode:
    """The reward modes (a reward's ``mode`` option), each name spelled here once: the settings check them, the rewards
    branch on them, the lab names its arms after them."""

    JUDGE = "judge"  # llm_judge: judge / 4
    HYBRID = "hybrid"  # llm_judge: rule * (0.5 + 0.5 * judge / 4)
    ROUTE = "route"  # llm_judge: judge / 4, the judge asked only where the rule cannot decide
    PAIRWISE_REF = "pairwise_ref"  # pairwise_judge: each answer against the reference solution
    TOURNAMENT = "tournament"  # pairwise_judge: each answer of a GRPO group against its group mates
    POINTWISE = (JUDGE, HYBRID, ROUTE)  # PointwiseSettings.mode
    PAIRWISE = (PAIRWISE_REF, TOURNAMENT)  # PairwiseSettings.mode


JUDGE_FAILURES = ("fallback", "abstain")


def combine(mode: str, judge: int, rule_score: float) -> float:
    """Reward from a 0-4 judge grade: ``judge/4`` (judge and route modes) or, in hybrid mode, ``rule * (0.5 +
    0.5*judge/4)``."""
    if mode in (Mode.JUDGE, Mode.ROUTE):
        return judge / 4.0
    if mode == Mode.HYBRID:
        return rule_score * (0.5 + 0.5 * judge / 4.0)
    raise ValueError(f"mode must be one of {Mode.POINTWISE}, got {mode!r}")


def fallback_value(fallback: object, rule_score: float) -> float:
    if isinstance(fallback, str) and fallback.strip().lower() == "rule":
        return rule_score
    if isinstance(fallback, bool):
        raise ValueError(f"fallback must be 'rule' or a number, got {fallback!r}")
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
    lowest = combine(mode, 0, 1.0)  # the lowest reward a real verdict can earn for an answer the judge is asked about
    if value > lowest:
        raise ValueError(
            f"parse_fail_score={value} is above the reward of the lowest real verdict in mode {mode!r} ({lowest}): "
            "a policy would learn to break the judge's reply"
        )
    return value


def canary_every_value(value: object) -> int:
    """``canary_every`` as the rewards read it (``int``): 0 / None (no probes) or a whole number >= 2 (an int, a whole
    float, digits). 1 is refused: every judged sample would carry a probe, half of all judge calls."""
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


def _key(value: object) -> object:
    """``value`` as a hashable cache key that tells types apart (``0`` from ``False``); containers by content."""
    if isinstance(value, Mapping):
        return ("{}", tuple(sorted((str(k), _key(v)) for k, v in value.items())))
    if isinstance(value, Sequence) and not isinstance(value, str):
        return ("[]", tuple(_key(v) for v in value))
    return (type(value).__name__, value)


def number_problem(name: str, value: object, whole: bool, least: float, above: bool) -> str | None:
    """Why option ``name`` cannot be ``value`` (None: it can): a number (``whole``: a whole one), at least ``least``
    (``above``: more than it); a bool, text or infinity is none.

    >>> number_problem("max_tokens", 0, True, 1, False), number_problem("deadline", 30, False, 0, True)
    ('max_tokens must be a whole number >= 1, got 0', None)
    """
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok and (not whole or float(value).is_integer()) and (value > least if above else value >= least):
        return None
    return (
        f"{name} must be {'a whole number' if whole else 'a number'} {'>' if above else '>='} {least:g}, got {value!r}"
    )


def _plain(value: Any) -> Any:
    """Hydra/OmegaConf containers (reward_kwargs values) -> plain dicts/lists for JSON."""
    if OmegaConf.is_config(value):
        return OmegaConf.to_container(value, resolve=True)
    return {str(k): _plain(v) for k, v in value.items()} if isinstance(value, Mapping) else value


_BUILT: dict[tuple, JudgeSettings] = {}
_MAX_BUILT = 64


@dataclass(frozen=True)
class JudgeSettings:
    """The options every judge reward takes (its ``reward_kwargs``), read and checked once; see README_llm_judge.md,
    "Every knob". A kind adds its own (``mode``, ``prompt``, ...) in a subclass."""

    NAME: ClassVar[str]  # who refuses an unknown option
    VERDICT: ClassVar[Verdict]
    MODES: ClassVar[tuple[str, ...]]
    #: the options the rewards' docs name first (the endpoint, the calls' limits, the mode and the scores without a
    #: verdict); ``DEFAULTS`` and the unknown-option message list the others, the knobs
    FIRST = ("base_url", "model", "api_key_env", "timeout", "max_retries", "mode", "fallback", "parse_fail_score")
    #: how a choice's allowed values are told where a kind says them otherwise than "one of (...)"
    SAYS: ClassVar[dict[str, str]] = {}
    #: verl's own arguments to a reward (its reward router), beside the reward_kwargs: no settings, ignored here
    VERL_ARGS = ("reward_router_address", "reward_model_tokenizer")
    #: the options that are numbers: (whole, least, above least only, None allowed)
    NUMBERS: ClassVar[dict[str, tuple]] = {
        "timeout": (False, 0, True, False),
        "max_retries": (True, 0, False, False),
        "max_tokens": (True, 1, False, False),
        "temperature": (False, 0, False, False),
        "deadline": (False, 0, True, True),
        "max_concurrency": (True, 1, False, False),
        "cache_size": (True, 0, False, False),
        "cache_ttl": (False, 0, False, True),
        "max_response_chars": (True, 1, False, False),
        "max_response_bytes": (True, 1, False, False),
    }
    SWITCHES: ClassVar[tuple[str, ...]] = ("grounded",)  # options that are true or false

    base_url: str | None = None
    model: str | None = None  # default: judge_service.DEFAULT_REMOTE_MODEL at a base_url, the served model at a router
    api_key_env: str | None = "OPENAI_API_KEY"
    timeout: float = 60.0
    max_retries: int = 4
    fallback: object = "rule"  # the score on a transport failure or without an endpoint: "rule" or a number
    rule_mode: str = "strict"  # reward_fns.gsm8k mode for rule_score: "strict" (#### N) or "flexible"
    max_tokens: int = 512
    temperature: float = 0.0
    deadline: float = 240.0  # < rate_limited's default reward.timeout (300 s), so we always answer first
    max_concurrency: int = 64
    cache_size: int = 4096
    cache_ttl: float = 3600.0
    max_response_chars: int = judge_service.MAX_RESPONSE_CHARS
    extra_body: Any = None
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES  # judge reply bodies are read up to this size
    # a paying verdict is checked against the text the judge was shown (reward_fns.guard); else it earns a 0's reward
    grounded: bool = True
    # one canary probe (reward_fns.canaries) beside a judged sample with probability 1/N (a hash of the sample draws
    # it); its outcome in the sample's canary_* keys; 0: none; 1 is refused (canary_every_value)
    canary_every: int = 20
    # a transport failure (after the retries): "fallback" (the fallback score) or "abstain" (judge_abstained=1: the
    # trainer's hooks leave the sample out of its GRPO group and of the policy loss)
    judge_failure: str = "fallback"

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """The knobs' defaults (every option but ``FIRST``)."""
        return {f.name: f.default for f in fields(cls) if f.name not in cls.FIRST}

    @classmethod
    def problems(cls, kwargs: Mapping[str, Any]) -> list[str]:
        """One message per invalid option in ``kwargs`` ([]: none), each naming the key and the value."""
        kwargs = {k: v for k, v in kwargs.items() if k not in cls.VERL_ARGS}
        known = sorted(f.name for f in fields(cls))
        unknown = sorted(kwargs.keys() - set(known))
        if unknown:
            close = {u: difflib.get_close_matches(u, known, n=1) for u in unknown}
            hint = ", ".join(f"{u!r}: did you mean {m[0]!r}?" for u, m in close.items() if m)
            return [f"{cls.NAME}: unknown option(s) {unknown}{f' ({hint})' if hint else ''}; known: {known}"]
        s = cls(**kwargs)
        found = [f"{n} must be {cls.SAYS.get(n, f'one of {allowed}')}, got {v!r}" for n, v, allowed in s._choices()]
        found += [
            f"{n} must be true or false, got {getattr(s, n)!r}" for n in cls.SWITCHES if type(getattr(s, n)) is not bool
        ]
        numbers = [(n, getattr(s, n), rule) for n, rule in cls.NUMBERS.items()]
        found += [p for n, v, r in numbers if not (v is None and r[3]) and (p := number_problem(n, v, *r[:3]))]
        if (body := _plain(s.extra_body)) and not isinstance(body, Mapping):
            found.append(f"extra_body must be a mapping of request fields, got {s.extra_body!r}")
        for check in s._checks():
            try:
                check()
            except (ValueError, TypeError, FileNotFoundError) as e:
                found.append(f"{type(e).__name__}: {e}" if isinstance(e, TypeError) else str(e))
        return found

    @classmethod
    def of(cls, kwargs: Mapping[str, Any]) -> JudgeSettings:
        """The settings for ``kwargs``, built and checked once per distinct ``kwargs`` (ValueError: ``problems``)."""
        try:
            key = (cls, _key(kwargs))
            built = _BUILT.get(key)
        except TypeError:  # a value that cannot be a key: built afresh each time
            key = built = None
        if built is None:
            problems = cls.problems(kwargs)
            if problems:
                raise ValueError("; ".join(problems))
            kwargs = copy.deepcopy(dict(kwargs))  # the settings keep no reference a caller could change later
            built = cls(**{**kwargs, "canary_every": canary_every_value(kwargs.get("canary_every", cls.canary_every))})
            if key is not None:
                if len(_BUILT) >= _MAX_BUILT:
                    _BUILT.pop(next(iter(_BUILT)))
                _BUILT[key] = built
        return built

    def _choices(self) -> list[tuple[str, object, tuple]]:
        """The options that must be one of a list, each ``(name, value, allowed)`` that is not."""
        named = [("mode", self.mode, self.MODES), ("judge_failure", self.judge_failure, JUDGE_FAILURES)]
        named.append(("rule_mode", self.rule_mode, gsm8k.MODES))
        return [(name, value, allowed) for name, value, allowed in named if value not in allowed]

    def _checks(self) -> list:
        """The other rules, each a call that raises: the fallback, the canary rate, the prompt."""
        return [
            lambda: fallback_value(self.fallback, 0.0),
            lambda: canary_every_value(self.canary_every),
            lambda: judge_service.check_prompt(self.VERDICT, self.prompt, self.prompt_version),
        ]

    @property
    def prompt_options(self) -> dict:
        """How ``judge_service.ask`` asks: the prompt, the responses' length, the grounding."""
        return {k: getattr(self, k) for k in ("prompt", "prompt_version", "max_response_chars", "grounded")}

    def client_options(self) -> dict:
        """``JudgeClient``'s settings (its constructor checks them): every number option but the prompt's
        ``max_response_chars``, and ``extra_body``."""
        numbers = {k: getattr(self, k) for k in self.NUMBERS if k != "max_response_chars"}
        return {**numbers, "extra_body": _plain(self.extra_body) or None}

    def client(self, reward_router_address: object = None, reward_model_tokenizer: object = None):
        """The process-wide client (``judge_service.get_client``) of the judge at ``base_url`` (``model`` default
        ``DEFAULT_REMOTE_MODEL``), else at verl's reward router with the served model's name (never the API key: the
        router is local); None: neither. ``JudgeConfigError``: a router without a model name."""
        url, model, key_env = self.base_url, self.model or judge_service.DEFAULT_REMOTE_MODEL, self.api_key_env
        if not url:
            if not reward_router_address:
                return None
            model = self.model or getattr(reward_model_tokenizer, "name_or_path", None)
            url, key_env = reward_router_address, None
            if not model:
                raise JudgeConfigError(
                    f"judge configuration error: reward_router_address {reward_router_address!r} given but no model "
                    "name. Likely fix: set `model` to the served model, or pass reward_model_tokenizer "
                    "(verl does when reward.reward_model.enable=True)"
                )
        return judge_service.get_client(url, model, api_key_env=key_env, **self.client_options())


@dataclass(frozen=True)
class PointwiseSettings(JudgeSettings):
    """``reward_fns.llm_judge``'s settings: a 0-4 grade with the ``gsm8k_grade`` prompt."""

    NAME: ClassVar[str] = "llm_judge.compute_score"
    VERDICT: ClassVar[Verdict] = POINTWISE
    MODES: ClassVar[tuple[str, ...]] = Mode.POINTWISE
    SAYS: ClassVar[dict[str, str]] = {"judge_failure": "'fallback' or 'abstain'"}

    mode: str = Mode.JUDGE
    # the score when the judge gives no verdict or refuses the request: "lowest" (what a verdict of 0 earns) or a
    # number not above that
    parse_fail_score: object = "lowest"
    prompt: str = "gsm8k_grade"
    prompt_version: str = "v3"

    def _checks(self) -> list:
        rules = super()._checks()
        if self.mode in self.MODES:
            rules.insert(2, lambda: parse_fail_value(self.parse_fail_score, self.mode))
        return rules

    def no_verdict(self, rule_score: float) -> float:
        """The score of a reply without a verdict, a refusal or a voided verdict."""
        value = parse_fail_value(self.parse_fail_score, self.mode)
        return combine(self.mode, 0, rule_score) if value is None else value


@dataclass(frozen=True)
class PairwiseSettings(JudgeSettings):
    """``reward_fns.pairwise_judge``'s settings: ``<better>A|B</better>`` with the ``pairwise_ref`` prompt."""

    NAME: ClassVar[str] = "pairwise_judge"
    VERDICT: ClassVar[Verdict] = PAIRWISE
    MODES: ClassVar[tuple[str, ...]] = Mode.PAIRWISE

    mode: str = Mode.PAIRWISE_REF
    prompt: str = "pairwise_ref"
    prompt_version: str = "v3"
    scheme: str = "circular"  # a tournament's comparisons: reward_fns.win_rates.SCHEMES
    rule_first: bool = False  # a comparison the rule decides (pairwise_judge.decides) is not asked
    SWITCHES: ClassVar[tuple[str, ...]] = ("grounded", "rule_first")

    def _choices(self) -> list[tuple[str, object, tuple]]:
        found = super()._choices()
        if self.scheme not in SCHEMES:
            found.insert(int(self.mode not in self.MODES), ("scheme", self.scheme, SCHEMES))
        return found
