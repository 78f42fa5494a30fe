"""Shared machinery of the ``data_prep`` CLIs.

* **Reading**: local JSONL (``.jsonl``/``.jsonl.gz``), JSON arrays (``.json``/``.json.gz``) and parquet,
  or a Hugging Face hub dataset (``datasets.load_dataset``). Rows are numbered from 1 in file order
  (for JSONL the number is the line number), so an error can name the row.
* **Bad rows**: an adapter raises ``BadRow(field, message, reason)``; with ``--on-bad-row error`` that
  stops the run with ``<file>: row N: field 'F': ...``, with ``skip`` it is counted as
  ``<reason>:<field>``. Content filters (``SkipRow``: empty or identical responses, ties, duplicates,
  ``--exclude`` overlap, over-length prompts) are always counted skips, never silent.
* **Length gate**: the fully templated prompt is measured exactly as verl's ``RLHFDataset`` measures
  it (``tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
  **apply_chat_template_kwargs)``, batched). Rows over ``--max-prompt-length`` are dropped and counted
  as ``too_long``, or, with ``--truncate-field``, the longest eligible free-text field is shortened
  in its middle (``TRUNCATION_MARKER``) until the prompt fits. Only field *contents* are shortened:
  the template's tail (Response B, the output-format line) is never cut.
* **Writing**: an explicit arrow schema per output and fixed parquet options, written atomically, so
  the same inputs and seed give byte-identical files.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import pyarrow as pa
import pyarrow.parquet as pq

from reward_fns.prompts import neutralize as _neutralize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Look-alike tags defused in every untrusted text placed in a judge prompt.
NEUTRALIZE_TAGS = (
    "score", "better", "think", "response", "response_a", "response_b",
    "query", "candidate", "reference", "problem",
)
#: Inserted where ``--truncate-field`` removed the middle of a field.
TRUNCATION_MARKER = "\n[... truncated ...]\n"
#: A field is never shortened below this many tokens (then the next longest field is tried).
MIN_KEEP_TOKENS = 32

JUDGE_ABILITY = "judge"


# ----------------------------------------------------------------------------- errors
class DataError(Exception):
    """A fatal data problem (``--on-bad-row error``) or an unusable input; the CLI exits with 2."""


class BadRow(Exception):
    """A malformed input row: ``field`` names the offending field, ``reason`` is the skip key."""

    def __init__(self, field: str, message: str, reason: str = "bad_value"):
        super().__init__(message)
        self.field = field
        self.message = message
        self.reason = reason


class SkipRow(Exception):
    """A well-formed row (or item) that is deliberately not written; always counted by ``reason``."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


# ----------------------------------------------------------------------------- text helpers
def neutralize(text: str) -> str:
    return _neutralize(text, NEUTRALIZE_TAGS)


_PUNCT = re.compile(r"[^\w\s]|_")


def normalize_text(text: str) -> str:
    """Overlap key: NFKC, lowercase, punctuation stripped, whitespace collapsed."""
    t = unicodedata.normalize("NFKC", text).lower()
    t = _PUNCT.sub("", t)
    return " ".join(t.split())


def stable_hash(*parts: str, n: int = 16) -> str:
    """Hex digest of a JSON list of ``parts`` (unambiguous, independent of PYTHONHASHSEED)."""
    blob = json.dumps(list(parts), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:n]


def require_str(row: Mapping, key: str, *, allow_empty: bool = False) -> str:
    """``row[key]`` as a string, or BadRow naming the field."""
    if key not in row or row[key] is None:
        raise BadRow(key, "missing", reason="missing")
    v = row[key]
    if not isinstance(v, str):
        raise BadRow(key, f"expected a string, got {type(v).__name__}", reason="bad_type")
    if not allow_empty and not v.strip():
        raise BadRow(key, "empty", reason="empty")
    return v


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
        raise BadRow("rejected", "conversation before the last 'Assistant:' turn differs from 'chosen'", reason="prefix_mismatch")
    return format_turns(c[:-1]), c[-1][1].strip(), r[-1][1].strip()


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
    for k in ("query", "question", "problem"):
        v = row.get(k)
        if isinstance(v, str) and v.strip():
            return v
    for k in ("prompt", "input"):
        v = row.get(k)
        if isinstance(v, str) and v.strip():
            return v
        if v is not None and not isinstance(v, str):
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


