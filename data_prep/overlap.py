"""Contamination check: overlap of prompt/query text between a training file and evaluation files.

Each row's query text (``data_prep.conversations.query_text``) is compared exact (whitespace-trimmed) and normalized
(NFKC, lowercase, no punctuation, collapsed whitespace); the report gives overlapping rows, distinct texts, examples
and duplicates inside the training file. ``--fail-on-overlap`` exits 1 on any normalized overlap (for CI); rerun the
converter with ``--exclude`` to drop them. A file with no query text is an error (exit 2) unless
``--no-fail-on-empty``.

    python -m data_prep.overlap --train data/pairs/train.parquet --eval data/pairs/test.parquet rb2.jsonl
"""

from __future__ import annotations

import sys
from collections import Counter
from functools import partial

from data_prep.cli import add_run_flags, cli, new_parser
from data_prep.conversations import QUERY_FIELDS, query_texts
from data_prep.files.errors import DataError
from data_prep.files.outputs import check_output_file, write_json
from data_prep.text import normalize_text

PROG = "data_prep.overlap"


def _queries(path: str, progress: bool, require: bool = False) -> tuple[list[tuple[int, str]], int]:
    """``([(row, query text)], rows without query text)``; with ``require``, no query text at all is a DataError."""
    out, missing = query_texts(path, progress)
    if require and not out:
        what = f"none of its {missing} rows has" if missing else "it has no rows, so no"
        raise DataError(
            f"{path}: {what} query text ({', '.join(QUERY_FIELDS)}): nothing to compare "
            "(--no-fail-on-empty reports it as no overlap)"
        )
    return out, missing


def _snippet(text: str, n: int = 120) -> str:
    t = " ".join(text.split())
    return t if len(t) <= n else t[: n - 3] + "..."


def overlap_report(
    train: str, evals: list[str], examples: int = 5, progress: bool = False, require_queries: bool = False
) -> dict:
    """The overlap report; ``require_queries``: a file without any query text is a DataError."""
    tq, tmiss = _queries(train, progress, require_queries)
    exact_counts = Counter(q.strip() for _, q in tq)
    norm_counts = Counter(normalize_text(q) for _, q in tq)
    report = {
        "train": train,
        "train_rows": len(tq) + tmiss,
        "train_rows_without_query": tmiss,
        "train_duplicates_exact": sum(c - 1 for c in exact_counts.values()),
        "train_duplicates_normalized": sum(c - 1 for c in norm_counts.values()),
        "evals": [],
    }
    for ev in evals:
        eq, emiss = _queries(ev, progress, require_queries)
        exact = {q.strip() for _, q in eq}
        norm = {}  # normalized text -> its first eval row
        for n, q in eq:
            norm.setdefault(normalize_text(q), n)
        hits = [(n, q, k) for n, q in tq if (k := normalize_text(q)) in norm]  # overlapping train rows, in order
        exact_hits = [q.strip() for _, q, _ in hits if q.strip() in exact]
        samples = []
        for n, q, k in hits[:examples]:
            match = "exact" if q.strip() in exact else "normalized"
            samples.append({"train_row": n, "eval_row": norm[k], "match": match, "text": _snippet(q)})
        report["evals"].append(
            {
                "eval": ev,
                "eval_rows": len(eq) + emiss,
                "eval_rows_without_query": emiss,
                "exact_train_rows": len(exact_hits),
                "exact_distinct": len(set(exact_hits)),
                "normalized_train_rows": len(hits),
                "normalized_distinct": len({k for _, _, k in hits}),
                "examples": samples,
            }
        )
    report["any_overlap"] = any(e["normalized_train_rows"] for e in report["evals"])
    return report


def format_report(r: dict) -> str:
    lines = [
        f"== {PROG}: train {r['train']}: {r['train_rows']} rows"
        f" ({r['train_rows_without_query']} without query text);"
        f" duplicates inside: {r['train_duplicates_exact']} exact, {r['train_duplicates_normalized']} normalized"
    ]
    for e in r["evals"]:
        lines.append(f"  vs {e['eval']} ({e['eval_rows']} rows, {e['eval_rows_without_query']} without query text)")
        for kind in ("exact", "normalized"):
            rows, distinct = e[f"{kind}_train_rows"], e[f"{kind}_distinct"]
            lines.append(f"    {kind + ' overlap':<20}{rows} train rows ({distinct} distinct texts)")
        for s in e["examples"]:
            lines.append(f"      train row {s['train_row']} = eval row {s['eval_row']} [{s['match']}]: {s['text']}")
    lines.append("  result: " + ("OVERLAP FOUND (remove it with --exclude)" if r["any_overlap"] else "no overlap"))
    return "\n".join(lines)


def build_parser():
    p = new_parser(PROG, __doc__)
    p.add_argument("--train", required=True, metavar="FILE", help="training file (.jsonl[.gz], .json, .parquet)")
    p.add_argument("--eval", required=True, nargs="+", metavar="FILE", help="evaluation file(s)")
    p.add_argument("--examples", type=int, default=5, help="examples listed per evaluation file (default 5)")
    p.add_argument("--fail-on-overlap", action="store_true", help="exit with status 1 if any overlap is found")
    p.add_argument("--summary-json", metavar="FILE", help="also write the report as JSON")
    add_run_flags(p)
    return p


def run(argv: list[str] | None = None) -> dict:
    args = build_parser().parse_args(argv)
    if args.summary_json:
        check_output_file(args.summary_json, "--summary-json")
    report = overlap_report(
        args.train, args.eval, args.examples, progress=not args.no_progress, require_queries=args.fail_on_empty
    )
    print(format_report(report), flush=True)
    if args.summary_json:
        write_json(args.summary_json, report, sort_keys=True)
    report["fail"] = bool(args.fail_on_overlap and report["any_overlap"])
    return report


#: Exit status 0, 1 (``--fail-on-overlap`` and overlap found) or 2 (error, one line on stderr).
main = partial(cli, run, status=lambda report: 1 if report["fail"] else 0)


if __name__ == "__main__":
    sys.exit(main())
