"""Reading the rows an evaluator scores: a ``.parquet`` or ``.jsonl[.gz]`` file as plain dicts (through
``data_prep.files.readers``), dotted column access (``extra_info.pair_id``), column checks that name what is
missing, chat messages from a row's ``prompt``. Every problem is an ``InputError`` (exit status 2).
Used by ``python -m scripts.eval.judge --data FILE`` and ``python -m scripts.eval.gsm8k --data FILE``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from data_prep.files.errors import DataError
from data_prep.files.readers import InvalidRow, local_source
from scripts.eval.cli import InputError

MISSING = object()  # get_path: no such column


def read_rows(path: str, limit: int | None = None) -> list[dict]:
    """Rows of a ``.parquet`` or ``.jsonl[.gz]`` file as plain Python dicts (first ``limit`` only)."""
    if not path or not os.path.exists(path):
        raise InputError(f"input file not found: {path}")
    if os.path.isdir(path):
        raise InputError(f"{path} is a folder; give a .parquet or .jsonl file")
    if not path.endswith((".parquet", ".jsonl", ".jsonl.gz")):
        raise InputError(f"{path}: unsupported file type (use .parquet or .jsonl / .jsonl.gz)")
    if limit is not None and limit < 1:
        raise InputError(f"--limit must be >= 1, got {limit}")
    rows = []
    try:
        for _path, lineno, row in local_source([path], limit).rows():
            if isinstance(row, InvalidRow):
                raise InputError(f"{path}: line {lineno}: {row.message}")
            rows.append(row)
    except DataError as e:
        raise InputError(str(e)) from None
    if not rows:
        raise InputError(f"{path}: no rows")
    return rows


def get_path(row: Mapping, dotted: str, default: Any = MISSING) -> Any:
    """``row["a"]["b"]`` for ``"a.b"``; ``default`` when any level is absent or not a mapping."""
    cur: Any = row
    for part in dotted.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return default
        cur = cur[part]
    return cur


def require_columns(rows: Sequence[Mapping], columns: Sequence[str], path: str) -> None:
    """InputError naming the first missing (dotted) column and the columns the file has."""
    for col in columns:
        missing_at = next((i for i, r in enumerate(rows) if get_path(r, col) is MISSING), None)
        if missing_at is not None:
            found = sorted(rows[0].keys())
            where = "" if missing_at == 0 else f" (row {missing_at + 1})"
            raise InputError(f"{path}: missing column '{col}'{where}; the file has columns {found}")


def as_messages(value: Any, where: str) -> list[dict]:
    """Chat messages ``[{"role", "content"}]`` from a parquet/JSON value, or InputError."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise InputError(f"{where}: expected a non-empty list of chat messages, got {type(value).__name__}")
    out = []
    for i, m in enumerate(value):
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise InputError(f"{where}[{i}]: expected a message with string 'role' and 'content'")
        out.append({"role": m["role"], "content": m["content"]})
    return out
