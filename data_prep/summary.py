"""Per-output statistics and the summary printed for every output file (and ``--summary-json``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Stats:
    split: str
    output: str = ""
    source: str = ""
    path: str = ""
    read: int = 0
    items: int = 0
    written: int = 0
    skipped: Counter = field(default_factory=Counter)
    labels: Counter = field(default_factory=Counter)
    truncated: Counter = field(default_factory=Counter)
    extra: dict = field(default_factory=dict)
    max_len: int | None = None
    longest: int = 0

    def as_dict(self) -> dict:
        return {
            "output": self.output or self.split,
            "split": self.split,
            "source": self.source,
            "path": self.path,
            "rows_read": self.read,
            "items": self.items,
            "rows_written": self.written,
            "skipped": dict(sorted(self.skipped.items())),
            "skipped_total": sum(self.skipped.values()),
            "labels": {str(k): v for k, v in sorted(self.labels.items(), key=lambda kv: str(kv[0]))},
            "truncated": dict(sorted(self.truncated.items())),
            "max_prompt_length": self.max_len,
            "longest_prompt": self.longest,
            **self.extra,
        }


def format_summary(prog: str, stats: Stats) -> str:
    d = stats.as_dict()
    lines = [f"== {prog}: {d['output']} (split {d['split']}) from {d['source']}"]
    lines.append(f"  rows read      {d['rows_read']}")
    lines.append(f"  items          {d['items']}")
    lines.append(f"  rows written   {d['rows_written']}" + (f"  -> {d['path']}" if d["path"] else ""))
    lines.append(f"  skipped        {d['skipped_total']}")
    for k, v in d["skipped"].items():
        lines.append(f"    {k:<34} {v}")
    if d["truncated"]:
        lines.append("  truncated      " + ", ".join(f"{k} {v}" for k, v in d["truncated"].items()))
    if d["labels"]:
        total = sum(d["labels"].values()) or 1
        lines.append(
            "  labels         " + "  ".join(f"{k}: {v} ({100.0 * v / total:.2f}%)" for k, v in d["labels"].items())
        )
    if d["max_prompt_length"]:
        lines.append(f"  prompt tokens  longest {d['longest_prompt']} (limit {d['max_prompt_length']})")
    for k, v in stats.extra.items():
        lines.append(f"  {k:<14} {v}")
    return "\n".join(lines)


def describe_empty(stats: Stats) -> str:
    """Why an output has no rows, for the ``--fail-on-empty`` error: rows read and skips by reason."""
    if stats.read == 0:
        return f"{stats.source or 'the input'} has no rows"
    skipped = ", ".join(f"{k} {v}" for k, v in sorted(stats.skipped.items()))
    return f"{stats.read} rows read from {stats.source or 'the input'}, none kept (skipped: {skipped or 'none'})"
