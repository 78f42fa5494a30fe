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
import math
import os
import re
import sys
from collections.abc import Mapping, Sequence

from data_prep.files.errors import DataError
from data_prep.files.outputs import write_json, write_text
from scripts.eval.cli import InputError, cli_main
from scripts.report.render import md_table, pyplot, read_metrics, save_fig

STAGES = ("gen", "reward", "old_log_prob", "ref", "update_actor")
JUDGE_HEALTH = (
    "judge_health/error_rate",
    "judge_health/parse_fail_rate",
    "judge_health/fallback_rate",
    "judge_health/agree_rule",
)
POSITION = ("position/verdict_a_share", "position/label_a_share")
IDENTICAL_GROUPS = "grpo/identical_reward_groups"
SHARE_YLIM = (-0.03, 1.03)
_MEAN_SUFFIX = re.compile(r"^mean(@\d+)?$")


# ----------------------------------------------------------------------------- reading
def _flatten(d: Mapping, prefix: str = "", out: dict | None = None) -> dict:
    out = {} if out is None else out
    for k, v in d.items():
        key = f"{prefix}/{k}" if prefix else str(k)
        if isinstance(v, Mapping):
            _flatten(v, key, out)
        else:
            out[key] = v
    return out


def _number(v: object) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        f = float(v)
        return f if math.isfinite(f) else None
    if isinstance(v, list) and len(v) == 1:  # numpy scalars serialised as 1-element lists
        return _number(v[0])
    return None


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
        flat = {}
        for k, v in _flatten(rec).items():
            x = _number(v)
            if x is not None:
                flat[k] = x
        if step is None:
            step = flat.get("training/global_step", float(pos))
        steps.setdefault(step, {}).update(flat)
    if len(bad) > 3:
        warn(f"warning: {path}: {len(bad)} malformed lines skipped in all")
    return sorted(steps.items())


# ----------------------------------------------------------------------------- key matching
def segment_keys(keys: Sequence[str], tokens: Sequence[str]) -> list[str]:
    """Keys with a path segment in ``tokens`` followed by nothing or ``mean[@N]``."""
    found = []
    for k in keys:
        parts = k.split("/")
        for i, part in enumerate(parts):
            if part in tokens:
                rest = parts[i + 1 :]
                if not rest or (len(rest) == 1 and _MEAN_SUFFIX.match(rest[0])):
                    found.append(k)
                    break
    return sorted(found, key=lambda k: (k.startswith("val"), k))


def _first_present(keys: set[str], candidates: Sequence[str]) -> list[str]:
    for c in candidates:
        if c in keys:
            return [c]
    return []


MAX_SERIES = 8


def panel_specs(keys: set[str]) -> list[dict]:
    """Each panel: name, title, ylabel, the keys to draw (possibly empty) and what was looked for."""
    ordered = sorted(keys)
    timing = [f"timing_s/{s}" for s in STAGES]
    return [
        {
            "name": "reward",
            "title": "Reward (training batch mean)",
            "ylabel": "score",
            "keys": _first_present(keys, ["critic/score/mean", "critic/rewards/mean"]),
            "looked_for": "critic/score/mean, critic/rewards/mean",
        },
        {
            "name": "judge_health",
            "title": "Judge health (share of samples)",
            "ylabel": "share",
            "keys": [k for k in JUDGE_HEALTH if k in keys],
            "looked_for": ", ".join(JUDGE_HEALTH),
            "ylim": SHARE_YLIM,
        },
        {
            "name": "position",
            "title": "Position: verdict A-share vs label A-share",
            "ylabel": "A-share",
            "keys": [k for k in POSITION if k in keys],
            "looked_for": ", ".join(POSITION),
            "ylim": SHARE_YLIM,
        },
        {
            "name": "identical_reward_groups",
            "title": "GRPO groups with identical rewards (no gradient)",
            "ylabel": "share of groups",
            "keys": _first_present(keys, [IDENTICAL_GROUPS]),
            "looked_for": IDENTICAL_GROUPS,
            "ylim": SHARE_YLIM,
        },
        {
            "name": "validation",
            "title": "Validation (val-core)",
            "ylabel": "value",
            "keys": [k for k in ordered if k.startswith("val-core/")][:MAX_SERIES],
            "looked_for": "val-core/*",
        },
        {
            "name": "judge_rule_agreement",
            "title": "Judge-rule agreement",
            "ylabel": "agreement",
            "keys": segment_keys(ordered, ("judge_rule_agree", "judge_rule_agreement"))[:MAX_SERIES],
            "looked_for": "segment judge_rule_agree | judge_rule_agreement",
        },
        {
            "name": "judge_failures",
            "title": "Judge error / parse-fail rate",
            "ylabel": "rate",
            "keys": segment_keys(ordered, ("judge_error", "judge_parse_fail"))[:MAX_SERIES],
            "looked_for": "segment judge_error | judge_parse_fail",
        },
        {
            "name": "judge_scores",
            "title": "Judge score vs rule score (means)",
            "ylabel": "mean",
            "keys": segment_keys(ordered, ("judge_score", "rule_score"))[:MAX_SERIES],
            "looked_for": "segment judge_score | rule_score",
        },
        {
            "name": "response_length",
            "title": "Response length (tokens, mean)",
            "ylabel": "tokens",
            "keys": _first_present(keys, ["response_length/mean"]),
            "looked_for": "response_length/mean",
        },
        {
            "name": "step_time",
            "title": "Step time by stage",
            "ylabel": "seconds",
            "keys": [k for k in timing if k in keys] + (["timing_s/step"] if "timing_s/step" in keys else []),
            "looked_for": ", ".join(timing + ["timing_s/step"]),
        },
    ]


