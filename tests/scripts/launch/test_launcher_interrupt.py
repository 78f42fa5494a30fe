"""The launcher's command line (``python -m scripts.launch``) interrupted (Ctrl-C) while its judge server starts: one
line, exit 130, no traceback, and neither the judge server nor the trainer left running, also when the Ctrl-C comes
while the server's process is being made. Stand-ins for the plan, the Ray head, the trainer and the server (processes
that sleep; the server never answers), the launcher's own ``local_run`` and ``judge_server.Served`` between them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.scripts.launch.test_judge_server import _alive
from tests.scripts.workflows.test_pipeline import ROOT

DRIVER = """
import os, signal, sys
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
        while not os.path.exists(os.path.join(tmp, "trainer.pid")):
            pass
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
    services={"judge_server": {"engine": "cpu_judge", "model": "/m", "start_timeout": 600}},
)
launcher.check_recipe = lambda recipe, overrides, env, **where: plan
sys.exit(launcher.main(["stand_in"]))
"""
LINE = "[launch] interrupted (Ctrl-C): what it started on this machine is stopped; exit 130"


@pytest.mark.parametrize("mode", ["spawning", "waiting"])
def test_ctrl_c_while_the_judge_server_starts(mode, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DRY_RUN", "RAY_ADDRESS")}
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, mode, str(tmp_path)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pids = {name: tmp_path / f"{name}.pid" for name in ("server", "trainer")}
    try:
        while not all(p.exists() and p.read_text() for p in pids.values()) and proc.poll() is None:
            time.sleep(0.05)
        if mode == "waiting":
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        assert (proc.returncode, out.strip().splitlines()[-1], "Traceback" in err) == (130, LINE, False), out + err
        assert {name: _alive(int(p.read_text())) for name, p in pids.items()} == {"server": False, "trainer": False}
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in pids.values():  # left running (the bug): ours to end
            if p.exists() and p.read_text() and _alive(int(p.read_text())):
                os.kill(int(p.read_text()), signal.SIGKILL)
