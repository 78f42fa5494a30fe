"""Reading a training run's metrics: verl's file logger JSONL (``trainer.logger=[console,file]``; one
``{"step": n, "data": {...}}`` per line, written to ``$VERL_FILE_LOGGER_PATH``) or flat
``{"step": n, "<metric>": value}`` lines. ``read_metrics`` is the one reader of these files: for
``python -m scripts.report.summarize_run`` and ``python -m scripts.report.plot_metrics``, and for the
pipeline's summary (``python -m scripts.pipeline``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

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
