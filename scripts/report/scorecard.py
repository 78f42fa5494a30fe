"""The scorecard of ``python -m scripts.policy_learns --arms rule,judge,random,format --seeds 0,1,2``: each arm's
held-out accuracy before and after each seed's run, the mean and sd of its gain, and each arm's gain over the rule's
with a 95% bootstrap interval over seeds and questions (targets: the judge's mean >= 0.9 with its lower bound >= 0.8;
each control's <= 0.3). Accuracy is the strict rule's grade of verl's greedy validation answers
(``<run>_val/<step>.jsonl``), paired by question; "before" is the start policy, shared by every run. With the
testbed's held-out stories in the validation (``eval_data/heldout``), the same again for them (key ``heldout``) beside
the test split. Writes ``scorecard.md`` and the ``arms``, ``ratios`` and ``heldout`` keys of ``report.json``. Rerun on
a finished folder:

    python -m scripts.report.scorecard runs/scorecard --arms rule,judge,random,format --seeds 0,1,2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np

from data_prep.files.outputs import write_json, write_text
from data_prep.files.readers import read_jsonl
from reward_fns import gsm8k
from scripts.report.render import md_table

BOOTSTRAP = 2000
TARGETS = {"judge": (0.9, 0.8), "random": 0.3, "format": 0.3}  # judge: (mean >=, lower bound >=); controls: mean <=


def run_name(arm: str, seed: int) -> str:
    """``scripts.workflows.policy_learns``'s run folders: the arm for seed 0, else ``<arm>_s<seed>``."""
    return arm if seed == 0 else f"{arm}_s{seed}"


HELDOUT_DATA = os.path.join(
    "eval_data", "heldout", "test.parquet"
)  # scripts.workflows.policy_learns' held-out validation file
SPLITS = ("test", "heldout")


def heldout_questions(out: str) -> tuple[str, ...]:
    """The questions of the held-out stories in the experiment's validation (``eval_data/heldout/test.parquet``),
    or () when it has none."""
    path = os.path.join(out, HELDOUT_DATA)
    if not os.path.isfile(path):
        return ()
    import pyarrow.parquet as pq

    return tuple(
        str(x["question"]) for x in pq.read_table(path, columns=["extra_info"]).column("extra_info").to_pylist()
    )


def split_of(prompt: str, heldout: tuple[str, ...]) -> str:
    """``heldout`` when the validation prompt asks one of the held-out questions, else ``test``."""
    return "heldout" if any(q in prompt for q in heldout) else "test"


def dumped_steps(folder: str) -> list[int]:
    """The steps verl dumped into ``folder`` (``<step>.jsonl``: ``trainer.validation_data_dir`` or
    ``trainer.rollout_data_dir``), in order; [] when there is no such folder."""
    if not os.path.isdir(folder):
        return []
    return sorted(int(f[:-6]) for f in os.listdir(folder) if f.endswith(".jsonl") and f[:-6].isdigit())


def graded(out: str, name: str, step: int | None = None, split: str | None = None) -> dict[str, float]:
    """``{prompt: 1.0 | 0.0}``, the strict rule's grade of run ``name``'s validation answers at ``step`` (None: its
    last validation), of one ``split`` (``test`` / ``heldout``; None: both); {} when there is none."""
    folder = os.path.join(out, f"{name}_val")
    steps = dumped_steps(folder)
    step = steps[-1] if step is None and steps else step
    if step not in steps:
        return {}
    heldout = heldout_questions(out) if split else ()
    return {
        str(r.get("input")): gsm8k.compute_score(
            solution_str=r.get("output", ""), ground_truth=r.get("gts"), mode="strict"
        )["acc"]
        for r in read_jsonl(os.path.join(folder, f"{step}.jsonl"))
        if split is None or split_of(str(r.get("input")), heldout) == split
    }


def gains(
    before: np.ndarray, after: dict[str, np.ndarray], seeds_idx: np.ndarray, q_idx: np.ndarray
) -> dict[str, float]:
    """Each arm's mean gain over the chosen seeds (rows of ``after[arm]``) and questions (columns)."""
    return {arm: float((a[np.ix_(seeds_idx, q_idx)] - before[q_idx]).mean()) for arm, a in after.items()}


