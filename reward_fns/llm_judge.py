"""LLM-judge reward for policy training (verl 0.9.1 reward loop), async and fault tolerant.

``compute_score`` asks an OpenAI-compatible judge to grade the policy's answer with the versioned
``gsm8k_grade`` prompt (the same one the pointwise judge recipe trains on, so a judge we train is a
drop-in) and turns the judge's ``<think>...</think><score>0-4</score>`` reply into a reward.

Deployments (the first that applies wins):

1. **Remote API**: ``base_url`` (+ ``model``, default ``gpt-4o-mini``) given through
   ``reward.custom_reward_function.reward_kwargs``. The key is read from the environment variable
   named by ``api_key_env`` at request time; it is never logged, stored in a repr or put in an error.
2. **Local judge served by verl's reward loop** (``reward.reward_model.enable=True``): verl passes
   ``reward_router_address`` (``host:port``) and ``reward_model_tokenizer``; requests go to
   ``http://{reward_router_address}/v1/chat/completions`` with ``model`` = the served model, i.e.
   the reward model's local path (``reward_model_tokenizer.name_or_path``, which is what verl's vLLM
   server is started with) unless ``model`` is given.
3. **Neither** (e.g. validation, where verl calls the function without a router address): no
   request is made; ``score`` is the fallback, ``judge_skipped=1`` and ``judge_fallback=1``.

Scores (``judge`` is the parsed 0-4 grade):

* ``mode="judge"``: ``judge / 4``.
* ``mode="hybrid"``: ``rule * (0.5 + 0.5 * judge / 4)`` -- the rule reward gates correctness (a
  wrong final answer earns 0 whatever the judge says, and the judge is not called for it:
  ``judge_skipped=1``), the judge grades the reasoning of a correct one (0.5 .. 1.0). On a weak
  policy most answers are wrong, so hybrid mode makes few judge calls.
* ``mode="route"``: the rule decides the clear cases without a call (``judge_skipped=1``): an answer with a
  ``#### N`` line earns the strict rule's grade; one that states no one final answer (``parse.final_answer``) earns
  0. The judge (``judge / 4``) is asked only about one final answer in another form (TinyV's false-negative
  recovery). The share judged is ``1 - judge_skipped``; ``judge_seconds`` is each call's time.
Failures are split by whether the policy's answer can cause them, so that no failure pays a policy
more than the worst real verdict would:

* **Transport failures** the answer cannot cause -- ``judge_errors.outcome(error) == "fallback"``:
  timeout, connection error, HTTP 429/408/409/5xx after the openai SDK's retries, a malformed or
  over-size (``max_response_bytes``) 2xx reply -- and **no endpoint**: ``score = fallback``,
  ``fallback="rule"`` (default, the GSM8K rule reward) or a constant (``fallback=0.0``). Flags:
  ``judge_error=1`` (or ``judge_skipped=1``) and ``judge_fallback=1``. A judge outage is not a
  wrong answer.
* **The judge answered without a valid verdict** (cut off by ``max_tokens``, empty, unparseable:
  ``judge_parse_fail=1``), or **refused this request** (another HTTP 4xx, such as a prompt over
  the judge's context or a content filter; or an unexpected client failure: ``judge_error=1``):
  the answer's text can cause these, so ``score = parse_fail_score``. Its default ``"lowest"`` is
  exactly what the lowest real verdict (0) earns for the same answer in the current mode:
  ``0.0`` in judge mode, ``rule * 0.5`` in hybrid mode. A number may be given instead; it must be
  finite and not above that lowest reward (0.0 in judge mode, 0.5 in hybrid mode).
* **Configuration errors** (``outcome(error) == "stop"``: HTTP 401/403/404/405, "model not found";
  or a router address without a model name) raise ``JudgeConfigError`` at the first occurrence,
  naming the URL (scrubbed), the status and the likely fix: no fallback, no retry, the run stops.

Returned keys, always all of them, in this order, all numeric: ``score``, ``judge_score`` (0-4,
-1 when there is no grade), ``rule_score`` (0/1), ``judge_error``, ``judge_parse_fail``,
``judge_skipped``, ``judge_fallback`` (1 when ``score`` is the transport / no-endpoint fallback),
``judge_cached`` (answered from the in-process cache / a shared in-flight request),
``judge_attempts`` (HTTP attempts made for this sample), ``rule_format`` (1 when the response ends
its answer GSM8K's strict way, ``#### N``: the policy's format share, whatever the reward),
``judge_ungrounded``, ``judge_contradiction`` (1 when the guard below overrode an accepting verdict),
``judge_unverified`` (1 when it could not check one), ``canary_wrong``, ``canary_wrong_accepted``, ``canary_right``,
``canary_right_rejected`` (1 when a canary probe graded beside this sample was wrong / right and the judge paid /
did not pay it: ``reward_fns.canaries``, about 1 sample in ``canary_every``; all 0 otherwise), ``judge_abstained``
(1 when ``judge_failure="abstain"`` and the call failed in transport: the sample carries no reward, and
``scripts/train/hooks.py`` leaves it out of its GRPO group and masks it out of the policy loss), ``judge_seconds``
(the wall time of this sample's judge call, 0 without one: the cost ledger).

**Grounded verdicts** (``grounded=True``, default; ``reward_fns.guard``): every paying verdict (1-4) must quote
(``Candidate: N``) the candidate's one final answer, and it must be the reference's; the rule, the prompt and the
guard read one normalised text (``parse.normalize_text``; the prompt's copy clipped at whitespace). The guard fails
closed: an unreadable quote, a contradiction or an ungrounded answer earns what a 0 earns and sets
``judge_unverified``, ``judge_contradiction`` or ``judge_ungrounded`` (README_llm_judge.md, "Grounded verdicts").

``judge_score`` keeps the judge's own verdict, so the judge-health metrics still show how often it accepted.

The function never raises for network, judge-reply or model-output problems. It raises
``ValueError`` for an invalid option (unknown ``mode``/``fallback``/``parse_fail_score``/prompt)
and ``JudgeConfigError`` for an endpoint that rejects the configuration; both should stop a run.
``check_options(**reward_kwargs)`` lists the same option errors without a call (the config check, before a run).
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from reward_fns import canaries, gsm8k, judge_service
from reward_fns.judge_client import JudgeClient
from reward_fns.judge_errors import JudgeConfigError, throttled
from reward_fns.judge_metrics import ACCEPT_AT
from reward_fns.judge_options import DEFAULTS, MODES, combine, errors, fallback_value, parse_fail_value
from reward_fns.judge_service import defuse, reference_text, text_of
from reward_fns.parse import FINAL_OK, final_answer, reference_answer
from reward_fns.prompts import NEUTRALIZED_TAGS
from reward_fns.redact import mask_url
from reward_fns.verdicts import POINTWISE

logger = logging.getLogger(__name__)

__all__ = [
    "compute_score",
    "check_options",
    "client_options",
    "build_messages",
    "defuse",
    "get_client",
    "combine",
    "KEYS",
    "DEFAULTS",
    "MODES",
    "NEUTRALIZED_TAGS",
    "JudgeConfigError",
]

KEYS = (
    "score",
    "judge_score",
    "rule_score",
    "judge_error",
    "judge_parse_fail",
    "judge_skipped",
    "judge_fallback",
    "judge_cached",
    "judge_attempts",
    "rule_format",
    "judge_ungrounded",
    "judge_contradiction",
    "judge_unverified",
    "canary_wrong",
    "canary_wrong_accepted",
    "canary_right",
    "canary_right_rejected",
    "judge_abstained",
    "judge_seconds",
)
DEFAULT_REMOTE_MODEL = "gpt-4o-mini"


# ---------------------------------------------------------------------------- prompt
def build_messages(
    solution_str: object,
    ground_truth: object = None,
    extra_info: Mapping | None = None,
    *,
    prompt: str = DEFAULTS["prompt"],
    prompt_version: str = DEFAULTS["prompt_version"],
    max_response_chars: int = DEFAULTS["max_response_chars"],
) -> list[dict]:
    """The judge's chat messages for one sample (shared with data prep so training matches use):
    ``judge_service.messages`` for the pointwise kind.

    Fields are filled by name: ``question``/``query``/``problem`` from ``extra_info["question"]``
    (or ``query``/``prompt``), ``reference`` from ``extra_info["answer"]`` (else the ground truth),
    ``reference_answer`` from ``reward_fns.parse.reference_answer`` (the reference's ``####`` answer,
    else a numeric ground truth; ``unknown`` when neither has one), ``response`` from the candidate,
    which is defused first (see ``defuse``).
    """
    return judge_service.messages(
        POINTWISE,
        (solution_str,),
        ground_truth,
        extra_info,
        prompt=prompt,
        prompt_version=prompt_version,
        max_response_chars=max_response_chars,
    )


# ---------------------------------------------------------------------------- clients
_CLIENTS: dict[tuple, JudgeClient] = {}
_CLIENTS_LOCK = threading.Lock()
_MAX_CLIENTS = 16


def get_client(base_url: str, model: str, **options: Any) -> JudgeClient:
    """The process-wide client for one configuration (same config -> same pool, cache, sessions)."""
    key = (base_url, model, tuple(sorted((k, repr(v)) for k, v in options.items())))
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            if len(_CLIENTS) >= _MAX_CLIENTS:  # a sweep over many configs: forget the oldest
                _CLIENTS.pop(next(iter(_CLIENTS)))
            client = JudgeClient(base_url, model, **options)
            _CLIENTS[key] = client
        return client


def endpoint(base_url, model, api_key_env, reward_router_address, reward_model_tokenizer) -> tuple | None:
    """``(url, model, api_key_env)`` of the judge: ``base_url`` (+ ``model``, default ``DEFAULT_REMOTE_MODEL``), else
    verl's reward router with the served model's name (never the API key: the router is local); None: neither.
    Shared by every judge reward (``reward_fns.pairwise_judge`` too)."""
    if base_url:
        return base_url, model or DEFAULT_REMOTE_MODEL, api_key_env
    if not reward_router_address:
        return None
    name = model or getattr(reward_model_tokenizer, "name_or_path", None)
    if not name:
        raise JudgeConfigError(
            f"judge configuration error: reward_router_address {reward_router_address!r} given but no model name. "
            "Likely fix: set `model` to the served model, or pass reward_model_tokenizer "
            "(verl does when reward.reward_model.enable=True)"
        )
    return reward_router_address, name, None


def probe_index(solution_str: object, ground_truth: object, every: int) -> int | None:
    """Whether this sample carries a canary probe (about 1 in ``every``, decided by a hash of the sample, so a
    sample always gets the same answer) and which one; None: no probe."""
    if every <= 0:
        return None
    key = f"{ground_truth}\x00{text_of(solution_str)}".encode("utf-8", "replace")
    h = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")
    return h // every if h % every == 0 else None


async def _canary(
    client: JudgeClient, k: int, reference: str | None, ground_truth: object, extra_info: object, opt: dict
) -> dict:
    """Grade canary probe ``k`` (``reward_fns.canaries``) for this sample's question: its ``canary_*`` keys."""
    made = canaries.probe(reference, k) if reference is not None else None
    if made is None:
        return {}
    text, right = made
    answer = await _ask(client, text, ground_truth, extra_info, opt)
    accepted = answer.stands and answer.value >= ACCEPT_AT
    if answer.failure or answer.cached:  # no verdict, or one already counted: nothing new learned about the judge
        return {}
    return (
        {"canary_right": 1.0, "canary_right_rejected": float(not accepted)}
        if right
        else {"canary_wrong": 1.0, "canary_wrong_accepted": float(accepted)}
    )


