#!/usr/bin/env python3
"""Evaluate a judge on a pointwise or pairwise parquet (from ``data_prep``) through any OpenAI-compatible
endpoint (a vLLM server of a HF folder / checkpoint, or an API), or offline with vLLM.

Each row's ``prompt`` chat messages are sent as they are; the reply is parsed with the same shared
parser as the training rewards (``reward_fns.parse``: ``<better>A|B</better>`` or ``<score>0-4</score>``
after ``<think>`` blocks, exactly one verdict tag). The task is auto-detected from
``reward_model.ground_truth`` ("A"/"B" -> pairwise, integers 0-4 -> pointwise).

Metrics (``report.json`` / ``report.md``, overall and per ``data_source``):

* every task: ``n``, ``error_rate`` (requests that failed after retries / n), ``parse_fail_rate``
  (replies without a well-formed verdict / replies received). Failed requests and unparseable
  replies count as wrong in ``accuracy``/``exact``/``within1``; the ``*_parsed`` variants use parsed
  replies only.
* pairwise: ``accuracy``, ``a_share`` (share of A among parsed verdicts; ``label_a_share`` for the
  data), and over pairs present in both orders (same ``extra_info.pair_id``, labels A and B):
  ``flip_rate`` (the verdict picks a different underlying response after A/B swap; a judge that
  always says A flips on every pair: 1.0), ``pair_accuracy`` (right in both orders). Pairs with a
  failed request or parse failure in either order are left out of ``flip_rate`` (``pairs_compared``).
* pointwise: ``exact``, ``within1`` (|pred - label| <= 1), ``mae`` (parsed replies), the 5x5
  confusion matrix (+ a column for no verdict).

Figures: ``per_source_accuracy.png``; pairwise ``position_bias.png`` (A-share, flip rate per source);
pointwise ``confusion_matrix.png``. Every reply is kept in ``predictions.jsonl``.

Examples:
    python scripts/eval_judge.py --data data/pairwise/test.parquet \\
        --base-url http://127.0.0.1:8000/v1 --model judge --out eval/pairwise
    python scripts/eval_judge.py --data data/hh/test.parquet --pairs 100 --seed 0 \\
        --base-url https://api.openai.com/v1 --model gpt-4o-mini --api-key-env OPENAI_API_KEY
    python scripts/eval_judge.py --data data/pointwise/test.parquet --vllm-offline /ckpt/hf   # GPU
    python scripts/eval_judge.py --data data/pairwise/test.parquet --hf-offline MODEL --max-tokens 256  # CPU
Exit status: 0 ok, 2 bad input, 3 every request failed (reports are still written).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from eval_common import (  # noqa: E402
    InputError, add_endpoint_args, add_offline_args, as_messages, check_backend, fmt, generate, get_path, md_table,
    pyplot, ratio, read_rows, require_columns, save_fig, write_json, write_jsonl, write_text,
)
from reward_fns._labels import choice_label, score_label  # noqa: E402
from reward_fns.parse import parse_choice, parse_score  # noqa: E402

TASKS = ("pairwise", "pointwise")
SCORES = (0, 1, 2, 3, 4)
REPLY_KEEP_CHARS = 4000


# ----------------------------------------------------------------------------- data
def detect_task(labels: Sequence[object], path: str) -> str:
    """"pairwise" when every ground truth is A/B, "pointwise" when every one is an integer 0-4."""
    for task, coerce in (("pairwise", choice_label), ("pointwise", score_label)):
        try:
            for gt in labels:
                coerce(gt)
            return task
        except ValueError:
            continue
    for i, gt in enumerate(labels):
        ok = False
        for coerce in (choice_label, score_label):
            try:
                coerce(gt)
                ok = True
            except ValueError:
                pass
        if not ok:
            raise InputError(f"{path}: row {i + 1}: reward_model.ground_truth {gt!r} is neither 'A'/'B' "
                             "(pairwise) nor an integer 0-4 (pointwise)")
    raise InputError(f"{path}: reward_model.ground_truth mixes pairwise ('A'/'B') and pointwise (0-4) labels")


def coerce_labels(task: str, labels: Sequence[object], path: str) -> list:
    coerce = choice_label if task == "pairwise" else score_label
    out = []
    for i, gt in enumerate(labels):
        try:
            out.append(coerce(gt))
        except ValueError as e:
            raise InputError(f"{path}: row {i + 1}: reward_model.ground_truth: {e}") from None
    return out


def select_pairs(rows: list[dict], n_pairs: int, seed: int, path: str) -> list[dict]:
    """Rows of ``n_pairs`` pair ids drawn at random (``seed``), both orders kept, file order kept."""
    ids = []
    seen = set()
    for i, r in enumerate(rows):
        pid = get_path(r, "extra_info.pair_id", None)
        if pid is None:
            raise InputError(f"{path}: row {i + 1}: --pairs needs extra_info.pair_id")
        if pid not in seen:
            seen.add(pid)
            ids.append(pid)
    if n_pairs < 1:
        raise InputError(f"--pairs must be >= 1, got {n_pairs}")
    keep = set(ids) if n_pairs >= len(ids) else set(random.Random(seed).sample(ids, n_pairs))
    return [r for r in rows if get_path(r, "extra_info.pair_id", None) in keep]


# ----------------------------------------------------------------------------- metrics
def _status_counts(recs: Sequence[Mapping]) -> tuple[int, int, int, int]:
    n = len(recs)
    n_err = sum(r["status"] == "error" for r in recs)
    n_pf = sum(r["status"] == "parse_fail" for r in recs)
    return n, n_err, n_pf, n - n_err - n_pf


def _status_metrics(n: int, n_err: int, n_pf: int, n_parsed: int) -> dict:
    """The counts and failure rates every task reports first."""
    return {"n": n, "n_error": n_err, "n_parse_fail": n_pf, "n_parsed": n_parsed,
            "error_rate": ratio(n_err, n), "parse_fail_rate": ratio(n_pf, n - n_err)}


def pairwise_metrics(recs: Sequence[Mapping]) -> dict:
    """Metrics of pairwise records ``{label, pred (A/B/None), status, pair_id}`` (see module doc)."""
    n, n_err, n_pf, n_parsed = _status_counts(recs)
    parsed = [r for r in recs if r["status"] == "ok"]
    correct = sum(r["pred"] == r["label"] for r in parsed)
    groups: dict[object, list[Mapping]] = defaultdict(list)
    for r in recs:
        if r.get("pair_id") is not None:
            groups[r["pair_id"]].append(r)
    both = compared = flips = both_right = 0
    for members in groups.values():
        if len(members) != 2 or {m["label"] for m in members} != {"A", "B"}:
            continue
        both += 1
        if all(m["status"] == "ok" for m in members):
            compared += 1
            picked_chosen = [m["pred"] == m["label"] for m in members]
            flips += picked_chosen[0] != picked_chosen[1]
            both_right += all(picked_chosen)
    return {
        **_status_metrics(n, n_err, n_pf, n_parsed),
        "accuracy": ratio(correct, n),
        "accuracy_parsed": ratio(correct, n_parsed),
        "a_share": ratio(sum(r["pred"] == "A" for r in parsed), n_parsed),
        "label_a_share": ratio(sum(r["label"] == "A" for r in recs), n),
        "pairs_both_orders": both,
        "pairs_compared": compared,
        "flip_rate": ratio(flips, compared),
        "pair_accuracy": ratio(both_right, compared),
    }


def pointwise_metrics(recs: Sequence[Mapping]) -> dict:
    """Metrics of pointwise records ``{label, pred (0-4/None), status}`` (see module doc)."""
    n, n_err, n_pf, n_parsed = _status_counts(recs)
    parsed = [r for r in recs if r["status"] == "ok"]
    exact = sum(r["pred"] == r["label"] for r in parsed)
    within1 = sum(abs(r["pred"] - r["label"]) <= 1 for r in parsed)
    abs_err = sum(abs(r["pred"] - r["label"]) for r in parsed)
    confusion = [[0] * (len(SCORES) + 1) for _ in SCORES]  # rows: label; cols: pred 0-4, no verdict
    for r in recs:
        col = r["pred"] if r["status"] == "ok" else len(SCORES)
        confusion[r["label"]][col] += 1
    return {
        **_status_metrics(n, n_err, n_pf, n_parsed),
        "exact": ratio(exact, n),
        "within1": ratio(within1, n),
        "exact_parsed": ratio(exact, n_parsed),
        "within1_parsed": ratio(within1, n_parsed),
        "mae": ratio(abs_err, n_parsed),
        "mean_pred": ratio(sum(r["pred"] for r in parsed), n_parsed),
        "mean_label": ratio(sum(r["label"] for r in recs), n),
        "confusion": confusion,
    }


def metrics_for(task: str, recs: Sequence[Mapping]) -> dict:
    return pairwise_metrics(recs) if task == "pairwise" else pointwise_metrics(recs)


def evaluate(task: str, rows: Sequence[Mapping], labels: Sequence, results: Sequence) -> tuple[list[dict], dict]:
    """Records (one per row) and the report body (overall, per source, failure breakdown)."""
    recs = []
    parse = parse_choice if task == "pairwise" else parse_score
    for i, (row, label, res) in enumerate(zip(rows, labels, results)):
        rec = {
            "row": i,
            "data_source": str(row.get("data_source") or "unknown"),
            "label": label,
            "pred": None,
            "status": "ok",
            "reason": "ok",
            "pair_id": get_path(row, "extra_info.pair_id", None),
            "reply": None,
        }
        if not res.ok:
            rec.update(status="error", reason=res.error.kind, error=str(res.error))
        else:
            rec["reply"] = res.text[:REPLY_KEEP_CHARS]
            p = parse(res.text)
            if p.ok:
                rec["pred"] = p.value
            else:
                rec.update(status="parse_fail", reason=p.reason)
        recs.append(rec)
    by_source: dict[str, list[dict]] = defaultdict(list)
    for r in recs:
        by_source[r["data_source"]].append(r)
    body = {
        "overall": metrics_for(task, recs),
        "per_source": {s: metrics_for(task, rs) for s, rs in sorted(by_source.items())},
        "error_kinds": dict(Counter(r["reason"] for r in recs if r["status"] == "error")),
        "parse_fail_reasons": dict(Counter(r["reason"] for r in recs if r["status"] == "parse_fail")),
    }
    return recs, body


# ----------------------------------------------------------------------------- report
def render_md(report: dict) -> str:
    task, ov = report["task"], report["overall"]
    lines = [f"# Judge evaluation: {task}", "",
             f"- data: `{report['data']}` ({ov['n']} rows)",
             f"- judge: `{report['judge']['model']}` via {report['judge']['endpoint']}",
             f"- wall time: {fmt(report['wall_s'], 1)} s", ""]
    if task == "pairwise":
        keys = ["n", "accuracy", "accuracy_parsed", "a_share", "label_a_share", "flip_rate", "pair_accuracy",
                "pairs_compared", "parse_fail_rate", "error_rate"]
    else:
        keys = ["n", "exact", "within1", "mae", "exact_parsed", "within1_parsed", "mean_pred", "mean_label",
                "parse_fail_rate", "error_rate"]
    lines += ["## Overall", "", md_table(["metric", "value"], [(k, ov[k]) for k in keys]), ""]
    lines += ["## Per source", "",
              md_table(["data_source"] + keys, [[s] + [m[k] for k in keys] for s, m in report["per_source"].items()]), ""]
    if task == "pointwise":
        header = ["label \\ pred"] + [str(s) for s in SCORES] + ["no verdict"]
        lines += ["## Confusion matrix (rows: label, columns: judge)", "",
                  md_table(header, [[str(s)] + row for s, row in zip(SCORES, ov["confusion"])]), ""]
    if report["error_kinds"] or report["parse_fail_reasons"]:
        lines += ["## Failures", ""]
        for k, v in sorted(report["error_kinds"].items()):
            lines.append(f"- request error `{k}`: {v}")
        for k, v in sorted(report["parse_fail_reasons"].items()):
            lines.append(f"- parse failure `{k}`: {v}")
        lines.append("")
    if task == "pairwise" and ov["pairs_both_orders"] == 0:
        lines += ["No pair appears in both orders (extra_info.pair_id), so flip rate is n/a.", ""]
    return "\n".join(lines)


def _bar_labels(ax, bars, values, ns=None):
    for i, (b, v) in enumerate(zip(bars, values)):
        if v is None:
            continue
        txt = f"{v:.2f}" + (f"\nn={ns[i]}" if ns is not None else "")
        ax.annotate(txt, (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom", fontsize=8,
                    xytext=(0, 2), textcoords="offset points")


def plot_report(report: dict, out_dir: str) -> list[str]:
    plt = pyplot()
    import numpy as np

    task = report["task"]
    title = f"{report['judge']['model']} on {os.path.basename(report['data'])}"
    groups = [("all", report["overall"])] + list(report["per_source"].items())
    names = [g for g, _ in groups]
    written = []
    x = np.arange(len(groups))

    # per-source accuracy
    fig, ax = plt.subplots(figsize=(max(5.0, 1.3 * len(groups) + 2), 4))
    if task == "pairwise":
        vals = [m["accuracy"] for _, m in groups]
        bars = ax.bar(x, [v or 0 for v in vals], color="#4C72B0", label="accuracy")
        _bar_labels(ax, bars, vals, [m["n"] for _, m in groups])
        ax.axhline(0.5, ls="--", color="grey", lw=1, label="chance")
    else:
        w = 0.38
        for off, key, color, lab in ((-w / 2, "exact", "#4C72B0", "exact"), (w / 2, "within1", "#55A868", "within 1")):
            vals = [m[key] for _, m in groups]
            bars = ax.bar(x + off, [v or 0 for v in vals], w, color=color, label=lab)
            _bar_labels(ax, bars, vals)
        ax.axhline(0.2, ls="--", color="grey", lw=1, label="chance (exact)")
    ax.set_xticks(x, names, rotation=20 if len(groups) > 3 else 0, ha="right" if len(groups) > 3 else "center")
    ax.set_ylim(0, 1.18)
    ax.set_ylabel("accuracy")
    ax.set_title(f"Judge accuracy per source\n{title}", fontsize=10)
    ax.legend(loc="upper right", fontsize=8)
    written.append(save_fig(fig, os.path.join(out_dir, "per_source_accuracy.png")))

    if task == "pairwise":
        fig, ax = plt.subplots(figsize=(max(5.0, 1.6 * len(groups) + 2), 4))
        w = 0.26
        series = (("a_share", "A-share (judge)", "#C44E52"), ("label_a_share", "A-share (labels)", "#DD8452"),
                  ("flip_rate", "flip rate (both orders)", "#8172B3"))
        for k, (key, lab, color) in enumerate(series):
            vals = [m[key] for _, m in groups]
            bars = ax.bar(x + (k - 1) * w, [v or 0 for v in vals], w, color=color, label=lab)
            _bar_labels(ax, bars, vals)
        ax.axhline(0.5, ls="--", color="grey", lw=1)
        ax.set_xticks(x, names)
        ax.set_ylim(0, 1.25)
        ax.set_ylabel("share")
        ax.set_title(f"Position bias: A-share and flip rate\n{title}", fontsize=10)
        ax.legend(loc="upper right", fontsize=8, ncol=3)
        written.append(save_fig(fig, os.path.join(out_dir, "position_bias.png")))
    else:
        conf = np.array(report["overall"]["confusion"], dtype=float)
        fig, ax = plt.subplots(figsize=(5.6, 4.6))
        ax.grid(False)
        im = ax.imshow(conf, cmap="Blues")
        cols = [str(s) for s in SCORES] + ["none"]
        ax.set_xticks(range(len(cols)), cols)
        ax.set_yticks(range(len(SCORES)), [str(s) for s in SCORES])
        ax.set_xlabel("judge score (none = error / no verdict)")
        ax.set_ylabel("label")
        top = conf.max() if conf.size else 0
        for i in range(conf.shape[0]):
            for j in range(conf.shape[1]):
                ax.text(j, i, f"{int(conf[i, j])}", ha="center", va="center", fontsize=9,
                        color="white" if top and conf[i, j] > 0.6 * top else "black")
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
        ov = report["overall"]
        ax.set_title(f"Confusion matrix  exact={fmt(ov['exact'], 2)} within1={fmt(ov['within1'], 2)} "
                     f"MAE={fmt(ov['mae'], 2)}\n{title}", fontsize=9)
        written.append(save_fig(fig, os.path.join(out_dir, "confusion_matrix.png")))
    return written


# ----------------------------------------------------------------------------- CLI
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="eval_judge.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("data")
    g.add_argument("--data", required=True, metavar="FILE", help="pointwise or pairwise parquet (or .jsonl) from data_prep")
    g.add_argument("--task", choices=("auto",) + TASKS, default="auto",
                   help="auto (default): from reward_model.ground_truth")
    g.add_argument("--limit", type=int, default=None, metavar="N", help="first N rows only")
    g.add_argument("--pairs", type=int, default=None, metavar="N",
                   help="pairwise: N random pair ids (--seed), both orders of each (after --limit)")
    g.add_argument("--seed", type=int, default=0, help="seed of --pairs (default 0)")
    g = p.add_argument_group("judge endpoint (or --vllm-offline / --hf-offline)")
    add_endpoint_args(g, what="judge", max_tokens=512)
    add_offline_args(g)
    g = p.add_argument_group("output")
    g.add_argument("--out", metavar="DIR", default=None,
                   help="report folder (default outputs/eval/judge-<data file stem>)")
    g.add_argument("--no-plots", action="store_true", help="skip the PNG figures")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def run(argv: list[str] | None = None) -> dict:
    args = build_parser().parse_args(argv)
    check_backend(args, "judge")
    rows = read_rows(args.data, args.limit)
    require_columns(rows, ["prompt", "reward_model.ground_truth"], args.data)
    raw_labels = [get_path(r, "reward_model.ground_truth") for r in rows]
    task = detect_task(raw_labels, args.data) if args.task == "auto" else args.task
    if args.pairs is not None:
        if task != "pairwise":
            raise InputError("--pairs only applies to pairwise data")
        rows = select_pairs(rows, args.pairs, args.seed, args.data)
        raw_labels = [get_path(r, "reward_model.ground_truth") for r in rows]
    labels = coerce_labels(task, raw_labels, args.data)
    conversations = [as_messages(r["prompt"], f"{args.data}: row {i + 1}: prompt") for i, r in enumerate(rows)]
    out_dir = args.out or os.path.join("outputs", "eval", "judge-" + os.path.basename(args.data).split(".")[0])

    start = time.monotonic()
    per_conv, judge = generate(args, conversations, desc=f"judge {task}", progress=not args.no_progress)
    results = [r[0] for r in per_conv]
    wall = time.monotonic() - start

    recs, body = evaluate(task, rows, labels, results)
    latencies = [r.latency_s for r in results if r.ok and not r.cached]
    report = {
        "task": task,
        "data": os.path.abspath(args.data),
        "judge": {**judge, "temperature": args.temperature, "max_tokens": args.max_tokens},
        "selection": {"limit": args.limit, "pairs": args.pairs, "seed": args.seed},
        "wall_s": wall,
        "mean_latency_s": ratio(sum(latencies), len(latencies)),
        **body,
    }
    write_json(os.path.join(out_dir, "report.json"), report)
    md = render_md(report)
    write_text(os.path.join(out_dir, "report.md"), md)
    write_jsonl(os.path.join(out_dir, "predictions.jsonl"), recs)
    report["figures"] = [] if args.no_plots else plot_report(report, out_dir)
    print(md)
    print(f"wrote {out_dir}/report.json, report.md, predictions.jsonl"
          + "".join(f", {os.path.basename(f)}" for f in report["figures"]))
    ov = report["overall"]
    if ov["n_error"]:
        first = next(r for r in recs if r["status"] == "error")
        print(f"warning: {ov['n_error']}/{ov['n']} judge requests failed (first: {first['error']})", file=sys.stderr)
    return report


def main(argv: list[str] | None = None) -> int:
    try:
        report = run(argv)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    ov = report["overall"]
    if ov["n"] and ov["n_error"] == ov["n"]:
        print(f"error: all {ov['n']} judge requests failed; see {report['judge']['endpoint']}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