# ----------------------------------------------------------------------------- reading
@dataclass
class InvalidRow:
    """Placeholder for a row that could not even be decoded (bad JSON, not an object)."""

    field: str
    message: str
    reason: str


@dataclass
class Source:
    """One split's input: a name for messages and an iterator of ``(location, row_number, row)``."""

    name: str
    rows: Callable[[], Iterator[tuple[str, int, object]]]
    total: int | None = None


def _open_text(path: str):
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def _iter_jsonl(path: str) -> Iterator[tuple[str, int, object]]:
    with _open_text(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                yield path, lineno, InvalidRow("<json>", f"invalid JSON: {e.msg} (column {e.colno})", "invalid_json")
                continue
            if not isinstance(obj, dict):
                obj = InvalidRow("<row>", f"expected a JSON object, got {type(obj).__name__}", "bad_type")
            yield path, lineno, obj


def _iter_json(path: str) -> Iterator[tuple[str, int, object]]:
    with _open_text(path) as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}: invalid JSON: {e}") from e
    if isinstance(data, dict):  # {"data": [...]} or {"rows": [...]}
        for k in ("data", "rows", "examples"):
            if isinstance(data.get(k), list):
                data = data[k]
                break
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a JSON array of objects")
    for i, obj in enumerate(data, 1):
        yield path, i, obj if isinstance(obj, dict) else InvalidRow("<row>", f"expected an object, got {type(obj).__name__}", "bad_type")


def _iter_parquet(path: str) -> Iterator[tuple[str, int, object]]:
    pf = pq.ParquetFile(path)
    n = 0
    for batch in pf.iter_batches(batch_size=2048):
        for obj in batch.to_pylist():
            n += 1
            yield path, n, obj


def _count_rows(path: str) -> int | None:
    if path.endswith(".parquet"):
        return pq.ParquetFile(path).metadata.num_rows
    if path.endswith((".jsonl", ".jsonl.gz")):
        with _open_text(path) as f:
            return sum(1 for line in f if line.strip())
    return None


def _reader(path: str):
    if path.endswith(".parquet"):
        return _iter_parquet
    if path.endswith((".jsonl", ".jsonl.gz")):
        return _iter_jsonl
    if path.endswith((".json", ".json.gz")):
        return _iter_json
    raise DataError(f"{path}: unsupported file type (use .jsonl, .jsonl.gz, .json, .json.gz or .parquet)")


def local_source(paths: Sequence[str], limit: int | None = None) -> Source:
    for p in paths:
        if not os.path.exists(p):
            raise DataError(f"input file not found: {p}")
        _reader(p)

    def rows():
        n = 0
        for p in paths:
            for item in _reader(p)(p):
                if limit is not None and n >= limit:
                    return
                n += 1
                yield item

    total = None
    try:
        counts = [_count_rows(p) for p in paths]
        if all(c is not None for c in counts):
            total = sum(counts)
            if limit is not None:
                total = min(total, limit)
    except Exception:  # a broken file is reported row by row later
        total = None
    return Source(name=", ".join(paths), rows=rows, total=total)


def hf_source(path: str, split: str, *, name: str | None = None, data_dir: str | None = None,
              data_files: Mapping[str, str] | None = None, limit: int | None = None) -> Source:
    """A split of a hub dataset via ``datasets.load_dataset`` (network, or the local HF cache)."""
    import datasets

    kwargs = {}
    if name:
        kwargs["name"] = name
    if data_dir:
        kwargs["data_dir"] = data_dir
    if data_files:
        kwargs["data_files"] = dict(data_files)
    label = f"hf:{path}" + (f"[{name}]" if name else "") + (f"/{data_dir}" if data_dir else "") + f":{split}"
    try:
        ds = datasets.load_dataset(path, split=split, **kwargs)
    except Exception as e:  # noqa: BLE001 - report any hub/cache failure as a data error
        raise DataError(f"{label}: could not load from the Hugging Face hub: {e}") from e
    total = len(ds) if limit is None else min(len(ds), limit)

    def rows():
        for i in range(total):
            yield label, i + 1, ds[i]

    return Source(name=label, rows=rows, total=total)


