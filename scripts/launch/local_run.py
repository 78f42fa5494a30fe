"""One local training run, as the launcher runs it (without ``RAY_ADDRESS``): the judge server when the config asks
for one, a private Ray head, the trainer (output teed to the console and the run's log, secrets masked) and the stall
watchdog; everything it starts is stopped before it returns.

verl binds the free ports it picks seconds later, so a run starting beside others can hit ``EADDRINUSE``: ``run``
starts it again when it failed so before its first step, ``START_TRIES`` starts in all.

    python -m scripts.launch gsm8k_rule trainer.total_training_steps=3      # a local run (this module's caller)
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

from scripts.console import mask, say
from scripts.launch import judge_server, ray_head, services, stall
from scripts.launch.knobs import ROOT

#: local starts of a run that failed before its first step because a port it picked was taken (EADDRINUSE)
START_TRIES = 3


class Tee:
    """Child output -> our stdout and a log file, line by line, secrets masked."""

    def __init__(self, log_path: str | None, env):
        self.env = env
        self.log = open(log_path, "a", encoding="utf-8") if log_path else None
        self.tail = ""  # the last lines seen (masked), to recognise transient errors
        self.on_line = None  # called with each line (the stall watchdog counts steps)
        self.port_taken = False  # a line said a port was taken (EADDRINUSE): a start-up race, if no step came first
        self.stepped = False  # a training step (step:N, N >= 1) was logged

    def last_lines(self, n: int = 20) -> str:
        return "\n".join(self.tail.splitlines()[-n:])

    def pump(self, stream) -> None:
        for line in iter(stream.readline, ""):
            line = mask(line, self.env)
            self.tail = (self.tail + line)[-16384:]
            self.port_taken = self.port_taken or "EADDRINUSE" in line or "address already in use" in line.lower()
            if not self.stepped and (m := stall.STEP_LINE.search(line)):
                self.stepped = int(m.group(1)) >= 1
            if self.on_line is not None:
                self.on_line(line)
            sys.stdout.write(line)
            sys.stdout.flush()
            if self.log:
                self.log.write(line)
                self.log.flush()

    def close(self):
        if self.log:
            self.log.close()


def run_child(cmd: list[str], env: dict, tee: Tee, stdin: str | None = None, on_start=()) -> int:
    release = services.hold_signals()  # a Ctrl-C between the fork and Popen returning would orphan the child
    try:
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            bufsize=1,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        )
    except BaseException:
        release()
        raise
    with services.tracked(proc):
        release()  # a signal noted while the child was made is delivered now, inside the block that stops it
        for hook in on_start:
            hook(proc)
        if stdin is not None:
            proc.stdin.write(stdin)
            proc.stdin.close()
        tee.pump(proc.stdout)
        return proc.wait()


def side_log(log_file: str, service: str) -> str:
    """The log of a service a run starts, beside the run's own log and named after it (``logs/judge.log`` ->
    ``logs/judge.ray_head.log``): two runs of one pipeline never write one file."""
    stem = os.path.splitext(log_file)[0]
    return f"{stem}.{service}.log"


def run(p, cenv: dict, env, tee: Tee, log_file: str, start_tries: int = START_TRIES) -> int:
    """Plan ``p`` (``scripts.launch.launcher.Plan``) run locally, started again after a port race at start-up (see
    above)."""
    rc = 1
    for attempt in range(1, max(1, start_tries) + 1):
        tee.port_taken = tee.stepped = False
        tee.tail = ""
        rc = run_local(p, dict(cenv), env, tee, log_file)  # its own copy: no Ray address of an earlier try
        # a race: failed (rc < 0 or >= 128: stopped by a signal) on a taken port before any step
        race = 0 < rc < 128 and tee.port_taken and not tee.stepped and not stepped(p.metrics_file)
        if not race or attempt == start_tries:
            return rc
        why = "a port it had picked was taken meanwhile by another process on this host (EADDRINUSE; runs started "
        why += f"together race for free ports); starting it again (try {attempt + 1} of {start_tries})"
        say("launch", f"training failed while starting: {why}", env)
    return rc


def stepped(metrics_file: str) -> bool:
    """Whether the run logged a training step (its metrics file is not empty, or is remote: unknown counts as
    stepped): a failure after that is no start-up race."""
    return "://" in metrics_file or (os.path.exists(metrics_file) and os.path.getsize(metrics_file) > 0)


def run_local(p, cenv: dict, env, tee: Tee, log_file: str) -> int:
    """One local run: the judge server when the config asks for one (started beside training's own start-up), a
    private Ray head, the trainer, the watchdog; everything started here is stopped before it returns."""
    rc = 1
    command = p.command
    with contextlib.ExitStack() as watches:
        hooks, served = [], None
        if p.judge_server is not None:
            log = side_log(log_file, "judge_server")
            served = judge_server.Served.beside(p.judge_server, cenv, log, command[0], lambda m: say("launch", m, env))
            watches.enter_context(served)
            command = [*command, *served.overrides]
            hooks.append(served.attach)
        head, address = ray_head.start(cenv, side_log(log_file, "ray_head"))
        watches.callback(lambda: ray_head.stop(head, keep=rc != 0))
        say("launch", f"Ray head at {address}; training", env)
        watch = None
        if p.watchdog is not None:
            steps = stall.Stall(p.watchdog, os.path.splitext(os.path.basename(log_file))[0])
            tee.on_line = steps.line
            watch = watches.enter_context(stall.Watch(steps, p.metrics_file, tee.last_lines))
            hooks.append(watch.attach)
        rc = run_child(command, cenv, tee, on_start=hooks)
        if served is not None and served.cause:
            say("launch", f"ERROR: {served.cause.splitlines()[0]} (exit {served.exit_code})", env)
            rc = served.exit_code
        elif watch is not None and watch.cause:
            say("launch", f"ERROR: {watch.cause.splitlines()[0]} (checkpoints kept in the run folder)", env)
            rc = stall.STALL_EXIT
        return rc
