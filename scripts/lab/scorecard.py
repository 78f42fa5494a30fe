"""The scorecard of ``python -m scripts.lab.policy_learns --arms rule,judge,route,random --seeds 0,1 [--instances 0,1]``
each arm's held-out accuracy before and after each seed's run, its gain, and its gain over the rule's with a 95%
bootstrap interval (``scorecard_stats``: over judge instances, then seeds, then questions). The rule's own gain comes
with its interval, and no ratio gets a verdict when that interval reaches 0. Targets: a judge-rewarded arm's (``judge``,
``route``, ``pairwise_ref``, ``tournament``) ratio mean >= 0.9 with lower bound >= 0.8; each control's upper bound <=
0.3 (a lower bound above 0.3: not met; an interval across it: no verdict). Accuracy is the strict rule's grade of verl's
greedy validation answers (``<run>_val/<step>.jsonl``), paired by question (a prompt dumped twice is graded by its first
answer, the repeats counted in a warning); "before" is the start policy, shared by every run of an instance. A run whose
last validation is not at its last step (``--steps``: stopped, crashed, or only its step-0 validation) is refused,
naming it. With the testbed's held-out stories in the validation (``eval_data/heldout``), the same again for them (key
``heldout``). Beside them, where the judge's reward and the rule part ways, per judge-graded run's dumps
(``scripts.lab.disagreements``: key ``disagreements``, each instance's and every instance's). Writes
``scorecard.md``, ``scorecard.png`` and ``report.json``'s keys. Rerun on a finished folder (one experiment, or the
instances of one; ``--arms``, ``--seeds`` and ``--instances`` each list a value once):

    python -m scripts.lab.scorecard runs/card --arms rule,judge,random,format --seeds 0,1,2
    python -m scripts.lab.scorecard runs/card --instances 0,1,2 --arms rule,judge,route,random --seeds 0,1
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys

import numpy as np

from data_prep.files.outputs import write_json, write_text
from data_prep.files.readers import read_jsonl
from reward_fns import gsm8k
from scripts.console import masked
from scripts.lab import disagreements
from scripts.lab.scorecard_stats import Instance, bootstrap, fmt, rule_learned, verdict
from scripts.report.render import md_table

LOG = logging.getLogger(__name__)


def run_name(arm: str, seed: int) -> str:
    """``scripts.lab.policy_learns``'s run folders: the arm for seed 0, else ``<arm>_s<seed>``."""
    return arm if seed == 0 else f"{arm}_s{seed}"


HELDOUT_DATA = os.path.join(
    "eval_data", "heldout", "test.parquet"
)  # scripts.lab.policy_learns' held-out validation file
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
    last validation), of one ``split`` (``test`` / ``heldout``; None: both); {} when there is none. A prompt dumped
    again is graded by its first answer; a warning counts the repeats."""
    folder = os.path.join(out, f"{name}_val")
    steps = dumped_steps(folder)
    step = steps[-1] if step is None and steps else step
    if step not in steps:
        return {}
    heldout = heldout_questions(out) if split else ()
    grades: dict[str, float] = {}
    repeats = 0
    for r in read_jsonl(os.path.join(folder, f"{step}.jsonl")):
        prompt = str(r.get("input"))
        if split is not None and split_of(prompt, heldout) != split:
            continue
        if prompt in grades:
            repeats += 1
            continue
        answer, reference = r.get("output", ""), r.get("gts")
        grades[prompt] = gsm8k.compute_score(solution_str=answer, ground_truth=reference, mode="strict")["acc"]
    if repeats:
        where = f"run {name}, step {step}" + (f" ({split})" if split else "")
        LOG.warning(f"{where}: {repeats} row(s) repeat an earlier prompt: left out, each graded by its first answer")
    return grades


def last_step(out: str, name: str, steps: int) -> int:
    """Run ``name``'s last validation step, which must be its last training step ``steps``; ValueError (naming the
    run, unusable) when it is not: a run stopped or crashed partway, or one that has only its step-0 validation."""
    if steps < 1:  # step 0 is the start policy's validation, before any training: never an "after"
        raise ValueError(f"run {name}: its last step must be >= 1, got {steps}")
    folder = os.path.join(out, f"{name}_val")
    got = dumped_steps(folder)
    if not got or got[-1] != steps:
        at = f"step {got[-1]}" if got else "no step"
        raise ValueError(
            f"run {name}: its last validation ({folder}) is at {at}, not at its last step {steps} (stopped, crashed "
            "or never trained): unusable, refused"
        )
    return steps


def instance(out: str, arms: list[str], seeds: list[int], steps: int, split: str | None) -> Instance | None:
    """One experiment folder's grades of one split (None: every validation question): "before" from the first run's
    step-0 validation, "after" from each run's last (``last_step``); None when step 0 has no question of the split."""
    base = graded(out, run_name(arms[0], seeds[0]), 0, split)
    if not base:
        return None
    questions = sorted(base)
    after = {}
    for arm in arms:
        rows = []
        for seed in seeds:
            name = run_name(arm, seed)
            got = graded(out, name, last_step(out, name, steps), split)
            missing = [q for q in questions if q not in got]
            if missing:
                raise ValueError(f"run {name}: its last validation lacks {len(missing)} of the questions")
            rows.append([got[q] for q in questions])
        after[arm] = np.array(rows, dtype=float)
    return Instance(np.array([base[q] for q in questions], dtype=float), after)


