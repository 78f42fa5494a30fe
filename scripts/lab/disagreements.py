"""Where the judge's reward and the strict rule part ways, sample by sample: what the judge pays that the rule refuses
(a right answer in another form, or a wrong one), what it refuses that the rule pays, and what its guard voided.

It reads the dumps verl writes of a judge-rewarded arm: ``<run>_rollouts/<step>.jsonl``
(``trainer.rollout_data_dir``: every training sample of every step, what the policy was paid for) and the last
``<run>_val/<step>.jsonl`` (``trainer.validation_data_dir``: greedy answers; judge-graded when the judge is served,
rule-graded otherwise: then every row has no verdict). Their rows carry the reward (``score``), the rule's grade
(``rule_score``) and the judge's own: a pointwise judge's (``reward_fns.llm_judge``: arms judge, route, flaky_*) its
verdict (``judge_score``, -1 without one) and the guard's flags; a pairwise judge's (``reward_fns.pairwise_judge``:
arms pairwise_ref, tournament) its win share (``judge_wins``, -1 when the score is no win share) and the share of its
comparisons the guard voided (``judge_guarded``). Files may be gzipped (``.jsonl.gz``) and may sit in ``val/`` or
``rollouts/`` below the experiment folder. A dump none of whose rows has ``judge_score`` or ``judge_wins`` (the rule,
the controls) is left out; in one that has, every row must carry its kind's keys. Each sample (abstained ones aside:
they carry no reward) falls in at most one class, graded by the rules (``reward_fns.gsm8k``), never by the guard's
reader:

* ``other_form`` (a): paid (``score`` > 0), the rule refuses, and the strict or the flexible rule (the last number of
  the answer) pays it: right in another form;
* ``paid_wrong`` (b): paid, and no rule pays it (``#### 18/5`` for 18: the strict rule reads no number, the flexible
  one 5);
* ``refused_right`` (c): not paid, the rule pays (``no_verdict``: of which the judge gave no verdict);
* ``guard_voided`` (d): nothing was paid and the guard voided a verdict: a pointwise verdict that pays
  (``judge_score`` > 0; ungrounded, contradiction or unverified), or any of a pairwise answer's comparisons
  (``judge_guarded`` > 0); ``right`` the rule pays (the guard took a right answer away), ``wrong`` it refuses (the
  guard stopped a wrong pay).

Counts, rates (over the samples) and 3 examples per class (answers clipped to 200 characters), per run, per arm
(its seeds together) and per instance (an experiment folder; a folder of ``instance_<k>`` folders is each of them),
and each arm over all instances. ``scripts.lab.scorecard`` adds each instance's to ``report.json``
(``instances.<i>.disagreements``) and a table to ``scorecard.md``.

    python -m scripts.lab.disagreements runs/card --out runs/card/disagreements.json
    python -m scripts.lab.disagreements runs/a runs/b --out d.json --md d.md

``--out`` and ``--md`` are two files, neither a folder nor in a run's dump folder (``<run>_val``, ``<run>_rollouts``),
where a later read would take them for dumps; else exit 2.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

from data_prep.files.errors import DataError
from data_prep.files.outputs import write_json, write_text
from data_prep.files.readers import read_jsonl
from reward_fns import gsm8k
from scripts.report.render import md_table

CLASSES = ("other_form", "paid_wrong", "refused_right", "guard_voided")
LABELS = {
    "other_form": "(a) paid, rule refuses, right in another form",
    "paid_wrong": "(b) paid, wrong",
    "refused_right": "(c) refused, rule pays",
    "guard_voided": "(d) guard voided",
}
GUARD = ("judge_ungrounded", "judge_contradiction", "judge_unverified")  # reward_fns.guard's problems
#: each judge's verdict key (its rows have it) and the keys every row of its dumps needs
VERDICT = {"pointwise": "judge_score", "pairwise": "judge_wins"}
NEEDED = {
    "pointwise": ("output", "gts", "score", "rule_score", "judge_score"),
    "pairwise": ("output", "gts", "score", "rule_score", "judge_wins", "judge_guarded"),
}
NUMBERS = ("score", "rule_score", "judge_score", "judge_wins", "judge_guarded", *GUARD, "judge_abstained")
SOURCES = ("rollouts", "val")  # trainer.rollout_data_dir, trainer.validation_data_dir
CLIP, EXAMPLES = 200, 3
_RUN = re.compile(r"^(.+)_(val|rollouts)$")
_SEED = re.compile(r"^(.+)_s(\d+)$")


def clip(text: object, limit: int = CLIP) -> str:
    """``text`` in at most ``limit`` characters: its start and its end (where the answer is) around `` … ``."""
    text = str(text)
    if len(text) <= limit:
        return text
    head = (limit - 3) // 2
    return text[:head] + " … " + text[-(limit - 3 - head) :]


def right_in_other_form(output: object, gts: object) -> bool:
    """Whether the strict or the flexible rule (``reward_fns.gsm8k``) pays the answer."""
    return any(gsm8k.compute_score(solution_str=output, ground_truth=gts, mode=m)["score"] > 0 for m in gsm8k.MODES)


def no_verdict(row: dict) -> bool:
    """Whether the judge gave the sample no verdict (pointwise: ``judge_score`` -1; pairwise: no win share)."""
    return row.get("judge_score", row.get("judge_wins", -1.0)) < 0


def voided(row: dict) -> list[str]:
    """The guard's flags of a verdict it voided: a pointwise verdict that pays, a pairwise answer's comparisons."""
    if "judge_wins" in row:
        return ["judge_guarded"] if row["judge_guarded"] > 0 else []
    return [k for k in GUARD if row.get(k, 0.0) > 0] if row["judge_score"] > 0 else []


def classify(row: dict) -> str | None:
    """The class of one judge-graded sample (``CLASSES``), or None when the reward and the rule agree."""
    paid, rule = row["score"] > 0, row["rule_score"] > 0
    if not paid and voided(row):
        return "guard_voided"
    if paid and not rule:
        return "other_form" if right_in_other_form(row["output"], row["gts"]) else "paid_wrong"
    if rule and not paid:
        return "refused_right"
    return None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    return float(value)


def read_dump(path: str) -> list[dict] | None:
    """The rows of one dump, checked row by row; None when it is no judge-graded dump (no row has ``judge_score`` or
    ``judge_wins``). ValueError naming the file and the row: unreadable, a row of both kinds, a row without one of its
    kind's ``NEEDED``, a non-number grade or a reference that is no number."""
    try:
        rows = read_jsonl(path)
    except DataError as e:
        raise ValueError(str(e)) from None
    kinds = [k for k, key in VERDICT.items() if any(key in row for row in rows)]
    if not kinds:
        return None
    if len(kinds) > 1:
        raise ValueError(f"{path}: rows of a pointwise (judge_score) and a pairwise (judge_wins) judge in one dump")
    needed = NEEDED[kinds[0]]
    for i, row in enumerate(rows, 1):
        missing = [k for k in needed if k not in row]
        if missing:
            raise ValueError(
                f"{path}: row {i}: no {', '.join(missing)} (a {kinds[0]} judge's dump has {', '.join(needed)})"
            )
        for k in NUMBERS:
            if k in row and _number(row[k]) is None:
                raise ValueError(f"{path}: row {i}: {k} is not a number: {row[k]!r}")
        try:
            gsm8k.reference_number(row["gts"])
        except ValueError as e:
            raise ValueError(f"{path}: row {i}: {e}") from None
    return rows