# ---------------------------------------------------------------------------- scoring
def _plain(value: Any) -> Any:
    """Hydra/OmegaConf containers (reward_kwargs values) -> plain dicts/lists for JSON."""
    try:
        from omegaconf import OmegaConf

        if OmegaConf.is_config(value):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:  # pragma: no cover - omegaconf ships with verl
        pass
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


_warned: set[str] = set()
_fail_count = 0


def _log_failure(result: Any, where: str, outcome: str) -> None:
    """Log a failed call (``result.error``: a ``JudgeResult``'s or a ``judge_service.Answer``'s): the first five of
    the process, then every hundredth."""
    global _fail_count
    _fail_count += 1
    if throttled(_fail_count):
        logger.warning(
            "llm_judge: judge call to %s failed (#%d, %s): %s",
            mask_url(where),
            _fail_count,
            outcome,
            mask_url(str(result.error)),
        )


def _warn_once(key: str, msg: str, *args: Any) -> None:
    if key not in _warned:
        _warned.add(key)
        logger.warning(msg, *args)


def _prompt_options(opt: dict) -> dict:
    return {k: opt[k] for k in ("prompt", "prompt_version", "max_response_chars")}


def _ask(client: JudgeClient, solution_str: object, ground_truth: object, extra_info: object, opt: dict):
    """The pointwise judge's ``judge_service.Answer`` for one response (the call, the parse, the guard)."""
    return judge_service.ask(
        client, POINTWISE, (solution_str,), ground_truth, extra_info, **_prompt_options(opt), grounded=opt["grounded"]
    )