# ----------------------------------------------------------------------------- plotting
COLORS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"]
STYLES = ["-", "--", ":", "-."]


def _smooth(ys: list[float], window: int) -> list[float]:
    if window <= 1:
        return ys
    out, acc = [], []
    for y in ys:
        acc.append(y)
        if len(acc) > window:
            acc.pop(0)
        out.append(sum(acc) / len(acc))
    return out


def _short(key: str) -> str:
    for prefix in ("timing_s/", "judge_health/", "position/", "grpo/"):
        key = key.removeprefix(prefix)
    return key.replace("/mean", "")


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
            total = key == "timing_s/step"
            if grid:
                color, style, name = ("black" if total else COLORS[ki % len(COLORS)]), STYLES[ri % len(STYLES)], None
            elif multi_run:
                color, style, name = COLORS[ri % len(COLORS)], "-", label
            else:
                color, style = ("black" if total else COLORS[ki % len(COLORS)]), ("--" if total else "-")
                name = _short(key) if len(runs) == 1 else f"{label}: {_short(key)}"
            ax.plot(
                xs,
                _smooth(list(ys), smooth),
                style,
                color=color,
                lw=1.5,
                label=name,
                marker="o" if len(xs) <= 12 else None,
                ms=3,
            )
            lines += 1
    ax.set_title(spec["title"], fontsize=10)
    ax.set_xlabel("step")
    ax.set_ylabel(spec["ylabel"])
    if spec.get("ylim"):
        ax.set_ylim(*spec["ylim"])
    if lines and grid:
        handles = [
            Line2D([], [], color="black" if k == "timing_s/step" else COLORS[i % len(COLORS)], lw=1.5, label=_short(k))
            for i, k in enumerate(keys)
        ]
        handles += [
            Line2D([], [], color="grey", ls=STYLES[i % len(STYLES)], lw=1.5, label=label)
            for i, (label, _st) in enumerate(contributing)
        ]
        ax.legend(handles=handles, fontsize=7, loc="best", ncol=2)
    elif lines:
        ax.legend(fontsize=7, loc="best")
    return lines


