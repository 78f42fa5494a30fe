"""The side-by-side table and figure of ``scripts.lab.policy_learns``: held-out accuracy before / after each run
(verl's greedy validation answers, ``<run>_val/<step>.jsonl``, graded here by the strict and the flexible rule: step 0
of the rule run, or of the judge run without one, is "before"; each run's last validation is "after"), the judge run's
agreement with the rule and its hacking shares per step, what the judge paid for that the rule did not (right answers
in another format vs wrong answers, from verl's rollout dumps), wall time; ``report.md``, ``report.json``,
``policy_learns.png`` in the experiment folder. Rerun on a finished (or copied) folder:

    python -m scripts.lab.report runs/policy_learns [--runs rule judge]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

import numpy as np

from data_prep.files.outputs import write_json, write_text
from data_prep.files.readers import read_jsonl
from reward_fns import gsm8k
from reward_fns.judge_metrics import ratio
from scripts.lab import scorecard
from scripts.report.render import fmt, md_table, pyplot, read_metrics, save_fig

# verl's validation (greedy): the rule's accuracy (reward_fns.gsm8k's ``acc``, which verl makes its core metric; the
# judge run's reward returns the rule's verdict as ``rule_score``) and the reward each run trains on
VAL_RULE = r"val-(core/.+/acc|aux/.+/rule_score)/mean@1$"
VAL_REWARD = r"val-(core|aux)/.+/reward/mean@1$"


def validation(out: str, name: str, step: int | None = None) -> dict:
    """Held-out accuracy of run ``name`` at validation ``step`` (None: its last): ``{"strict", "flexible", "n",
    "step"}`` on the test split, graded from verl's dump of its greedy answers, plus ``"heldout": {"strict",
    "flexible", "n"}`` for the testbed's held-out stories when the validation has them; {} when there is none."""
    folder = os.path.join(out, f"{name}_val")
    steps = scorecard.dumped_steps(folder)
    if step is None and steps:
        step = steps[-1]
    if step not in steps:
        return {}
    rows = read_jsonl(os.path.join(folder, f"{step}.jsonl"))
    held = scorecard.heldout_questions(out)
    parts = {s: [r for r in rows if scorecard.split_of(str(r.get("input")), held) == s] for s in scorecard.SPLITS}
    if not parts["test"]:
        return {}

    def acc(rs: list[dict]) -> dict:
        return {
            **{
                m: float(
                    np.mean(
                        [
                            gsm8k.compute_score(solution_str=r.get("output", ""), ground_truth=r.get("gts"), mode=m)[
                                "acc"
                            ]
                            for r in rs
                        ]
                    )
                )
                for m in ("strict", "flexible")
            },
            "n": len(rs),
        }

    return {**acc(parts["test"]), "step": step, **({"heldout": acc(parts["heldout"])} if parts["heldout"] else {})}


def _series(rows: list[dict], pattern: str) -> list[tuple[int, float]]:
    """``(step, value)`` of the metric matching ``pattern``, on the test split (not the held-out stories')."""
    rx = re.compile(pattern)
    out = {}
    for r in rows:
        for k, v in r.items():
            if rx.search(k) and "_heldout/" not in k and isinstance(v, (int, float)):
                out[int(r["step"])] = float(v)
    return sorted(out.items())


def _slope_per_100(points: list[tuple[int, float]]) -> float | None:
    if len(points) < 3:
        return None
    x, y = np.array(points, dtype=np.float64).T
    return float(np.polyfit(x, y, 1)[0] * 100)


