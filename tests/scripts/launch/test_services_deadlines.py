"""scripts/launch/services.py's deadlines, measured on a fake clock and a fake process: ``wait_until`` gives up at
its ``timeout`` (not later), says every 30 s that it is waiting; ``stop`` waits ``grace`` seconds for SIGTERM before
SIGKILL (the value it passes, not a time measured). No real process, no real sleep."""

from __future__ import annotations

import signal
import subprocess
import types

import pytest

from scripts.launch import services


class Clock:
    """A clock that moves only when slept on."""

    def __init__(self):
        self.now, self.sleeps = 0.0, 0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.now += seconds


class Running:
    """A process that never exits (what ``wait_until`` polls)."""

    returncode = None

    def poll(self):
        return None


@pytest.mark.parametrize(
    "case, ready_at, timeout, poll, outcome, now, sleeps, said",
    [
        # ready() asked at 0, 0.5, ... 3.0: ready at the seventh question, after six sleeps
        ("ready after 3 s", 3.0, 10, 0.5, True, 3.0, 6, []),
        # the first reading past 10 s (10.5) raises: 21 sleeps, not one more
        ("never ready, 10 s", None, 10, 0.5, "not ready within 10s (x.start_timeout)", 10.5, 21, []),
        ("never ready, 2 s polled by 1 s", None, 2, 1.0, "not ready within 2s (x.start_timeout)", 3.0, 3, []),
        # a deadline of 0: the first reading after one poll raises
        ("never ready, no time", None, 0, 0.5, "not ready within 0s (x.start_timeout)", 0.5, 1, []),
        (
            "never ready, 95 s: says so at 30, 60 and 90 s",
            None,
            95,
            5.0,
            "not ready within 95s (x.start_timeout)",
            100.0,
            20,
            [30, 60, 90],
        ),
    ],
)
def test_wait_until_gives_up_at_its_deadline(
    case, ready_at, timeout, poll, outcome, now, sleeps, said, monkeypatch, tmp_path
):
    clock, messages = Clock(), []
    monkeypatch.setattr(services, "say", lambda who, msg: messages.append((who, msg)))
    log = tmp_path / "stand-in.log"
    log.write_text("starting\n")

    def wait():
        return services.wait_until(
            lambda: ready_at is not None and clock() >= ready_at,
            Running(),
            "the stand-in",
            timeout,
            str(log),
            setting="x.start_timeout",
            poll=poll,
            who="test",
            clock=clock,
            sleep=clock.sleep,
        )

    if outcome is True:
        assert wait() is True
    else:
        with pytest.raises(services.ServiceError) as e:
            wait()
        assert str(e.value) == f"the stand-in was {outcome}; its log ({log}) ends:\nstarting"
    assert (clock.now, clock.sleeps) == (now, sleeps)
    assert messages == [("test", f"waiting for the stand-in ({s}s) ...") for s in said]


class FakePopen:
    """Records what ``stop`` does to it: ``terminate``, ``kill`` and each ``wait`` with its timeout. ``obeys``: it
    exits on SIGTERM (else only on SIGKILL); ``alive``: running when ``stop`` is called."""

    pid = 999_999_999  # no real process: only the fake killpg below ever sees it

    def __init__(self, obeys: bool, alive: bool = True):
        self.obeys, self.events = obeys, []
        self.returncode = None if alive else 0
        self.signalled = None

    def poll(self):
        return self.returncode

    def terminate(self):
        self.events.append("terminate")
        self.signalled = signal.SIGTERM

    def kill(self):
        self.events.append("kill")
        self.signalled = signal.SIGKILL

    def wait(self, timeout=None):
        self.events.append(("wait", timeout))
        if self.returncode is None:
            if self.signalled == signal.SIGKILL or (self.signalled == signal.SIGTERM and self.obeys):
                self.returncode = -self.signalled
            elif timeout is not None:
                raise subprocess.TimeoutExpired("fake", timeout)
        return self.returncode


@pytest.mark.parametrize(
    "case, obeys, alive, grace, events, ran",
    [
        ("exits on SIGTERM", True, True, None, ["terminate", ("wait", 30.0), ("wait", None)], True),
        (
            "ignores SIGTERM: SIGKILL after the default 30 s",
            False,
            True,
            None,
            ["terminate", ("wait", 30.0), "kill", ("wait", None)],
            True,
        ),
        (
            "ignores SIGTERM: SIGKILL after 7 s",
            False,
            True,
            7,
            ["terminate", ("wait", 7), "kill", ("wait", None)],
            True,
        ),
        ("already gone", False, False, 7, [("wait", None)], False),
    ],
)
def test_stop_waits_grace_seconds_before_sigkill(case, obeys, alive, grace, events, ran):
    proc = FakePopen(obeys, alive)
    assert (services.stop(proc) if grace is None else services.stop(proc, grace)) is ran
    assert proc.events == events


@pytest.mark.parametrize("obeys", [True, False])
def test_group_stop_waits_grace_seconds_before_sigkill(obeys, monkeypatch):
    """``group=True``: SIGTERM to the group, ``grace`` seconds for the leader, SIGKILL to the group, then the group
    is asked once whether it is gone (the fake group is gone at once)."""
    proc, signals = FakePopen(obeys), []

    def killpg(pgid, sig):
        signals.append((pgid, sig))
        if sig == 0:
            raise ProcessLookupError
        proc.signalled = sig

    monkeypatch.setattr(services, "os", types.SimpleNamespace(killpg=killpg))
    assert services.stop(proc, grace=12, group=True) is True
    assert proc.events == [("wait", 12), ("wait", None)]
    assert signals == [(proc.pid, signal.SIGTERM), (proc.pid, signal.SIGKILL), (proc.pid, 0)]


@pytest.mark.parametrize(
    "how, grace, events",
    [
        # the pipeline's stages and local runs call both without a grace: the default, 30 s
        ("tracked", None, ["terminate", ("wait", 30.0), "kill", ("wait", None)]),
        ("tracked", 3, ["terminate", ("wait", 3), "kill", ("wait", None)]),
        # stop_all sends SIGTERM to all first, then stops each: SIGTERM again, grace seconds, SIGKILL
        ("stop_all", None, ["terminate", "terminate", ("wait", 30.0), "kill", ("wait", None)]),
        ("stop_all", 4, ["terminate", "terminate", ("wait", 4), "kill", ("wait", None)]),
    ],
)
def test_tracked_and_stop_all_pass_their_grace_on(how, grace, events):
    proc, kw = FakePopen(obeys=False), {} if grace is None else {"grace": grace}
    if how == "tracked":
        with services.tracked(proc, **kw):
            pass
    else:
        services.started(proc)
        try:
            assert services.stop_all("a stage failed", **kw) == 1
        finally:
            services.ended(proc)
    assert proc.events == events