# ----------------------------------------------------------------------------- tokenizer + length gate
def default_tokenizer_path() -> str:
    """``$VERL_JUDGE_MODEL`` if set, else the materialised SmolLM2-135M-Instruct folder."""
    env = os.environ.get("VERL_JUDGE_MODEL")
    if env and os.path.isdir(env):
        return env
    scripts = os.path.join(ROOT, "scripts")
    if scripts not in sys.path:
        sys.path.insert(0, scripts)
    try:
        from materialize_model import materialize
    except ImportError as e:  # installed without the scripts folder
        raise DataError("no --tokenizer given and scripts/materialize_model.py is not available") from e
    return materialize()


@lru_cache(maxsize=4)
def load_tokenizer(path: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


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
    and share any truncation.
    """

    row: int
    fields: dict[str, str]
    meta: dict = field(default_factory=dict)
    key: str = ""
    query: str = ""
    weight: int = 1  # items this unit stands for (skip counts), e.g. all candidates of one question


Builder = Callable[[Unit, dict], list[Draft]]


class LengthGate:
    """Measures chat-formatted prompts like verl's RLHFDataset and enforces ``max_len``."""

    def __init__(self, tokenizer, max_len: int | None, truncate: Sequence[str] | None = None,
                 chat_template_kwargs: Mapping | None = None):
        self.tokenizer = tokenizer
        self.max_len = max_len if max_len and max_len > 0 else None
        self.truncate = None if truncate is None else tuple(truncate)
        kw = dict(chat_template_kwargs or {})
        for k in ("tokenize", "return_dict", "return_tensors", "add_generation_prompt"):
            kw.pop(k, None)
        self.kwargs = kw
        self._marker_tokens = None

    def lengths(self, convs: list[list[dict]]) -> list[int]:
        if not convs:
            return []
        out = self.tokenizer.apply_chat_template(convs, add_generation_prompt=True, tokenize=True, **self.kwargs)
        ids = out["input_ids"] if isinstance(out, Mapping) or hasattr(out, "keys") else out
        return [len(x) for x in ids]

    def length(self, messages: list[dict]) -> int:
        return self.lengths([messages])[0]

    @property
    def marker_tokens(self) -> int:
        if self._marker_tokens is None:
            self._marker_tokens = len(self.tokenizer(TRUNCATION_MARKER, add_special_tokens=False)["input_ids"])
        return self._marker_tokens

    def apply(self, units: list[Unit], build: Builder, stats: "Stats", chunk: int = 256,
              progress: bool = True) -> list[tuple[Unit, list[Draft], tuple[str, ...]]]:
        """Units whose every prompt fits (possibly after truncation), with their drafts."""
        accepted = []
        bar = _progress(len(units), f"{stats.output or stats.split}: length check", progress and self.max_len is not None)
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
                if n <= self.max_len:
                    accepted.append((u, ds, ()))
                    stats.note_len(n)
                    continue
                if self.truncate is None:
                    stats.skip("too_long", u.weight)
                    continue
                try:
                    ds2, names, n2 = self._fit(u, build, n)
                except SkipRow as e:
                    stats.skip(e.reason, u.weight)
                    continue
                accepted.append((u, ds2, names))
                stats.note_len(n2)
                for nm in names:
                    stats.truncated[nm] += 1
            bar.update(len(part))
        bar.close()
        return accepted

    def _offsets(self, text: str) -> list[tuple[int, int]]:
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return [tuple(o) for o in enc["offset_mapping"]]

    def _fit(self, unit: Unit, build: Builder, length: int):
        # eligible: the named fields (``response`` also matches ``response.0``, ``response.1``...), or all
        eligible = [f for f in unit.fields if unit.fields[f]
                    and (not self.truncate or f in self.truncate or f.split(".")[0] in self.truncate)]
        if not eligible:
            raise SkipRow("too_long")
        offsets = {f: self._offsets(unit.fields[f]) for f in eligible}
        keep = {f: len(offsets[f]) for f in eligible}
        fields = dict(unit.fields)
        names: set[str] = set()
        drafts: list[Draft] = []
        for attempt in range(64):
            excess = length - self.max_len
            if excess <= 0:
                return drafts, tuple(sorted({nm.split(".")[0] for nm in names})), length
            # the field with the most tokens left; ties go to the field listed first
            name = max(eligible, key=lambda f: (keep[f], -eligible.index(f)))
            if keep[name] <= MIN_KEEP_TOKENS:
                raise SkipRow("too_long")
            want = keep[name] - excess - (self.marker_tokens if name not in names else 0) - attempt
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


# ----------------------------------------------------------------------------- stats + summary
@dataclass
class Stats:
    split: str
    output: str = ""
    source: str = ""
    path: str = ""
    read: int = 0
    items: int = 0
    written: int = 0
    skipped: Counter = field(default_factory=Counter)
    labels: Counter = field(default_factory=Counter)
    truncated: Counter = field(default_factory=Counter)
    extra: dict = field(default_factory=dict)
    max_len: int | None = None
    longest: int = 0

    def skip(self, reason: str, n: int = 1) -> None:
        self.skipped[reason] += n

    def note_len(self, n: int) -> None:
        self.longest = max(self.longest, n)

    def as_dict(self) -> dict:
        return {
            "output": self.output or self.split,
            "split": self.split,
            "source": self.source,
            "path": self.path,
            "rows_read": self.read,
            "items": self.items,
            "rows_written": self.written,
            "skipped": dict(sorted(self.skipped.items())),
            "skipped_total": sum(self.skipped.values()),
            "labels": {str(k): v for k, v in sorted(self.labels.items(), key=lambda kv: str(kv[0]))},
            "truncated": dict(sorted(self.truncated.items())),
            "max_prompt_length": self.max_len,
            "longest_prompt": self.longest,
            **self.extra,
        }


def format_summary(prog: str, stats: Stats) -> str:
    d = stats.as_dict()
    lines = [f"== {prog}: {d['output']} (split {d['split']}) from {d['source']}"]
    lines.append(f"  rows read      {d['rows_read']}")
    lines.append(f"  items          {d['items']}")
    lines.append(f"  rows written   {d['rows_written']}" + (f"  -> {d['path']}" if d["path"] else ""))
    lines.append(f"  skipped        {d['skipped_total']}")
    for k, v in d["skipped"].items():
        lines.append(f"    {k:<34} {v}")
    if d["truncated"]:
        lines.append("  truncated      " + ", ".join(f"{k} {v}" for k, v in d["truncated"].items()))
    if d["labels"]:
        total = sum(d["labels"].values()) or 1
        lines.append("  labels         " + "  ".join(f"{k}: {v} ({100.0 * v / total:.2f}%)" for k, v in d["labels"].items()))
    if d["max_prompt_length"]:
        lines.append(f"  prompt tokens  longest {d['longest_prompt']} (limit {d['max_prompt_length']})")
    for k, v in stats.extra.items():
        lines.append(f"  {k:<14} {v}")
    return "\n".join(lines)


def _progress(total: int | None, desc: str, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="row", disable=not enabled, file=sys.stderr, mininterval=0.5, leave=False)


# ----------------------------------------------------------------------------- reading units
def read_units(source: Source, to_units: Callable[[Mapping, int], list[Unit]], stats: Stats, *,
               on_bad_row: str, progress: bool = True, exclude: set[str] | None = None,
               dedup: bool = True) -> list[Unit]:
    """Run ``to_units`` over every row; bad rows error or are counted; dedup and ``--exclude`` applied."""
    units: list[Unit] = []
    seen: set[str] = set()
    bar = _progress(source.total, f"{stats.output or stats.split}: read", progress)
    for loc, rownum, row in source.rows():
        stats.read += 1
        bar.update(1)
        try:
            if isinstance(row, InvalidRow):
                raise BadRow(row.field, row.message, row.reason)
            new = to_units(row, rownum)
        except BadRow as e:
            if on_bad_row == "error":
                bar.close()
                raise DataError(
                    f"{loc}: row {rownum}: field '{e.field}': {e.message} "
                    f"(use --on-bad-row skip to count and drop such rows)"
                ) from None
            stats.skip(f"{e.reason}:{e.field}")
            continue
        except SkipRow as e:
            stats.skip(e.reason)
            continue
        for u in new:
            if dedup and u.key:
                if u.key in seen:
                    stats.skip("duplicate")
                    continue
                seen.add(u.key)
            if exclude and normalize_text(u.query) in exclude:
                stats.skip("excluded_overlap")
                continue
            units.append(u)
    bar.close()
    return units


def load_exclusion(paths: Sequence[str] | None) -> set[str] | None:
    """Normalised query texts of every row of ``paths`` (any supported file) for ``--exclude``."""
    if not paths:
        return None
    keys: set[str] = set()
    for p in paths:
        found = 0
        for _loc, _n, row in local_source([p]).rows():
            if isinstance(row, InvalidRow):
                continue
            q = query_text(row)
            if q:
                keys.add(normalize_text(q))
                found += 1
        if not found:
            raise DataError(f"--exclude {p}: no query/question/prompt text found in any row")
    return keys


# ----------------------------------------------------------------------------- writing
MESSAGES_TYPE = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))


