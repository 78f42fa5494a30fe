"""Reading a run's metrics and putting numbers into reports. ``read_metrics`` reads verl's file logger JSONL
(``trainer.logger=[console,file]``: one ``{"step": n, "data": {...}}`` per line, at ``$VERL_FILE_LOGGER_PATH``) or flat
``{"step": n, "<metric>": value}`` lines. ``fmt`` and ``md_table`` (Markdown), ``pyplot`` (matplotlib on the Agg
backend) and ``save_fig`` (a figure written atomically). Used by the evaluators' reports, ``python -m
scripts.report.plot_metrics``, ``summarize_run``, ``compare_evals`` and the pipeline's summary.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from data_prep.files.outputs import write_file
from data_prep.files.readers import read_jsonl


def read_metrics(path: str, on_bad: Callable[[int, str], None] | None = None) -> list[dict]:
    """Each line's ``data`` dict (a flat line: the line itself) in file order, with ``"step"`` added when
    absent: the line's ``step``, else ``data["training/global_step"]``, else the record's position (from 1).

    A missing file gives ``[]``. A line that is not a JSON object is a ``data_prep.files.errors.DataError``, or,
    with ``on_bad``, skipped after ``on_bad(line_number, problem)`` (a file still being written).
    """
    if not os.path.exists(path):
        return []
    rows = []
    for pos, rec in enumerate(read_jsonl(path, on_bad=on_bad), 1):
        data = rec.get("data")
        row = dict(data) if isinstance(data, Mapping) else dict(rec)
        if "step" not in row:
            step = rec.get("step")
            row["step"] = step if step is not None else row.get("training/global_step", pos)
        rows.append(row)
    return rows


def fmt(x: Any, digits: int = 3) -> str:
    """A Markdown cell: floats with ``digits`` decimals, ``None`` and NaN as ``n/a``, anything else ``str``."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]], align: str | None = None) -> str:
    """A Markdown table; ``align`` has one ``l`` or ``r`` per column (default: first left, the rest right)."""
    align = align or ("l" + "r" * (len(header) - 1))
    sep = ["---:" if a == "r" else "---" for a in align]
    lines = [header, sep] + [[fmt(c) for c in r] for r in rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def pyplot():
    """matplotlib.pyplot on the non-interactive Agg backend (works without a display)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 100, "axes.grid": True, "grid.alpha": 0.3})
    return plt


def save_fig(fig, path: str, dpi: int | None = None) -> str:
    """Lay out ``fig``, write it to ``path`` atomically (format from the suffix, default PNG), close it."""
    fig.tight_layout()
    fmt_ = os.path.splitext(path)[1].lstrip(".").lower() or "png"
    write_file(path, lambda f: fig.savefig(f, dpi=dpi, format=fmt_), binary=True)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path