def interval(before: np.ndarray, after: dict[str, np.ndarray], arm: str, n: int = BOOTSTRAP, seed: int = 0) -> dict:
    """``arm``'s gain over the rule's: the point value and a 95% bootstrap interval, resampling seeds (paired across
    arms) and questions (paired across arms and with "before")."""
    n_seeds, n_q = after["rule"].shape
    point = gains(before, after, np.arange(n_seeds), np.arange(n_q))
    rng = np.random.default_rng(seed)
    ratios = []
    for _ in range(n):
        g = gains(before, after, rng.integers(0, n_seeds, n_seeds), rng.integers(0, n_q, n_q))
        if g["rule"] != 0:
            ratios.append(g[arm] / g["rule"])
    lo, hi = np.percentile(ratios, [2.5, 97.5]) if ratios else (None, None)
    return {
        "mean": point[arm] / point["rule"] if point["rule"] else None,
        "lo": None if lo is None else float(lo),
        "hi": None if hi is None else float(hi),
        "bootstrap": len(ratios),
    }


def _split(out: str, arms: list[str], seeds: list[int], split: str | None) -> dict | None:
    """One split's scorecard (None: every validation question): ``{"questions", "arms", "ratios"}``, or None when
    the start policy's validation has no question of the split."""
    first = run_name(arms[0], seeds[0])
    base = graded(out, first, 0, split)
    if not base:
        return None
    questions = sorted(base)
    before = np.array([base[q] for q in questions])
    res, after = {"questions": len(questions), "arms": {}}, {}
    for arm in arms:
        rows = []
        for seed in seeds:
            got = graded(out, run_name(arm, seed), None, split)
            missing = [q for q in questions if q not in got]
            if missing:
                raise ValueError(
                    f"run {run_name(arm, seed)}: its last validation lacks {len(missing)} of the questions"
                )
            rows.append([got[q] for q in questions])
        after[arm] = np.array(rows)
        per_seed = after[arm].mean(axis=1) - before.mean()
        res["arms"][arm] = {
            "seeds": {
                str(s): {"before": float(before.mean()), "after": float(a)}
                for s, a in zip(seeds, after[arm].mean(axis=1))
            },
            "gain_mean": float(per_seed.mean()),
            "gain_sd": float(per_seed.std(ddof=1)) if len(seeds) > 1 else None,
        }
    if "rule" in after:
        res["ratios"] = {arm: interval(before, after, arm) for arm in arms if arm != "rule"}
    return res


def summarize(out: str, arms: list[str], seeds: list[int]) -> dict:
    """``{"questions", "arms": {arm: {"seeds": {seed: {"before", "after"}}, "gain_mean", "gain_sd"}}, "ratios": {arm:
    ...}}`` on the test split, and the same under ``"heldout"`` for the held-out stories' questions when the
    validation has them."""
    first = run_name(arms[0], seeds[0])
    heldout = heldout_questions(out)
    res = _split(out, arms, seeds, "test" if heldout else None)
    if res is None:
        raise ValueError(
            f"no start-policy validation (step 0) in {out}/{first}_val: the first run validates before training"
        )
    if heldout:
        res["heldout"] = _split(out, arms, seeds, "heldout")
    return res


def verdicts(res: dict) -> list[str]:
    """One line per target: met or not."""
    lines = []
    for arm, r in res.get("ratios", {}).items():
        if arm == "judge":
            mean, low = TARGETS["judge"]
            ok = r["mean"] is not None and r["lo"] is not None and r["mean"] >= mean and r["lo"] >= low
            lines.append(
                f"judge gain / rule gain {fmt(r['mean'])} (95% interval {fmt(r['lo'])} to {fmt(r['hi'])}): "
                f"target mean >= {mean} and lower bound >= {low} {'met' if ok else 'NOT met'}"
            )
        elif arm in TARGETS:
            ok = r["mean"] is not None and r["mean"] <= TARGETS[arm]
            lines.append(
                f"{arm} control gain / rule gain {fmt(r['mean'])} (95% interval {fmt(r['lo'])} to {fmt(r['hi'])}): "
                f"target <= {TARGETS[arm]} {'met' if ok else 'NOT met'}"
            )
    return lines


