"""The ledger of judge instances: evidence that accumulates across runs made on different days and machines. ``keep``
stores one finished experiment (``python -m scripts.lab.policy_learns``: one instance, or ``--instances`` folders) as a
small kept folder: ``grades.jsonl.gz`` (the strict rule's grade of every validation question, before and after each
arm's run, the scorecard's input) and ``ledger.json`` (each instance stamped with its commit, machine, date and
command, and the settings its arms ran with). ``pool`` reads any number of kept folders and gives the scorecard over
all their instances (``scorecard_stats.bootstrap``: instances, then seeds, then questions), so a run that adds two
instances strengthens the interval instead of replacing it.

Instances pool only when they **match**: the same arms' settings, read from each run's own launch line (every Hydra
override, the reward function and its ``reward_kwargs`` included, with the run's paths, its KV-cache and GPU-memory
sizes and its metrics file left out: those are the machine's, not the experiment's), and the same experiment
settings (``stage_settings.json`` without the testbed seed and the model path). Commits may differ (each is listed);
a mismatch is refused, naming the instance and the first setting that differs. An instance appears once (testbed
seed), whatever folders hold it.

    python -m scripts.lab.ledger keep runs/pw --dest docs/results/2026-11-28-pairwise_reward \\
        --arms rule,pairwise_ref,tournament --seeds 0 --machine "one H200" --commit 425df64 --date 2026-11-28
    python -m scripts.lab.ledger pool docs/results/*-pairwise_reward --arms rule,pairwise_ref --seeds 0
"""

from __future__ import annotations

import argparse
import glob
import gzip
import io
import json
import os
import re
import shlex
import sys

import numpy as np

from data_prep.files.outputs import write_json
from data_prep.files.readers import read_jsonl
from scripts.lab import scorecard
from scripts.lab.scorecard_stats import Instance, bootstrap, fmt, verdict

GRADES, LEDGER = "grades.jsonl.gz", "ledger.json"
#: overrides that say where a run ran and with what memory, not what it learned: left out of the match
MACHINE_KEYS = re.compile(
    r"(^|\.)(kv_cache_memory_bytes|gpu_memory_utilization|wait_for|model_path|default_local_dir|validation_data_dir|"
    r"rollout_data_dir|VERL_FILE_LOGGER_PATH|train_files|val_files|path)$"
)
_LAUNCH = "[launch] command: "


def arm_settings(out: str, run: str) -> list[str]:
    """Run ``run``'s Hydra overrides from its launch line (``logs/<run>.log``), sorted, without the machine's
    (``MACHINE_KEYS``; a ``pkg://`` value is kept: it names code, such as the reward). ValueError when there is
    none."""
    log = os.path.join(out, "logs", f"{run}.log")
    line = next((ln for ln in open(log, encoding="utf-8", errors="replace") if ln.startswith(_LAUNCH)), None)
    if line is None:
        raise ValueError(f"{log}: no launch line ({_LAUNCH!r}): not a run of scripts.launch")
    words = shlex.split(line[len(_LAUNCH) :])
    overrides = words[words.index("config") + 1 :] if "config" in words else words
    kept = []
    for o in overrides:
        key, _, value = o.partition("=")
        if value and (not MACHINE_KEYS.search(key.lstrip("+")) or value.startswith("pkg://")):
            kept.append(o)
    return sorted(kept)


def experiment_settings(out: str) -> dict:
    """The experiment's stage settings without what names the instance (testbed seed) or the machine (model path)."""
    s = json.load(open(os.path.join(out, "stage_settings.json"), encoding="utf-8"))
    s.pop("model", None)
    s["testbed_arg"] = [a for a in s.get("testbed_arg", []) if not a.startswith("--seed")]
    return s


