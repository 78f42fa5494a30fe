"""Background processes, one way: the services a run starts (the private Ray head, the judge server) and the child
processes a run or a pipeline must stop on every exit path. No command of its own:

    proc = services.spawn(cmd, env, "judge.log", group=True)                     # output to the log
    services.wait_until(lambda: up(url), proc, "the judge server", 600)          # a deadline, and what it waits for
    services.stop(proc, group=True)                                              # SIGTERM, then SIGKILL
    with services.tracked(subprocess.Popen(...)) as proc: ...                    # stopped whatever happens
    services.stop_all("stage sft failed")                                        # every tracked child still running

``stop`` with ``group=True`` also kills what the process left in its process group (vLLM's engine core).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from scripts.console import say


class ServiceError(RuntimeError):
    """A service was not ready within its deadline."""


class ServiceExited(ServiceError):
    """A service exited before it was ready."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(cmd: list[str], env: dict, log_path: str, cwd: str | None = None, group: bool = False) -> subprocess.Popen:
    """Start ``cmd`` with its output (stdout and stderr) in ``log_path``, no stdin; ``group``: in a process group of its
    own (``stop(proc, group=True)`` then ends everything it started)."""
    os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    with open(log_path, "w") as log:
        return subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=group,
        )


def tail(log_path: str, n: int = 20) -> str:
    """The last ``n`` lines of a log ("(no log)" when it cannot be read)."""
    try:
        with open(log_path, errors="replace") as f:
            return "".join(f.readlines()[-n:]).rstrip()
    except OSError:
        return "(no log)"


def wait_until(
    ready: Callable[[], bool],
    proc: subprocess.Popen,
    what: str,
    timeout: float,
    log_path: str,
    cancel: threading.Event | None = None,
    who: str = "services",
    setting: str = "",
    poll: float = 0.5,
    lines: int = 20,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], None] | None = None,
) -> bool:
    """Wait until ``ready()``; False when ``cancel`` is set first. ``what`` names the service in every message,
    ``setting`` the knob of its deadline. ``ready()`` is asked every ``poll`` seconds; the deadline passes once
    more than ``timeout`` seconds of ``clock`` have gone by (``clock`` and ``sleep``: the time it reads and waits
    by; None: ``time.time`` and ``time.sleep``)."""
    clock, sleep = clock or time.time, sleep or time.sleep
    t0 = shown = clock()
    while not ready():
        if cancel is not None and cancel.is_set():
            return False
        if proc.poll() is not None:
            raise ServiceExited(
                f"{what} exited with {proc.returncode} before it was ready; its log ({log_path}) ends:"
                f"\n{tail(log_path, lines)}"
            )
        if clock() - t0 > timeout:
            raise ServiceError(
                f"{what} was not ready within {timeout:.0f}s{f' ({setting})' if setting else ''}; its "
                f"log ({log_path}) ends:\n{tail(log_path, lines)}"
            )
        if clock() - shown >= 30:
            say(who, f"waiting for {what} ({clock() - t0:.0f}s) ...")
            shown = clock()
        sleep(poll)
    return True


def stop(proc: subprocess.Popen | None, grace: float = 30.0, group: bool = False) -> bool:
    """SIGTERM (to its process group with ``group``), SIGKILL after ``grace`` seconds, also when a second signal
    interrupts the wait; with ``group``, SIGKILL to whatever is left in the group once its leader is gone, and return
    once the group is gone (at most 10 s more). Whether it was running."""
    if proc is None:
        return False
    running = proc.poll() is None
    try:
        if running:
            os.killpg(proc.pid, signal.SIGTERM) if group else proc.terminate()
            proc.wait(timeout=grace)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        pass
    finally:
        if group:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # the leader's children, or a leader that ignored SIGTERM
        elif proc.poll() is None:
            proc.kill()
        proc.wait()
        if group and not _group_gone(proc.pid, 10.0):
            say("children", f"process group {proc.pid} still has members 10 s after SIGKILL")
    return running


def _group_gone(pgid: int, seconds: float) -> bool:
    """Wait until no process of group ``pgid`` is left (SIGKILLed ones included, until they are reaped)."""
    end = time.monotonic() + seconds
    while True:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return True
        if time.monotonic() > end:
            return False
        time.sleep(0.02)


_live: set[subprocess.Popen] = set()
_lock = threading.Lock()


def started(proc: subprocess.Popen) -> None:
    with _lock:
        _live.add(proc)


def ended(proc: subprocess.Popen) -> None:
    with _lock:
        _live.discard(proc)


def live() -> list[subprocess.Popen]:
    with _lock:
        return [p for p in _live if p.poll() is None]


INT_EXIT = 130  # a Ctrl-C: 128 + SIGINT


class Interrupted(SystemExit):
    """A Ctrl-C, handled: everything started was stopped and a line said so (status 130). A command line ends on it
    through ``as_command``."""

    def __init__(self) -> None:
        super().__init__(INT_EXIT)


def as_command(run) -> int:
    """``sys.exit(as_command(lambda: main(argv)))`` in a command line's ``__main__``: ``run()``'s exit status; on
    ``Interrupted`` the process dies of SIGINT instead, as Python ends on an unhandled Ctrl-C (a shell's ``$?``: 130).
    Bash goes on with a script after a child that merely exits 130 (it takes the Ctrl-C as the child's own business),
    so a script of several commands (``scripts/gpu_smoke.sh``) would start the next one."""
    try:
        return run()
    except Interrupted:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        return INT_EXIT  # SIGINT blocked in this thread: the status alone


def hold_signals():
    """Until the function it returns is called, SIGINT, SIGTERM and SIGHUP are only noted, where their handlers are
    Python's (the main thread; elsewhere nothing changes); the call restores the handlers and delivers the noted
    signals. Held around a child's spawn (the judge server, the trainer): a Ctrl-C while the process is being made
    (between its fork and ``Popen`` returning) would otherwise leave it running with nothing to stop it."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    noted: list[int] = []
    held = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    held = {s: h for s, h in held.items() if callable(h)}
    for s in held:
        signal.signal(s, lambda signum, _frame: noted.append(signum))

    def release() -> None:
        for s, handler in held.items():
            signal.signal(s, handler)
        for signum in dict.fromkeys(noted):
            signal.raise_signal(signum)

    return release


@contextlib.contextmanager
def tracked(proc: subprocess.Popen, grace: float = 30.0):
    """``proc`` in the registry while the block runs; stopped and removed when it ends, whatever ends it."""
    started(proc)
    try:
        yield proc
    finally:
        stop(proc, grace)
        ended(proc)


def stop_all(why: str, grace: float = 30.0) -> int:
    """SIGTERM to every tracked child still running, SIGKILL to those alive after ``grace`` seconds; how many were
    running. A pipeline calls it when a stage fails or it is signalled, before it joins its other threads (each
    thread's launcher then stops its own judge server and Ray head)."""
    procs = live()
    if not procs:
        return 0
    pids = ", ".join(f"pid {p.pid}" for p in procs)
    say("children", f"{why}: stopping {len(procs)} running child process(es): {pids}")
    for p in procs:
        p.terminate()
    for p in procs:
        stop(p, grace)
    return len(procs)