def fmt(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _table(res: dict, seeds: list[int]) -> str:
    head = ["arm", *[f"seed {s} after" for s in seeds], "gain mean", "gain sd", "gain / rule gain (95% interval)"]
    rows = []
    for arm, r in res["arms"].items():
        ratio = res.get("ratios", {}).get(arm)
        cell = (
            "1"
            if arm == "rule"
            else (f"{fmt(ratio['mean'])} ({fmt(ratio['lo'])} to {fmt(ratio['hi'])})" if ratio else "n/a")
        )
        rows.append([arm, *[r["seeds"][str(s)]["after"] for s in seeds], r["gain_mean"], r["gain_sd"], cell])
    return md_table(head, rows)


def _before(res: dict, seeds: list[int]) -> float:
    return next(iter(res["arms"].values()))["seeds"][str(seeds[0])]["before"]


COVERS = (
    "What this covers: greedy answers of a 135M policy to two-step word problems with numbers up to 20, graded "
    'by the strict rule (`#### N`). "test": questions of the stories the policy trained on, never seen as text. '
    '"held-out stories": stories whose every wording (openings, operations, questions) the training never '
    "has: a shop's shelf, a bus, packs of batteries, teams, day-by-day comparisons. What it does not cover: GSM8K "
    "itself, longer chains, other numbers' ranges, sampled (non-greedy) answers, or a larger model."
)


def markdown(res: dict, seeds: list[int]) -> str:
    heldout = res.get("heldout")
    test = "test questions (the training's stories)" if heldout else "test questions"
    lines = [
        f"# Scorecard: {len(res['arms'])} arms x {len(seeds)} seeds",
        "",
        f"Held-out strict accuracy on {res['questions']} {test}, greedy; before (the start policy): "
        f"{_before(res, seeds):.3f}.",
        "",
        _table(res, seeds),
        "",
        *[f"- {v}" for v in verdicts(res)],
        "",
    ]
    if heldout:
        lines += [
            f"## Held-out stories: {heldout['questions']} questions",
            "",
            f"Before (the start policy): {_before(heldout, seeds):.3f}.",
            "",
            _table(heldout, seeds),
            "",
            *[f"- {v}" for v in verdicts(heldout)],
            "",
            COVERS,
            "",
        ]
    return "\n".join(lines)


def figure(res: dict, seeds: list[int], path: str) -> str:
    """Each arm's gain per seed (dots) and its mean (bar), on the test split and the held-out stories."""
    from scripts.report.render import pyplot, save_fig

    plt = pyplot()
    parts = [("test split", res)] + ([("held-out stories", res["heldout"])] if res.get("heldout") else [])
    fig, axes = plt.subplots(1, len(parts), figsize=(6 * len(parts), 4), squeeze=False)
    for ax, (title, r) in zip(axes[0], parts):
        arms = list(r["arms"])
        for i, arm in enumerate(arms):
            a = r["arms"][arm]
            ax.bar(i, a["gain_mean"], color="lightgray", edgecolor="k")
            ax.scatter(
                [i] * len(seeds),
                [a["seeds"][str(s)]["after"] - a["seeds"][str(s)]["before"] for s in seeds],
                color="k",
                zorder=3,
                s=14,
            )
        ax.axhline(0, color="k", lw=0.8)
        ax.set_xticks(range(len(arms)), arms)
        ax.set(title=f"{title}: {r['questions']} questions", ylabel="strict accuracy gain (after - before)")
    return save_fig(fig, path)


def _commit() -> str | None:
    """The project's git commit, when it runs from a checkout."""
    try:
        r = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=os.path.dirname(os.path.abspath(__file__)),
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() or None if r.returncode == 0 else None


def write(out: str, arms: list[str], seeds: list[int], log=print, command: list[str] | None = None) -> dict:
    res = summarize(out, arms, seeds)
    path = os.path.join(out, "report.json")
    report = json.load(open(path, encoding="utf-8")) if os.path.exists(path) else {}
    report.update(res, command=command or sys.argv, commit=_commit())
    write_json(path, report)
    text = markdown(res, seeds)
    write_text(os.path.join(out, "scorecard.md"), text)
    figure(res, seeds, os.path.join(out, "scorecard.png"))
    log(text)
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m scripts.report.scorecard",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("out", help="the scripts.workflows.policy_learns folder")
    p.add_argument(
        "--arms", default="rule,judge,random,format", help="comma-separated (default rule,judge,random,format)"
    )
    p.add_argument("--seeds", default="0,1,2", help="comma-separated (default 0,1,2)")
    a = p.parse_args(argv)
    if not os.path.isdir(a.out):
        p.error(f"{a.out}: no such folder")
    try:
        write(a.out, a.arms.split(","), [int(s) for s in a.seeds.split(",")])
    except ValueError as e:
        p.error(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