def describe(inst: Instance, arms: list[str], seeds: list[int]) -> dict:
    """``{"questions", "arms": {arm: {"seeds": {seed: {"before", "after"}}, "gain_mean", "gain_sd"}}, "gain",
    "ratios", "rule_gain"}``: one instance's numbers and its own bootstrap (seeds, then questions)."""
    before = float(inst.before.mean())
    res = {"questions": len(inst.before), "arms": {}}
    for arm in arms:
        per_seed = inst.after[arm].mean(axis=1) - before
        res["arms"][arm] = {
            "seeds": {str(s): {"before": before, "after": float(a)} for s, a in zip(seeds, inst.after[arm].mean(1))},
            "gain_mean": float(per_seed.mean()),
            "gain_sd": float(per_seed.std(ddof=1)) if len(seeds) > 1 else None,
        }
    return {**res, **_stats(bootstrap([inst], arms), arms)}


def _stats(stats: dict, arms: list[str]) -> dict:
    out = {"gain": stats["gain"], "bootstrap": stats["bootstrap"]}
    if "rule" in arms:
        out.update(ratios=stats["ratio"], rule_gain=stats["gain"]["rule"])
    return out


def splits(out: str, arms: list[str], seeds: list[int], steps: int) -> dict[str, Instance]:
    """One experiment's grades: ``{"test": ...}``, and ``"heldout"`` for the held-out stories' questions when the
    validation has them (then "test" is the rest; without them, every question)."""
    heldout = heldout_questions(out)
    test = instance(out, arms, seeds, steps, "test" if heldout else None)
    if test is None:
        raise ValueError(
            f"no start-policy validation (step 0) in {out}/{run_name(arms[0], seeds[0])}_val: the first run "
            "validates before training"
        )
    return {"test": test, **({"heldout": instance(out, arms, seeds, steps, "heldout")} if heldout else {})}


def summarize(out: str, arms: list[str], seeds: list[int], steps: int, grades: dict | None = None) -> dict:
    """One experiment's scorecard: ``describe`` of the test split, and the same under ``"heldout"`` for the held-out
    stories' questions when the validation has them (``grades``: its ``splits``, when already read)."""
    grades = grades or splits(out, arms, seeds, steps)
    res = describe(grades["test"], arms, seeds)
    if "heldout" in grades:
        res["heldout"] = describe(grades["heldout"], arms, seeds)
    res["disagreements"] = disagreed(out, arms, seeds)
    return res


def disagreed(out: str, arms: list[str], seeds: list[int]) -> dict:
    """``disagreements.instance`` of the runs; a run with a dump it cannot read is left out, and ``errors`` names it
    and why (the scorecard stands, with the other runs)."""
    errors: dict[str, str] = {}
    res = disagreements.instance(out, arms, seeds, errors)
    return {**res, "errors": errors} if errors else res


def disagreement_lines(found: dict[str, dict]) -> list[str]:
    """The Markdown section of ``{instance: disagreements}``: their table, or why there is none."""
    head = ["## Where the judge's reward and the strict rule part ways", ""]
    errors = [
        f"- {name}, run {run}: not read: {why}" for name, d in found.items() for run, why in d.get("errors", {}).items()
    ]
    if not any(d.get("arms") for d in found.values()):
        why = "no dump of these runs holds per-sample judge and rule grades (judge_score or judge_wins, rule_score)"
        return [*head, *(errors or [why]), ""]
    note = (
        "Rates over the samples (training rollouts: every step; val: the last validation). (d): the verdict paid "
        "and the guard voided it; right / wrong: whether the rule pays it. Examples: "
        "`python -m scripts.lab.disagreements`."
    )
    return [*head, note, "", disagreements.table(found), "", *errors, ""]


