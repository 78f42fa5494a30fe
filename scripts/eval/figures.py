"""The evaluators' figures (PNG, matplotlib on Agg, written atomically): ``judge_figures`` for
``python -m scripts.eval.judge`` and ``gsm8k_figures`` for ``python -m scripts.eval.gsm8k``, each drawn
from the report dict that evaluator writes as ``report.json`` (``--no-plots`` skips them).
"""

from __future__ import annotations

import os

from reward_fns import verdicts
from scripts.report.render import fmt, pyplot, save_fig


def _bar_labels(ax, bars, values, ns=None, digits: int = 2, fontsize: int = 8):
    for i, (b, v) in enumerate(zip(bars, values)):
        if v is None:
            continue
        txt = f"{v:.{digits}f}" + (f"\nn={ns[i]}" if ns is not None else "")
        ax.annotate(
            txt,
            (b.get_x() + b.get_width() / 2, b.get_height()),
            ha="center",
            va="bottom",
            fontsize=fontsize,
            xytext=(0, 2),
            textcoords="offset points",
        )


def judge_figures(report: dict, out_dir: str) -> list[str]:
    """``per_source_accuracy.png``; pairwise ``position_bias.png``, pointwise ``confusion_matrix.png``."""
    plt = pyplot()
    title = f"{report['judge']['model']} on {os.path.basename(report['data'])}"
    groups = [("all", report["overall"])] + list(report["per_source"].items())
    paired = verdicts.KINDS[report["task"]].paired  # A/B answers in both orders: accuracy and position bias
    written = [save_fig(_accuracy_figure(plt, groups, paired, title), os.path.join(out_dir, "per_source_accuracy.png"))]
    if paired:
        written.append(save_fig(_position_bias_figure(plt, groups, title), os.path.join(out_dir, "position_bias.png")))
    else:
        fig = _confusion_figure(plt, report["overall"], title)
        written.append(save_fig(fig, os.path.join(out_dir, "confusion_matrix.png")))
    return written


def _accuracy_figure(plt, groups: list[tuple[str, dict]], paired: bool, title: str):
    """Accuracy per source (pairwise, against chance 0.5), or exact and within-1 (pointwise, chance 0.2)."""
    import numpy as np

    x = np.arange(len(groups))
    fig, ax = plt.subplots(figsize=(max(5.0, 1.3 * len(groups) + 2), 4))
    if paired:
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
    many = len(groups) > 3
    ax.set_xticks(x, [g for g, _ in groups], rotation=20 if many else 0, ha="right" if many else "center")
    ax.set_ylim(0, 1.18)
    ax.set_ylabel("accuracy")
    ax.set_title(f"Judge accuracy per source\n{title}", fontsize=10)
    ax.legend(loc="upper right", fontsize=8)
    return fig


def _position_bias_figure(plt, groups: list[tuple[str, dict]], title: str):
    """The judge's and the labels' A-share and the flip rate per source."""
    import numpy as np

    x = np.arange(len(groups))
    fig, ax = plt.subplots(figsize=(max(5.0, 1.6 * len(groups) + 2), 4))
    w = 0.26
    series = (
        ("a_share", "A-share (judge)", "#C44E52"),
        ("label_a_share", "A-share (labels)", "#DD8452"),
        ("flip_rate", "flip rate (both orders)", "#8172B3"),
    )
    for k, (key, lab, color) in enumerate(series):
        vals = [m[key] for _, m in groups]
        bars = ax.bar(x + (k - 1) * w, [v or 0 for v in vals], w, color=color, label=lab)
        _bar_labels(ax, bars, vals)
    ax.axhline(0.5, ls="--", color="grey", lw=1)
    ax.set_xticks(x, [g for g, _ in groups])
    ax.set_ylim(0, 1.25)
    ax.set_ylabel("share")
    ax.set_title(f"Position bias: A-share and flip rate\n{title}", fontsize=10)
    ax.legend(loc="upper right", fontsize=8, ncol=3)
    return fig


def _confusion_figure(plt, ov: dict, title: str):
    """The overall label x judge score counts (a column for no verdict), with exact / within-1 / MAE."""
    import numpy as np

    conf = np.array(ov["confusion"], dtype=float)
    scores = range(conf.shape[0])  # one row per label 0-4
    fig, ax = plt.subplots(figsize=(5.6, 4.6))
    ax.grid(False)
    im = ax.imshow(conf, cmap="Blues")
    cols = [str(s) for s in scores] + ["none"]
    ax.set_xticks(range(len(cols)), cols)
    ax.set_yticks(scores, [str(s) for s in scores])
    ax.set_xlabel("judge score (none = error / no verdict)")
    ax.set_ylabel("label")
    top = conf.max() if conf.size else 0
    for i in range(conf.shape[0]):
        for j in range(conf.shape[1]):
            color = "white" if top and conf[i, j] > 0.6 * top else "black"
            ax.text(j, i, f"{int(conf[i, j])}", ha="center", va="center", fontsize=9, color=color)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    ax.set_title(
        f"Confusion matrix  exact={fmt(ov['exact'], 2)} within1={fmt(ov['within1'], 2)} "
        f"MAE={fmt(ov['mae'], 2)}\n{title}",
        fontsize=9,
    )
    return fig


def gsm8k_figures(report: dict, out_dir: str) -> list[str]:
    """``gsm8k_accuracy.png``; with a judge, ``judge_vs_rule.png`` (judge scores by rule verdict)."""
    plt = pyplot()
    import numpy as np

    p = report["policy"]
    written = []
    names = ["strict", "flexible"] + [k for k in p if "pass@" in k]
    vals = [p["strict_acc"], p["flexible_acc"]] + [p[k] for k in p if "pass@" in k]
    fig, ax = plt.subplots(figsize=(4.8, 3.8))
    bars = ax.bar(names, [v or 0 for v in vals], color=["#4C72B0", "#55A868", "#8172B3", "#937860"][: len(vals)])
    _bar_labels(ax, bars, vals, digits=3, fontsize=9)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("accuracy")
    ax.set_title(f"GSM8K accuracy, {p['n_questions']} questions\n{report['policy_endpoint']['model']}", fontsize=10)
    written.append(save_fig(fig, os.path.join(out_dir, "gsm8k_accuracy.png")))

    j = report.get("judge")
    if j:
        h = j["score_histogram"]
        x = np.arange(5)
        w = 0.4
        fig, ax = plt.subplots(figsize=(5.6, 3.9))
        ax.bar(x - w / 2, [h["rule_correct"][str(s)] for s in range(5)], w, color="#55A868", label="rule: correct")
        ax.bar(x + w / 2, [h["rule_wrong"][str(s)] for s in range(5)], w, color="#C44E52", label="rule: wrong")
        ax.axvline(j["threshold"] - 0.5, ls="--", color="grey", lw=1, label=f"threshold {j['threshold']}")
        ax.set_xticks(x, [str(s) for s in range(5)])
        ax.set_xlabel("judge score")
        ax.set_ylabel("answers")
        ax.legend(fontsize=8)
        ax.set_title(
            f"Judge vs {j['rule']} rule: agreement {fmt(j['agreement'], 2)}, P {fmt(j['precision'], 2)}, "
            f"R {fmt(j['recall'], 2)}, F1 {fmt(j['f1'], 2)}\n{report['judge_endpoint']['model']}",
            fontsize=9,
        )
        written.append(save_fig(fig, os.path.join(out_dir, "judge_vs_rule.png")))
    return written
