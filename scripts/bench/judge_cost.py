"""What a judge reward adds to a GRPO step: the rule reward and the judge's placements run side by side in one
invocation, each stage's median time against the rule's.

    python -m scripts.bench.judge_cost --gpus 0,1,2,3 --arms rule,resident,colocated,server  # one arm a GPU, together
    python -m scripts.bench.judge_cost --interleave --gpus 0 --rounds 2     # every arm on GPU 0, one after another
    python -m scripts.bench.judge_cost --steps 40 -- data.train_batch_size=32  # Hydra overrides for every arm
    DRY_RUN=1 python -m scripts.bench.judge_cost                            # check every arm's config on CPU, no GPU

Arms (each is one launcher run, ``python -m scripts.launch <recipe> <overrides>``, as ``recipes/<recipe>/run.sh``):

* ``rule``: recipes/gsm8k_rule, the strict ``#### N`` rule (``reward_fns/gsm8k.py``), scored in the agent loop.
* ``resident``: recipes/gsm8k_local_judge with ``judge_placement=colocated`` (verl's reward model enabled: the judge's
  vLLM loaded on the policy's GPU, as in ``colocated``), but the custom reward is the rule (``pkg://reward_fns.gsm8k``):
  the judge is resident and never called. It separates the cost of a resident judge from the cost of its calls. As
  in ``colocated``, verl 0.9.1 then scores in a reward stage of its own after generation (with a colocated reward
  model it does not stream rewards from the agent loop), so its ``timing_s/reward`` is that stage's dispatch.
* ``colocated``: recipes/gsm8k_local_judge as it is (``judge_placement=colocated``, the default).
* ``colocated_deferred``: ``colocated`` with ``verl_judge.deferred_reward=true``: the judge's reward is computed beside
  the old and reference log-probs and joined just before the advantage (``scripts/train/deferred_reward.py``); its
  ``timing_s/reward`` is the start alone, ``timing_s/reward_join`` the wait at the join.
* ``server``: ``judge_placement=server``: the launcher serves the judge beside the policy on the same GPU.
* ``route``: ``server`` with ``reward_kwargs.mode=route`` (the rule decides the clear answers without a call).

Every arm gets the same overrides first: ``trainer.total_training_steps=STEPS trainer.n_gpus_per_node=1
actor_rollout_ref.rollout.gpu_memory_utilization=0.3 trainer.save_freq=-1 trainer.test_freq=-1
trainer.resume_mode=disable``, ``trainer.default_local_dir=<run>/checkpoints``,
``trainer.experiment_name=judge-cost-<arm>``; then the arm's, then the arguments after ``--`` (a later key wins).

Placement: ``--gpus 0,1,2,3`` starts one arm per GPU (``CUDA_VISIBLE_DEVICES`` of each child) at the same time, so
every arm shares the host alike; more arms than GPUs is refused. ``--interleave`` (implied by one GPU) runs the
arms on one GPU (the one ``--gpus`` names, default 0) one after another. ``--rounds R`` repeats that R times, the
arms' order rotated by one each round; an arm's medians pool its runs. ``DRY_RUN=1`` (the launcher's dry-run mode)
checks every arm's composed config on CPU, one after another, and makes no table.

Report (``OUT/cost.md`` and ``OUT/cost.json``, printed too): per arm, each ``timing_s/*`` stage's median over steps
2..N of its runs (``--skip-first``) and its ratio to the rule arm's median (no ratio where the rule's median is under
``scripts.report.summarize_run.MIN_BASE_S``: the rule reward takes microseconds), side by side; the runs (GPU, round,
exit status, seconds, folder); the machine, command and commit. Each run's folder ``OUT/<arm>[/round-R]`` holds
``run.log``, the launcher's ``launch.log`` and verl's ``metrics.jsonl``.

Exit status: 0 when every run exited 0; 1 when one did not (the table holds the arms that finished); 2 for a bad
argument or environment (nothing is run); 130 when interrupted. Every child runs in a process group of its own and
is stopped on every exit path (SIGTERM, then SIGKILL of its group after ``--stop-grace`` s); a run still going after
``--run-timeout`` s is stopped and counted as failed (exit 124).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from importlib import metadata

from data_prep.files.outputs import write_json, write_text
from scripts.console import say
from scripts.launch import overrides as ov
from scripts.launch import services
from scripts.report.metrics import read_metrics
from scripts.report.summarize_run import MIN_BASE_S, STAGES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WHO = "judge_cost"
RULE_REWARD = "reward.custom_reward_function.path=pkg://reward_fns.gsm8k"
KWARGS = "++reward.custom_reward_function.reward_kwargs."
#: arm -> (recipe, the arm's own Hydra overrides)
ARMS: dict[str, tuple[str, list[str]]] = {
    "rule": ("gsm8k_rule", []),
    "resident": ("gsm8k_local_judge", ["judge_placement=colocated", RULE_REWARD]),
    "colocated": ("gsm8k_local_judge", ["judge_placement=colocated"]),
    "colocated_deferred": ("gsm8k_local_judge", ["judge_placement=colocated", "verl_judge.deferred_reward=true"]),
    "server": ("gsm8k_local_judge", ["judge_placement=server"]),
    "route": ("gsm8k_local_judge", ["judge_placement=server", KWARGS + "mode=route"]),
}
BASE = "rule"
#: variables that would change what an arm is (its reward, its placement): refused rather than passed on
FIXED_BY_ARMS = ("REWARD_FN", "REWARD_FN_NAME", "JUDGE_GPUS")
PACKAGES = ("torch", "vllm", "verl", "ray", "transformers")
POLL_S = 0.5


def is_dry(env) -> bool:
    """DRY_RUN set to anything but 0 (as scripts/lib.sh's is_dry): the launcher checks and stops."""
    v = (env.get("DRY_RUN") or "").strip()
    return v not in ("", "0")


def shared(steps: int, folder: str, arm: str) -> list[str]:
    """The overrides every arm gets first."""
    return [
        f"trainer.total_training_steps={steps}",
        "trainer.n_gpus_per_node=1",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.3",
        "trainer.save_freq=-1",
        "trainer.test_freq=-1",
        "trainer.resume_mode=disable",
        f"trainer.default_local_dir={ov.hydra_str(os.path.join(folder, 'checkpoints'))}",
        f"trainer.experiment_name=judge-cost-{arm}",
    ]


def arm_overrides(arm: str, steps: int, folder: str, extra: list[str]) -> list[str]:
    """An arm's Hydra overrides: the shared ones, the arm's, then ``extra`` (a later key wins)."""
    return ov.merge(shared(steps, folder, arm), ARMS[arm][1], list(extra))


@dataclass
class Run:
    arm: str
    round: int
    gpu: str
    folder: str
    command: list[str]
    rc: int | None = None
    seconds: float | None = None
    proc: subprocess.Popen | None = field(default=None, repr=False)
    t0: float = 0.0

    @property
    def log(self) -> str:
        return os.path.join(self.folder, "run.log")

    @property
    def metrics(self) -> str:
        return os.path.join(self.folder, "metrics.jsonl")


def plan_runs(
    arms: list[str], gpus: list[str], interleave: bool, rounds: int, steps: int, out: str, extra, launcher
) -> list[list[Run]]:
    """The waves of runs: each wave starts together (``--gpus``: one arm per GPU) or, interleaved, one run a wave."""
    waves = []
    for r in range(rounds):
        order = arms[r % len(arms) :] + arms[: r % len(arms)]
        wave = []
        for i, arm in enumerate(order):
            folder = os.path.join(out, arm, f"round-{r + 1}") if rounds > 1 else os.path.join(out, arm)
            cmd = [*launcher, ARMS[arm][0], *arm_overrides(arm, steps, folder, extra)]
            wave.append(Run(arm, r + 1, gpus[0] if interleave else gpus[i], folder, cmd))
        waves.extend([[run] for run in wave] if interleave else [wave])
    return waves


# ------------------------------------------------------------------------------------------------ children
def start(run: Run, env) -> None:
    os.makedirs(run.folder, exist_ok=True)
    cenv = {**env, "OUTPUT_DIR": run.folder, "CUDA_VISIBLE_DEVICES": run.gpu}
    cenv["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    say(WHO, f"start {run.arm} (round {run.round}, GPU {run.gpu}) -> {run.log}")
    run.t0 = time.monotonic()
    run.proc = services.spawn(run.command, cenv, run.log, cwd=ROOT, group=True)


def stop(runs: list[Run], grace: float, why: str) -> None:
    """SIGTERM to each running child (the launcher stops its Ray head and judge server), then, after ``grace``
    seconds, SIGKILL to whatever is left in each child's process group."""
    mine = [r for r in runs if r.proc is not None and r.rc is None]  # started, exit not yet taken
    live = [r for r in mine if r.proc.poll() is None]
    if live:
        say(WHO, f"{why}: stopping " + ", ".join(f"{r.arm} (pid {r.proc.pid})" for r in live))
    for r in live:
        r.proc.terminate()
    end = time.monotonic() + grace
    for r in mine:
        try:
            r.proc.wait(timeout=max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            say(WHO, f"{r.arm}: still running {grace:.0f}s after SIGTERM (--stop-grace): SIGKILL to its process group")
        services.stop(r.proc, grace=0, group=True)  # SIGKILL to the group: a leader past its grace, what it left
        r.rc, r.seconds = r.proc.returncode, time.monotonic() - r.t0


def wait(wave: list[Run], timeout: float, grace: float) -> None:
    """Until every run of the wave has exited; a run past ``timeout`` seconds is stopped (exit 124)."""
    shown = time.monotonic()
    while True:
        going = []
        for r in wave:
            if r.rc is not None:
                continue
            rc = r.proc.poll()
            if rc is not None:
                r.rc, r.seconds = rc, time.monotonic() - r.t0
                services.stop(r.proc, grace=0, group=True)  # what the run left in its process group
                say(WHO, f"{r.arm} (round {r.round}): exit {rc} in {r.seconds:.0f}s")
                if rc != 0:
                    say(WHO, f"{r.arm}: its log ({r.log}) ends:\n{services.tail(r.log)}")
            elif time.monotonic() - r.t0 > timeout:
                say(WHO, f"{r.arm} (round {r.round}): no exit within {timeout:.0f}s (--run-timeout)")
                stop([r], grace, f"{r.arm} is past its deadline")
                r.rc = 124
                say(WHO, f"{r.arm}: its log ({r.log}) ends:\n{services.tail(r.log)}")
            else:
                going.append(r)
        if not going:
            return
        if time.monotonic() - shown >= 60:
            say(WHO, "waiting for " + ", ".join(f"{r.arm} ({time.monotonic() - r.t0:.0f}s)" for r in going))
            shown = time.monotonic()
        time.sleep(POLL_S)


# ------------------------------------------------------------------------------------------------ report
def train_steps(path: str) -> list[dict]:
    """The training steps of a metrics file (rows with ``timing_s/step``), in file order."""
    return [r for r in read_metrics(path) if isinstance(r.get("timing_s/step"), (int, float))]


def medians(files: list[str], skip_first: int = 1) -> tuple[dict[str, float], int]:
    """Each ``timing_s/*`` key's median over the steps after the first ``skip_first`` of every file, pooled; and how
    many steps that is."""
    rows = [r for f in files for r in train_steps(f)[skip_first:]]
    keys = sorted({k for r in rows for k in r if k.startswith("timing_s/") and isinstance(r[k], (int, float))})
    return {k: statistics.median(r[k] for r in rows if k in r) for k in keys}, len(rows)


def stage_order(keys) -> list[str]:
    """summarize_run's stages first (step, gen, reward, ...), then the other timing keys by name."""
    return [s for s in STAGES if s in keys] + sorted(set(keys) - set(STAGES))


def summarize(runs: list[Run], skip_first: int = 1) -> dict:
    """{arm: {recipe, overrides, runs, steps, median, ratio}} for the arms with a run that exited 0 and logged a step
    after the first ``skip_first``; ratios to the rule arm where it is among them."""
    arms: dict[str, dict] = {}
    for arm in dict.fromkeys(r.arm for r in runs):
        ok = [r for r in runs if r.arm == arm and r.rc == 0]
        med, n = medians([r.metrics for r in ok], skip_first)
        if n:
            arms[arm] = {"recipe": ARMS[arm][0], "overrides": ARMS[arm][1], "runs": len(ok), "steps": n, "median": med}
    base = arms.get(BASE, {}).get("median", {})
    for arm, a in arms.items():
        a["ratio"] = {k: v / base[k] for k, v in a["median"].items() if base.get(k, 0) >= MIN_BASE_S}
    return arms


def markdown(rep: dict) -> str:
    arms = rep["arms"]
    names = list(arms)
    s = rep["settings"]
    lines = [
        f"# Judge cost ({rep['date']}): {', '.join(s['arms'])}",
        "",
        f"Placement: {s['placement']}; {s['steps']} steps a run, {s['rounds']} round(s); medians over steps "
        f"{s['skip_first'] + 1}..N of each run; ratio = the arm's median / the {BASE} arm's "
        f"(none where the {BASE}'s is under {MIN_BASE_S} s).",
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
                cells.append("" if v is None else f"{v:.3f} s" + ("" if x is None or n == BASE else f" ({x:.2f}x)"))
            lines.append(f"| {k} | " + " | ".join(cells) + " |")
        lines.append("| steps in the medians | " + " | ".join(str(arms[n]["steps"]) for n in names) + " |")
    else:
        lines.append("No arm finished: no table.")
    if BASE not in arms and names:
        lines += ["", f"No ratios: the {BASE} arm did not finish."]
    lines += ["", "| run | round | GPU | exit | seconds | folder |", "|---|---:|---|---:|---:|---|"]
    for r in rep["runs"]:
        sec = "" if r["seconds"] is None else f"{r['seconds']:.0f}"
        rc = "not started" if r["exit"] is None else r["exit"]
        lines.append(f"| {r['arm']} | {r['round']} | {r['gpu']} | {rc} | {sec} | {r['folder']} |")
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


def report(runs: list[Run], settings: dict, command: str, skip_first: int) -> dict:
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
                "seconds": r.seconds,
                "folder": r.folder,
                "command": shlex.join(r.command),
            }
            for r in runs
        ],
        "arms": summarize(runs, skip_first),
    }


# ------------------------------------------------------------------------------------------------ entry
def parse(argv):
    ap = argparse.ArgumentParser(
        prog="python -m scripts.bench.judge_cost",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--arms", default=",".join(ARMS), help=f"comma-separated, from {', '.join(ARMS)} (default: all, in that order)"
    )
    ap.add_argument("--gpus", default="0", help="GPU ids (CUDA_VISIBLE_DEVICES values), one arm each (default 0)")
    ap.add_argument("--interleave", action="store_true", help="every arm on the one GPU of --gpus, one after another")
    ap.add_argument("--rounds", type=int, default=1, help="times every arm runs (default 1)")
    ap.add_argument("--steps", type=int, default=40, help="training steps a run (default 40)")
    ap.add_argument("--skip-first", type=int, default=1, help="steps of each run left out of the medians (default 1)")
    ap.add_argument("--out", default=None, help="results folder (default outputs/judge_cost/<UTC date-time>)")
    ap.add_argument("--run-timeout", type=float, default=7200, help="seconds a run may take (default 7200)")
    ap.add_argument("--stop-grace", type=float, default=60, help="seconds from SIGTERM to SIGKILL (default 60)")
    ap.add_argument(
        "--launcher",
        default=None,
        help="the command that runs one recipe, given the recipe and its overrides (default: this interpreter "
        "-m scripts.launch); a custom one is trusted to find its GPUs",
    )
    ap.add_argument("overrides", nargs="*", help="Hydra overrides for every arm (after --)")
    args = ap.parse_args(argv)
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    bad = [a for a in arms if a not in ARMS]
    if bad or not arms:
        ap.error(f"--arms: unknown arm(s) {', '.join(bad) or '(none given)'}; the arms: {', '.join(ARMS)}")
    if len(set(arms)) != len(arms):
        ap.error("--arms: an arm is named twice")
    gpus = [g.strip() for g in args.gpus.split(",") if g.strip()]
    if not gpus or len(set(gpus)) != len(gpus):
        ap.error(f"--gpus {args.gpus!r}: give distinct GPU ids, e.g. 0,1,2,3")
    if args.interleave and len(gpus) != 1:
        ap.error(f"--interleave runs every arm on one GPU: give one id with --gpus, not {args.gpus!r}")
    args.interleave = args.interleave or len(gpus) == 1  # one GPU: the arms can only take turns
    if not args.interleave and len(arms) > len(gpus):
        ap.error(
            f"{len(arms)} arms ({', '.join(arms)}) for {len(gpus)} GPU(s) ({','.join(gpus)}): one arm per GPU; "
            "give more GPUs, fewer --arms, or --interleave"
        )
    for name in ("rounds", "steps"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.skip_first < 0 or args.skip_first >= args.steps:
        ap.error(f"--skip-first must be in [0, --steps), got {args.skip_first} for {args.steps} steps")
    if args.run_timeout <= 0 or args.stop_grace < 0:
        ap.error("--run-timeout must be > 0 and --stop-grace >= 0")
    bad = [o for o in args.overrides if "=" not in o]
    if bad:
        ap.error(f"not a Hydra override KEY=VALUE: {' '.join(bad)}")
    args.arms, args.gpus = arms, gpus
    return args


def main(argv=None, env=None) -> int:
    env = dict(os.environ if env is None else env)
    args = parse(sys.argv[1:] if argv is None else argv)
    fixed = [n for n in FIXED_BY_ARMS if (env.get(n) or "").strip()]
    if fixed:
        say(WHO, f"ERROR: {', '.join(fixed)} set: each arm sets its reward and placement itself; unset them")
        return 2
    dry = is_dry(env)
    custom = args.launcher is not None
    launcher = shlex.split(args.launcher) if custom else [sys.executable, "-m", "scripts.launch"]
    if not dry and not custom:
        seen = gpu_names()
        if seen is None:
            say(WHO, "ERROR: no GPU (nvidia-smi fails or is missing); DRY_RUN=1 checks the arms' configs on CPU")
            return 2
        ids = {ln.split(",")[0].strip() for ln in seen}
        missing = [g for g in args.gpus if g.isdigit() and g not in ids]
        if missing:
            say(WHO, f"ERROR: --gpus {','.join(missing)}: no such GPU; nvidia-smi lists {', '.join(sorted(ids))}")
            return 2
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    out = os.path.abspath(args.out or os.path.join(ROOT, "outputs", "judge_cost", stamp))
    interleave = args.interleave or dry  # a dry run checks one arm after another (no GPU, a few seconds each)
    waves = plan_runs(args.arms, args.gpus, interleave, args.rounds, args.steps, out, args.overrides, launcher)
    runs = [r for w in waves for r in w]
    command = shlex.join(["python", "-m", "scripts.bench.judge_cost", *(sys.argv[1:] if argv is None else argv)])
    placement = f"interleaved on GPU {args.gpus[0]}" if args.interleave else "one arm per GPU, started together"
    settings = {
        "arms": args.arms,
        "placement": placement,
        "gpus": args.gpus,
        "steps": args.steps,
        "rounds": args.rounds,
        "overrides": args.overrides,
    }
    say(WHO, f"{len(runs)} run(s), {placement}{' (DRY_RUN: config checks only)' if dry else ''}; results: {out}")

    def on_term(signum, _frame):
        raise KeyboardInterrupt

    main_thread = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGTERM, on_term) if main_thread else None
    interrupted = False
    try:
        for wave in waves:
            for r in wave:
                start(r, env)
            wait(wave, args.run_timeout, args.stop_grace)
    except KeyboardInterrupt:
        interrupted = True
        say(WHO, "interrupted")
    finally:
        if main_thread:  # the children are stopped within deadlines; a second Ctrl-C does not cut that short
            old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            stop(runs, args.stop_grace, "interrupted" if interrupted else "the bench ends")
        finally:
            if main_thread:
                signal.signal(signal.SIGINT, old_int)
                signal.signal(signal.SIGTERM, old)
    failed = [r for r in runs if r.rc != 0]
    if dry:
        for r in runs:
            say(WHO, f"DRY_RUN {r.arm}: {'config OK' if r.rc == 0 else f'exit {r.rc}, see {r.log}'}")
        return 130 if interrupted else (1 if failed else 0)
    rep = report(runs, settings, command, args.skip_first)
    os.makedirs(out, exist_ok=True)
    write_json(os.path.join(out, "cost.json"), rep)
    text = markdown(rep)
    write_text(os.path.join(out, "cost.md"), text)
    print(text, flush=True)
    for r in failed:
        say(WHO, f"{r.arm} (round {r.round}) " + ("was not started" if r.rc is None else f"exited {r.rc}: {r.log}"))
    say(WHO, f"report: {os.path.join(out, 'cost.md')} and cost.json")
    return 130 if interrupted else (1 if failed else 0)


if __name__ == "__main__":
    sys.exit(main())