def pooled(folders: list[str], arms: list[str], seeds: list[int], steps: int) -> dict:
    """The scorecard over instances (``folders``: one experiment each): ``{"instances": {name: summarize(...)},
    "pooled": {"test": ..., "heldout": ...}}``, each pooled split ``{"gain", "ratios", "rule_gain"}`` from a
    bootstrap over instances, then seeds, then questions."""
    res = {"instances": {}, "pooled": {}}
    grades: dict[str, list[Instance]] = {"test": [], "heldout": []}
    for f in folders:
        own = splits(f, arms, seeds, steps)
        res["instances"][os.path.basename(os.path.normpath(f))] = summarize(f, arms, seeds, steps, own)
        for split, inst in own.items():
            grades[split].append(inst)
    for split, insts in grades.items():
        if insts and len(insts) == len(folders):
            res["pooled"][split] = _stats(bootstrap(insts, arms), arms)
    res["disagreements"] = disagreements.pooled({k: v["disagreements"] for k, v in res["instances"].items()})
    return res


def verdicts(res: dict) -> list[str]:
    """One line per target: the rule's own gain first, then each arm's verdict."""
    stats = {"gain": res["gain"], "ratio": res.get("ratios", {}), "bootstrap": res["bootstrap"]}
    lines = [rule_learned(stats)[1]] if "rule" in res["gain"] else []
    for arm in res.get("ratios", {}):
        word, line = verdict(stats, arm)
        if word != "no target":
            lines.append(f"{line} {word}" if word != "no verdict" else line)
    return lines


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


def markdown(res: dict, seeds: list[int], name: str = "this experiment") -> str:
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
    if "disagreements" in res:
        lines += disagreement_lines({name: res["disagreements"]})
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


def write(out: str, arms: list[str], seeds: list[int], steps: int, log=print, command: list[str] | None = None) -> dict:
    res = summarize(out, arms, seeds, steps)
    path = os.path.join(out, "report.json")
    try:
        report = json.load(open(path, encoding="utf-8")) if os.path.exists(path) else {}
    except ValueError as e:
        raise ValueError(f"{path}: not a report ({e}); move it away") from None
    if not isinstance(report, dict):
        raise ValueError(f"{path}: not a report (a JSON object), got a {type(report).__name__}; move it away")
    report.update(res, command=masked(command or sys.argv), commit=_commit())
    write_json(path, report)
    text = markdown(res, seeds, os.path.basename(os.path.normpath(out)))
    write_text(os.path.join(out, "scorecard.md"), text)
    figure(res, seeds, os.path.join(out, "scorecard.png"))
    log(text)
    return report


def pooled_markdown(res: dict, seeds: list[int]) -> str:
    """The pooled table (each instance's ratio beside the pooled one) per split, then each instance's own table."""
    lines = [f"# Scorecard over {len(res['instances'])} judge instances x {len(seeds)} seeds", ""]
    for split, title in (("test", "test split"), ("heldout", "held-out stories")):
        if split not in res["pooled"]:
            continue
        p = res["pooled"][split]
        per = {k: (v if split == "test" else v.get("heldout")) for k, v in res["instances"].items()}
        arms = list(p["gain"])
        head = ["arm", "pooled gain (95% interval)", "pooled / rule gain (95% interval)", *per]
        rows = []
        for arm in arms:
            g, r = p["gain"][arm], p.get("ratios", {}).get(arm)
            ratio = "1" if arm == "rule" else (f"{fmt(r['mean'])} ({fmt(r['lo'])} to {fmt(r['hi'])})" if r else "n/a")
            cells = [
                fmt(v["arms"][arm]["gain_mean"])
                + ("" if arm == "rule" else f" ({fmt(v.get('ratios', {}).get(arm, {}).get('mean'))}x)")
                for v in per.values()
            ]
            rows.append([arm, f"{fmt(g['mean'])} ({fmt(g['lo'])} to {fmt(g['hi'])})", ratio, *cells])
        stats = {"gain": p["gain"], "ratios": p.get("ratios", {}), "bootstrap": p["bootstrap"]}
        lines += [
            f"## Pooled, {title}",
            "",
            "Instance columns: the arm's gain (its ratio to that instance's rule gain).",
            "",
            md_table(head, rows),
            "",
            *[f"- {v}" for v in verdicts(stats)],
            "",
        ]
    found = {k: v["disagreements"] for k, v in res["instances"].items()}
    every = {"all": {"arms": res["disagreements"]}} if len(found) > 1 else {}
    lines += disagreement_lines({**found, **every})
    for name, v in res["instances"].items():
        own = {k: x for k, x in v.items() if k != "disagreements"}  # in the table above
        lines += [f"## Instance {name}", "", markdown(own, seeds).split("\n", 2)[2], ""]
    return "\n".join(lines)