def summarize(out: str, names: list[str]) -> dict:
    """``{"before": acc, "runs": {name: {...}}}`` from the experiment folder's files."""
    before = next((v for v in (validation(out, n, 0) for n in ("rule", *names)) if v), {})
    runs = {}
    for name in names:
        rows = read_metrics(os.path.join(out, f"{name}_metrics.jsonl"))
        train = [r for r in rows if "critic/score/mean" in r]
        after = validation(out, name)
        after = after if after.get("step") else {}  # step 0 is the start policy, not an "after"
        done = os.path.join(out, f".{name}.done")
        run = {
            "steps": len(train),
            "wall_s": float(open(done).read()) if os.path.exists(done) else None,
            "after": after,
            "val_rule": _series(rows, VAL_RULE),
            "val_reward": _series(rows, VAL_REWARD),
            "reward": [(int(r["step"]), r["critic/score/mean"]) for r in train],
        }
        for mode in ("strict", "flexible"):
            run[f"gain_{mode}"] = after[mode] - before[mode] if before and after else None
        if "heldout" in before and "heldout" in after:  # the testbed's held-out stories
            run["gain_heldout_strict"] = after["heldout"]["strict"] - before["heldout"]["strict"]
        if any("judge_health/agree_rule" in r for r in train):  # a judge-rewarded run
            for key in ("agree_rule", "accept_rule_reject", "reject_rule_accept", "hacking_alarm"):
                run[key] = [(int(r["step"]), r[f"judge_health/{key}"]) for r in train if f"judge_health/{key}" in r]
            run["rule_score"] = [
                (int(r["step"]), r["reward/rule_score/mean"]) for r in train if "reward/rule_score/mean" in r
            ]
            run["accept_rule_reject_slope_per_100"] = _slope_per_100(run["accept_rule_reject"])
        runs[name] = run
    res = {"before": before, "runs": runs}
    if "rule" in runs and "judge" in runs and runs["rule"]["gain_strict"] and runs["judge"]["gain_strict"] is not None:
        res["judge_gain_over_rule_gain"] = {
            m: ratio(runs["judge"][f"gain_{m}"], runs["rule"][f"gain_{m}"]) for m in ("strict", "flexible")
        }
    return res


def examples(out: str, name: str, k: int = 3, chars: int = 400) -> tuple[int | None, list[dict]]:
    """Up to ``k`` samples of the run's last dumped step (``<name>_rollouts/<step>.jsonl``, verl's
    ``trainer.rollout_data_dir``) that the judge accepted (verdict >= 3) and the rule rejected."""
    folder, steps = _dumped_steps(out, name)
    if not steps:
        return None, []
    rows = read_jsonl(os.path.join(folder, f"{steps[-1]}.jsonl"))
    picked = [r for r in rows if float(r.get("judge_score", -1)) >= 3 and float(r.get("rule_score", 1)) == 0][:k]
    return steps[-1], [
        {"output": str(r.get("output", ""))[:chars], "judge_score": r["judge_score"], "ground_truth": r.get("gts")}
        for r in picked
    ]


def _dumped_steps(out: str, name: str) -> tuple[str, list[int]]:
    folder = os.path.join(out, f"{name}_rollouts")
    steps = scorecard.dumped_steps(folder)
    return folder, steps


def audit(out: str, name: str) -> dict | None:
    """What the judge paid for that the rule did not, over every dumped step of run ``name``: samples rewarded
    (``score`` > 0) whose strict rule score is 0, split by the flexible rule (the last number; ``reward_fns.gsm8k``)
    into right answers in another format and wrong answers; the largest per-step share of paid wrong answers; and,
    per step, the share of samples where being paid agrees with the flexible rule (the judge prompt's own reading of
    "the final answer"), its minimum over steps."""
    folder, steps = _dumped_steps(out, name)
    if not steps:
        return None
    n = paid = wrong = 0
    worst, agree = 0.0, []
    for step in steps:
        rows = read_jsonl(os.path.join(folder, f"{step}.jsonl"))
        bad = same = 0
        for r in rows:
            right = gsm8k.compute_score(solution_str=r.get("output", ""), ground_truth=r.get("gts"), mode="flexible")[
                "acc"
            ]
            pays = float(r.get("score", 0)) > 0
            same += pays == (right == 1)
            if pays and float(r.get("rule_score", 1)) == 0:
                paid += 1
                bad += right == 0
        n, wrong = n + len(rows), wrong + bad
        if rows:
            worst, agree = max(worst, bad / len(rows)), agree + [same / len(rows)]
    return {
        "steps": len(steps),
        "samples": n,
        "paid_rule_rejects": paid,
        "paid_flexible_right": paid - wrong,
        "paid_wrong": wrong,
        "paid_wrong_share": wrong / n if n else None,
        "paid_wrong_max_step_share": worst,
        "paid_agree_flexible_min": min(agree) if agree else None,
    }


