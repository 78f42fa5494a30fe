"""Rows and labels: input rows -> units (items) -> drafts -> verl rows.

* ``read_units`` runs an adapter over every input row. A ``BadRow`` stops the run (``--on-bad-row
  error``: ``<file>: row N: field 'F': ...``) or is counted as ``<reason>:<field>`` (``skip``); a
  ``SkipRow`` is always counted. Then, per split: items with the same ``key`` and the same ``label`` are
  kept once (the rest are ``duplicate``); items with the same ``key`` but different labels contradict
  each other and are all dropped (``conflicting_label``); items whose normalized query is in
  ``--exclude`` files are dropped (``excluded_overlap``).
* ``row_schema`` / ``make_rows``: the verl ``RLHFDataset`` row (``data_source``, ``prompt``,
  ``ability``, ``reward_model``, ``extra_info``) with an explicit arrow schema.
* ``sft_row``: a warm-start row for verl's SFT trainer (``SFT_FIELDS``): a verl row's prompt plus an answer.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from data_prep.conversations import query_texts
from data_prep.files.errors import BadRow, DataError, SkipRow
from data_prep.files.readers import InvalidRow, Source
from data_prep.progress import progress_bar
from data_prep.summary import Stats
from data_prep.text import normalize_text

JUDGE_ABILITY = "judge"
MESSAGES_TYPE = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
_ROW_TAIL = [("prompt_version", pa.string()), ("source_row", pa.int64()), ("truncated", pa.string())]


@dataclass
class Draft:
    """One output row before split/index are assigned."""

    messages: list[dict]
    ground_truth: object
    extra_info: dict


@dataclass
class Unit:
    """One input item: free-text ``fields`` (truncatable, raw), ``meta`` for the builder.

    All rows built from one unit (e.g. both orders of a pair) pass or fail the length gate together
    and share any truncation. ``key`` identifies the item for de-duplication; ``label`` (hashable, or
    None when the item has none) is what two items with the same key must agree on.
    """

    row: int
    fields: dict[str, str]
    meta: dict = field(default_factory=dict)
    key: str = ""
    query: str = ""
    weight: int = 1  # items this unit stands for (skip counts), e.g. all candidates of one question
    label: Hashable | None = None


Builder = Callable[[Unit, dict], list[Draft]]


def read_units(
    source: Source,
    to_units: Callable[[Mapping, int], list[Unit]],
    stats: Stats,
    *,
    on_bad_row: str,
    progress: bool = True,
    exclude: set[str] | None = None,
) -> list[Unit]:
    """Run ``to_units`` over every row; bad rows error or are counted; duplicates, conflicting labels and
    ``--exclude`` applied (see the module docstring)."""
    found: list[Unit] = []
    bar = progress_bar(source.total, f"{stats.output or stats.split}: read", progress)
    try:
        for loc, rownum, row in source.rows():
            stats.read += 1
            bar.update(1)
            try:
                if isinstance(row, InvalidRow):
                    raise BadRow(row.field, row.message, row.reason)
                found.extend(to_units(row, rownum))
            except BadRow as e:
                if on_bad_row == "error":
                    raise DataError(
                        f"{loc}: row {rownum}: field '{e.field}': {e.message} "
                        f"(use --on-bad-row skip to count and drop such rows)"
                    ) from None
                stats.skipped[f"{e.reason}:{e.field}"] += 1
            except SkipRow as e:
                stats.skipped[e.reason] += 1
    finally:
        bar.close()
    return _keep_unique(found, stats, exclude)


def _keep_unique(found: list[Unit], stats: Stats, exclude: set[str] | None) -> list[Unit]:
    labels: dict[str, Hashable] = {}
    conflicting: set[str] = set()
    for u in found:
        if u.key and u.label is not None and labels.setdefault(u.key, u.label) != u.label:
            conflicting.add(u.key)
    units: list[Unit] = []
    seen: set[str] = set()
    for u in found:
        if u.key:
            if u.key in conflicting:
                stats.skipped["conflicting_label"] += 1
                continue
            if u.key in seen:
                stats.skipped["duplicate"] += 1
                continue
            seen.add(u.key)
        if exclude and normalize_text(u.query) in exclude:
            stats.skipped["excluded_overlap"] += 1
            continue
        units.append(u)
    return units


def load_exclusion(paths: Sequence[str] | None) -> set[str] | None:
    """Normalised query texts of every row of ``paths`` (any supported file) for ``--exclude``."""
    if not paths:
        return None
    keys: set[str] = set()
    for p in paths:
        texts = [q for _n, q in query_texts(p)[0] if q]
        if not texts:
            raise DataError(f"--exclude {p}: no query/question/prompt text found in any row")
        keys.update(normalize_text(q) for q in texts)
    return keys


def row_schema(ground_truth_type: pa.DataType, extra_fields: Sequence[str | tuple[str, pa.DataType]]) -> pa.Schema:
    """verl row schema; ``extra_info`` is ``split``, ``index``, ``extra_fields`` (strings unless given as
    ``(name, type)``), then ``prompt_version``, ``source_row`` and ``truncated`` (the shortened fields)."""
    extra = [(f, pa.string()) if isinstance(f, str) else f for f in extra_fields]
    return pa.schema(
        [
            ("data_source", pa.string()),
            ("prompt", MESSAGES_TYPE),
            ("ability", pa.string()),
            ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", ground_truth_type)])),
            ("extra_info", pa.struct([("split", pa.string()), ("index", pa.int64()), *extra, *_ROW_TAIL])),
        ]
    )


def make_rows(
    drafts: Iterable[tuple[Draft, tuple[str, ...]]], *, split: str, data_source: str, ability: str, schema: pa.Schema
) -> list[dict]:
    """Final verl rows: index = position in the file; ``truncated`` lists shortened fields."""
    ei_names = [f.name for f in schema.field("extra_info").type]
    rows = []
    for i, (d, truncated) in enumerate(drafts):
        ei = {"split": split, "index": i, **d.extra_info, "truncated": ",".join(truncated)}
        if set(ei) != set(ei_names):
            raise AssertionError(f"extra_info keys {sorted(ei)} != schema {sorted(ei_names)}")
        rows.append(
            {
                "data_source": data_source,
                "prompt": [{"role": m["role"], "content": m["content"]} for m in d.messages],
                "ability": ability,
                "reward_model": {"style": "rule", "ground_truth": d.ground_truth},
                "extra_info": {k: ei[k] for k in ei_names},
            }
        )
    return rows


#: The columns of an SFT row (``verl.trainer.sft_trainer`` reads ``messages``).
SFT_FIELDS = [("messages", MESSAGES_TYPE), ("data_source", pa.string())]


def sft_row(row: Mapping, answer: str) -> dict:
    """An SFT row of the verl row ``row``: its prompt messages plus the assistant turn ``answer``."""
    msgs = [{"role": m["role"], "content": m["content"]} for m in row["prompt"]]
    return {
        "messages": [*msgs, {"role": "assistant", "content": answer}],
        "data_source": str(row.get("data_source", "")),
    }