def dumps(folder: str) -> list[tuple[int, str]]:
    """``(step, path)`` of the ``<step>.jsonl`` / ``<step>.jsonl.gz`` files in ``folder``, by step; ValueError for a
    step written twice."""
    found: dict[int, str] = {}
    for f in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        m = re.fullmatch(r"(\d+)\.jsonl(\.gz)?", f)
        if m:
            step = int(m.group(1))
            if step in found:
                raise ValueError(f"{folder}: step {step} dumped twice ({os.path.basename(found[step])} and {f})")
            found[step] = os.path.join(folder, f)
    return sorted(found.items())


def _empty() -> dict:
    return {
        "steps": [],
        "runs": 0,
        "files": 0,
        "samples": 0,
        "abstained": 0,
        "no_verdict": 0,
        "paid": 0,
        "rule_paid": 0,
        "classes": {c: {"count": 0} for c in CLASSES},
        "examples": {c: [] for c in CLASSES},
    }


def _example(row: dict, step: int, cls: str) -> dict:
    """The sample as the rules read it (``strict``, ``flexible``: the number each takes, or none) and as it was paid."""
    read = {m: gsm8k.extract_answer(row["output"], m) for m in gsm8k.MODES}
    verdict = "judge_wins" if "judge_wins" in row else "judge_score"
    ex = {
        "step": step,
        "reference": str(row["gts"]),
        **{m: "none" if v is None else str(v) for m, v in read.items()},
        "score": row["score"],
        verdict: row[verdict],
        "rule_score": row["rule_score"],
        "output": clip(row["output"]),
    }
    if cls == "guard_voided":
        ex["guard"] = voided(row)
    return ex


