"""``python -m scripts.lab.policy_learns --instances ...`` interrupted (Ctrl-C) while its instances run: one line, no
traceback, every instance stopped, and the command line dies of SIGINT (``services.as_command``), so that the bash
script running it stops there too (no ``AFTER`` line). Stand-ins for the instances (processes that sleep), started
through the real ``instances.run``."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from tests.scripts.launch.test_judge_server import _alive
from tests.scripts.launch.test_launcher_interrupt import in_own_group

DEADLINE_S = 120.0  # for what each step waits for: a command line that never gets there fails the test, never hangs it
DRIVER = """
import os, runpy, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # a terminal's Ctrl-C, also where SIGINT came in ignored
from scripts.launch import services
tmp = sys.argv[1]
SLEEP = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(600)"
real_spawn = services.spawn
def spawn(cmd, env, log, **kwargs):  # instance k: a process that sleeps, in a process group of its own as the real one
    k = os.path.basename(log).removeprefix("instance_").removesuffix(".log")
    return real_spawn([sys.executable, "-c", SLEEP, os.path.join(tmp, f"instance_{k}.pid")], env, log, **kwargs)
services.spawn = spawn
sys.argv = ["scripts.lab.policy_learns", "--out", os.path.join(tmp, "card"), "--instances", "0,1"]
runpy.run_module("scripts.lab.policy_learns", run_name="__main__")  # the command line itself
"""
LINE = "[pipeline] interrupted (Ctrl-C): every instance and what it started are stopped; exit 130"


def test_ctrl_c_stops_every_instance_and_the_script_that_ran_it(tmp_path):
    driver = [sys.executable, "-c", DRIVER, str(tmp_path)]
    proc = in_own_group(["bash", "-c", '"$@"; echo "AFTER $?"', "bash", *driver])
    pids = [tmp_path / f"instance_{k}.pid" for k in (0, 1)]
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not all(p.exists() and p.read_text() for p in pids) and proc.poll() is None:
            if time.monotonic() > deadline:
                pytest.fail(f"the instances never started within {DEADLINE_S} s")
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: to the whole foreground process group
        out, err = proc.communicate(timeout=DEADLINE_S)
        lines = out.strip().splitlines() or [""]
        # dead of SIGINT, as Python ends on an unhandled Ctrl-C (bash: the same, having seen its child die of it)
        assert (proc.returncode, lines[-1], "Traceback" in err) == (-signal.SIGINT, LINE, False), out + err
        assert [_alive(int(p.read_text())) for p in pids] == [False, False]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for p in pids:  # left running (the bug): ours to end
            if p.exists() and p.read_text() and _alive(int(p.read_text())):
                os.kill(int(p.read_text()), signal.SIGKILL)
