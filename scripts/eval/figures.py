"""The evaluators' figures (PNG, matplotlib on Agg, written atomically): ``judge_figures`` for
``python -m scripts.eval.judge`` and ``gsm8k_figures`` for ``python -m scripts.eval.gsm8k``, each drawn
from the report dict that evaluator writes as ``report.json`` (``--no-plots`` skips them).
"""

from __future__ import annotations

import os

from reward_fns import verdicts
from scripts.report.render import fmt, pyplot, save_fig


def _bars(ax, x, series, width: float, ns=None, digits: int = 2, fontsize: int = 8) -> None:
    """Bars of each ``(values, label, color)`` side by side around ``x``, each with its value (and ``n``) on top."""
    for k, (values, label, color) in enumerate(series):
        bars = ax.bar(
            x + (k - (len(series) - 1) / 2) * width, [v or 0 for v in values], width, color=color, label=label
        )
        for i, (b, v) in enumerate(zip(bars, values)):
            if v is not None:
                txt = f"{v:.{digits}f}" + (f"\nn={ns[i]}" if ns is not None else "")
                xy = (b.get_x() + b.get_width() / 2, b.get_height())
                kw = dict(ha="center", va="bottom", fontsize=fontsize, xytext=(0, 2), textcoords="offset points")
                ax.annotate(txt, xy, **kw)


def judge_figures(report: dict, out_dir: str) -> list[str]:
    """``per_source_accuracy.png``; pairwise ``position_bias.png``, pointwise ``confusion_matrix.png``."""
    import numpy as np

    plt = pyplot()
    title = f"{report['judge']['model']} on {os.path.basename(report['data'])}"
    groups = [("all", report["overall"])] + list(report["per_source"].items())
    names, x = [g for g, _ in groups], np.arange(len(groups))
    col = lambda key: [m[key] for _, m in groups]  # noqa: E731
    paired = verdicts.KINDS[report["task"]].paired  # A/B answers in both orders: accuracy and position bias

    # accuracy per source (pairwise, against chance 0.5), or exact and within-1 (pointwise, chance 0.2)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.3 * len(groups) + 2), 4))
    if paired:
        _bars(ax, x, [(col("accuracy"), "accuracy", "#4C72B0")], 0.8, ns=[m["n"] for _, m in groups])
        ax.axhline(0.5, ls="--", color="grey", lw=1, label="chance")
    else:
        _bars(ax, x, [(col("exact"), "exact", "#4C72B0"), (col("within1"), "within 1", "#55A868")], 0.38)
        ax.axhline(0.2, ls="--", color="grey", lw=1, label="chance (exact)")
    many = len(groups) > 3
    ax.set_xticks(x, names, rotation=20 if many else 0, ha="right" if many else "center")
    ax.set(ylim=(0, 1.18), ylabel="accuracy")
    ax.set_title(f"Judge accuracy per source\n{title}", fontsize=10)
    ax.legend(loc="upper right", fontsize=8)
    written = [save_fig(fig, os.path.join(out_dir, "per_source_accuracy.png"))]
    if not paired:
        fig = _confusion_figure(plt, report["overall"], title)
        return written + [save_fig(fig, os.path.join(out_dir, "confusion_matrix.png"))]

    # position bias: the judge's and the labels' A-share and the flip rate per source
    fig, ax = plt.subplots(figsize=(max(5.0, 1.6 * len(groups) + 2), 4))
    series = [("a_share", "A-share (judge)", "#C44E52"), ("label_a_share", "A-share (labels)", "#DD8452")]
    series.append(("flip_rate", "flip rate (both orders)", "#8172B3"))
    _bars(ax, x, [(col(k), label, color) for k, label, color in series], 0.26)
    ax.axhline(0.5, ls="--", color="grey", lw=1)
    ax.set_xticks(x, names)
    ax.set(ylim=(0, 1.25), ylabel="share")
    ax.set_title(f"Position bias: A-share and flip rate\n{title}", fontsize=10)
    ax.legend(loc="upper right", fontsize=8, ncol=3)
    return written + [save_fig(fig, os.path.join(out_dir, "position_bias.png"))]


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
    ax.set(xlabel="judge score (none = error / no verdict)", ylabel="label")
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
    import numpy as np

    plt = pyplot()
    p = report["policy"]
    names = ["strict", "flexible"] + [k for k in p if "pass@" in k]
    vals = [p["strict_acc"], p["flexible_acc"]] + [p[k] for k in p if "pass@" in k]
    fig, ax = plt.subplots(figsize=(4.8, 3.8))
    colors = ["#4C72B0", "#55A868", "#8172B3", "#937860"][: len(vals)]
    _bars(ax, np.arange(len(names)), [(vals, None, colors)], 0.8, digits=3, fontsize=9)
    ax.set_xticks(np.arange(len(names)), names)
    ax.set(ylim=(0, 1.1), ylabel="accuracy")
    ax.set_title(f"GSM8K accuracy, {p['n_questions']} questions\n{report['policy_endpoint']['model']}", fontsize=10)
    written = [save_fig(fig, os.path.join(out_dir, "gsm8k_accuracy.png"))]
    j = report.get("judge")
    if not j:
        return written
    h, x, w = j["score_histogram"], np.arange(5), 0.4
    fig, ax = plt.subplots(figsize=(5.6, 3.9))
    ax.bar(x - w / 2, [h["rule_correct"][str(s)] for s in range(5)], w, color="#55A868", label="rule: correct")
    ax.bar(x + w / 2, [h["rule_wrong"][str(s)] for s in range(5)], w, color="#C44E52", label="rule: wrong")
    ax.axvline(j["threshold"] - 0.5, ls="--", color="grey", lw=1, label=f"threshold {j['threshold']}")
    ax.set_xticks(x, [str(s) for s in range(5)])
    ax.set(xlabel="judge score", ylabel="answers")
    ax.legend(fontsize=8)
    ax.set_title(
        f"Judge vs {j['rule']} rule: agreement {fmt(j['agreement'], 2)}, P {fmt(j['precision'], 2)}, "
        f"R {fmt(j['recall'], 2)}, F1 {fmt(j['f1'], 2)}\n{report['judge_endpoint']['model']}",
        fontsize=9,
    )
    return written + [save_fig(fig, os.path.join(out_dir, "judge_vs_rule.png"))]