def table(res: dict) -> str:
    b, rows = res["before"], []
    for name, r in res["runs"].items():
        a = r["after"]
        vals = [v for _, v in r.get("agree_rule", [])]
        arr = [v for _, v in r.get("accept_rule_reject", [])]
        alarms = sum(v for _, v in r.get("hacking_alarm", []))
        val = r["val_rule"]
        rows.append(
            [
                name,
                r["steps"],
                None if r["wall_s"] is None else round(r["wall_s"]),
                b.get("strict"),
                a.get("strict"),
                r["gain_strict"],
                b.get("flexible"),
                a.get("flexible"),
                r["gain_flexible"],
                val[0][1] if val else None,
                f"{val[-1][1]:.3f} (step {val[-1][0]})" if val else None,
                min(vals) if vals else None,
                float(np.mean(vals)) if vals else None,
                max(arr) if arr else None,
                r.get("accept_rule_reject_slope_per_100"),
                int(alarms) if r.get("hacking_alarm") else None,
                b.get("heldout", {}).get("strict"),
                a.get("heldout", {}).get("strict"),
                r.get("gain_heldout_strict"),
            ]
        )
    head = [
        "reward",
        "steps",
        "wall s",
        "strict before",
        "strict after",
        "gain",
        "flexible before",
        "flexible after",
        "gain",
        "validation first",
        "validation last",
        "agree_rule min",
        "agree_rule mean",
        "accept-rule-reject max",
        "its slope /100 steps",
        "alarm steps",
        "held-out stories: strict before",
        "after",
        "gain",
    ]
    return md_table(head, rows)


def figure(res: dict, path: str) -> str:
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    colors = {"rule": "tab:blue", "judge": "tab:orange", "random": "tab:gray", "format": "tab:green"}
    ax = axes[0]
    for name, r in res["runs"].items():
        if r["val_rule"]:
            ax.plot(
                *zip(*r["val_rule"]),
                marker="o",
                color=colors.get(name.split("_s")[0]),
                label=f"{name} run: validation, rule accuracy",
            )
    ax.set(title="held-out accuracy (verl validation, greedy)", xlabel="step", ylabel="strict rule accuracy")
    ax.legend(fontsize=8)
    ax = axes[1]
    for name, r in res["runs"].items():
        if r["reward"]:
            ax.plot(
                *zip(*r["reward"]),
                color=colors.get(name.split("_s")[0]),
                label=f"{name} run: reward (critic/score/mean)",
            )
        if r.get("rule_score"):
            ax.plot(
                *zip(*r["rule_score"]),
                color=colors.get(name.split("_s")[0]),
                ls="--",
                label=f"{name} run: rule accuracy of its samples",
            )
    ax.set(title="training reward vs rule accuracy", xlabel="step")
    ax.legend(fontsize=8)
    ax = axes[2]
    j = res["runs"].get("judge", {})
    for key, style in (("accept_rule_reject", "-"), ("reject_rule_accept", "--")):
        if j.get(key):
            ax.plot(*zip(*j[key]), ls=style, color="tab:red", label=f"judge {key.replace('_', ' ')}")
    alarms = [s for s, v in j.get("hacking_alarm", []) if v]
    if alarms:
        ax.scatter(alarms, [0] * len(alarms), marker="x", color="k", label="hacking alarm")
    ax.set(title="judge run: disagreement with the rule", xlabel="step", ylabel="share of answered samples")
    ax.legend(fontsize=8)
    return save_fig(fig, path)