def row_schema(ground_truth_type: pa.DataType, extra_fields: Sequence[tuple[str, pa.DataType]]) -> pa.Schema:
    """verl row schema: extra_info always starts with ``split``, ``index``."""
    return pa.schema([
        ("data_source", pa.string()),
        ("prompt", MESSAGES_TYPE),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", ground_truth_type)])),
        ("extra_info", pa.struct([("split", pa.string()), ("index", pa.int64()), *extra_fields])),
    ])


def make_rows(drafts: Iterable[tuple[Draft, tuple[str, ...]]], *, split: str, data_source: str, ability: str,
              schema: pa.Schema) -> list[dict]:
    """Final verl rows: index = position in the file; ``truncated`` lists shortened fields (if in schema)."""
    ei_names = [f.name for f in schema.field("extra_info").type]
    rows = []
    for i, (d, truncated) in enumerate(drafts):
        ei = {"split": split, "index": i, **d.extra_info}
        if "truncated" in ei_names:
            ei["truncated"] = ",".join(truncated)
        if set(ei) != set(ei_names):
            raise AssertionError(f"extra_info keys {sorted(ei)} != schema {sorted(ei_names)}")
        rows.append({
            "data_source": data_source,
            "prompt": [{"role": m["role"], "content": m["content"]} for m in d.messages],
            "ability": ability,
            "reward_model": {"style": "rule", "ground_truth": d.ground_truth},
            "extra_info": {k: ei[k] for k in ei_names},
        })
    return rows


