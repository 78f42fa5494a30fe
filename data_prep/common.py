"""Compatibility imports: every name ``data_prep.common`` has always offered, from the modules that hold it.

New code should import from the module itself:

* ``data_prep.errors``: ``DataError``, ``BadRow``, ``SkipRow``
* ``data_prep.text``: ``neutralize``, ``NEUTRALIZE_TAGS``, ``normalize_text``, ``stable_hash``, ``require_str``
* ``data_prep.conversations``: ``format_turns``, ``messages_to_turns``, ``parse_hh``, ``hh_pair``, ``query_text``
* ``data_prep.readers``: ``InvalidRow``, ``Source``, ``local_source``, ``hf_source``
* ``data_prep.lengths``: ``LengthGate``, ``middle_cut``, ``TRUNCATION_MARKER``, ``MIN_KEEP_TOKENS``,
  ``load_tokenizer``, ``default_tokenizer_path``
* ``data_prep.rows``: ``Draft``, ``Unit``, ``Builder``, ``read_units``, ``load_exclusion``, ``row_schema``,
  ``make_rows``, ``MESSAGES_TYPE``, ``JUDGE_ABILITY``
* ``data_prep.summary``: ``Stats``, ``format_summary``
* ``data_prep.outputs``: ``write_parquet``
* ``data_prep.cli``: ``HFPreset``, ``add_common_args``, ``make_gate``, ``resolve_sources``, ``finish``, ``cli``
"""

from __future__ import annotations

from data_prep.cli import HFPreset, add_common_args, cli, finish, make_gate, resolve_sources
from data_prep.conversations import format_turns, hh_pair, messages_to_turns, parse_hh, query_text
from data_prep.errors import BadRow, DataError, SkipRow
from data_prep.lengths import (
    MIN_KEEP_TOKENS, TRUNCATION_MARKER, LengthGate, default_tokenizer_path, load_tokenizer, middle_cut,
)
from data_prep.outputs import write_parquet
from data_prep.readers import InvalidRow, Source, hf_source, local_source
from data_prep.rows import (
    JUDGE_ABILITY, MESSAGES_TYPE, Builder, Draft, Unit, load_exclusion, make_rows, read_units, row_schema,
)
from data_prep.summary import Stats, format_summary
from data_prep.text import NEUTRALIZE_TAGS, neutralize, normalize_text, require_str, stable_hash

__all__ = [
    "JUDGE_ABILITY", "MESSAGES_TYPE", "MIN_KEEP_TOKENS", "NEUTRALIZE_TAGS", "TRUNCATION_MARKER",
    "BadRow", "Builder", "DataError", "Draft", "HFPreset", "InvalidRow", "LengthGate", "SkipRow", "Source",
    "Stats", "Unit",
    "add_common_args", "cli", "default_tokenizer_path", "finish", "format_summary", "format_turns",
    "hf_source", "hh_pair", "load_exclusion", "load_tokenizer", "local_source", "make_gate", "make_rows",
    "messages_to_turns", "middle_cut", "neutralize", "normalize_text", "parse_hh", "query_text", "read_units",
    "require_str", "resolve_sources", "row_schema", "stable_hash", "write_parquet",
]
