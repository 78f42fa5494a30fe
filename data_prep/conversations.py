"""Conversations in source schemas: chat messages, hh-rlhf transcripts, and the query text of any row or file."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

from data_prep.files.errors import BadRow
from data_prep.files.readers import InvalidRow, local_source
from data_prep.progress import progress_bar

_ROLE_LABEL = {"user": "Human", "human": "Human", "assistant": "Assistant", "system": "System"}


def format_turns(turns: Sequence[tuple[str, str]]) -> str:
    """A conversation as query text: a lone human turn is just its text, else a labelled transcript."""
    if len(turns) == 1 and turns[0][0] == "Human":
        return turns[0][1].strip()
    return "\n\n".join(f"{role}: {text.strip()}" for role, text in turns)


def messages_to_turns(messages: object, field_name: str = "input") -> list[tuple[str, str]]:
    """Chat messages (``[{"role", "content"}]``) -> ``[(label, text)]``; BadRow when malformed."""
    if hasattr(messages, "tolist"):
        messages = messages.tolist()
    if not isinstance(messages, list) or not messages:
        raise BadRow(field_name, "expected a non-empty list of chat messages", reason="bad_type")
    turns = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or not isinstance(m.get("content"), str) or not isinstance(m.get("role"), str):
            raise BadRow(f"{field_name}[{i}]", "expected a message with string 'role' and 'content'", reason="bad_type")
        label = _ROLE_LABEL.get(m["role"].lower())
        if label is None:
            raise BadRow(f"{field_name}[{i}].role", f"unknown role {m['role']!r}", reason="bad_value")
        turns.append((label, m["content"]))
    return turns


def openjudge_output(row: Mapping, pair: bool = False) -> tuple[str, list[tuple[str, object]]]:
    """An OpenJudge row (``input``: chat messages; ``output``: ``{"answer": {"content", "label"}}`` entries, exactly
    two with ``pair``): its query text and each answer's ``(content, label)`` (the entry's own ``label`` where the
    answer has none); BadRow when malformed."""
    query = format_turns(messages_to_turns(row.get("input"), "input"))
    output = row.get("output")
    if hasattr(output, "tolist"):
        output = output.tolist()
    if isinstance(output, Mapping) and not pair:
        output = [output]
    if pair and (not isinstance(output, list) or len(output) != 2):
        raise BadRow("output", "expected a list of exactly two {'answer': {...}} entries", reason="bad_type")
    if not isinstance(output, list) or not output:
        raise BadRow("output", "expected a non-empty list of {'answer': {...}} entries", reason="bad_type")
    answers = []
    for i, entry in enumerate(output):
        ans = entry.get("answer") if isinstance(entry, Mapping) else None
        if not isinstance(ans, Mapping):
            raise BadRow(f"output[{i}].answer", "missing", reason="missing")
        if not isinstance(ans.get("content"), str):
            raise BadRow(f"output[{i}].answer.content", "missing or not a string", reason="missing")
        label = ans.get("label")
        answers.append((ans["content"], entry.get("label") if label is None else label))
    return query, answers


_HH_MARK = re.compile(r"\n\n(Human|Assistant):")


def parse_hh(transcript: str, field_name: str) -> list[tuple[str, str]]:
    """An hh-rlhf transcript (``\\n\\nHuman: ... \\n\\nAssistant: ...``) -> ``[(role, text)]``."""
    t = transcript if transcript.startswith("\n\n") else "\n\n" + transcript
    parts = _HH_MARK.split(t)
    if parts[0].strip() or len(parts) < 3:
        raise BadRow(field_name, "not a '\\n\\nHuman: ... \\n\\nAssistant: ...' transcript", reason="bad_transcript")
    turns = [(parts[i], parts[i + 1]) for i in range(1, len(parts), 2)]
    if turns[0][0] != "Human":
        raise BadRow(field_name, "transcript does not start with a 'Human:' turn", reason="bad_transcript")
    if turns[-1][0] != "Assistant":
        raise BadRow(field_name, "transcript does not end with an 'Assistant:' turn", reason="bad_transcript")
    return turns


def hh_pair(chosen: str, rejected: str) -> tuple[str, str, str]:
    """(query, chosen response, rejected response) of an hh-rlhf pair; BadRow if prefixes differ."""
    c, r = parse_hh(chosen, "chosen"), parse_hh(rejected, "rejected")
    if c[:-1] != r[:-1]:
        raise BadRow(
            "rejected", "conversation before the last 'Assistant:' turn differs from 'chosen'", reason="prefix_mismatch"
        )
    return format_turns(c[:-1]), c[-1][1].strip(), r[-1][1].strip()


#: Where ``query_text`` looks, in order (for messages that say why a file has no query text).
QUERY_FIELDS = (
    "extra_info.query",
    "extra_info.question",
    "query",
    "question",
    "problem",
    "prompt",
    "input",
    "hh-rlhf chosen",
)


def query_text(row: Mapping) -> str | None:
    """The prompt/query text of a row of any supported file (ours or a source schema), or None.

    Order: ``extra_info.query``/``extra_info.question`` (our outputs), ``query``/``question``/
    ``problem``, ``prompt`` (a string, or chat messages: their conversation), OpenJudge ``input``
    messages, hh-rlhf ``chosen`` (the conversation before the last Assistant turn).
    """
    ei = row.get("extra_info")
    if isinstance(ei, Mapping):
        for k in ("query", "question"):
            v = ei.get(k)
            if isinstance(v, str) and v.strip():
                return v
    for k in ("query", "question", "problem", "prompt", "input"):
        v = row.get(k)
        if isinstance(v, str) and v.strip():
            return v
        if k in ("prompt", "input") and v is not None and not isinstance(v, str):
            try:
                return format_turns(messages_to_turns(v, k))
            except BadRow:
                pass
    v = row.get("chosen")
    if isinstance(v, str) and "\n\nAssistant:" in v:
        try:
            return format_turns(parse_hh(v, "chosen")[:-1])
        except BadRow:
            return None
    return None


def query_texts(path: str, progress: bool = False) -> tuple[list[tuple[int, str]], int]:
    """``([(row number, query text)], rows without query text)`` of any supported file (``--exclude``, overlap)."""
    src = local_source([path])
    out, missing = [], 0
    bar = progress_bar(src.total, os.path.basename(path), progress)
    try:
        for _loc, n, row in src.rows():
            bar.update(1)
            q = None if isinstance(row, InvalidRow) else query_text(row)
            if q is None:
                missing += 1
            else:
                out.append((n, q))
    finally:
        bar.close()
    return out, missing