def write_parquet(rows: list[dict], path: str, schema: pa.Schema) -> None:
    """Deterministic parquet (fixed options, no varying metadata), written atomically."""
    table = pa.Table.from_pylist(rows, schema=schema)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    pq.write_table(
        table, tmp,
        compression="zstd", compression_level=3, use_dictionary=True, write_statistics=True,
        row_group_size=4096, data_page_size=1 << 20, version="2.6", data_page_version="1.0",
    )
    os.replace(tmp, path)


# ----------------------------------------------------------------------------- CLI helpers
@dataclass(frozen=True)
class HFPreset:
    path: str
    name: str | None = None
    data_dir: str | None = None
    data_files: tuple[tuple[str, str], ...] | None = None  # ((split, pattern), ...)
    splits: tuple[tuple[str, str], ...] = (("train", "train"), ("test", "test"))  # ((ours, hub), ...)
    help: str = ""


def add_common_args(p: argparse.ArgumentParser, *, default_max_len: int, text_fields: Sequence[str],
                    presets: Mapping[str, HFPreset], default_preset: str | None) -> None:
    g = p.add_argument_group("inputs and outputs")
    g.add_argument("--out", required=True, metavar="DIR", help="output folder (file names: see data_prep/README.md)")
    g.add_argument("--train", nargs="+", metavar="FILE", help="local input file(s) for the train split (.jsonl[.gz], .json, .parquet)")
    g.add_argument("--test", nargs="+", metavar="FILE", help="local input file(s) for the test split")
    names = ", ".join(f"{k} ({v.help or v.path})" for k, v in presets.items())
    g.add_argument("--hf", nargs="?", const=default_preset, default=None, choices=sorted(presets),
                   help=f"read from the Hugging Face hub instead (default when no --train/--test): {names}")
    g.add_argument("--hf-path", help="override the hub dataset id of the preset")
    g.add_argument("--hf-name", help="override the hub config name")
    g.add_argument("--hf-data-dir", help="override the hub data_dir")
    g.add_argument("--limit", type=int, default=None, help="read at most N rows per split (quick runs)")
    g.add_argument("--summary-json", metavar="FILE", help="also write the summary as JSON")
    g.add_argument("--no-progress", action="store_true", help="no progress bars")

    g = p.add_argument_group("rows")
    g.add_argument("--on-bad-row", choices=("error", "skip"), default="error",
                   help="malformed row: stop with row number and field (error, default) or count and drop it (skip)")
    g.add_argument("--seed", type=int, default=0, help="seed for every random choice (default 0)")
    g.add_argument("--exclude", nargs="+", metavar="FILE", default=None,
                   help="drop rows whose normalized query text appears in any of these files (contamination removal)")
    g.add_argument("--data-source", default=None, help="override the data_source column")
    g.add_argument("--prompt-version", default="v1", help="prompt template version (default v1)")

    g = p.add_argument_group("prompt length (measured like verl's RLHFDataset)")
    g.add_argument("--max-prompt-length", type=int, default=default_max_len,
                   help=f"tokens of the chat-formatted prompt (default {default_max_len}; 0 = no limit); "
                        "set it to the recipe's data.max_prompt_length")
    g.add_argument("--tokenizer", default=None,
                   help="policy tokenizer folder (default: $VERL_JUDGE_MODEL, else the materialised SmolLM2-135M-Instruct)")
    g.add_argument("--chat-template-kwargs", default="{}", metavar="JSON",
                   help="extra apply_chat_template kwargs, as data.apply_chat_template_kwargs (default {})")
    g.add_argument("--truncate-field", nargs="*", default=None, choices=list(text_fields), metavar="FIELD",
                   help="instead of dropping an over-long row, shorten the longest of these free-text fields in "
                        f"the middle (marker {TRUNCATION_MARKER.strip()!r}); no FIELD = any of: {', '.join(text_fields)}")


