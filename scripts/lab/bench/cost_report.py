"""The report of ``python -m scripts.lab.bench.judge_cost``: each arm's median stage times over its finished runs, their
ratios to the base arm's, the runs, the arms' definitions, the machine and the commit (``cost.json``, ``cost.md``).
Runs of a round that stepped at the same time count only the steps they ran together (``together``: runs started in
one second do not step together, as the one without a judge starts stepping first).

A run is anything with ``arm``, ``round``, ``gpu``, ``rc``, ``seconds``, ``folder``, ``metrics`` and ``command``
(``scripts.lab.bench.children.Run``), and ``error`` (a run that exited 0 and still failed)."""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import statistics
import subprocess
from importlib import metadata

import scripts
from scripts.report.render import read_metrics
from scripts.report.summarize_run import MIN_BASE_S, STAGES

ROOT = scripts.ROOT
PACKAGES = ("torch", "vllm", "verl", "ray", "transformers")


def train_steps(path: str) -> list[dict]:
    """The training steps of a metrics file (rows with ``timing_s/step``), in file order."""
    return [r for r in read_metrics(path) if isinstance(r.get("timing_s/step"), (int, float))]


#: verl's stages between the step timer's end and the step's metrics (``RayPPOTrainer.fit``)
AFTER_STEP = ("timing_s/testing", "timing_s/stop_profile")


def span(row: dict) -> tuple[float, float] | None:
    """A training step's (start, end) on the clock: ``perf/step_end_unix_s`` is read as the step's metrics are
    computed, after its validation, so the stages after the step timer come off; None without the clock."""
    if "perf/step_end_unix_s" not in row:
        return None
    end = row["perf/step_end_unix_s"] - sum(row.get(k, 0.0) for k in AFTER_STEP)
    return end - row["timing_s/step"], end


def together(files: list[str], skip_first: int = 1) -> tuple[float, float] | None:
    """The clock window in which every file's run was stepping (after its first ``skip_first`` steps): from the
    latest first step's start to the earliest last step's end (``span``). None when there is no file, a file has no
    step with the clock, or the runs never stepped together."""
    spans = []
    for f in files:
        steps = [sp for r in train_steps(f)[skip_first:] if (sp := span(r))]
        if not steps:
            return None
        spans.append((steps[0][0], steps[-1][1]))
    if not spans:
        return None
    start, end = max(s for s, _ in spans), min(e for _, e in spans)
    return (start, end) if start < end else None


def step_rows(path: str, skip_first: int = 1, window: tuple[float, float] | None = None) -> list[dict]:
    """A metrics file's training steps after the first ``skip_first``; with ``window`` (``together``), only the
    steps run wholly inside it."""
    rows = train_steps(path)[skip_first:]
    if window is None:
        return rows
    return [r for r in rows if (sp := span(r)) and window[0] <= sp[0] and sp[1] <= window[1]]


def timing_medians(rows: list[dict]) -> tuple[dict[str, float], int]:
    """Each ``timing_s/*`` key's median over ``rows``, and how many rows that is."""
    keys = sorted({k for r in rows for k in r if k.startswith("timing_s/") and isinstance(r[k], (int, float))})
    return {k: statistics.median(r[k] for r in rows if k in r) for k in keys}, len(rows)


def medians(files: list[str], skip_first: int = 1) -> tuple[dict[str, float], int]:
    """``timing_medians`` over the ``step_rows`` of every file, pooled."""
    return timing_medians([r for f in files for r in step_rows(f, skip_first)])


def stage_order(keys) -> list[str]:
    """summarize_run's stages first (step, gen, reward, ...), then the other timing keys by name."""
    return [s for s in STAGES if s in keys] + sorted(set(keys) - set(STAGES))


def rounds_together(runs: list, skip_first: int) -> dict[int, tuple[float, float]]:
    """{round: ``together`` window} for each round whose runs that exited 0 (two or more) stepped at the same time;
    a round run one arm after another has none."""
    windows = {}
    for rnd in dict.fromkeys(r.round for r in runs):
        files = [r.metrics for r in runs if r.round == rnd and r.rc == 0]
        if len(files) > 1 and (w := together(files, skip_first)):
            windows[rnd] = w
    return windows


