"""The child processes a run or a pipeline starts and must stop on every exit path: ``started(proc)`` when one
starts, ``ended(proc)`` when it is done with, and ``stop_all(why)`` stops those still running. A pipeline calls
``stop_all`` when a stage fails or it is signalled, before it joins its other threads (each thread's launcher then
stops its own judge server and Ray head). No command of its own:

    proc = subprocess.Popen(...); children.started(proc); try: ... finally: children.ended(proc)
"""

from __future__ import annotations

import subprocess
import threading

from scripts.console import say

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


def stop_all(why: str, grace: float = 30.0) -> int:
    """SIGTERM to every child still running, SIGKILL to those alive after ``grace`` seconds; how many were running."""
    procs = live()
    if not procs:
        return 0
    say("children", f"{why}: stopping {len(procs)} running child process(es): "
        + ", ".join(f"pid {p.pid}" for p in procs))
    for p in procs:
        p.terminate()
    for p in procs:
        stop(p, grace)
    return len(procs)


def stop(proc: subprocess.Popen | None, grace: float = 30.0) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds (nothing when it has ended)."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
