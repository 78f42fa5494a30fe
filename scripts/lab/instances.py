"""The scorecard over judge instances: one side-by-side experiment (``scripts.lab.policy_learns``) per testbed seed,
each with its own testbed, warm start and trained judge, all at once on the listed GPUs, then the pooled scorecard
(``scripts.lab.scorecard``: each instance's ratio and a pooled ratio whose interval resamples instances, then
seeds, then questions). Run through ``scripts.lab.policy_learns``:

    python -m scripts.lab.policy_learns --out runs/card --instances 0,1,2 --seeds 0,1 \\
        --arms rule,judge,route,random --parallel 8 --gpus 0,1,2,3

Instance ``k`` is ``python -m scripts.lab.policy_learns --out <out>/instance_<k> --testbed-arg=--seed=<k> ...`` with the
same other arguments; its own stages (testbed, warm start, judge) run on GPU ``gpus[i % n]`` (``i``: its position in
``--instances``) and its runs' chains on the GPUs rotated by ``i``, so that every GPU holds about as many runs. Each
instance's output goes to ``<out>/instance_<k>.log``. One that fails stops the others (exit 1, naming it and ending
with its log's last lines); Ctrl-C stops them all, says so in one line and ends the command line by SIGINT (a shell's
``$?``: 130; ``services.as_command``), so a script that ran it stops too. A finished instance is resumed, not redone
(its stages' markers). The progress line every minute names each instance's stage finished most recently.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

from scripts.lab import scorecard
from scripts.launch import services
from scripts.workflows.stages import say

POLL_S = 5.0  # how often the children are looked at
SAY_S = 60.0  # how often progress is said


def folder(out: str, k: int) -> str:
    return os.path.join(out, f"instance_{k}")


def child_argv(argv: list[str], out: str, k: int, gpus: list[str], i: int) -> list[str]:
    """Instance ``k``'s command line: the user's arguments without ``--instances``, ``--out`` and ``--gpus``, with
    its own folder, testbed seed and (rotated by ``i``) GPUs."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]  # argparse also takes an unambiguous abbreviation (--instance, --ou, --gpu)
        if (
            name.startswith("--")
            and len(name) > 2
            and any(o.startswith(name) for o in ("--instances", "--out", "--gpus"))
        ):
            skip = "=" not in arg
            continue
        kept.append(arg)
    rotated = gpus[i % len(gpus) :] + gpus[: i % len(gpus)] if gpus else []
    return [
        "--out",
        folder(out, k),
        f"--testbed-arg=--seed={k}",
        *([f"--gpus={','.join(rotated)}"] if rotated else []),
        *kept,
    ]


def progress(out: str, k: int) -> str:
    """Instance ``k``'s finished stages, from their ``.<stage>.done`` markers; the last one is the one finished most
    recently (its marker's mtime; the name breaks a tie)."""
    where = folder(out, k)
    try:
        done = []
        for f in os.listdir(where):
            if f.startswith(".") and f.endswith(".done"):
                with contextlib.suppress(OSError):  # a marker removed meanwhile (a stage redone)
                    done.append((os.stat(os.path.join(where, f)).st_mtime_ns, f[1:-5]))
    except OSError:
        return "starting"
    return f"{len(done)} stages done" + (f" (last: {max(done)[1]})" if done else "")


def run(cfg, argv: list[str]) -> int:
    """Every instance of ``cfg.instances`` (the experiment's settings, ``policy_learns.Experiment``) at once, then the
    pooled scorecard; 0, or 1 when an instance failed."""
    gpus = cfg.gpus.split(",") if cfg.gpus else []
    os.makedirs(cfg.out, exist_ok=True)
    procs: dict[int, tuple] = {}
    failed = None
    interrupted = False
    try:
        for i, k in enumerate(cfg.instances):
            env = dict(os.environ)
            # every vLLM engine compiles with inductor, whose default pool is one process per CPU: with many runs at
            # once that exhausted a 64-core host's processes (docs/results/2026-11-27-guard_smoke)
            env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
            if gpus:
                env["CUDA_VISIBLE_DEVICES"] = gpus[i % len(gpus)]
            cmd = [sys.executable, "-m", "scripts.lab.policy_learns", *child_argv(argv, cfg.out, k, gpus, i)]
            log = os.path.join(cfg.out, f"instance_{k}.log")
            release = services.hold_signals()  # a Ctrl-C while the instance is made would orphan it
            try:
                proc = services.spawn(cmd, env, log, group=True)
                services.started(proc)
                procs[k] = (proc, log)
            finally:
                release()  # a signal noted meanwhile is delivered now, the instance in ``procs`` (stopped below)
            say(f"instance {k}: pid {proc.pid}, log {log}")
        last_said = time.monotonic()
        while failed is None and any(p.poll() is None for p, _ in procs.values()):
            time.sleep(POLL_S)
            failed = next((k for k, (p, _) in procs.items() if p.poll() not in (None, 0)), None)
            if time.monotonic() - last_said >= SAY_S:
                last_said = time.monotonic()
                say("; ".join(f"instance {k}: {progress(cfg.out, k)}" for k in procs))
        failed = next((k for k, (p, _) in procs.items() if p.poll() not in (None, 0)), failed)
    except KeyboardInterrupt:  # no failure of an instance: one line below, once every instance is stopped
        interrupted = True
    finally:
        for proc, _ in procs.values():
            services.stop(proc, group=True)
            services.ended(proc)
    if interrupted:
        say("interrupted (Ctrl-C): every instance and what it started are stopped; exit 130")
        raise services.Interrupted from None  # the command line then dies of SIGINT (services.as_command)
    if failed is not None:
        proc, log = procs[failed]
        say(f"ERROR: instance {failed} failed (exit {proc.returncode}); the others were stopped. {log} ends:")
        print(services.tail(log, 30), flush=True)
        return 1
    folders = [folder(cfg.out, k) for k in cfg.instances]
    report = scorecard.write_pooled(cfg.out, folders, cfg.arms, cfg.seeds, cfg.steps, command=["python", *sys.argv])
    print(scorecard.pooled_console(report), flush=True)
    return 0
