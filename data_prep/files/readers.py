"""Reading inputs: local JSONL (``.jsonl``/``.jsonl.gz``), JSON arrays (``.json``/``.json.gz``), parquet,
or a Hugging Face hub dataset (``datasets.load_dataset``); ``read_jsonl`` / ``read_parquet`` for a whole file as a list.

Rows are numbered from 1 in file order (JSONL: the line number), so an error can name the row. A JSONL line that is
not valid UTF-8, not JSON or not an object is an ``InvalidRow`` (an error, or a counted skip with ``--on-bad-row
skip``); a problem of the whole file (missing, unsupported suffix, bad gzip or parquet, a bad ``.json`` array) is a
``DataError`` naming it, raised when the source is created, before any work.
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from data_prep.files.errors import DataError

GZIP_MAGIC = b"\x1f\x8b"
_GZIP_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error)
SUFFIXES = ".jsonl, .jsonl.gz, .json, .json.gz or .parquet"


@dataclass
class InvalidRow:
    """Placeholder for a row that could not even be decoded (bad UTF-8, bad JSON, not an object)."""

    field: str
    message: str
    reason: str


@dataclass
class Source:
    """One split's input: a name for messages, an iterator of ``(location, row_number, row)``, and ``total()``,
    its row count for progress bars (None when unknown; called only when a bar is shown)."""

    name: str
    rows: Callable[[], Iterator[tuple[str, int, object]]]
    total: Callable[[], int | None] = lambda: None


# ----------------------------------------------------------------------------- lines and files
def _split_universal(chunk: bytes) -> list[bytes]:
    """A ``\\n``-terminated chunk split like text mode would (``\\r\\n`` and a lone ``\\r`` end lines too)."""
    if b"\r" not in chunk:
        return [chunk]
    body = chunk[:-1] if chunk.endswith(b"\n") else chunk
    if body.endswith(b"\r"):
        body = body[:-1]
    return body.split(b"\r")


def _binary_lines(path: str, split: bool = True) -> Iterator[tuple[int, bytes]]:
    """``(line_number, raw line)`` of a plain or gzip file (``split`` off: its raw ``\\n``-terminated chunks);
    DataError for unreadable or truncated gzip data."""
    n = 0
    try:
        with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
            for chunk in f:  # ``\r`` never occurs inside a UTF-8 multi-byte sequence: splitting bytes is safe
                for line in _split_universal(chunk) if split else [chunk]:
                    n += 1
                    yield n, line
    except _GZIP_ERRORS as e:
        raise DataError(f"{path}: truncated or corrupt gzip data after line {n} ({e})") from None
    except OSError as e:
        raise DataError(f"{path}: cannot read after line {n}: {e.strerror or e}") from None


def _utf8_problem(raw: bytes, e: UnicodeDecodeError) -> str:
    return f"not valid UTF-8 (byte 0x{raw[e.start]:02x} at byte {e.start + 1})"


def _iter_jsonl(path: str) -> Iterator[tuple[str, int, object]]:
    for lineno, raw in _binary_lines(path):
        try:
            line = raw.decode("utf-8").rstrip("\r\n")  # a column number counts within the line
        except UnicodeDecodeError as e:
            yield path, lineno, InvalidRow("<line>", _utf8_problem(raw, e), "invalid_utf8")
            continue
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


def read_jsonl(path: str, on_bad: Callable[[int, str], None] | None = None) -> list[dict]:
    """The objects of a ``.jsonl`` file (gzip when the name ends in ``.gz``), blank lines skipped.

    A line that is not valid UTF-8, not JSON or not an object is a ``DataError`` naming the file and the
    line, unless ``on_bad`` is given: then ``on_bad(line_number, problem)`` runs and the line is skipped."""
    if not os.path.exists(path):
        raise DataError(f"input file not found: {path}")
    rows = []
    for _path, lineno, obj in _iter_jsonl(path):
        if isinstance(obj, InvalidRow):
            if on_bad is None:
                raise DataError(f"{path}: line {lineno}: {obj.message}")
            on_bad(lineno, obj.message)
        else:
            rows.append(obj)
    return rows


def read_parquet(path: str) -> list[dict]:
    """Every row of a parquet file; a DataError naming ``path`` when it cannot be read."""
    try:
        return pq.read_table(path).to_pylist()
    except (OSError, pa.ArrowInvalid) as e:
        raise DataError(f"{path}: cannot read: {e}") from None


def _iter_json(path: str) -> Iterator[tuple[str, int, object]]:
    raw = b"".join(chunk for _n, chunk in _binary_lines(path, split=False))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise DataError(
            f"{path}: line {line}: {_utf8_problem(raw, e)}; a JSON array file cannot skip "
            "a single row (fix the file, or convert it to .jsonl)"
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: invalid JSON: {e}") from None
    if isinstance(data, dict):  # {"data": [...]}, {"rows": [...]} or {"examples": [...]}
        data = next((data[k] for k in ("data", "rows", "examples") if isinstance(data.get(k), list)), data)
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a JSON array of objects")
    for i, obj in enumerate(data, 1):
        if not isinstance(obj, dict):
            obj = InvalidRow("<row>", f"expected an object, got {type(obj).__name__}", "bad_type")
        yield path, i, obj


def _iter_parquet(path: str) -> Iterator[tuple[str, int, object]]:
    n = 0
    try:
        pf = pq.ParquetFile(path)
        for batch in pf.iter_batches(batch_size=2048):
            for obj in batch.to_pylist():
                n += 1
                yield path, n, obj
    except (pa.ArrowException, OSError) as e:
        raise DataError(f"{path}: unreadable parquet data after row {n}: {e}") from None


def _count_rows(path: str) -> int | None:
    if path.endswith(".parquet"):
        return pq.read_metadata(path).num_rows
    if path.endswith((".jsonl", ".jsonl.gz")):
        return sum(1 for _n, line in _binary_lines(path) if line.strip())
    return None


def _reader(path: str):
    if path.endswith(".parquet"):
        return _iter_parquet
    if path.endswith((".jsonl", ".jsonl.gz")):
        return _iter_jsonl
    if path.endswith((".json", ".json.gz")):
        return _iter_json
    raise DataError(f"{path}: unsupported file type (use {SUFFIXES})")


def check_input(path: str) -> None:
    """DataError unless ``path`` is a readable file of a supported type (gzip signature, parquet footer)."""
    if not os.path.exists(path):
        raise DataError(f"input file not found: {path}")
    if os.path.isdir(path):
        raise DataError(f"{path}: is a folder, not an input file")
    _reader(path)
    try:
        with open(path, "rb") as f:
            head = f.read(2)
    except OSError as e:
        raise DataError(f"{path}: cannot read: {e.strerror or e}") from None
    if path.endswith(".gz") and head and head != GZIP_MAGIC:
        raise DataError(f"{path}: not a gzip file (no gzip signature); drop the .gz suffix if it is plain text")
    if path.endswith(".parquet"):
        try:
            pq.read_metadata(path)
        except (pa.ArrowException, OSError) as e:
            raise DataError(f"{path}: not a readable parquet file: {e}") from None


def local_source(paths: Sequence[str], limit: int | None = None) -> Source:
    for p in paths:
        check_input(p)

    def rows():  # the first ``limit`` rows of the files in turn
        return itertools.islice(itertools.chain.from_iterable(_reader(p)(p) for p in paths), limit)

    def total():
        try:
            counts = [_count_rows(p) for p in paths]
        except (DataError, OSError, pa.ArrowException, *_GZIP_ERRORS):  # a broken file is reported while reading
            return None
        if any(c is None for c in counts):
            return None
        return sum(counts) if limit is None else min(sum(counts), limit)

    return Source(name=", ".join(paths), rows=rows, total=total)


def hf_source(
    path: str,
    split: str,
    *,
    name: str | None = None,
    data_dir: str | None = None,
    data_files: Mapping[str, str] | None = None,
    limit: int | None = None,
) -> Source:
    """A split of a hub dataset via ``datasets.load_dataset`` (network, or the local HF cache)."""
    import datasets

    given = {"name": name, "data_dir": data_dir, "data_files": dict(data_files) if data_files else None}
    kwargs = {k: v for k, v in given.items() if v}
    label = f"hf:{path}" + (f"[{name}]" if name else "") + (f"/{data_dir}" if data_dir else "") + f":{split}"
    try:
        ds = datasets.load_dataset(path, split=split, **kwargs)
    except Exception as e:  # noqa: BLE001 - report any hub/cache failure as a data error
        raise DataError(f"{label}: could not load from the Hugging Face hub: {e}") from e
    total = len(ds) if limit is None else min(len(ds), limit)
    return Source(name=label, rows=lambda: ((label, i + 1, ds[i]) for i in range(total)), total=lambda: total)