def pooled_figure(res: dict, seeds: list[int], path: str) -> str:
    """One point per run (its gain; a marker per instance) and each arm's pooled gain (bar), per split."""
    from scripts.report.render import pyplot, save_fig

    plt = pyplot()
    splits = [s for s in ("test", "heldout") if s in res["pooled"]]
    fig, axes = plt.subplots(1, len(splits), figsize=(6 * len(splits), 4), squeeze=False)
    markers = "os^vDP*X"
    for ax, split in zip(axes[0], splits):
        arms = list(res["pooled"][split]["gain"])
        for i, arm in enumerate(arms):
            ax.bar(i, res["pooled"][split]["gain"][arm]["mean"], color="lightgray", edgecolor="k")
            for j, v in enumerate(res["instances"].values()):
                a = (v if split == "test" else v["heldout"])["arms"][arm]["seeds"]
                xs = [i - 0.25 + 0.5 * (j + 0.5) / len(res["instances"])] * len(seeds)
                ax.scatter(xs, [a[str(s)]["after"] - a[str(s)]["before"] for s in seeds], marker=markers[j % 8], s=16)
        ax.axhline(0, color="k", lw=0.8)
        ax.set_xticks(range(len(arms)), arms)
        ax.set(title=f"{split}: one point per run, a marker per instance", ylabel="strict accuracy gain")
    return save_fig(fig, path)


def write_pooled(
    out: str, folders: list[str], arms: list[str], seeds: list[int], steps: int, command: list[str] | None = None
) -> dict:
    """The scorecard over the instances in ``folders``: ``report.json``, ``scorecard.md``, ``scorecard.png`` in
    ``out``."""
    res, command = pooled(folders, arms, seeds, steps), masked(command or sys.argv)
    report = {**res, "arms": arms, "seeds": seeds, "steps": steps, "command": command, "commit": _commit()}
    write_json(os.path.join(out, "report.json"), report)
    write_text(os.path.join(out, "scorecard.md"), pooled_markdown(res, seeds))
    pooled_figure(res, seeds, os.path.join(out, "scorecard.png"))
    return report


def pooled_console(report: dict) -> str:
    """The pooled verdicts, a line each, for the end of a run."""
    lines = []
    for split, p in report["pooled"].items():
        stats = {"gain": p["gain"], "ratios": p.get("ratios", {}), "bootstrap": p["bootstrap"]}
        lines += [f"{split}: {v}" for v in verdicts(stats)]
    return "\n".join(lines)


def repeated(values: list) -> list:
    """The values listed more than once in ``values``, each once, in the order they first repeat."""
    seen: set = set()
    return list(dict.fromkeys(v for v in values if v in seen or seen.add(v)))


def listed(flag: str, value: str, kind=str) -> list:
    """``flag``'s comma-separated values (each a ``kind``); ValueError when there is none, one is no ``kind`` or one
    is repeated (naming it)."""
    items = [x.strip() for x in value.split(",") if x.strip()]
    if not items:
        raise ValueError(f"{flag} needs at least one value, got {value!r}")
    try:
        values = [kind(x) for x in items]
    except ValueError:
        raise ValueError(f"{flag}: comma-separated {kind.__name__} values, got {value!r}") from None
    twice = repeated(values)
    if twice:
        raise ValueError(f"{flag}: {', '.join(map(str, twice))} listed more than once in {value!r}: list each once")
    return values


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m scripts.lab.scorecard",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("out", help="the scripts.lab.policy_learns folder")
    p.add_argument(
        "--arms", default="rule,judge,random,format", help="comma-separated (default rule,judge,random,format)"
    )
    p.add_argument("--seeds", default="0,1,2", help="comma-separated (default 0,1,2)")
    p.add_argument("--steps", type=int, default=100, help="each run's last step: its last validation (default 100)")
    p.add_argument("--instances", default=None, help="testbed seeds: the folders OUT/instance_<k> (pooled scorecard)")
    a = p.parse_args(argv)
    if not os.path.isdir(a.out):
        p.error(f"{a.out}: no such folder")
    try:
        arms, seeds = listed("--arms", a.arms), listed("--seeds", a.seeds, int)
        if a.instances is not None:
            folders = [os.path.join(a.out, f"instance_{k}") for k in listed("--instances", a.instances, int)]
            print(pooled_console(write_pooled(a.out, folders, arms, seeds, a.steps)))
        else:
            write(a.out, arms, seeds, a.steps)
    except ValueError as e:
        p.error(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
