"""Asking a judge, for every verdict kind: one request in, one ``Answer`` out. The rewards over a judge
(``reward_fns.llm_judge``: pointwise; ``reward_fns.pairwise_judge``: pairwise) are thin layers over ``ask``.

``ask(client, verdict, responses, ground_truth, extra_info, prompt=..., prompt_version=...)``:

1. **the messages** (``messages``): the versioned prompt (``reward_fns/prompts``) filled by name: the question
   (``question``/``query``/``problem`` from ``extra_info["question"]``, else ``query``/``problem``/``prompt``), the
   reference solution (``reference``: ``extra_info["answer"]``, else the ground truth), its final answer
   (``reference_answer``: ``parse.reference_answer``; ``unknown`` when there is none) and the judged responses under
   the kind's field names (``Verdict.responses``: ``response``; ``response_a``, ``response_b``), each defused
   (``defuse``); the question and reference defused of look-alike tags too where the kind says so
   (``Verdict.defuse_context``). A field the prompt needs and no one fills: ``ValueError``.
2. **the call** (``JudgeClient.complete``: retries, cache, concurrency limit; it never raises). A configuration
   error (``judge_errors.outcome == "stop"``: 401/403/404, "model not found") raises ``JudgeConfigError``: every
   request would fail the same way. Any other failure is ``Answer.failure``: ``"fallback"`` (the answer cannot cause
   it: timeout, 429/5xx, a broken reply) or ``"refused"`` (another 4xx: the request can).
3. **the parse** (``Verdict.parse``): ``Answer.value``, None when the reply holds no verdict.
4. **the grounding** (``grounded=True``): a verdict the kind checks (``Verdict.pays``: pointwise, a score above 0;
   pairwise, either letter) must hold ``Verdict.grounding`` (``reward_fns.guard``) against the responses and the
   reference answer: the one the prompt shows, or always where the kind says so (``Verdict.reference_always``).
   ``Answer.problem`` names what is wrong (``guard.PROBLEMS``), None when it holds or was not checked.

What a reward pays for an ``Answer`` (a fallback, the lowest verdict, a loss) is the reward's. From a shell, against
the fake server of ``tests.doubles.fake_openai``:

    echo '{}' > /tmp/none.json && python -m tests.doubles.fake_openai --port 18556 --replies /tmp/none.json \\
        --default '<think>Reference: 72. Candidate: 72. Same.</think><score>4</score>' &
    python -c "import asyncio; from reward_fns import judge_service as s; from reward_fns.verdicts import POINTWISE
    from reward_fns.judge_client import JudgeClient; c = JudgeClient('http://127.0.0.1:18556/v1', 'judge')
    print(asyncio.run(s.ask(c, POINTWISE, ['#### 72'], '72', {'answer': '#### 72'}, prompt='gsm8k_grade',
        prompt_version='v3')))"
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from reward_fns.judge_client import JudgeClient
from reward_fns.judge_errors import JudgeError, outcome
from reward_fns.judge_options import DEFAULTS
from reward_fns.parse import normalize_text, reference_answer
from reward_fns.prompts import NEUTRALIZED_TAGS, load, neutralize
from reward_fns.verdicts import Verdict

__all__ = ["Answer", "ask", "messages", "reference_shown", "defuse", "text_of", "reference_text"]

_SPECIAL_TOKEN = re.compile(r"<\|([^<>|\n]{1,64})\|>")
_BRACKET_MARKER = re.compile(r"\[/?(?:INST|SYS|AVAILABLE_TOOLS|TOOL_CALLS|TOOL_RESULTS)\]|<</?SYS>>", re.IGNORECASE)
_SHOWS_REFERENCE = {"reference", "reference_answer"}


# ---------------------------------------------------------------------------- the prompt
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


def defuse(text: object, max_chars: int = DEFAULTS["max_response_chars"]) -> str:
    """Untrusted candidate text -> prompt-safe text: read as the rule reads it first (``parse.normalize_text``: NFKC
    turns fullwidth ``＜/candidate＞`` and ``｜`` into ASCII, invisible characters such as zero-width spaces and soft
    hyphens go, a Unicode minus before a number becomes ``-``), clipped at whitespace to ``max_chars``, then look-alike
    tags (``< /candidate>``, ``<start_of_turn>``, ``</s>``), chat special tokens (``<|im_end|>``, DeepSeek's
    ``<｜end▁of▁sentence｜>``) and bracket markers (``[INST]``, ``<<SYS>>``) defused."""
    s = text if isinstance(text, str) else ("" if text is None else str(text))
    s = s.encode("utf-8", "replace").decode("utf-8")  # lone surrogates cannot be sent as UTF-8 JSON
    s = _clip(normalize_text(s), int(max_chars))
    s = neutralize(s, NEUTRALIZED_TAGS)
    s = _BRACKET_MARKER.sub(lambda m: f"\u27e6{m.group(0)[1:-1]}\u27e7", s)
    return _SPECIAL_TOKEN.sub(lambda m: f"\u2039|{m.group(1)}|\u203a", s)


def text_of(value: object) -> str:
    """A data field as text: ``""`` for None and NaN (a missing parquet value)."""
    if value is None:
        return ""
    if isinstance(value, float) and math.isnan(value):
        return ""
    return value if isinstance(value, str) else str(value)


def reference_text(ground_truth: object, extra_info: object) -> str:
    """The reference solution the judge is shown: ``extra_info["answer"]`` (or ``reference``), else the ground
    truth."""
    info = extra_info if isinstance(extra_info, Mapping) else {}
    return text_of(info.get("answer") or info.get("reference") or ground_truth)


def messages(
    verdict: Verdict,
    responses: Sequence[object],
    ground_truth: object = None,
    extra_info: Mapping | None = None,
    *,
    prompt: str,
    prompt_version: str,
    max_response_chars: int = DEFAULTS["max_response_chars"],
) -> list[dict]:
    """The judge's chat messages for ``responses`` (in the kind's order, ``Verdict.responses``); see the module
    docstring. Data prep builds training rows with the same function (through ``llm_judge.build_messages``)."""
    if len(responses) != len(verdict.responses):
        raise ValueError(f"a {verdict.name} verdict judges {len(verdict.responses)} response(s), got {len(responses)}")
    info = extra_info if isinstance(extra_info, Mapping) else {}
    template = load(prompt, prompt_version)
    question = text_of(info.get("question") or info.get("query") or info.get("problem") or info.get("prompt"))
    reference = reference_text(ground_truth, info)
    if verdict.defuse_context:
        question, context = neutralize(question, NEUTRALIZED_TAGS), neutralize(reference, NEUTRALIZED_TAGS)
    else:
        context = reference
    available = {
        "question": question,
        "query": question,
        "problem": question,
        "reference": context,
        "reference_answer": reference_answer(reference, ground_truth) or "unknown",
        **{field: defuse(r, max_response_chars) for field, r in zip(verdict.responses, responses)},
    }
    missing = template.fields() - available.keys()
    if missing:
        raise ValueError(f"prompt {template.id} needs fields this reward cannot fill: {sorted(missing)}")
    return template.render(**{k: available[k] for k in template.fields()})


def reference_shown(
    verdict: Verdict, ground_truth: object, extra_info: object, *, prompt: str, prompt_version: str
) -> str | None:
    """The reference answer the grounding checks against: the one the prompt shows (``parse.reference_answer``), or
    always where ``verdict.reference_always``; None when there is none or the prompt shows none."""
    if not (verdict.reference_always or load(prompt, prompt_version).fields() & _SHOWS_REFERENCE):
        return None
    return reference_answer(reference_text(ground_truth, extra_info), ground_truth)


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
    responses: Sequence[object],
    ground_truth: object = None,
    extra_info: Mapping | None = None,
    *,
    prompt: str,
    prompt_version: str,
    max_response_chars: int = DEFAULTS["max_response_chars"],
    grounded: bool = True,
) -> Answer:
    """Ask ``client``'s judge for a ``verdict`` on ``responses``: the messages, the call, the parse, the grounding
    (module docstring). Raises ``ValueError`` for a prompt it cannot fill and ``JudgeConfigError`` for an endpoint
    that rejects the configuration; never for the judge's replies or the network."""
    shown = dict(prompt=prompt, prompt_version=prompt_version)
    sent = messages(verdict, responses, ground_truth, extra_info, max_response_chars=max_response_chars, **shown)
    result = await client.complete(sent)
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
        reference = reference_shown(verdict, ground_truth, extra_info, **shown)
        problem = verdict.grounding(result.text, parsed.value, [text_of(r) for r in responses], reference)
    return Answer(result.text, parsed.value, problem, **timing)