def make_gate(args) -> LengthGate:
    try:
        kwargs = json.loads(args.chat_template_kwargs)
    except json.JSONDecodeError as e:
        raise DataError(f"--chat-template-kwargs is not JSON: {e}") from e
    if not isinstance(kwargs, dict):
        raise DataError("--chat-template-kwargs must be a JSON object")
    max_len = args.max_prompt_length if args.max_prompt_length and args.max_prompt_length > 0 else None
    tok = None
    if max_len is not None:
        tok = load_tokenizer(args.tokenizer or default_tokenizer_path())
    truncate = None if args.truncate_field is None else tuple(args.truncate_field)
    return LengthGate(tok, max_len, truncate, kwargs)


def resolve_sources(args, presets: Mapping[str, HFPreset], default_preset: str | None) -> list[tuple[str, Source]]:
    """``[(split, Source)]`` from ``--train``/``--test`` or, with none of them, the hub preset."""
    if (args.train or args.test) and args.hf:
        raise DataError("give either local files (--train/--test) or --hf, not both")
    out = []
    if args.train or args.test:
        for split in ("train", "test"):
            paths = getattr(args, split)
            if paths:
                out.append((split, local_source(paths, args.limit)))
        return out
    preset_name = args.hf or default_preset
    if preset_name is None:
        raise DataError("no input: give --train/--test files or --hf PRESET")
    pre = presets[preset_name]
    data_files = dict(pre.data_files) if pre.data_files else None
    for ours, hub in pre.splits:
        out.append((ours, hf_source(args.hf_path or pre.path, hub, name=args.hf_name or pre.name,
                                    data_dir=args.hf_data_dir or pre.data_dir, data_files=data_files,
                                    limit=args.limit)))
    return out


def finish(prog: str, all_stats: list[Stats], args) -> dict:
    """Print every summary (stdout) and write ``--summary-json``."""
    for s in all_stats:
        print(format_summary(prog, s), flush=True)
    summary = {"program": prog, "seed": args.seed, "outputs": [s.as_dict() for s in all_stats]}
    if getattr(args, "summary_json", None):
        os.makedirs(os.path.dirname(os.path.abspath(args.summary_json)), exist_ok=True)
        with open(args.summary_json, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2, sort_keys=True)
            f.write("\n")
    return summary


def cli(run: Callable[[list[str] | None], dict], argv: list[str] | None = None) -> int:
    """Run ``run(argv)``; a DataError becomes ``error: ...`` on stderr and exit status 2."""
    try:
        run(argv)
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