def instance_name(out: str) -> str:
    """``word_problems seed <k>`` (the testbed seed names a judge instance), else the folder's name."""
    s = json.load(open(os.path.join(out, "stage_settings.json"), encoding="utf-8"))
    seed = next((a.split("=", 1)[1] for a in s.get("testbed_arg", []) if a.startswith("--seed=")), None)
    return f"{s.get('testbed')} seed {seed}" if seed is not None else os.path.basename(os.path.normpath(out))


def _bits(a: np.ndarray) -> str:
    """0/1 grades as a string (``"0110"``), as ``grades.jsonl.gz`` keeps them; ``_grades`` reads it back."""
    return "".join(str(int(v)) for v in a)


def _grades(bits: str) -> np.ndarray:
    return np.array([int(c) for c in bits], dtype=float)


def record(out: str, arms: list[str], seeds: list[int], steps: int, stamp: dict) -> tuple[dict, list[dict]]:
    """One experiment folder as ``(ledger entry, grade rows)``: the entry holds the stamp, the settings and the arms;
    the rows one per split (``before``, ``after_<arm>_seed<s>``, bit strings over the split's questions)."""
    name = instance_name(out)
    entry = {
        "instance": name,
        **stamp,
        "steps": steps,
        "seeds": seeds,
        "settings": experiment_settings(out),
        "arms": {a: arm_settings(out, scorecard.run_name(a, seeds[0])) for a in arms},
    }
    rows = []
    for split, inst in scorecard.splits(out, arms, seeds, steps).items():
        row = {"instance": name, "split": split, "before": _bits(inst.before)}
        for a in arms:
            row.update({f"after_{a}_seed{s}": _bits(inst.after[a][i]) for i, s in enumerate(seeds)})
        rows.append(row)
    return entry, rows


def _write_gz(path: str, rows: list[dict]) -> None:
    """JSON lines, gzip with no name or time in its header (the same rows give the same bytes)."""
    raw = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows).encode())
    with open(path, "wb") as f:
        f.write(raw.getvalue())


def keep(folders: list[str], dest: str, arms: list[str], seeds: list[int], steps: int, stamp: dict) -> dict:
    """Write ``dest/grades.jsonl.gz`` and ``dest/ledger.json`` for the experiment ``folders``; returns the ledger."""
    entries, rows = [], []
    for f in folders:
        e, r = record(f, arms, seeds, steps, stamp)
        entries.append(e)
        rows += r
    os.makedirs(dest, exist_ok=True)
    _write_gz(os.path.join(dest, GRADES), rows)
    ledger = {"instances": entries}
    write_json(os.path.join(dest, LEDGER), ledger)
    return ledger


def _mismatch(a: dict, b: dict, arms: list[str]) -> str | None:
    """The first setting in which two ledger entries differ for ``arms``, None when they match."""
    if a["steps"] != b["steps"]:
        return f"steps {a['steps']} != {b['steps']}"
    for k in sorted(set(a["settings"]) | set(b["settings"])):
        if a["settings"].get(k) != b["settings"].get(k):
            return f"setting {k}: {a['settings'].get(k)!r} != {b['settings'].get(k)!r}"
    for arm in arms:
        x, y = set(a["arms"].get(arm, [])), set(b["arms"].get(arm, []))
        if x != y:
            return f"arm {arm}: {sorted(x ^ y)[0]!r} in one only"
    return None


