"""Numbers into reports: ``ratio`` (``None`` for a zero denominator: JSON ``null``, Markdown ``n/a``; its home is
``reward_fns.judge_metrics``), ``fmt`` and ``md_table`` (Markdown), ``pyplot`` (matplotlib on the non-interactive Agg
backend) and
``save_fig`` (a figure written atomically). Used by the reports the evaluators write
(``python -m scripts.eval.judge``, ``python -m scripts.eval.gsm8k``) and by
``python -m scripts.report.plot_metrics`` / ``python -m scripts.report.compare_evals``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

from data_prep.files.outputs import write_file
from reward_fns.judge_metrics import ratio  # noqa: F401  (the reports' ratio)


def fmt(x: Any, digits: int = 3) -> str:
    """A Markdown cell: floats with ``digits`` decimals, ``None`` and NaN as ``n/a``, anything else ``str``."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]], align: str | None = None) -> str:
    """A Markdown table; ``align`` has one ``l`` or ``r`` per column (default: first left, the rest right)."""
    align = align or ("l" + "r" * (len(header) - 1))
    sep = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    for r in rows:
        lines.append("| " + " | ".join(fmt(c) for c in r) + " |")
    return "\n".join(lines)


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