def client_options(opt: dict, timeout: object, max_retries: object) -> dict:
    """``JudgeClient``'s settings from the options (its constructor checks them)."""
    keys = ("deadline", "max_concurrency", "temperature", "max_tokens", "cache_size", "cache_ttl", "max_response_bytes")
    return dict(
        timeout=timeout,
        max_retries=max_retries,
        extra_body=_plain(opt["extra_body"]) or None,
        **{k: opt[k] for k in keys},
    )


def check_options(**kwargs: Any) -> list[str]:
    """What ``compute_score`` would raise for these ``reward_kwargs`` at a call, one message per problem ([]: none):
    the options' rules (``judge_options.errors``), the prompt ``build_messages`` loads, the client's settings. The
    config check (``scripts/launch/verl_config.py``) asks before a run starts."""
    named = inspect.signature(compute_score).parameters
    given = {
        k: kwargs.get(k, named[k].default) for k in ("mode", "fallback", "parse_fail_score", "timeout", "max_retries")
    }
    options = {k: v for k, v in kwargs.items() if k not in named}
    found = errors(given["mode"], given["fallback"], given["parse_fail_score"], options)
    if found:
        return found
    opt = {**DEFAULTS, **options}
    for check in (
        lambda: build_messages("", None, None, **_prompt_options(opt)),
        lambda: JudgeClient(
            "http://127.0.0.1:1/v1",
            "check",
            api_key_env=None,
            **client_options(opt, given["timeout"], given["max_retries"]),
        ),
    ):
        try:
            check()
        except (ValueError, TypeError, FileNotFoundError) as e:
            found.append(f"{type(e).__name__}: {e}" if isinstance(e, TypeError) else str(e))
    return found


