"""The judge-cost bench's child runs: each a launcher run in a process group of its own, started a wave at a time,
watched against its deadline, and stopped on every exit path (a Ctrl-C, SIGTERM or SIGHUP, a run past its deadline).

Used by ``python -m scripts.lab.bench.judge_cost``; no command of its own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field

import scripts
from scripts.console import say
from scripts.launch import services

ROOT = scripts.ROOT
WHO = "judge_cost"
POLL_S = 0.5


@dataclass
class Run:
    arm: str
    round: int
    gpu: str
    folder: str
    command: list[str]
    rc: int | None = None
    seconds: float | None = None
    error: str | None = None  # a run that exited 0 and still failed
    proc: subprocess.Popen | None = field(default=None, repr=False)
    t0: float = 0.0

    @property
    def log(self) -> str:
        return os.path.join(self.folder, "run.log")

    @property
    def metrics(self) -> str:
        return os.path.join(self.folder, "metrics.jsonl")


def start(run: Run, env) -> None:
    os.makedirs(run.folder, exist_ok=True)
    if os.path.exists(run.metrics):  # an earlier bench's steps must not stand in for this run's
        os.remove(run.metrics)
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


def run_waves(waves: list[list[Run]], env, timeout: float, grace: float) -> tuple[bool, list[int]]:
    """Start each wave and wait for it; every run is stopped at the end, on every exit path (a second Ctrl-C does not
    cut that short). ``(interrupted, the SIGTERM / SIGHUP signals taken)``."""
    terminated: list[int] = []  # SIGTERM / SIGHUP: exit 130; a Ctrl-C: services.Interrupted

    def on_term(signum, _frame):
        terminated.append(signum)
        raise KeyboardInterrupt

    main_thread = threading.current_thread() is threading.main_thread()
    stops = (signal.SIGTERM, signal.SIGHUP)  # a hangup as SIGTERM: the children, in sessions of their own, stay
    old = {s: signal.signal(s, on_term) for s in stops} if main_thread else {}
    interrupted = False
    try:
        for wave in waves:
            for r in wave:
                start(r, env)
            wait(wave, timeout, grace)
    except KeyboardInterrupt:
        interrupted = True
        say(WHO, "interrupted")
    finally:
        if main_thread:  # the children are stopped within deadlines; a second Ctrl-C does not cut that short
            old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
            for s in stops:
                signal.signal(s, signal.SIG_IGN)
        try:
            stop([r for w in waves for r in w], grace, "interrupted" if interrupted else "the bench ends")
        finally:
            if main_thread:
                signal.signal(signal.SIGINT, old_int)
                for s, h in old.items():
                    signal.signal(s, h)
    return interrupted, terminated