def tally(files: list[tuple[int, list[dict]]]) -> dict:
    """One summary of ``(step, rows)`` dumps: counts (``finish`` adds the rates) and the first examples of each
    class."""
    s = _empty()
    for step, rows in files:
        s["files"] += 1
        s["steps"] = [min(s["steps"] + [step]), max(s["steps"] + [step])]
        for row in rows:
            if row.get("judge_abstained", 0.0) > 0:  # no reward at all: left out of its group and of the loss
                s["abstained"] += 1
                continue
            s["samples"] += 1
            s["no_verdict"] += no_verdict(row)
            s["paid"] += row["score"] > 0
            s["rule_paid"] += row["rule_score"] > 0
            cls = classify(row)
            if cls is None:
                continue
            c = s["classes"][cls]
            c["count"] += 1
            if cls == "refused_right":
                c["no_verdict"] = c.get("no_verdict", 0) + no_verdict(row)
            if cls == "guard_voided":
                key = "right" if row["rule_score"] > 0 else "wrong"
                c[key] = c.get(key, 0) + 1
            if len(s["examples"][cls]) < EXAMPLES:
                s["examples"][cls].append(_example(row, step, cls))
    return finish(s)


def finish(s: dict) -> dict:
    """``s`` with its rates: each class's and ``disagree``'s (samples in any class) count over ``samples``."""
    n = s["samples"]
    s["classes"]["refused_right"].setdefault("no_verdict", 0)
    s["classes"]["guard_voided"].setdefault("right", 0)
    s["classes"]["guard_voided"].setdefault("wrong", 0)
    for c in s["classes"].values():
        c["rate"] = c["count"] / n if n else None
    count = sum(c["count"] for c in s["classes"].values())
    s["disagree"] = {"count": count, "rate": count / n if n else None}
    return s


def merge(summaries: list[dict]) -> dict:
    """The summaries together (counts added, steps spanned, the first examples of each class)."""
    s = _empty()
    for x in summaries:
        for k in ("runs", "files", "samples", "abstained", "no_verdict", "paid", "rule_paid"):
            s[k] += x[k]
        if x["steps"]:
            s["steps"] = [min(s["steps"][:1] + x["steps"][:1]), max(s["steps"][1:] + x["steps"][1:])]
        for cls in CLASSES:
            for k, v in x["classes"][cls].items():
                if k != "rate":
                    s["classes"][cls][k] = s["classes"][cls].get(k, 0) + v
            s["examples"][cls] = (s["examples"][cls] + x["examples"][cls])[:EXAMPLES]
    return finish(s)


def run_of(name: str) -> tuple[str, int]:
    """``(arm, seed)`` of a ``scripts.lab.policy_learns`` run folder's name (``judge``, ``judge_s1``)."""
    m = _SEED.match(name)
    return (m.group(1), int(m.group(2))) if m else (name, 0)


def run_folders(out: str) -> dict[str, dict[str, str]]:
    """``{run: {"val": folder, "rollouts": folder}}``: the dump folders in ``out`` and in its ``val/`` and
    ``rollouts/`` (as kept under docs/results)."""
    found: dict[str, dict[str, str]] = {}
    for where in (out, os.path.join(out, "val"), os.path.join(out, "rollouts")):
        for f in sorted(os.listdir(where)) if os.path.isdir(where) else []:
            m = _RUN.match(f)
            if m and os.path.isdir(os.path.join(where, f)) and dumps(os.path.join(where, f)):
                found.setdefault(m.group(1), {}).setdefault(m.group(2), os.path.join(where, f))
    return found


