"""Asking a judge, for every verdict kind: the one service the judge rewards (``reward_fns.llm_judge``: pointwise;
``reward_fns.pairwise_judge``: pairwise) are thin policies over. A sample is read once into a ``Case``; ``ask(client,
verdict, case, responses, prompt=..., prompt_version=...)`` turns one request into one ``Answer``: the prompt filled
from the case with each response defused (``messages``; ``ValueError`` for a prompt the kind cannot fill), the call
(``JudgeClient.complete``; a configuration error raises ``JudgeConfigError``, any other failure is
``Answer.failure``), the parse (``Verdict.parse``) and, with ``grounded=True``, the guard (``Verdict.grounding``).
Beside it what every reward over a judge shares: ``get_client``, ``probe_index``, ``log_failure``.
From a shell, against ``tests.doubles.fake_openai``:

    echo '{}' > /tmp/none.json && python -m tests.doubles.fake_openai --port 18556 --replies /tmp/none.json \\
        --default '<think>Reference: 72. Candidate: 72. Same.</think><score>4</score>' &
    python -c "import asyncio; from reward_fns import judge_service as s; from reward_fns.verdicts import POINTWISE
    from reward_fns.judge_client import JudgeClient; c = JudgeClient('http://127.0.0.1:18556/v1', 'judge')
    print(asyncio.run(s.ask(c, POINTWISE, s.Case.of(['#### 72'], '72', {'answer': '#### 72'}), ['#### 72'],
        prompt='gsm8k_grade', prompt_version='v3')))"
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reward_fns.judge_client import JudgeClient
from reward_fns.judge_errors import JudgeError, outcome, throttled
from reward_fns.parse import normalize_text, reference_answer
from reward_fns.prompts import load, neutralize
from reward_fns.redact import mask_url
from reward_fns.verdicts import Verdict

logger = logging.getLogger(__name__)

MAX_RESPONSE_CHARS = 12000  # the default of the rewards' max_response_chars: longer responses are clipped
DEFAULT_REMOTE_MODEL = "gpt-4o-mini"  # the model asked at a base_url that names none
_SPECIAL_TOKEN = re.compile(r"<\|([^<>|\n]{1,64})\|>")
_BRACKET_MARKER = re.compile(r"\[/?(?:INST|SYS|AVAILABLE_TOOLS|TOOL_CALLS|TOOL_RESULTS)\]|<</?SYS>>", re.IGNORECASE)
_SHOWS_REFERENCE = {"reference", "reference_answer"}


# ---------------------------------------------------------------------------- the case and the prompt
def text_of(value: object) -> str:
    """A data field as text: ``""`` for None and NaN (a missing parquet value)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return value if isinstance(value, str) else str(value)


@dataclass(frozen=True)
class Case:
    """One sample (or one GRPO group's question) as every request about it reads it, built once by ``Case.of``:
    ``question`` (``extra_info["question"]``, else ``query``/``problem``/``prompt``), ``reference`` (the reference
    solution shown: ``extra_info["answer"]`` or ``reference``, else the ground truth), ``reference_answer`` (its final
    answer, ``parse.reference_answer``; None: none) and ``answers`` (the judged answers, as text)."""

    question: str
    reference: str
    reference_answer: str | None
    answers: tuple[str, ...] = ()

    @classmethod
    def of(cls, answers: Sequence[object], ground_truth: object, extra_info: object) -> Case:
        info = extra_info if isinstance(extra_info, Mapping) else {}
        question = text_of(info.get("question") or info.get("query") or info.get("problem") or info.get("prompt"))
        reference = text_of(info.get("answer") or info.get("reference") or ground_truth)
        texts = tuple(a if isinstance(a, str) else "" for a in answers)  # as the rule reads a non-string: no answer
        return cls(question, reference, reference_answer(reference, ground_truth), texts)


