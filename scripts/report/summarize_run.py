"""Summarise a run's JSONL metrics (verl's file logger): step count, median stage times, rewards.

    python -m scripts.report.summarize_run outputs/verl-judge/gsm8k_rule/metrics.jsonl [more.jsonl ...]
        [--skip-first 1] [--json] [--require KEY ...] [--labels A B ...] [--ratio]

Median of every ``timing_s/*`` key after the first ``--skip-first`` steps, the first and last ``critic/score/mean``,
every ``val-*`` key of the last validation. ``--require KEY`` exits 1 when a key never appears (substring match;
``scripts/gpu_smoke.sh`` uses it). Several files make one Markdown table; ``--ratio`` adds each stage's median over
the first run's (none for a stage under 0.05 s there).
"""

from __future__ import annotations

import json
import os
import statistics
import sys

from data_prep.cli import new_parser
from data_prep.files.errors import DataError
from scripts.report.render import read_metrics

STAGES = tuple(f"timing_s/{s}" for s in ("step", "gen", "reward", "old_log_prob", "ref", "update_actor", "adv"))
MIN_BASE_S = 0.05  # a first-run stage shorter than this gets no ratio (it would only measure noise)


def load(path: str) -> list[dict]:
    """The numeric metrics of each step (``scripts.report.render.read_metrics``); a missing or malformed
    file ends the program with a message."""
    if not os.path.exists(path):
        raise SystemExit(f"{path}: no such file")
    try:
        records = read_metrics(path)
    except DataError as e:
        raise SystemExit(str(e)) from None
    return [{k: v for k, v in r.items() if k == "step" or isinstance(v, (int, float))} for r in records]


def summarize(rows: list[dict], skip_first: int = 1) -> dict:
    train = [r for r in rows if "timing_s/step" in r]  # training steps (a validation before training has no step time)
    later = train[skip_first:] if len(train) > skip_first else train
    out: dict = {"steps": len(train)}
    for k in sorted({k for r in later for k in r if k.startswith("timing_s/")}):
        out[f"median {k}"] = statistics.median(r[k] for r in later if k in r)
    for k in ("critic/score/mean", "response_length/mean"):
        vals = [r[k] for r in train if k in r]
        if vals:
            out[f"first {k}"], out[f"last {k}"] = vals[0], vals[-1]
    return out | {k: v for r in rows for k, v in r.items() if k.startswith("val-")}


def ratios(sums: dict, files: list[str], labels: list[str]) -> dict:
    """{label: {stage: median(run) / median(first run)}} for runs 2..n; a stage missing in either run,
    or under MIN_BASE_S seconds in the first, has no ratio."""
    base = {st: b for st in STAGES if (b := sums[files[0]].get(f"median {st}")) is not None and b >= MIN_BASE_S}
    return {
        lab: {st: sums[f][f"median {st}"] / b for st, b in base.items() if f"median {st}" in sums[f]}
        for f, lab in zip(files[1:], labels[1:])
    }


def _print_table(corner: str, columns: list[str], rows: list[tuple[str, list]], spec: str) -> None:
    """A Markdown table on stdout: a row per ``(name, cells)`` with a value, formatted with ``spec``, ``None`` empty."""
    print(f"| {corner} | " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for name, cells in rows:
        if any(c is not None for c in cells):
            print(f"| {name} | " + " | ".join("" if c is None else format(c, spec) for c in cells) + " |")


def main(argv=None) -> int:
    ap = new_parser("scripts.report.summarize_run", __doc__)
    ap.add_argument("files", nargs="+", help="metrics JSONL file(s)")
    ap.add_argument("--skip-first", type=int, default=1, help="steps left out of the medians (default 1)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    ap.add_argument("--require", nargs="*", default=[], help="metric key substrings that must appear")
    ap.add_argument("--labels", nargs="+", default=None, help="column names (default: the file paths)")
    ap.add_argument("--ratio", action="store_true", help="also: each stage's median / the first run's")
    args = ap.parse_args(argv)
    if args.labels and len(args.labels) != len(args.files):
        ap.error(f"--labels: {len(args.labels)} labels for {len(args.files)} files")
    labels = args.labels or args.files
    if len(set(args.files)) != len(args.files):
        ap.error("the same file is given twice")
    runs = {f: load(f) for f in args.files}
    sums = {f: summarize(r, args.skip_first) for f, r in runs.items()}
    if args.json:
        out = {lab: sums[f] for lab, f in zip(labels, args.files)}
        if args.ratio:
            out = {"runs": out, "ratios": ratios(sums, args.files, labels)}
        print(json.dumps(out, indent=1))
    else:
        keys = [k for k in ("steps", *(f"median {s}" for s in STAGES)) if any(k in s for s in sums.values())]
        keys += sorted({k for s in sums.values() for k in s} - set(keys))
        _print_table("metric", labels, [(k, [sums[f].get(k) for f in args.files]) for k in keys], ".4g")
        if args.ratio and len(args.files) > 1:
            rat = ratios(sums, args.files, labels)
            print()
            rows = [(st, [rat[lab].get(st) for lab in labels[1:]]) for st in STAGES]
            _print_table(f"median stage time / {labels[0]}", labels[1:], rows, ".2f")
    missing = [req for req in args.require if not any(req in k for rows in runs.values() for r in rows for k in r)]
    if missing:
        print(f"missing metric keys: {missing}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