def run_summary(folders: dict[str, str]) -> dict:
    """One run's ``{"rollouts": ..., "val": ...}`` (each source it has judge-graded dumps of; val: its last step)."""
    res = {}
    for source in SOURCES:
        files = dumps(folders[source]) if source in folders else []
        files = files[-1:] if source == "val" else files
        read = [(step, read_dump(path)) for step, path in files]
        graded = [(step, rows) for step, rows in read if rows is not None]
        if graded:
            res[source] = {**tally(graded), "runs": 1}
    return res


def instance(
    out: str, arms: list[str] | None = None, seeds: list[int] | None = None, errors: dict | None = None
) -> dict:
    """One experiment's ``{"runs": {run: {source: summary}}, "arms": {arm: {source: summary}}}`` over its
    judge-graded runs (only those of ``arms`` x ``seeds`` when given); empty ones when it has none. A dump it cannot
    read raises ``ValueError``; with ``errors`` (a dict) that run is left out instead and ``errors[run]`` says why."""
    runs = {}
    for name, folders in run_folders(out).items():
        arm, seed = run_of(name)
        if (arms is None or arm in arms) and (seeds is None or seed in seeds):
            try:
                got = run_summary(folders)
            except ValueError as e:
                if errors is None:
                    raise
                errors[name] = str(e)
                continue
            if got:
                runs[name] = got
    by_arm: dict[str, dict[str, list[dict]]] = {}
    for name, got in runs.items():
        for source, s in got.items():
            by_arm.setdefault(run_of(name)[0], {}).setdefault(source, []).append(s)
    return {
        "runs": {name: {src: _counts(s) for src, s in got.items()} for name, got in runs.items()},
        "arms": {arm: {src: merge(v) for src, v in sorted(srcs.items())} for arm, srcs in sorted(by_arm.items())},
    }


def _counts(s: dict) -> dict:
    return {k: v for k, v in s.items() if k != "examples"}


def pooled(instances: dict[str, dict]) -> dict:
    """Each arm's summary per source over all the instances."""
    by_arm: dict[str, dict[str, list[dict]]] = {}
    for res in instances.values():
        for arm, srcs in res.get("arms", {}).items():
            for source, s in srcs.items():
                by_arm.setdefault(arm, {}).setdefault(source, []).append(s)
    return {arm: {src: merge(v) for src, v in sorted(srcs.items())} for arm, srcs in sorted(by_arm.items())}


def _share(c: dict) -> str:
    """``count (rate%`` (the caller closes the bracket)."""
    rate = "n/a" if c["rate"] is None else f"{100 * c['rate']:.2f}%"
    return f"{c['count']} ({rate}"


def _cell(s: dict, cls: str) -> str:
    c = s["classes"][cls]
    extra = f"; {c['right']} right / {c['wrong']} wrong" if cls == "guard_voided" else ""
    extra += f"; {c['no_verdict']} no verdict" if cls == "refused_right" and c["no_verdict"] else ""
    return f"{_share(c)}{extra})"


def table(instances: dict[str, dict]) -> str:
    """One row per instance x arm x source: the samples, the classes' counts (rates) and the disagreements."""
    head = ["instance", "arm", "source", "runs", "steps", "samples", "no verdict", *[LABELS[c] for c in CLASSES], "all"]
    rows = []
    for name, res in instances.items():
        for arm, srcs in res.get("arms", {}).items():
            for source, s in srcs.items():
                steps = "-".join(str(x) for x in sorted(set(s["steps"])))
                cells = [name, arm, source, str(s["runs"]), steps, str(s["samples"]), str(s["no_verdict"])]
                rows.append([*cells, *[_cell(s, c) for c in CLASSES], _share(s["disagree"]) + ")"])
    return md_table(head, rows, "lllrl" + "r" * (len(head) - 5))


def examples(arms: dict[str, dict]) -> str:
    """Each arm's examples per source and class, a line each."""
    lines = []
    for arm, srcs in arms.items():
        for source, s in srcs.items():
            for cls in CLASSES:
                for ex in s["examples"][cls]:
                    why = f", guard {'/'.join(ex['guard'])}" if "guard" in ex else ""
                    verdict = f"wins {ex['judge_wins']}" if "judge_wins" in ex else f"verdict {ex['judge_score']}"
                    lines.append(
                        f"- {arm} {source} step {ex['step']}, {LABELS[cls]}: reference {ex['reference']}, strict "
                        f"{ex['strict']}, flexible {ex['flexible']}, {verdict}, rule {ex['rule_score']}, paid "
                        f"{ex['score']}{why}: `{' '.join(ex['output'].split()).replace('`', chr(39))}`"
                    )
    return "\n".join(lines)