def _clip(text: str, limit: int) -> str:
    """Keep the head and (longer) tail of an over-long response, cut at whitespace only (a number is shown whole
    or not at all): the final answer is at the end."""
    if limit <= 0 or len(text) <= limit:
        return text
    head, tail = text[: limit // 4], text[len(text) - (limit - limit // 4) :]
    cut = max(head.rfind(c) for c in " \t\n\r")  # back to the last whitespace of the head ...
    head = head[:cut] if cut >= 0 else ""
    starts = [i for i in (tail.find(c) for c in " \t\n\r") if i >= 0]  # ... on from the first of the tail
    tail = tail[min(starts) :] if starts else ""
    return head + "\n[... middle of the response omitted ...]\n" + tail


def defuse(text: object, max_chars: int = MAX_RESPONSE_CHARS) -> str:
    """Untrusted candidate text -> prompt-safe text: read as the rule reads it first (``parse.normalize_text``: NFKC
    turns fullwidth ``＜/candidate＞`` and ``｜`` into ASCII, invisible characters such as zero-width spaces and soft
    hyphens go, a Unicode minus before a number becomes ``-``), clipped at whitespace to ``max_chars``, then look-alike
    tags (``< /candidate>``, ``<start_of_turn>``, ``</s>``), chat special tokens (``<|im_end|>``, DeepSeek's
    ``<｜end▁of▁sentence｜>``) and bracket markers (``[INST]``, ``<<SYS>>``) defused."""
    s = text if isinstance(text, str) else ("" if text is None else str(text))
    s = s.encode("utf-8", "replace").decode("utf-8")  # lone surrogates cannot be sent as UTF-8 JSON
    s = _clip(normalize_text(s), int(max_chars))
    s = neutralize(s)
    s = _BRACKET_MARKER.sub(lambda m: f"\u27e6{m.group(0)[1:-1]}\u27e7", s)
    return _SPECIAL_TOKEN.sub(lambda m: f"\u2039|{m.group(1)}|\u203a", s)


def check_prompt(verdict: Verdict, prompt: str, prompt_version: str) -> None:
    """Raise for a prompt this kind cannot ask with: ``FileNotFoundError`` (no such template), ``ValueError`` (it
    has none of the kind's response fields, or fields no case fills)."""
    template = load(prompt, prompt_version)
    if not set(verdict.responses) <= template.fields():
        raise ValueError(f"prompt {template.id} is no {verdict.name} prompt (fields {template.fields()})")
    messages(verdict, Case("", "", None), [""] * len(verdict.responses), prompt=prompt, prompt_version=prompt_version)


def messages(
    verdict: Verdict,
    case: Case,
    responses: Sequence[object],
    *,
    prompt: str,
    prompt_version: str,
    max_response_chars: int = MAX_RESPONSE_CHARS,
) -> list[dict]:
    """The judge's chat messages for ``responses`` (under the kind's field names, ``Verdict.responses``) about
    ``case``: the prompt filled by name (``question``/``query``/``problem``, ``reference``, ``reference_answer``,
    ``unknown`` when there is none). Data prep builds training rows with it too (``llm_judge.build_messages``)."""
    if len(responses) != len(verdict.responses):
        raise ValueError(f"a {verdict.name} verdict judges {len(verdict.responses)} response(s), got {len(responses)}")
    template = load(prompt, prompt_version)
    question, reference = case.question, case.reference
    if verdict.defuse_context:
        question, reference = neutralize(question), neutralize(reference)
    available = {
        "question": question,
        "query": question,
        "problem": question,
        "reference": reference,
        "reference_answer": case.reference_answer or "unknown",
        **{field: defuse(r, max_response_chars) for field, r in zip(verdict.responses, responses)},
    }
    missing = template.fields() - available.keys()
    if missing:
        raise ValueError(f"prompt {template.id} needs fields this reward cannot fill: {sorted(missing)}")
    return template.render(**{k: available[k] for k in template.fields()})


def reference_shown(verdict: Verdict, case: Case, *, prompt: str, prompt_version: str) -> str | None:
    """The reference answer the grounding checks against: the one the prompt shows, or always where
    ``verdict.reference_always``; None when there is none or the prompt shows none."""
    if not (verdict.reference_always or load(prompt, prompt_version).fields() & _SHOWS_REFERENCE):
        return None
    return case.reference_answer


# ---------------------------------------------------------------------------- the request
@dataclass(frozen=True)
class Answer:
    """What one request to the judge gave: ``failure`` None (it answered: ``text``; ``value`` the verdict, None when
    the reply holds none; ``problem`` the grounding's objection, None when it holds) or ``"fallback"`` /
    ``"refused"`` (``judge_errors.outcome``; ``error`` says what). ``seconds``: the request's wall time (0 from the
    cache); ``cached``: answered from the cache or a request in flight; ``attempts``: HTTP attempts."""

    text: str | None
    value: object = None
    problem: str | None = None
    failure: str | None = None
    seconds: float = 0.0
    cached: bool = False
    attempts: int = 0
    error: JudgeError | None = None

    @property
    def stands(self) -> bool:
        """A verdict that counts: one was parsed and the grounding did not void it."""
        return self.value is not None and self.problem is None


async def ask(
    client: JudgeClient,
    verdict: Verdict,
    case: Case,
    responses: Sequence[object],
    *,
    prompt: str,
    prompt_version: str,
    max_response_chars: int = MAX_RESPONSE_CHARS,
    grounded: bool = True,
) -> Answer:
    """Ask ``client``'s judge for a ``verdict`` on ``responses`` about ``case``: the messages, the call, the parse,
    the grounding (module docstring). Raises ``ValueError`` for a prompt it cannot fill and ``JudgeConfigError`` for
    an endpoint that rejects the configuration; never for the judge's replies or the network."""
    shown = dict(prompt=prompt, prompt_version=prompt_version)
    result = await client.complete(messages(verdict, case, responses, max_response_chars=max_response_chars, **shown))
    timing = dict(seconds=result.latency_s, cached=result.cached, attempts=result.attempts)
    if not result.ok:
        failure = outcome(result.error)
        if failure == "stop":  # wrong key, URL or model: every request would fail; stop the run
            raise client.config_error(result.error)
        return Answer(None, failure=failure, error=result.error, **timing)
    parsed = verdict.parse(result.text)
    if not parsed.ok:
        return Answer(result.text, **timing)
    problem = None
    if grounded and verdict.grounding is not None and verdict.pays(parsed.value):  # the guard fails closed
        reference = reference_shown(verdict, case, **shown)
        problem = verdict.grounding(result.text, parsed.value, [text_of(r) for r in responses], reference)
    return Answer(result.text, parsed.value, problem, **timing)


# ---------------------------------------------------------------------------- what every judge reward shares
#: the process-wide clients, one per configuration (same config -> same pool, cache, sessions); oldest first
CLIENTS: dict[tuple, JudgeClient] = {}
_CLIENTS_LOCK = threading.Lock()
MAX_CLIENTS = 16


def get_client(base_url: str, model: str, **options: Any) -> JudgeClient:
    """The process-wide client for one configuration (a sweep over more than ``MAX_CLIENTS``: the oldest goes)."""
    key = (base_url, model, tuple(sorted((k, repr(v)) for k, v in options.items())))
    with _CLIENTS_LOCK:
        client = CLIENTS.get(key)
        if client is None:
            if len(CLIENTS) >= MAX_CLIENTS:
                CLIENTS.pop(next(iter(CLIENTS)))
            client = CLIENTS[key] = JudgeClient(base_url, model, **options)
        return client


def probe_index(solution_str: object, ground_truth: object, every: int) -> int | None:
    """Whether this sample carries a canary probe (about 1 in ``every``, decided by a hash of the sample, so a
    sample always gets the same answer) and which one; None: no probe."""
    if every <= 0:
        return None
    key = f"{ground_truth}\x00{text_of(solution_str)}".encode("utf-8", "replace")
    h = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")
    return h // every if h % every == 0 else None


_failures = 0


def log_failure(answer: Answer, url: str, what: str) -> None:
    """Log a failed call (``answer.error``), URL and error masked: the first five of the process, then every
    hundredth (``judge_errors.throttled``)."""
    global _failures
    _failures += 1
    if throttled(_failures):
        error = mask_url(str(answer.error))
        logger.warning("judge call to %s failed (#%d, %s): %s", mask_url(url), _failures, what, error)