def plot_all(runs: Sequence[tuple[str, list]], out_dir: str, smooth: int = 1, log=print) -> dict:
    plt = pyplot()
    keys: set[str] = set()
    for _label, steps in runs:
        for _s, m in steps:
            keys.update(m)
    specs = panel_specs(keys)
    drawn, skipped = [], []
    for spec in specs:
        if not spec["keys"]:
            skipped.append({"panel": spec["name"], "looked_for": spec["looked_for"]})
            log(f"skipped panel '{spec['name']}': none of [{spec['looked_for']}] in any run")
            continue
        fig, ax = plt.subplots(figsize=(6.4, 3.8))
        draw_panel(ax, spec, runs, smooth)
        path = save_fig(fig, os.path.join(out_dir, f"{spec['name']}.png"))
        drawn.append({"panel": spec["name"], "file": path, "keys": spec["keys"]})
    overview = None
    if drawn:
        n = len(drawn)
        cols = 2 if n > 1 else 1
        rows = (n + cols - 1) // cols
        fig, axes = plt.subplots(rows, cols, figsize=(6.0 * cols, 3.4 * rows), squeeze=False)
        by_name = {s["name"]: s for s in specs}
        for ax, d in zip(axes.flat, drawn):
            draw_panel(ax, by_name[d["panel"]], runs, smooth)
        for ax in list(axes.flat)[n:]:
            ax.axis("off")
        fig.suptitle("Training metrics: " + ", ".join(label for label, _ in runs), fontsize=11)
        overview = save_fig(fig, os.path.join(out_dir, "overview.png"), dpi=72)
    return {"drawn": drawn, "skipped": skipped, "overview": overview}


# ----------------------------------------------------------------------------- CLI
def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m scripts.report.plot_metrics",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="keys the judge panels read: " + ", ".join([*JUDGE_HEALTH, *POSITION, IDENTICAL_GROUPS]),
    )
    ap.add_argument("runs", nargs="+", metavar="RUN.jsonl", help="metrics JSONL file(s); several are overlaid")
    ap.add_argument("--out", required=True, metavar="DIR", help="output folder for the PNGs and summary")
    ap.add_argument(
        "--labels",
        nargs="+",
        default=None,
        metavar="LABEL",
        help="one legend label per run (default: file names without .jsonl)",
    )
    ap.add_argument(
        "--smooth", type=int, default=1, metavar="N", help="trailing moving average over N steps (default 1: none)"
    )
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
        steps = load_run(path, warn)
        if not steps:
            warn(f"warning: {path}: no numeric metrics")
        runs.append((label, steps))
    if not any(steps for _l, steps in runs):
        raise InputError("no numeric metrics in any input file")
    result = plot_all(runs, args.out, args.smooth, log=warn)
    used = sorted({k for d in result["drawn"] for k in d["keys"]})
    last = {
        label: {k: next((m[k] for _s, m in reversed(steps) if k in m), None) for k in used} for label, steps in runs
    }
    summary = {
        "runs": [
            {
                "label": label,
                "file": os.path.abspath(p),
                "steps": len(steps),
                "first_step": _step(steps[0][0]) if steps else None,
                "last_step": _step(steps[-1][0]) if steps else None,
            }
            for (label, steps), p in zip(runs, args.runs)
        ],
        "panels_drawn": [
            {"panel": d["panel"], "file": os.path.basename(d["file"]), "keys": d["keys"]} for d in result["drawn"]
        ],
        "panels_skipped": result["skipped"],
        "overview": os.path.basename(result["overview"]) if result["overview"] else None,
        "last_values": last,
    }
    write_json(os.path.join(args.out, "summary.json"), summary)
    md = [
        "# Training metrics",
        "",
        md_table(
            ["run", "file", "steps", "last step"],
            [(r["label"], os.path.basename(r["file"]), r["steps"], r["last_step"]) for r in summary["runs"]],
        ),
        "",
        "## Panels",
        "",
    ]
    md += [f"- `{d['file']}`: {', '.join(d['keys'])}" for d in summary["panels_drawn"]]
    md += [f"- skipped `{s['panel']}`: none of {s['looked_for']}" for s in summary["panels_skipped"]]
    if used:
        md += [
            "",
            "## Last value per run",
            "",
            md_table(
                ["metric"] + [label for label, _ in runs], [[k] + [last[label][k] for label, _ in runs] for k in used]
            ),
        ]
    write_text(os.path.join(args.out, "summary.md"), "\n".join(md))
    print("\n".join(md))
    print(f"wrote {len(result['drawn'])} panels + overview.png, summary.json, summary.md to {args.out}")
    return summary


def main(argv: list[str] | None = None) -> int:
    return cli_main(run, argv)


if __name__ == "__main__":
    sys.exit(main())
