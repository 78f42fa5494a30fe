"""The three exceptions every ``data_prep`` step speaks.

* ``DataError``: a fatal problem with an input, an output path or an option. The CLIs print it as one
  line, ``error: <what>: <why>``, and exit with status 2; no output of the run is written.
* ``BadRow(field, message, reason)``: one malformed input row. With ``--on-bad-row error`` it stops the
  run as ``<file>: row N: field 'F': <message>``; with ``skip`` it is counted as ``<reason>:<field>``.
* ``SkipRow(reason)``: a well-formed row (or item) that is deliberately not written (empty or identical
  responses, ties, duplicates, conflicting labels, ``--exclude`` overlap, over-long prompts); always
  counted by ``reason``, never silent.
"""

from __future__ import annotations


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
