"""The launcher's command line (``python -m scripts.launch``) interrupted (Ctrl-C) while its judge server starts: one
line, no traceback, and neither the judge server nor the trainer left running, also when the Ctrl-C comes while the
server's process is being made. It then dies of SIGINT (a shell's ``$?``: 130), as an unhandled Ctrl-C would: bash
goes on with a script after a child that only exits 130 (it takes the Ctrl-C as the child's own business), so a
script of several launches (``scripts/gpu_smoke.sh``) would start the next one. Stand-ins for the plan, the Ray head,
the trainer and the server (processes that sleep; the server never answers), the launcher's own ``local_run`` and
``judge_server.Served`` between them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.scripts.launch.test_judge_server import _alive
from tests.scripts.workflows.test_pipeline import ROOT

DEADLINE_S = 120.0  # for what each step waits for: a launcher that never gets there fails the test, never hangs it
DRIVER = """
import os, runpy, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # a terminal's Ctrl-C, also where SIGINT came in ignored
from scripts.launch import judge_server, launcher, ray_head, services
mode, tmp = sys.argv[1:3]
SLEEP = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(600)"
judge_server.command = lambda settings, port, python=None: [sys.executable, "-c", "import time; time.sleep(600)"]
ray_head.start = lambda env, log_path, **kw: (None, "127.0.0.1:1")
ray_head.stop = lambda proc, keep=False: None
real_spawn = services.spawn
def spawn(cmd, *args, **kwargs):
    proc = real_spawn(cmd, *args, **kwargs)
    open(os.path.join(tmp, "server.pid"), "w").write(str(proc.pid))
    if mode == "spawning":  # the Ctrl-C while the server's process is being made (once the trainer runs)
        deadline = time.monotonic() + %(deadline)r
        while not os.path.exists(os.path.join(tmp, "trainer.pid")):
            if time.monotonic() > deadline:
                raise RuntimeError("the trainer never started")
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)  # to the process, as a terminal sends it (its main thread takes it)
    return proc
services.spawn = spawn
plan = launcher.Plan(
    recipe="stand_in",
    mode="local",
    command=[sys.executable, "-c", SLEEP, os.path.join(tmp, "trainer.pid")],
    metrics_file=os.path.join(tmp, "run", "metrics.jsonl"),
    output_dir=os.path.join(tmp, "run"),
    log_file=os.path.join(tmp, "run", "launch.log"),
    judge_server={"engine": "cpu_judge", "model": "/m", "start_timeout": 600},
)
launcher.check_recipe = lambda recipe, overrides, env, **where: plan
sys.argv = ["scripts.launch", "stand_in"]
runpy.run_module("scripts.launch", run_name="__main__")  # the command line itself: python -m scripts.launch
""" % {"deadline": DEADLINE_S}
LINE = "[launch] interrupted (Ctrl-C): what it started on this machine is stopped; exit 130"


# runs its arguments with SIGINT's default disposition: a pytest-xdist worker may ignore SIGINT, and an ignored SIGINT
# is inherited, so neither bash nor Python would ever see the Ctrl-C (an exec, not ``preexec_fn``: the worker has
# threads)
DEFAULT_SIGINT = [
    sys.executable,
    "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])",
]


def in_own_group(argv: list[str]) -> subprocess.Popen:
    """``argv`` with SIGINT's default disposition, in a process group of its own (a Ctrl-C sent to that group reaches
    no process of the test), its output captured; the environment without ``DRY_RUN`` and ``RAY_ADDRESS``."""
    env = {k: v for k, v in os.environ.items() if k not in ("DRY_RUN", "RAY_ADDRESS")}
    return subprocess.Popen(
        [*DEFAULT_SIGINT, *argv],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


# "spawning": the driver sends itself SIGINT inside the server's spawn; "waiting": SIGINT to the driver while the
# server is awaited; "terminal": the driver run by a bash script that has a command after it, SIGINT to the whole
# process group as a terminal's Ctrl-C sends it: the script must stop there (no AFTER line)
@pytest.mark.parametrize("mode", ["spawning", "waiting", "terminal"])
def test_ctrl_c_while_the_judge_server_starts(mode, tmp_path):
    driver = [sys.executable, "-c", DRIVER, "spawning" if mode == "spawning" else "waiting", str(tmp_path)]
    if mode == "terminal":
        driver = ["bash", "-c", '"$@"; echo "AFTER $?"', "bash", *driver]
    proc = in_own_group(driver)
    pids = {name: tmp_path / f"{name}.pid" for name in ("server", "trainer")}
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not all(p.exists() and p.read_text() for p in pids.values()) and proc.poll() is None:
            if time.monotonic() > deadline:
                pytest.fail(f"the trainer or the judge server never started within {DEADLINE_S} s")
            time.sleep(0.05)
        if mode == "waiting":
            proc.send_signal(signal.SIGINT)
        elif mode == "terminal":
            os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=DEADLINE_S)
        lines = out.strip().splitlines() or [""]
        # dead of SIGINT, as Python ends on an unhandled Ctrl-C (bash: the same, having seen its child die of it)
        assert (proc.returncode, lines[-1], "Traceback" in err) == (-signal.SIGINT, LINE, False), out + err
        assert {name: _alive(int(p.read_text())) for name, p in pids.items()} == {"server": False, "trainer": False}
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for p in pids.values():  # left running (the bug): ours to end
            if p.exists() and p.read_text() and _alive(int(p.read_text())):
                os.kill(int(p.read_text()), signal.SIGKILL)