def load(folders: list[str], arms: list[str], seeds: list[int]) -> tuple[list[dict], dict[str, list[Instance]]]:
    """The ledger entries and per-split ``Instance``s of the kept ``folders`` (every instance once); ValueError
    naming what is missing or does not match (``_mismatch``)."""
    entries, grades, seen = [], {"test": [], "heldout": []}, set()
    for d in folders:
        ledger = json.load(open(os.path.join(d, LEDGER), encoding="utf-8"))
        rows = read_jsonl(os.path.join(d, GRADES))
        for e in ledger["instances"]:
            name = e["instance"]
            if name in seen:
                raise ValueError(f"{d}: instance {name!r} is already pooled from another folder (pool it once)")
            lacking = [a for a in arms if a not in e["arms"]] + [f"seed {s}" for s in seeds if s not in e["seeds"]]
            if lacking:
                raise ValueError(f"{d}: instance {name!r} has no {', '.join(map(str, lacking))}")
            if entries and (why := _mismatch(entries[0], e, arms)):
                raise ValueError(f"{d}: instance {name!r} does not match {entries[0]['instance']!r}: {why}")
            seen.add(name)
            entries.append(e)
            for r in (r for r in rows if r["instance"] == name):
                after = {a: np.stack([_grades(r[f"after_{a}_seed{s}"]) for s in seeds]) for a in arms}
                grades[r["split"]].append(Instance(_grades(r["before"]), after))
    return entries, {k: v for k, v in grades.items() if len(v) == len(entries) and v}


def pool(folders: list[str], arms: list[str], seeds: list[int]) -> dict:
    """``{"instances": [...stamps], "pooled": {split: bootstrap stats}}`` over every instance of ``folders``."""
    entries, grades = load(folders, arms, seeds)
    stamps = [{k: e.get(k) for k in ("instance", "commit", "machine", "date", "command")} for e in entries]
    return {"instances": stamps, "pooled": {split: bootstrap(insts, arms) for split, insts in grades.items()}}


def markdown(res: dict, arms: list[str]) -> str:
    lines = [f"# Ledger: {len(res['instances'])} judge instance(s)", ""]
    lines += [f"- {s['instance']}: commit {s['commit']}, {s['machine']}, {s['date']}" for s in res["instances"]]
    for split, stats in res["pooled"].items():
        lines += ["", f"## {split}", "", "| arm | gain (95% interval) | gain / rule gain (95% interval) | target |"]
        lines += ["| --- | ---: | ---: | --- |"]
        for a in arms:
            g, r = stats["gain"][a], stats["ratio"].get(a)
            ratio = "1" if a == arms[0] else f"{fmt(r['mean'])} ({fmt(r['lo'])} to {fmt(r['hi'])})"
            said = "" if a == arms[0] else " ".join(verdict(stats, a))
            lines.append(f"| {a} | {fmt(g['mean'])} ({fmt(g['lo'])} to {fmt(g['hi'])}) | {ratio} | {said} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m scripts.lab.ledger", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    sub = p.add_subparsers(dest="verb", required=True)
    k = sub.add_parser("keep", help="store finished experiments' grades and settings in a kept folder")
    k.add_argument("folders", nargs="+", help="experiment folders (one instance each)")
    k.add_argument("--dest", required=True)
    for name in ("--machine", "--commit", "--date", "--command"):
        k.add_argument(name, required=name != "--command", help="stamped on every instance")
    k.add_argument("--steps", type=int, default=100)
    q = sub.add_parser("pool", help="the scorecard over every instance of kept folders")
    q.add_argument("folders", nargs="+", help="kept folders (globs allowed)")
    for s in (k, q):
        s.add_argument("--arms", required=True, help="comma-separated, the rule first, e.g. rule,pairwise_ref")
        s.add_argument("--seeds", default="0", help="comma-separated (default 0)")
    args = p.parse_args(argv)
    try:
        args.arms, args.seeds = scorecard.listed("--arms", args.arms), scorecard.listed("--seeds", args.seeds, int)
        if args.verb == "keep":
            stamp = {k: getattr(args, k) for k in ("commit", "machine", "date", "command")}
            ledger = keep(args.folders, args.dest, args.arms, args.seeds, args.steps, stamp)
            print(f"kept {len(ledger['instances'])} instance(s) in {args.dest}")
            return 0
        folders = sorted({f for pattern in args.folders for f in glob.glob(pattern)} or args.folders)
        print(markdown(pool(folders, args.arms, args.seeds), args.arms), end="")
        return 0
    except (OSError, ValueError, KeyError) as e:
        print(f"ledger: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
