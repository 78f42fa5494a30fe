"""Before/after table of two evaluation reports (``report.json`` of ``scripts.eval.judge`` or
``scripts.eval.gsm8k``).

    python -m scripts.report.compare_evals outputs/learn/x/eval_before outputs/learn/x/eval_after [--out FILE.md]

Every numeric headline metric either report has (``overall`` of a judge report, ``policy`` of a gsm8k one):
``metric | before | after | after - before``; missing or null shows ``n/a``; a ``"partial": true`` report is named.
Writes the Markdown table to ``--out`` (and a ``.json`` beside it) when given, and prints it. Exit status 2 on a
missing or mismatched report.
"""

from __future__ import annotations

import json
import os
import sys

from data_prep.files.outputs import write_json, write_text
from scripts.eval.cli import InputError, cli_main, new_parser
from scripts.report.render import fmt, md_table

SECTIONS = ("overall", "policy")


def headline(path: str) -> tuple[str, dict, str | None]:
    """(section name, {metric: number or None}, what a partial report covers or None) of one report (a folder or its
    report.json)."""
    path = os.path.join(path, "report.json") if os.path.isdir(path) else path
    if not os.path.isfile(path):
        raise InputError(f"no report at {path}")
    with open(path) as f:
        try:
            rep = json.load(f)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}: not JSON ({e})") from None
    sec = next((s for s in SECTIONS if isinstance(rep, dict) and isinstance(rep.get(s), dict)), None)
    if sec is None:
        raise InputError(f"{path}: neither a scripts.eval.judge ('overall') nor a scripts.eval.gsm8k ('policy') report")
    number = lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))  # noqa: E731
    note = None
    if rep.get("partial"):
        prog = rep.get("progress") or {}
        total, unit = (prog.get("rows"), "rows") if "rows" in prog else (prog.get("samples"), "policy answers")
        why = f", stopped by {rep['stopped_by']}" if rep.get("stopped_by") else ""
        note = f"partial report: {prog.get('done')} of {total} {unit} done{why}"
    return sec, {k: v for k, v in rep[sec].items() if number(v)}, note


def compare(before: dict, after: dict) -> list[list]:
    rows = []
    for k in list(before) + [k for k in after if k not in before]:
        b, a = before.get(k), after.get(k)
        rows.append([k, b, a, a - b if isinstance(a, (int, float)) and isinstance(b, (int, float)) else None])
    return rows


def run(argv=None) -> list[list]:
    summary, epilog = __doc__.split("\n\n", 1)
    ap = new_parser("scripts.report.compare_evals", summary, epilog=epilog)
    ap.add_argument("before", help="report folder or report.json of the start model")
    ap.add_argument("after", help="report folder or report.json of the trained model")
    ap.add_argument("--out", metavar="FILE.md", default=None, help="write the table here (and FILE.json)")
    args = ap.parse_args(argv)
    (sb, before, note_b), (sa, after, note_a) = headline(args.before), headline(args.after)
    if sb != sa:
        raise InputError(f"the reports are of different kinds ({sb} vs {sa})")
    rows = compare(before, after)
    table = md_table(["metric", "before", "after", "after - before"], [[r[0]] + [fmt(x) for x in r[1:]] for r in rows])
    notes = {"before": note_b, "after": note_a}
    for (side, note), path in zip(notes.items(), (args.before, args.after)):
        if note:
            table += f"\n\nWarning: {side} is a {note}; its metrics cover those rows only."
            print(f"warning: {side} ({path}) is a {note}", file=sys.stderr)
    print(table)
    if args.out:
        write_text(args.out, table + "\n")
        write_json(
            os.path.splitext(args.out)[0] + ".json",
            {
                "before": os.path.abspath(args.before),
                "after": os.path.abspath(args.after),
                "partial": {side: note is not None for side, note in notes.items()},
                "rows": [dict(zip(("metric", "before", "after", "change"), r)) for r in rows],
            },
        )
    return rows


if __name__ == "__main__":
    sys.exit(cli_main(run))
