"""How the evaluation and report CLIs read their flags, show progress and fail: ``from_args`` (from
``data_prep.cli``: the parsed flags as a frozen dataclass, built once and passed on), ``progress_bar`` (tqdm on
stderr), ``InputError`` (bad input or arguments) and ``cli_main``, which turns it into ``error: <message>`` on stderr
and exit status 2. Every ``python -m scripts.eval.*`` and ``python -m scripts.report.*`` command ends in ``cli_main``
(``plot_metrics``, ``compare_evals``, ``judge``, ``gsm8k``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from data_prep.cli import from_args, new_parser  # noqa: F401 (the evaluators' and benches' settings builder, parser)


class InputError(Exception):
    """Bad input or arguments: the CLI prints ``error: <message>`` and exits with status 2."""


def cli_main(run: Callable[[list[str] | None], Any], argv: list[str] | None = None) -> int:
    """Run ``run(argv)``; InputError -> ``error: ...`` on stderr and exit status 2. A ``run`` that returns
    ``(report, status, reason)`` (the evaluators) exits with ``status``, printing ``reason`` when set."""
    try:
        out = run(argv)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if isinstance(out, tuple) and len(out) == 3:
        _report, status, reason = out
        if reason:
            print(f"error: {reason}", file=sys.stderr)
        return status
    return 0


def progress_bar(desc: str, unit: str, progress: bool, done: int, total: int):
    """A tqdm bar on stderr that starts at ``done`` of ``total`` (hidden without ``progress``)."""
    from tqdm import tqdm

    return tqdm(
        total=total, initial=done, desc=desc, unit=unit, disable=not progress, file=sys.stderr, dynamic_ncols=True
    )
