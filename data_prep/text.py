"""Text helpers: tag neutralization for judge prompts, the overlap key, stable ids, field access."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Mapping

from data_prep.files.errors import BadRow
from reward_fns.prompts import neutralize  # noqa: F401 (here for data_prep: tags defused as the judge rewards do)

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
