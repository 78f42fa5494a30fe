"""scripts/launch/services.py: start, wait until ready, stop, on real child processes (CPU, seconds)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from scripts.launch import services

SLEEPER = [sys.executable, "-c", "import sys, time; print('up', flush=True); time.sleep(float(sys.argv[1]))"]


@pytest.mark.parametrize(
    "case, seconds, ready, timeout, cancel, outcome",
    [
        ("ready at once", "30", lambda log: True, 5, False, True),
        ("ready once its log says so", "30", lambda log: "up" in open(log).read(), 10, False, True),
        (
            "exits before it is ready",
            "0",
            lambda log: False,
            10,
            False,
            "the stand-in exited with 0 before it was ready; its log ({log}) ends:\nup",
        ),
        (
            "never ready",
            "30",
            lambda log: False,
            0.5,
            False,
            "the stand-in was not ready within 0s (x.start_timeout); its log ({log}) ends:\nup",
        ),
        ("cancelled", "30", lambda log: False, 10, True, False),
    ],
)
def test_wait_until(case, seconds, ready, timeout, cancel, outcome, tmp_path):
    log = str(tmp_path / "logs" / "stand-in.log")
    proc = services.spawn([*SLEEPER, seconds], dict(os.environ), log, group=True)
    stop = threading.Event()
    if cancel:
        stop.set()
    try:
        if isinstance(outcome, str):
            if seconds == "0":
                proc.wait(timeout=30)
            else:  # its first line is in the log before the deadline passes
                while "up" not in open(log).read():
                    time.sleep(0.05)
            kind = services.ServiceExited if seconds == "0" else services.ServiceError
            with pytest.raises(kind) as e:
                services.wait_until(
                    lambda: ready(log), proc, "the stand-in", timeout, log, stop, setting="x.start_timeout", poll=0.05
                )
            assert str(e.value) == outcome.format(log=log)
        else:
            assert (
                services.wait_until(lambda: ready(log), proc, "the stand-in", timeout, log, stop, poll=0.05) is outcome
            )
    finally:
        services.stop(proc, grace=5, group=True)
    assert proc.poll() is not None


def test_stop_takes_the_whole_group_and_says_whether_it_ran(tmp_path):
    """A leader and its child that both ignore SIGTERM (as a stuck engine does): both are gone when
    ``stop(group=True)`` returns, within the grace period."""
    code = (
        "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "c = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(30)']); print(c.pid, flush=True); time.sleep(30)"
    )
    log = str(tmp_path / "group.log")
    proc = services.spawn([sys.executable, "-c", code], dict(os.environ), log, group=True)
    while not open(log).read().strip():
        time.sleep(0.05)
    child = int(open(log).read().split()[0])
    assert services.stop(proc, grace=1, group=True) is True
    # both ignored SIGTERM: the grace ran out and the group got SIGKILL (a leader that sleeps its 30 s out exits 0)
    assert proc.poll() == -signal.SIGKILL and not _alive(child)
    assert services.stop(proc, grace=1, group=True) is False  # already stopped: nothing to do


def test_tracked_children_are_stopped_on_the_way_out():
    proc = subprocess.Popen([*SLEEPER, "60"], stdout=subprocess.DEVNULL)
    with pytest.raises(RuntimeError), services.tracked(proc, grace=5):
        assert services.live() == [proc]
        raise RuntimeError("a stage failed")
    assert proc.poll() is not None and services.live() == []


def _alive(pid: int) -> bool:
    """Whether ``pid`` exists now (a zombie not yet reaped counts: it is still in its process group)."""
    return os.path.exists(f"/proc/{pid}")
