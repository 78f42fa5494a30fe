"""Training curves (PNG) from the JSONL metrics file of one run, or several runs overlaid.

Input: verl's file logger records (``trainer.logger=[console,file]``, at ``$VERL_FILE_LOGGER_PATH``) or flat
``{"step": N, "<metric>": value}`` lines (``scripts.report.render.read_metrics``). Records of one step are merged;
malformed lines are skipped with a warning (a file still being written can be plotted).

Panels (``panel_specs``: the keys each looks for; a panel whose keys no run has is skipped and reported): reward,
judge_health, position, identical_reward_groups, validation, judge_rule_agreement, judge_failures, judge_scores,
response_length, step_time. A segment key matches as ``<token>``, ``.../<token>`` or ``.../<token>/mean[@N]``. Also
writes ``overview.png`` (all drawn panels) and ``summary.json`` / ``summary.md`` (panels drawn or skipped, keys used,
last value per run).

    python -m scripts.report.plot_metrics runs/a.jsonl runs/b.jsonl --labels rule judge --out figs
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import re
import sys
from collections.abc import Mapping, Sequence

from data_prep.files.errors import DataError
from data_prep.files.outputs import write_json, write_text
from scripts.eval.cli import InputError, cli_main, new_parser
from scripts.report.render import md_table, pyplot, read_metrics, save_fig

STAGES = ("gen", "reward", "old_log_prob", "ref", "update_actor")
JUDGE_HEALTH = tuple(f"judge_health/{k}" for k in ("error_rate", "parse_fail_rate", "fallback_rate", "agree_rule"))
POSITION = ("position/verdict_a_share", "position/label_a_share")
IDENTICAL_GROUPS = "grpo/identical_reward_groups"
SHARE_YLIM = (-0.03, 1.03)
_MEAN_SUFFIX = re.compile(r"^mean(@\d+)?$")


# ----------------------------------------------------------------------------- reading
def _flatten(d: Mapping, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}/{k}" if prefix else str(k)
        out.update(_flatten(v, key) if isinstance(v, Mapping) else {key: v})
    return out


def _number(v: object) -> float | None:
    if isinstance(v, list) and len(v) == 1:  # numpy scalars serialised as 1-element lists
        return _number(v[0])
    ok = isinstance(v, bool) or (isinstance(v, (int, float)) and math.isfinite(v))
    return float(v) if ok else None


def load_run(path: str, warn=print) -> list[tuple[float, dict]]:
    """``[(step, {metric: float})]`` sorted by step; records of one step merged, malformed lines skipped."""
    if not os.path.exists(path):
        raise InputError(f"metrics file not found: {path}")
    bad: list[int] = []

    def skip(lineno: int, problem: str) -> None:
        bad.append(lineno)
        if len(bad) <= 3:
            warn(f"warning: {path}: line {lineno}: {problem}, skipped")

    try:
        records = read_metrics(path, on_bad=skip)
    except DataError as e:  # unreadable (e.g. a corrupt .gz)
        raise InputError(str(e)) from None
    steps: dict[float, dict] = {}
    for pos, rec in enumerate(records, 1):
        step = _number(rec.pop("step"))
        flat = {k: x for k, v in _flatten(rec).items() if (x := _number(v)) is not None}
        if step is None:
            step = flat.get("training/global_step", float(pos))
        steps.setdefault(step, {}).update(flat)
    if len(bad) > 3:
        warn(f"warning: {path}: {len(bad)} malformed lines skipped in all")
    return sorted(steps.items())


# ----------------------------------------------------------------------------- key matching
def segment_keys(keys: Sequence[str], tokens: Sequence[str]) -> list[str]:
    """Keys with a path segment in ``tokens`` followed by nothing or ``mean[@N]``."""

    def match(parts: list[str]) -> bool:
        return parts[-1] in tokens or (len(parts) > 1 and parts[-2] in tokens and bool(_MEAN_SUFFIX.match(parts[-1])))

    return sorted((k for k in keys if match(k.split("/"))), key=lambda k: (k.startswith("val"), k))


MAX_SERIES = 8
#: (name, title, ylabel, how the keys are found, what is looked for); "first": the first of the keys present, "all":
#: every key present, "prefix": keys starting with it, "segment": ``segment_keys`` (at most MAX_SERIES of those two)
PANELS = (
    ("reward", "Reward (training batch mean)", "score", "first", ("critic/score/mean", "critic/rewards/mean")),
    ("judge_health", "Judge health (share of samples)", "share", "all", JUDGE_HEALTH),
    ("position", "Position: verdict A-share vs label A-share", "A-share", "all", POSITION),
    (
        "identical_reward_groups",
        "GRPO groups with identical rewards (no gradient)",
        "share of groups",
        "all",
        (IDENTICAL_GROUPS,),
    ),
    ("validation", "Validation (val-core)", "value", "prefix", "val-core/"),
    (
        "judge_rule_agreement",
        "Judge-rule agreement",
        "agreement",
        "segment",
        ("judge_rule_agree", "judge_rule_agreement"),
    ),
    ("judge_failures", "Judge error / parse-fail rate", "rate", "segment", ("judge_error", "judge_parse_fail")),
    ("judge_scores", "Judge score vs rule score (means)", "mean", "segment", ("judge_score", "rule_score")),
    ("response_length", "Response length (tokens, mean)", "tokens", "all", ("response_length/mean",)),
    ("step_time", "Step time by stage", "seconds", "all", (*(f"timing_s/{s}" for s in STAGES), "timing_s/step")),
)
SHARE_PANELS = ("judge_health", "position", "identical_reward_groups")


def panel_specs(keys: set[str]) -> list[dict]:
    """Each panel: name, title, ylabel, the keys to draw (possibly empty) and what was looked for."""
    ordered, specs = sorted(keys), []
    for name, title, ylabel, how, wanted in PANELS:
        if how == "prefix":
            found, looked_for = [k for k in ordered if k.startswith(wanted)][:MAX_SERIES], f"{wanted}*"
        elif how == "segment":
            found, looked_for = segment_keys(ordered, wanted)[:MAX_SERIES], "segment " + " | ".join(wanted)
        else:
            found, looked_for = [k for k in wanted if k in keys][: 1 if how == "first" else None], ", ".join(wanted)
        spec = {"name": name, "title": title, "ylabel": ylabel, "keys": found, "looked_for": looked_for}
        specs.append({**spec, "ylim": SHARE_YLIM} if name in SHARE_PANELS else spec)
    return specs


# ----------------------------------------------------------------------------- plotting
COLORS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"]
STYLES = ["-", "--", ":", "-."]


def _smooth(ys: list[float], window: int) -> list[float]:
    """Trailing moving average over ``window`` values."""
    return [sum(w) / len(w) for w in (ys[max(0, i + 1 - window) : i + 1] for i in range(len(ys)))]


def _short(key: str) -> str:
    for prefix in ("timing_s/", "judge_health/", "position/", "grpo/"):
        key = key.removeprefix(prefix)
    return key.replace("/mean", "")


def _key_color(key: str, i: int) -> str:
    """The colour of the ``i``-th key of a panel (the total step time: black)."""
    return "black" if key == "timing_s/step" else COLORS[i % len(COLORS)]


def draw_panel(ax, spec: dict, runs: Sequence[tuple[str, list]], smooth: int) -> int:
    """Draw one panel on ``ax``; returns the number of lines drawn.

    One contributing run: a colour per key. Several runs and one key: a colour per run. Several runs
    and several keys: colour = key, line style = run, with a compact two-part legend.
    """
    from matplotlib.lines import Line2D

    keys = spec["keys"]
    contributing = [(label, steps) for label, steps in runs if any(k in m for _s, m in steps for k in keys)]
    multi_run = len(contributing) > 1
    grid = multi_run and len(keys) > 1
    lines = 0
    for ri, (label, steps) in enumerate(contributing):
        for ki, key in enumerate(keys):
            pts = [(s, m[key]) for s, m in steps if key in m]
            if not pts:
                continue
            xs, ys = zip(*pts)
            if grid:
                color, style, name = _key_color(key, ki), STYLES[ri % len(STYLES)], None
            elif multi_run:
                color, style, name = COLORS[ri % len(COLORS)], "-", label
            else:
                color, style = _key_color(key, ki), ("--" if key == "timing_s/step" else "-")
                name = _short(key) if len(runs) == 1 else f"{label}: {_short(key)}"
            marker = "o" if len(xs) <= 12 else None
            ax.plot(xs, _smooth(list(ys), smooth), style, color=color, lw=1.5, label=name, marker=marker, ms=3)
            lines += 1
    ax.set_title(spec["title"], fontsize=10)
    ax.set_xlabel("step")
    ax.set_ylabel(spec["ylabel"])
    if spec.get("ylim"):
        ax.set_ylim(*spec["ylim"])
    if lines and grid:
        handles = [Line2D([], [], color=_key_color(k, i), lw=1.5, label=_short(k)) for i, k in enumerate(keys)]
        handles += [
            Line2D([], [], color="grey", ls=STYLES[i % len(STYLES)], lw=1.5, label=label)
            for i, (label, _st) in enumerate(contributing)
        ]
        ax.legend(handles=handles, fontsize=7, loc="best", ncol=2)
    elif lines:
        ax.legend(fontsize=7, loc="best")
    return lines


def plot_all(runs: Sequence[tuple[str, list]], out_dir: str, smooth: int = 1, log=print) -> dict:
    """One PNG per panel with keys and ``overview.png``: summary.json's ``panels_drawn``, ``panels_skipped``,
    ``overview``."""
    plt = pyplot()
    specs = panel_specs({k for _label, steps in runs for _s, m in steps for k in m})
    drawn = [s for s in specs if s["keys"]]
    skipped = [{"panel": s["name"], "looked_for": s["looked_for"]} for s in specs if not s["keys"]]
    for s in skipped:
        log(f"skipped panel '{s['panel']}': none of [{s['looked_for']}] in any run")
    for spec in drawn:
        fig, ax = plt.subplots(figsize=(6.4, 3.8))
        draw_panel(ax, spec, runs, smooth)
        save_fig(fig, os.path.join(out_dir, f"{spec['name']}.png"))
    if drawn:
        cols = 2 if len(drawn) > 1 else 1
        rows = -(-len(drawn) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(6.0 * cols, 3.4 * rows), squeeze=False)
        for ax, spec in itertools.zip_longest(axes.flat, drawn):
            draw_panel(ax, spec, runs, smooth) if spec else ax.axis("off")
        fig.suptitle("Training metrics: " + ", ".join(label for label, _ in runs), fontsize=11)
        save_fig(fig, os.path.join(out_dir, "overview.png"), dpi=72)
    return {
        "panels_drawn": [{"panel": s["name"], "file": f"{s['name']}.png", "keys": s["keys"]} for s in drawn],
        "panels_skipped": skipped,
        "overview": "overview.png" if drawn else None,
    }


# ----------------------------------------------------------------------------- CLI
def build_parser() -> argparse.ArgumentParser:
    epilog = "keys the judge panels read: " + ", ".join([*JUDGE_HEALTH, *POSITION, IDENTICAL_GROUPS])
    ap = new_parser("scripts.report.plot_metrics", __doc__, epilog=epilog)
    ap.add_argument("runs", nargs="+", metavar="RUN.jsonl", help="metrics JSONL file(s); several are overlaid")
    ap.add_argument("--out", required=True, metavar="DIR", help="output folder for the PNGs and summary")
    labels_help = "one legend label per run (default: file names without .jsonl)"
    ap.add_argument("--labels", nargs="+", default=None, metavar="LABEL", help=labels_help)
    smooth_help = "trailing moving average over N steps (default 1: none)"
    ap.add_argument("--smooth", type=int, default=1, metavar="N", help=smooth_help)
    return ap


def _step(x: float | None):
    return int(x) if x is not None and float(x).is_integer() else x


def run(argv: list[str] | None = None) -> dict:
    args = build_parser().parse_args(argv)
    if args.labels is not None and len(args.labels) != len(args.runs):
        raise InputError(f"--labels: {len(args.labels)} labels for {len(args.runs)} runs")
    if args.smooth < 1:
        raise InputError(f"--smooth must be >= 1, got {args.smooth}")
    labels = args.labels or [os.path.basename(p).removesuffix(".jsonl") for p in args.runs]
    warn = lambda msg: print(msg, file=sys.stderr)  # noqa: E731
    runs = []
    for label, path in zip(labels, args.runs):
        runs.append((label, load_run(path, warn)))
        if not runs[-1][1]:
            warn(f"warning: {path}: no numeric metrics")
    if not any(steps for _l, steps in runs):
        raise InputError("no numeric metrics in any input file")
    plotted = plot_all(runs, args.out, args.smooth, log=warn)
    used = sorted({k for d in plotted["panels_drawn"] for k in d["keys"]})
    first_last = [(_step(steps[0][0]), _step(steps[-1][0])) if steps else (None, None) for _l, steps in runs]
    files = [
        {"label": label, "file": os.path.abspath(p), "steps": len(steps), "first_step": first, "last_step": last}
        for (label, steps), p, (first, last) in zip(runs, args.runs, first_last)
    ]
    last = {
        label: {k: next((m[k] for _s, m in reversed(steps) if k in m), None) for k in used} for label, steps in runs
    }
    summary = {"runs": files, **plotted, "last_values": last}
    write_json(os.path.join(args.out, "summary.json"), summary)
    rows = [(r["label"], os.path.basename(r["file"]), r["steps"], r["last_step"]) for r in files]
    md = ["# Training metrics", "", md_table(["run", "file", "steps", "last step"], rows), "", "## Panels", ""]
    md += [f"- `{d['file']}`: {', '.join(d['keys'])}" for d in summary["panels_drawn"]]
    md += [f"- skipped `{s['panel']}`: none of {s['looked_for']}" for s in summary["panels_skipped"]]
    if used:
        table = md_table(["metric", *labels], [[k] + [last[label][k] for label in labels] for k in used])
        md += ["", "## Last value per run", "", table]
    write_text(os.path.join(args.out, "summary.md"), "\n".join(md))
    print("\n".join(md))
    print(f"wrote {len(plotted['panels_drawn'])} panels + overview.png, summary.json, summary.md to {args.out}")
    return summary


def main(argv: list[str] | None = None) -> int:
    return cli_main(run, argv)


if __name__ == "__main__":
    sys.exit(main())
