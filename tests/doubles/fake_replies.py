"""What the fake OpenAI server (``tests.doubles.fake_openai``) answers when no fault applies: scripted replies, a
replies-file table, or a tiny deterministic grader; and the chat-completion body it sends. No command of its own;
used by ``tests.doubles.fake_openai`` (``--replies FILE``, ``--default TEXT``) and by the tests that script a judge.

* ``reply(body) -> str | Reply`` given to the server: the test states exactly what the "judge" or "policy" says. A
  ``Reply`` can also be an HTTP error status (``Reply(status=503)``), a raw body sent as is (``Reply(raw=b"<html>")``),
  extra headers or a ``finish_reason``.
* ``table_reply(table, default)``: the replies of a replies file ``{"<model>": {"<marker>": "<reply>"}}``: the entry,
  for the request's ``model``, of the last ``[[marker]]`` found in its messages (``markers``); ``default`` when none
  is in the table.
* ``default_reply`` otherwise: it reads the user message the way a judge would, takes the candidate between
  ``<candidate>`` and the last ``</candidate>``, and answers ``<think>...</think><score>4</score>`` when the
  candidate's ``#### N`` equals the reference's, else ``<score>1</score>`` (quoting the ``#### N``, else the one final
  answer, else ``none``). ``JUDGE_SAYS:<n>`` in the request ->
  ``<think>told to say n. Reference: R. Candidate: C.</think><score>n</score>`` (``C``: the candidate's one final
  answer without the marker, ``reward_fns.parse.final_answer``, or ``none``; ``n`` any text, so ``JUDGE_SAYS:x`` is an
  unparseable verdict).

    >>> markers({"messages": [{"role": "user", "content": "[[q1]] and [[q2]]"}]})
    ['q1', 'q2']
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from reward_fns.parse import final_answer

__all__ = ["Reply", "default_reply", "table_reply", "candidate_of", "completion", "all_text", "markers"]

_MARK_SAYS = re.compile(r"JUDGE_SAYS:(\S+)")
_HASH_NUM = re.compile(r"####\s*(-?[\d,]*\.?\d+)")
MARKER = re.compile(r"\[\[([A-Za-z0-9_.:-]+)\]\]")


@dataclass
class Reply:
    """What a reply function may return instead of the reply text."""

    text: str | None = None
    status: int = 200
    raw: bytes | None = None  # sent as is (with ``status``) instead of a chat completion
    headers: dict = field(default_factory=dict)
    finish_reason: str = "stop"


def candidate_of(user_text: str) -> str | None:
    """The text between the first ``<candidate>`` line and the last ``</candidate>``, as a judge reads it."""
    start = user_text.find("<candidate>\n")
    end = user_text.rfind("\n</candidate>")
    if start < 0 or end < start:
        return None
    return user_text[start + len("<candidate>\n") : end]


def _num(s: str | None) -> str | None:
    if not s:
        return None
    m = _HASH_NUM.findall(s)
    return m[-1].replace(",", "") if m else None


def all_text(body: Mapping) -> str:
    """Every message content of a request body, one per line."""
    return "\n".join(str(m.get("content", "")) for m in body.get("messages", []) if isinstance(m, Mapping))


def markers(body: Mapping) -> list[str]:
    """The ``[[marker]]`` names in a request's messages, in order."""
    return MARKER.findall(all_text(body))


def default_reply(body: dict) -> str:
    """Deterministic judge reply for a request body (see the module docstring)."""
    msgs = body.get("messages") or []
    user = next((m.get("content", "") for m in reversed(msgs) if m.get("role") == "user"), "")
    said = _MARK_SAYS.search(user)
    cand = candidate_of(user)
    ref_m = re.search(r"<reference>\n(.*?)\n</reference>", user, re.DOTALL)
    ref = _num(ref_m.group(1)) if ref_m else None
    if said:  # told what to say; it quotes the candidate's one final answer (without the marker) truthfully
        value, _ = final_answer(_MARK_SAYS.sub("", cand or user))
        quote = "none" if value is None else format(value, "f")
        n = said.group(1)
        return f"<think>told to say {n}. Reference: {ref}. Candidate: {quote}.</think><score>{n}</score>"
    got = _num(cand)
    if ref is not None and got is not None and float(got) == float(ref):
        return f"<think>Reference: {ref}. Candidate: {got}. Same.</think><score>4</score>"
    value, _ = final_answer(cand or "")  # what it calls different: the candidate's one final answer, if any
    quote = got if got is not None else ("none" if value is None else format(value, "f"))
    return f"<think>Reference: {ref}. Candidate: {quote}. Different.</think><score>1</score>"


def table_reply(table: Mapping[str, Mapping[str, str]], default: str = "") -> Callable[[dict], str]:
    """Reply function of a replies file: the entry of the last known marker for the request's model."""

    def reply(body: dict) -> str:
        per_model = table.get(body.get("model"), {})
        for m in reversed(markers(body)):
            if m in per_model:
                return per_model[m]
        return default

    return reply


def completion(body: Mapping, text: str, finish: str = "stop") -> dict:
    """An OpenAI chat-completion response body answering ``body`` with ``text``."""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 0, "completion_tokens": len(text.split()), "total_tokens": len(text.split())},
    }