def markdown(res: dict) -> str:
    """The report of ``analyse``: one table (each instance, then every instance together) and the examples."""
    rows = {**res["instances"], **({"all": {"arms": res["arms"]}} if len(res["instances"]) > 1 else {})}
    return "\n".join(
        [
            "# Where the judge's reward and the strict rule part ways",
            "",
            "Rates over the samples (abstained ones aside). (d): the judge's verdict paid and its guard voided it; "
            "right / wrong: whether the rule pays the answer.",
            "",
            table(rows),
            "",
            "## Examples (the first of each class; answers clipped)",
            "",
            examples(res["arms"]) or "none",
            "",
        ]
    )


def instance_folders(paths: list[str]) -> dict[str, str]:
    """``{label: folder}``: each path, or its ``instance_<k>`` folders when it has them and no dumps of its own;
    ValueError for a path that is no folder or is named twice."""
    found: dict[str, str] = {}
    for path in paths:
        if not os.path.isdir(path):
            raise ValueError(f"{path}: no such folder")
        subs = sorted(f for f in os.listdir(path) if re.fullmatch(r"instance_\d+", f))
        for folder in [os.path.join(path, f) for f in subs] if subs and not run_folders(path) else [path]:
            label = os.path.normpath(folder)
            if label in found:
                raise ValueError(f"{folder}: named twice")
            found[label] = folder
    return found


def analyse(paths: list[str]) -> dict:
    """``{"instances": {label: instance(...)}, "arms": pooled(...)}`` of the experiment folders in ``paths``;
    ValueError when none holds a dump verl wrote or none of those is judge-graded."""
    folders = instance_folders(paths)
    if not any(run_folders(f) for f in folders.values()):
        raise ValueError(
            f"no <run>_val or <run>_rollouts folder with <step>.jsonl[.gz] dumps in {', '.join(folders)} (nor in its "
            "val/ or rollouts/)"
        )
    res = {label: instance(folder) for label, folder in folders.items()}
    if not any(r["arms"] for r in res.values()):
        raise ValueError(
            f"no dump in {', '.join(folders)} holds per-sample judge and rule grades (judge_score or judge_wins, "
            "rule_score): only a judge-rewarded arm's (judge, route, flaky_*, pairwise_ref, tournament) do"
        )
    return {"instances": res, "arms": pooled(res)}


def output_problem(out: str, md: str | None) -> str | None:
    """Why ``--out`` and ``--md`` cannot be written, or None: a folder, both the same file, a file in a run's dump
    folder (a later read would take it for a dump)."""
    paths = {"--out": out, **({"--md": md} if md is not None else {})}
    for flag, path in paths.items():
        if os.path.isdir(path):
            return f"{flag} {path}: a folder; give the file to write"
        folder = os.path.basename(os.path.dirname(os.path.abspath(path)))
        if _RUN.match(folder):
            return f"{flag} {path}: in the dump folder ({folder}), whose files are read as dumps: write it elsewhere"
    if md is not None and os.path.realpath(out) == os.path.realpath(md):
        return f"--out and --md name the same file ({out}): one report would replace the other"
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m scripts.lab.disagreements",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "run_dir", nargs="+", help="an experiment folder (scripts.lab.policy_learns --out), or its instances'"
    )
    p.add_argument("--out", required=True, help="the JSON report to write")
    p.add_argument("--md", default=None, help="also write the Markdown report here (it is printed either way)")
    argv = sys.argv[1:] if argv is None else argv
    a = p.parse_args(argv)
    problem = output_problem(a.out, a.md)
    if problem:
        p.error(problem)
    try:
        res = analyse(a.run_dir)
    except ValueError as e:
        p.error(str(e))
    write_json(a.out, {**res, "command": ["python", "-m", "scripts.lab.disagreements", *argv]})
    text = markdown(res)
    if a.md:
        write_text(a.md, text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
