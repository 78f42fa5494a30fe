"""A signal that arrives while a child is being made (between its fork and ``Popen`` returning) leaves no child
running: ``services.hold_signals`` notes it and delivers it once the child is in the block that stops it. Checked
for the trainer's spawn (``local_run.run_child``) and the judge server's (``judge_server.start``)."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from scripts.launch import judge_server, local_run, services

SLEEP = [sys.executable, "-c", "import time; time.sleep(600)"]


@pytest.fixture
def ctrl_c(monkeypatch):
    """Python's own SIGINT handler for the test (an xdist worker may run with SIGINT ignored), and a Popen that
    receives a Ctrl-C the moment its process exists; yields the processes it made."""
    made: list[subprocess.Popen] = []
    real = subprocess.Popen

    def popen(*args, **kwargs):
        proc = real(*args, **kwargs)
        made.append(proc)
        signal.raise_signal(signal.SIGINT)  # inside Popen's caller, before it has the process
        return proc

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    monkeypatch.setattr(subprocess, "Popen", popen)
    try:
        yield made
    finally:
        signal.signal(signal.SIGINT, previous)
        for proc in made:
            if proc.poll() is None:  # left running (the bug): ours to end
                proc.kill()
                proc.wait()


def test_a_ctrl_c_while_the_trainer_is_made_stops_it(ctrl_c, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        local_run.run_child(SLEEP, {}, local_run.Tee(str(tmp_path / "run.log"), {}))
    assert len(ctrl_c) == 1 and ctrl_c[0].poll() == -signal.SIGTERM and services.live() == []


def test_a_ctrl_c_while_the_judge_server_is_made_stops_it(ctrl_c, tmp_path, monkeypatch):
    monkeypatch.setattr(judge_server, "command", lambda settings, port, python=None: SLEEP)
    with pytest.raises(KeyboardInterrupt):
        judge_server.start({"model": "/m", "engine": "cpu_judge"}, {}, str(tmp_path / "server.log"), timeout=60)
    assert len(ctrl_c) == 1 and ctrl_c[0].poll() == -signal.SIGTERM


def test_signals_are_only_noted_while_held():
    seen: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: seen.append(signum))
    try:
        release = services.hold_signals()
        signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGINT)
        held = list(seen)
        release()
        assert (held, seen) == ([], [signal.SIGINT])  # delivered once, after the release
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_ctrl_c_while_an_instance_is_made_stops_it(ctrl_c, tmp_path, monkeypatch):
    from types import SimpleNamespace

    from scripts.lab import instances

    real_spawn = services.spawn
    monkeypatch.setattr(services, "spawn", lambda cmd, env, log, **kw: real_spawn(SLEEP, env, log, **kw))
    cfg = SimpleNamespace(instances=[0, 1], gpus="", out=str(tmp_path), arms=["rule"], seeds=[0], steps=1)
    with pytest.raises(services.Interrupted):
        instances.run(cfg, ["--out", str(tmp_path)])
    assert len(ctrl_c) == 1 and ctrl_c[0].poll() == -signal.SIGTERM and services.live() == []