async def compute_score(
    data_source=None,
    solution_str="",
    ground_truth=None,
    extra_info=None,
    *,
    base_url: str | None = None,
    model: str | None = None,
    api_key_env: str | None = "OPENAI_API_KEY",
    mode: str = "judge",
    fallback: object = "rule",
    parse_fail_score: object = "lowest",
    timeout: float = 60.0,
    max_retries: int = 4,
    reward_router_address: str | None = None,
    reward_model_tokenizer: Any = None,
    **kwargs: Any,
) -> dict:
    """verl custom reward function; see the module docstring. Extra knobs: ``DEFAULTS``.

    Every sample gets the same keys, ``score`` first. In ``mode="route"`` the rule decides an answer with a ``#### N``
    line without asking the judge (``judge_skipped`` 1.0; no request is made here):

    >>> r = asyncio.run(compute_score("openai/gsm8k", "48 + 24 = 72\\n#### 72", "72", {"question": "How many?"},
    ...                               base_url="http://127.0.0.1:9/v1", model="judge", mode="route", canary_every=0))
    >>> list(r)[:6], len(r)
    (['score', 'judge_score', 'rule_score', 'judge_error', 'judge_parse_fail', 'judge_skipped'], 19)
    >>> (r["score"], r["rule_score"], r["judge_skipped"])
    (1.0, 1.0, 1.0)
    """
    problems = errors(mode, fallback, parse_fail_score, kwargs)  # the rules: reward_fns/judge_options.py
    if problems:
        raise ValueError("; ".join(problems))
    opt = {**DEFAULTS, **kwargs}
    rule_score = gsm8k.grade(solution_str, ground_truth, opt["rule_mode"])
    fallback_score = fallback_value(fallback, rule_score)
    no_verdict = parse_fail_value(parse_fail_score, mode)
    if no_verdict is None:  # "lowest": what a real verdict of 0 earns for this answer
        no_verdict = combine(mode, 0, rule_score)
    out = dict.fromkeys(KEYS, 0.0)
    out.update(
        score=fallback_score,
        judge_score=-1.0,
        rule_score=rule_score,
        judge_fallback=1.0,
        rule_format=float(gsm8k.extract_answer(solution_str, "strict") is not None),
    )

    # 1. where to send the request (hybrid mode: a wrong final answer earns 0 whatever the judge says,
    #    so the judge is only asked about rule-correct answers)
    if mode == "hybrid" and rule_score == 0.0:
        out.update(score=0.0, judge_skipped=1.0, judge_fallback=0.0)
        return out
    if mode == "route" and (out["rule_format"] or final_answer(solution_str)[1] != FINAL_OK):  # the rule decides
        out.update(score=rule_score, judge_skipped=1.0, judge_fallback=0.0)
        return out
    where = endpoint(base_url, model, api_key_env, reward_router_address, reward_model_tokenizer)
    if where is None:
        _warn_once("skip", "llm_judge: no base_url and no reward_router_address (validation?): using the fallback")
        out["judge_skipped"] = 1.0
        return out
    url, judge_model, key_env = where

    # 2. the call, with its prompt (a data problem here is a config problem: raise), parse and guard
    client = get_client(url, judge_model, api_key_env=key_env, **client_options(opt, timeout, max_retries))
    reference = reference_answer(reference_text(ground_truth, extra_info), ground_truth)  # as the prompt shows it
    k = probe_index(solution_str, ground_truth, int(opt["canary_every"] or 0))
    started = time.perf_counter()
    if k is not None:  # a probe beside this sample's own request
        answer, probed = await asyncio.gather(
            _ask(client, solution_str, ground_truth, extra_info, opt),
            _canary(client, k, reference, ground_truth, extra_info, opt),
        )
        out.update(probed)
    else:
        answer = await _ask(client, solution_str, ground_truth, extra_info, opt)
    out["judge_seconds"] = time.perf_counter() - started
    out["judge_attempts"] = float(answer.attempts)
    out["judge_cached"] = 1.0 if answer.cached else 0.0
    if answer.failure:  # (a configuration error has raised JudgeConfigError)
        out["judge_error"] = 1.0
        if answer.failure == "fallback" and opt["judge_failure"] == "abstain":  # no reward: left out
            _log_failure(answer, client.url, "abstaining")
            out.update(score=0.0, judge_fallback=0.0, judge_abstained=1.0)
            return out
        if answer.failure == "fallback":  # the answer cannot cause these: the documented fallback
            _log_failure(answer, client.url, "using the fallback")
            return out
        _log_failure(answer, client.url, "scored as the lowest verdict")  # a refusal this request can cause
        out.update(score=no_verdict, judge_fallback=0.0)
        return out

    # 3. the verdict (a reply without one, e.g. cut off by max_tokens, earns what a 0 earns; a paying verdict the
    #    guard voids, what a 0 earns)
    out["judge_fallback"] = 0.0
    if answer.value is None:
        out.update(score=no_verdict, judge_parse_fail=1.0)
        return out
    out["judge_score"] = float(answer.value)
    out["score"] = combine(mode, answer.value, rule_score)
    if answer.problem is not None:
        out.update({answer.problem: 1.0, "score": no_verdict})
    return out