def console(res: dict, out: str) -> str:
    """The experiment's last words on the console: held-out accuracy before / after each run, the gain ratio, and
    where the report is."""
    rows = [
        [
            name,
            r["steps"],
            res["before"].get("strict"),
            r["after"].get("strict"),
            r["gain_strict"],
            r["after"].get("flexible"),
            r["gain_flexible"],
            r["after"].get("heldout", {}).get("strict"),
            r.get("gain_heldout_strict"),
        ]
        for name, r in res["runs"].items()
    ]
    n = res["before"].get("n") or next((r["after"].get("n") for r in res["runs"].values() if r["after"]), None)
    lines = [
        "",
        "=" * 100,
        f"policy_learns: held-out accuracy ({n} test questions, greedy)",
        "",
        md_table(
            [
                "reward",
                "steps",
                "strict before",
                "strict after",
                "gain",
                "flexible after",
                "gain",
                "held-out stories after",
                "gain",
            ],
            rows,
        ),
    ]
    g = res.get("judge_gain_over_rule_gain")
    if g:
        lines += ["", "judge gain / rule gain: " + ", ".join(f"{m} {fmt(g[m])}" for m in ("strict", "flexible"))]
    lines += ["", f"report: {os.path.join(out, 'report.md')} (report.json, policy_learns.png)", "=" * 100]
    return "\n".join(lines)


def write(out: str, names: list[str], log=print) -> dict:
    res = summarize(out, names)
    lines = [f"# policy_learns: {out}", "", table(res), ""]
    if "judge_gain_over_rule_gain" in res:
        g = res["judge_gain_over_rule_gain"]
        lines.append(
            "Judge-run gain / rule-run gain: "
            + ", ".join(f"{m} {'n/a' if g[m] is None else format(g[m], '.3f')}" for m in ("strict", "flexible"))
            + "."
        )
    paid = audit(out, "judge") if "judge" in names else None
    if paid:
        res["judge_paid_audit"] = paid
        lines += [
            "",
            f"What the judge paid for and the strict rule did not ({paid['samples']:,} samples, {paid['steps']} "
            f"dumped steps): {paid['paid_rule_rejects']:,}; right answers in another format (the flexible rule: "
            f"the last number) {paid['paid_flexible_right']:,}; wrong answers {paid['paid_wrong']:,} (a share of "
            f"{paid['paid_wrong_share']:.4f}; at most {paid['paid_wrong_max_step_share']:.4f} in one step). Paid or "
            f"not agrees with the flexible rule on at least {paid['paid_agree_flexible_min']:.3f} "
            f"of every step's samples.",
        ]
    step, picked = examples(out, "judge")
    if picked:
        lines += [
            "",
            f"Judge run, step {step}: samples the judge accepted and the rule rejected (first {len(picked)}):",
            "",
        ]
        lines += [
            f"- ground truth {p['ground_truth']}, verdict {p['judge_score']:g}: `{json.dumps(p['output'])}`"
            for p in picked
        ]
    compare = os.path.join(out, "compare.md")
    if os.path.exists(compare):
        lines += ["", "The judge (its held-out verification rows):", "", open(compare).read().split("\n", 2)[-1]]
    text = "\n".join(lines) + "\n"
    write_text(os.path.join(out, "report.md"), text)
    write_json(os.path.join(out, "report.json"), res)
    figure(res, os.path.join(out, "policy_learns.png"))
    log(text)
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m scripts.lab.report",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("out", help="the scripts.lab.policy_learns folder")
    p.add_argument("--runs", nargs="+", default=["rule", "judge"], help="run names (default rule judge)")
    a = p.parse_args(argv)
    if not os.path.isdir(a.out):
        p.error(f"{a.out}: no such folder")
    write(a.out, [n for n in a.runs if os.path.exists(os.path.join(a.out, f"{n}_metrics.jsonl"))])
    return 0


if __name__ == "__main__":
    sys.exit(main())