def summarize(runs: list, skip_first: int, base: str, table: dict[str, tuple[str, list[str]]], windows: dict) -> dict:
    """{arm: {recipe, overrides, runs, steps, median, ratio}} for the arms with a run that exited 0 and logged a step
    after the first ``skip_first``; ratios to the ``base`` arm where it is among them. ``table``: arm -> (recipe,
    the arm's own overrides). ``windows``: {round: window} (``rounds_together``); in such a round only the steps
    inside the window count."""
    arms: dict[str, dict] = {}
    for arm in dict.fromkeys(r.arm for r in runs):
        ok = [r for r in runs if r.arm == arm and r.rc == 0]
        med, n = timing_medians([x for r in ok for x in step_rows(r.metrics, skip_first, windows.get(r.round))])
        if n:
            recipe, own = table[arm]
            arms[arm] = {"recipe": recipe, "overrides": own, "runs": len(ok), "steps": n, "median": med}
    ref = arms.get(base, {}).get("median", {})
    for a in arms.values():
        a["ratio"] = {k: v / ref[k] for k, v in a["median"].items() if ref.get(k, 0) >= MIN_BASE_S}
    return arms


def markdown(rep: dict) -> str:
    arms = rep["arms"]
    names = list(arms)
    s = rep["settings"]
    base = s["base"]
    lines = [
        f"# Judge cost ({rep['date']}): {', '.join(s['arms'])}",
        "",
        f"Placement: {s['placement']}; {s['steps']} steps a run, {s['rounds']} round(s); medians over steps "
        f"{s['skip_first'] + 1}..N of each run"
        + (
            f" (round(s) {', '.join(rep['together'])}: only the steps all its runs ran together); "
            if rep.get("together")
            else "; "
        )
        + (
            f"ratio = the arm's median / the {base} arm's (none where the {base}'s is under {MIN_BASE_S} s)."
            if base
            else "no ratios: no base arm in this run (--base names one)."
        ),
        "",
        f"Command: `{rep['command']}`  ",
        f"Commit: `{rep['commit'] or 'unknown'}`  ",
        f"Machine: {rep['machine']['host']}; GPUs: {'; '.join(rep['machine']['gpus']) or 'none seen'}; "
        + ", ".join(f"{k} {v}" for k, v in rep["machine"]["packages"].items()),
        "",
    ]
    if names:
        keys = stage_order({k for a in arms.values() for k in a["median"]})
        lines += ["| stage | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
        for k in keys:
            cells = []
            for n in names:
                v, x = arms[n]["median"].get(k), arms[n]["ratio"].get(k)
                cells.append("" if v is None else f"{v:.3f} s" + ("" if x is None or n == base else f" ({x:.2f}x)"))
            lines.append(f"| {k} | " + " | ".join(cells) + " |")
        lines.append("| steps in the medians | " + " | ".join(str(arms[n]["steps"]) for n in names) + " |")
    else:
        lines.append("No arm finished: no table.")
    if base and base not in arms and names:
        lines += ["", f"No ratios: the {base} arm did not finish."]
    lines += ["", "| run | round | GPU | exit | seconds | folder |", "|---|---:|---|---:|---:|---|"]
    for r in rep["runs"]:
        sec = "" if r["seconds"] is None else f"{r['seconds']:.0f}"
        rc = "not started" if r["exit"] is None else f"{r['exit']}" + (f" ({r['error']})" if r.get("error") else "")
        lines.append(f"| {r['arm']} | {r['round']} | {r['gpu']} | {rc} | {sec} | {r['folder']} |")
    defs = s.get("definitions") or {}
    if defs:
        lines += ["", "| arm | recipe | its overrides (after the shared ones) |", "|---|---|---|"]
        for a, d in defs.items():
            lines.append(f"| {a} | {d['recipe']} | {' '.join(f'`{o}`' for o in d['overrides']) or 'none'} |")
    return "\n".join(lines) + "\n"


def commit() -> str | None:
    """HEAD of the checkout, ``+dirty`` when tracked files differ from it; None outside a checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def gpu_names() -> list[str] | None:
    """``index, name, memory`` of each GPU nvidia-smi lists; None when nvidia-smi is missing or fails."""
    try:
        r = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,name,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return [ln.strip() for ln in r.stdout.splitlines() if ln.strip()] if r.returncode == 0 else None


def machine() -> dict:
    packages = {}
    for p in PACKAGES:
        try:
            packages[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            pass
    host = f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    return {"host": host, "gpus": gpu_names() or [], "packages": packages}


def report(runs: list, settings: dict, command: str, skip_first: int, table: dict) -> dict:
    """The whole report (``cost.json``); ``settings`` holds ``base`` and the arms' ``definitions``."""
    windows = rounds_together(runs, skip_first)
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": command,
        "commit": commit(),
        "machine": machine(),
        "settings": {**settings, "skip_first": skip_first},
        "runs": [
            {
                "arm": r.arm,
                "round": r.round,
                "gpu": r.gpu,
                "exit": r.rc,
                "error": r.error,
                "seconds": r.seconds,
                "folder": r.folder,
                "command": shlex.join(r.command),
            }
            for r in runs
        ],
        "arms": summarize(runs, skip_first, settings["base"], table, windows),
        "together": {str(k): list(w) for k, w in windows.items()},
    }
