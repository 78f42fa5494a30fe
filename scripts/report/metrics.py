"""verl's file logger (JSONL, one ``{"step": n, "data": {...}}`` per line) read back: ``read_metrics(path)``.

    from scripts.report.metrics import read_metrics; rows = read_metrics("outputs/run/metrics.jsonl")
"""

from __future__ import annotations

import json
import os


def read_metrics(path: str) -> list[dict]:
    """Each line's ``data`` dict (a line without one: the line itself); a missing file: []."""
    rows = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    rec = json.loads(line)
                    rows.append(rec.get("data", rec))
    return rows
