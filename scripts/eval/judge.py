"""Evaluate a judge on a pointwise or pairwise parquet (from ``data_prep``) through an OpenAI-compatible endpoint
(a vLLM server or an API), or offline with vLLM / transformers.

Each row's ``prompt`` is sent as the parquet has it; the label is ``reward_model.ground_truth`` (``"A"``/``"B"`` ->
pairwise, integers 0-4 -> pointwise), pairs are matched by ``extra_info.pair_id``, replies are parsed by
``reward_fns.parse`` as in training (exactly one ``<better>``/``<score>`` tag outside ``<think>``).

Metrics (``report.json`` / ``report.md``, overall and per ``data_source``); failed requests and unparseable replies
count as wrong, the ``*_parsed`` variants use parsed replies only:

* every task: ``n``, ``error_rate`` (failed requests / n), ``parse_fail_rate`` (no verdict / replies).
* pairwise: ``accuracy``, ``a_share`` (A among parsed verdicts; ``label_a_share`` for the data); over pairs in both
  orders (``pairs_both_orders``): ``pair_accuracy`` (right in BOTH orders) and ``flip_rate`` (of ``pairs_compared``,
  the pairs with both verdicts: the share picking a different response after the A/B swap; always-A flips on all).
* pointwise: ``exact``, ``within1`` (|pred - label| <= 1), ``mae`` (parsed replies), the 5x5 confusion matrix (+ a
  no-verdict column).
* labels only 0 and 4 (verification): accept = score >= 3, reject <= 2; ``tp``, ``fn``, ``tn``, ``fp``, ``none``;
  ``recall`` = tp / label-4 rows, ``specificity`` = tn / label-0 rows, ``balanced_accuracy`` their mean,
  ``precision`` = tp / accepted (0.0 when none). null for other label sets.

Figures: ``per_source_accuracy.png``; pairwise ``position_bias.png``; pointwise ``confusion_matrix.png``.

``--out`` is checked writable first; every reply is appended to ``predictions.jsonl`` as it arrives; a rerun with the
same ``--out`` resumes (answered rows, keyed by a prompt hash, are skipped; failed ones retried; judge and sampling
settings must match ``run.json``); SIGINT / SIGTERM write the reports of finished rows, ``"partial": true``.

Examples (from the repository root):
    python -m scripts.eval.judge --data data/pairwise/test.parquet \\
        --base-url http://127.0.0.1:8000/v1 --model judge --out eval/pairwise
    python -m scripts.eval.judge --data data/hh/test.parquet --pairs 100 --seed 0 \\
        --base-url https://api.openai.com/v1 --model gpt-4o-mini --api-key-env OPENAI_API_KEY
    python -m scripts.eval.judge --data data/pointwise/test.parquet --vllm-offline /ckpt/hf   # GPU
    python -m scripts.eval.judge --data data/pairwise/test.parquet --hf-offline MODEL --max-tokens 256  # CPU
Exit status: 0 ok; 2 bad input or unwritable --out; 3 every request failed; 4 no reply had a parseable verdict
(--allow-unparseable makes it 0, e.g. for an untrained judge); 130 / 143 stopped by SIGINT / SIGTERM. Reports are
written in every case but 2.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from reward_fns import verdicts
from reward_fns.judge_metrics import ratio
from scripts.eval.backends import Backend, add_backend_args, generate
from scripts.eval.cli import InputError, cli_main, from_args, new_parser
from scripts.eval.figures import judge_figures
from scripts.eval.predictions import (
    REPLY_KEEP_CHARS,
    PredictionLog,
    StopSignals,
    add_output_args,
    default_out,
    request_ids,
    until_stopped,
    write_reports,
)
from scripts.eval.rows import as_messages, get_path, read_rows, require_columns
from scripts.report.render import fmt, md_table

TASKS = tuple(verdicts.KINDS)
#: what each report.md metric means (printed under the tables)
DEFINITIONS = {
    "accuracy": "rows whose verdict equals the label / all rows (failed or unparseable rows count as wrong)",
    "accuracy_parsed": "the same over rows with a parsed verdict only",
    "a_share": "share of A among parsed verdicts (label_a_share: among the labels)",
    "flip_rate": "pairs with a verdict in both orders (pairs_compared) where the verdict picks a different "
    "underlying response after the A/B swap / pairs_compared (always-A judge: 1.0)",
    "pair_accuracy": "pairs present in both orders (same extra_info.pair_id) judged right in BOTH orders / "
    "those pairs (a failed or unparseable order makes the pair wrong)",
    "exact": "rows whose score equals the label / all rows",
    "within1": "rows with |score - label| <= 1 / all rows",
    "mae": "mean |score - label| over parsed replies",
    "balanced_accuracy": "(recall + specificity) / 2 on labels 0 and 4 (accept = score >= 3)",
    "precision": "label-4 rows accepted / all accepted rows (0.0 when nothing is accepted)",
    "recall": "label-4 rows accepted / all label-4 rows (no verdict counts as wrong)",
    "specificity": "label-0 rows rejected (score <= 2) / all label-0 rows (no verdict counts as wrong)",
    "parse_fail_rate": "replies without one well-formed verdict / replies received",
    "error_rate": "requests that failed after retries / rows",
}


# ----------------------------------------------------------------------------- data
def detect_task(labels: Sequence[object], path: str) -> str:
    """The verdict kind whose labels every ground truth is (``reward_fns.verdicts.detect``)."""
    try:
        return verdicts.detect(labels).name
    except ValueError as e:
        raise InputError(f"{path}: {e}") from None


def coerce_labels(task: str, labels: Sequence[object], path: str) -> list:
    out = []
    for i, gt in enumerate(labels):
        try:
            out.append(verdicts.KINDS[task].label(gt))
        except ValueError as e:
            raise InputError(f"{path}: row {i + 1}: reward_model.ground_truth: {e}") from None
    return out


def select_pairs(rows: list[dict], n_pairs: int, seed: int, path: str) -> list[dict]:
    """Rows of ``n_pairs`` pair ids drawn at random (``seed``), both orders kept, file order kept."""
    pids = [get_path(r, "extra_info.pair_id", None) for r in rows]
    if None in pids:
        raise InputError(f"{path}: row {pids.index(None) + 1}: --pairs needs extra_info.pair_id")
    ids = list(dict.fromkeys(pids))  # each once, in file order
    if n_pairs < 1:
        raise InputError(f"--pairs must be >= 1, got {n_pairs}")
    keep = set(ids) if n_pairs >= len(ids) else set(random.Random(seed).sample(ids, n_pairs))
    return [r for r in rows if get_path(r, "extra_info.pair_id", None) in keep]


# ----------------------------------------------------------------------------- records
def row_fields(i: int, row: Mapping, label) -> dict:
    """What a ``predictions.jsonl`` record takes from its row (also set on a reused record: the row may have moved)."""
    source, pair_id = str(row.get("data_source") or "unknown"), get_path(row, "extra_info.pair_id", None)
    return {"row": i, "data_source": source, "label": label, "pair_id": pair_id}


def make_record(task: str, i: int, row_id: str, row: Mapping, label, res) -> dict:
    """The ``predictions.jsonl`` record of row ``i`` from its reply (``JudgeResult``)."""
    rec = dict.fromkeys("kind row row_id data_source label pred status reason pair_id reply".split())  # file order
    rec |= {"kind": "judge", "row_id": row_id, **row_fields(i, row, label)}
    if not res.ok:
        return rec | {"status": "error", "reason": res.error.kind, "error": str(res.error)}
    p = verdicts.KINDS[task].parse(res.text)
    rec |= {"reply": res.text[:REPLY_KEEP_CHARS], "pred": p.value if p.ok else None}
    rec |= {"status": "ok", "reason": "ok"} if p.ok else {"status": "parse_fail", "reason": p.reason}
    if res.finish_reason:
        rec["finish_reason"] = res.finish_reason
    if not res.cached:
        rec["latency_s"] = round(res.latency_s, 4)
    return rec


def summarize(task: str, recs: Sequence[Mapping]) -> dict:
    """The report body of ``recs``: overall, per source, failure breakdown."""
    by_source: dict[str, list[Mapping]] = defaultdict(list)
    for r in recs:
        by_source[r["data_source"]].append(r)
    metrics = verdicts.KINDS[task].metrics
    return {
        "overall": metrics(recs),
        "per_source": {s: metrics(rs) for s, rs in sorted(by_source.items())},
        "error_kinds": dict(Counter(r["reason"] for r in recs if r["status"] == "error")),
        "parse_fail_reasons": dict(Counter(r["reason"] for r in recs if r["status"] == "parse_fail")),
    }


def evaluate(task: str, rows: Sequence[Mapping], labels: Sequence, results: Sequence) -> tuple[list[dict], dict]:
    """Records (one per row) and the report body of replies given in row order."""
    ids = request_ids([as_messages(r["prompt"], "prompt") for r in rows])
    recs = [
        make_record(task, i, rid, row, label, res)
        for i, (rid, row, label, res) in enumerate(zip(ids, rows, labels, results))
    ]
    return recs, summarize(task, recs)


# ----------------------------------------------------------------------------- report
def md_keys(report: dict) -> list[str]:
    """The metrics of the report.md tables (verification metrics when some group has them)."""
    keys = list(verdicts.KINDS[report["task"]].report_keys)
    groups = [report["overall"], *report["per_source"].values()]
    if any(m.get("n_label4") is not None for m in groups):
        keys += ["balanced_accuracy", "precision", "recall", "specificity"]
    return keys + ["parse_fail_rate", "error_rate"]


def render_md(report: dict) -> str:
    task, ov = report["task"], report["overall"]
    kind = verdicts.KINDS[task]
    prog = report.get("progress") or {}
    title = f"# Judge evaluation: {task}"
    if report.get("partial"):
        title += f" (PARTIAL: {prog.get('done')} of {prog.get('rows')} rows)"
    lines = [
        title,
        "",
        f"- data: `{report['data']}` ({ov['n']} rows)",
        f"- judge: `{report['judge']['model']}` via {report['judge']['endpoint']}",
        f"- wall time: {fmt(report['wall_s'], 1)} s",
    ]
    if prog.get("reused"):
        lines.append(
            f"- resumed: {prog['reused']} rows reused from predictions.jsonl, {prog['done'] - prog['reused']} "
            "answered in this run"
        )
    if report.get("partial"):
        why = f"stopped by {report['stopped_by']}" if report.get("stopped_by") else "not every row was answered"
        lines.append(
            f"- **partial**: {prog.get('done')} of {prog.get('rows')} rows answered ({why}); the metrics "
            "cover those rows only. Rerun the same command to answer the rest."
        )
    lines.append("")
    keys = md_keys(report)
    lines += ["## Overall", "", md_table(["metric", "value"], [(k, ov.get(k)) for k in keys]), ""]
    lines += [note, ""] if (note := kind.summary(ov)) else []
    per_source = [[s] + [m.get(k) for k in keys] for s, m in report["per_source"].items()]
    lines += ["## Per source", "", md_table(["data_source"] + keys, per_source), ""]
    if kind.values and ov.get("confusion") is not None:
        header = ["label \\ pred"] + [str(s) for s in kind.values] + ["no verdict"]
        table = md_table(header, [[str(s)] + row for s, row in zip(kind.values, ov["confusion"])])
        lines += ["## Confusion matrix (rows: label, columns: judge)", "", table, ""]
    if report["error_kinds"] or report["parse_fail_reasons"]:
        lines += ["## Failures", ""]
        lines += [f"- request error `{k}`: {v}" for k, v in sorted(report["error_kinds"].items())]
        lines += [f"- parse failure `{k}`: {v}" for k, v in sorted(report["parse_fail_reasons"].items())]
        lines.append("")
    lines += [note, ""] if (note := kind.caveat(ov)) else []
    lines += ["## Definitions", ""] + [f"- `{k}`: {DEFINITIONS[k]}" for k in keys if k in DEFINITIONS] + [""]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- CLI
def build_parser() -> argparse.ArgumentParser:
    p = new_parser("scripts.eval.judge", __doc__)
    g = p.add_argument_group("data")
    data_help = "pointwise or pairwise parquet (or .jsonl) from data_prep"
    g.add_argument("--data", required=True, metavar="FILE", help=data_help)
    task_help = "auto (default): from reward_model.ground_truth"
    g.add_argument("--task", choices=("auto",) + TASKS, default="auto", help=task_help)
    g.add_argument("--limit", type=int, default=None, metavar="N", help="first N rows only")
    pairs_help = "pairwise: N random pair ids (--seed), both orders of each (after --limit)"
    g.add_argument("--pairs", type=int, default=None, metavar="N", help=pairs_help)
    g.add_argument("--seed", type=int, default=0, help="seed of --pairs (default 0)")
    g = p.add_argument_group("judge endpoint (or --vllm-offline / --hf-offline)")
    add_backend_args(g, what="judge")
    g = add_output_args(p, default_out="outputs/eval/judge-<data file stem>", reused="rows already answered")
    unparseable_help = "exit 0 even when no reply has a parseable verdict (expected of an untrained judge, e.g. the "
    unparseable_help += "'before' evaluation of a training run); without it such a run exits 4"
    g.add_argument("--allow-unparseable", action="store_true", help=unparseable_help)
    g.add_argument("--no-plots", action="store_true", help="skip the PNG figures")
    g.add_argument("--no-progress", action="store_true", help="no progress bar (stderr)")
    return p


@dataclass(frozen=True)
class Options:
    """The command line (``build_parser``), parsed once by ``parse_options``."""

    data: str
    task: str
    limit: int | None
    pairs: int | None
    seed: int
    judge: Backend
    out: str
    no_resume: bool
    allow_unparseable: bool
    no_plots: bool
    no_progress: bool


def parse_options(argv: list[str] | None) -> Options:
    args = build_parser().parse_args(argv)
    judge = from_args(Backend, args)
    judge.check("judge")
    return from_args(Options, args, judge=judge, out=default_out(args.out, args.data, "judge-"))


def _run(argv: list[str] | None) -> tuple[dict, int, str | None]:
    options = parse_options(argv)
    task, rows, labels = select_rows(options)
    conversations = [as_messages(r["prompt"], f"{options.data}: row {i + 1}: prompt") for i, r in enumerate(rows)]
    ids = request_ids(conversations)
    settings = {"judge": {"task": task, **options.judge.settings()}}
    log = PredictionLog(options.out, "eval_judge", settings, resume=not options.no_resume)
    recs = reuse_saved(log, ids, rows, labels)
    reused, todo = sum(r is not None for r in recs), [i for i, r in enumerate(recs) if r is None]

    def on_result(j: int, _k: int, res) -> None:
        i = todo[j]
        recs[i] = make_record(task, i, ids[i], rows[i], labels[i], res)
        log.append(recs[i])

    def ask(stop: StopSignals) -> dict | None:
        convs = [conversations[i] for i in todo]
        progress = dict(desc=f"judge {task}", progress=not options.no_progress, done=reused, total=len(rows))
        return generate(options.judge, convs, on_result=on_result, stop=stop, **progress)[1] if todo else None

    judge, stop, wall = until_stopped("judge requests", ask)
    done = [r for r in recs if r is not None]
    log.finalize(done)
    latencies = [recs[i]["latency_s"] for i in todo if recs[i] is not None and "latency_s" in recs[i]]
    report = {
        "task": task,
        "data": os.path.abspath(options.data),
        "judge": options.judge.described(judge),
        "selection": {"limit": options.limit, "pairs": options.pairs, "seed": options.seed},
        "partial": len(done) < len(rows),
        "stopped_by": stop.name,
        "progress": {"rows": len(rows), "done": len(done), "reused": reused},
        "wall_s": wall,
        "mean_latency_s": ratio(sum(latencies), len(latencies)),
        **summarize(task, done),
    }
    draw = None if options.no_plots or not done else judge_figures
    write_reports(options.out, report, render_md(report), draw, also="predictions.jsonl")
    if report["overall"]["n_error"]:
        first = next(r for r in done if r["status"] == "error")
        n_error, n = report["overall"]["n_error"], report["overall"]["n"]
        print(f"warning: {n_error}/{n} judge requests failed (first: {first['error']})", file=sys.stderr)
    return report, *exit_status(report, stop_status=stop.exit_status, allow_unparseable=options.allow_unparseable)


def select_rows(options: Options) -> tuple[str, list[dict], list]:
    """The verdict kind, the rows (``--limit``, ``--pairs``) and their labels."""
    rows = read_rows(options.data, options.limit)
    require_columns(rows, ["prompt", "reward_model.ground_truth"], options.data)
    labels = lambda rows: [get_path(r, "reward_model.ground_truth") for r in rows]  # noqa: E731
    task = detect_task(labels(rows), options.data) if options.task == "auto" else options.task
    if options.pairs is not None:
        if not verdicts.KINDS[task].paired:
            raise InputError("--pairs only applies to pairwise data")
        rows = select_pairs(rows, options.pairs, options.seed, options.data)
    return task, rows, coerce_labels(task, labels(rows), options.data)


def reuse_saved(log: PredictionLog, ids: Sequence[str], rows: Sequence[Mapping], labels: Sequence) -> list:
    """The records an earlier run in ``--out`` saved for these rows (failed requests are asked again: ``None``, as
    every row still to request); says what it reuses, then starts the log with them."""
    saved = log.load()
    recs: list[dict | None] = [None] * len(rows)
    for i, rid in enumerate(ids):
        old = saved.get(("judge", rid))
        if old is not None and old.get("status") != "error":
            recs[i] = {**old, **row_fields(i, rows[i], labels[i])}
    reused, dropped = sum(r is not None for r in recs), len(saved) - sum(r is not None for r in recs)
    what = f"{reused} of {len(rows)} rows reused from {log.path}, {len(rows) - reused} to request"
    what += f" ({dropped} saved rows not reused: failed or not in this selection)" if dropped > 0 else ""
    log.begin([r for r in recs if r is not None], reused=what)
    return recs


def exit_status(
    report: dict, stop_status: int | None = None, allow_unparseable: bool = False
) -> tuple[int, str | None]:
    """(exit status, reason printed on stderr) of a finished run (see the module doc)."""
    ov, prog = report["overall"], report["progress"]
    if stop_status:
        return stop_status, (
            f"stopped by {report['stopped_by']} after {prog['done']} of {prog['rows']} rows; the "
            "reports cover those (partial); rerun the same command to resume"
        )
    if ov["n"] and ov["n_error"] == ov["n"]:
        return 3, f"all {ov['n']} judge requests failed; see {report['judge']['endpoint']}"
    if ov["n"] and ov["n_parsed"] == 0 and not allow_unparseable:
        return 4, (
            f"no reply had a parseable verdict ({ov['n_parse_fail']} unparseable, {ov['n_error']} failed of "
            f"{ov['n']}): the run measured nothing (--allow-unparseable accepts this, e.g. for an untrained judge)"
        )
    return 0, None


def main(argv: list[str] | None = None) -> int:
    return cli_main(_run, argv)


if __name__ == "__main__":
    sys.exit(main())
