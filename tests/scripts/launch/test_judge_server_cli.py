"""scripts/launch/judge_server.py's command line, interrupted (Ctrl-C) before its server is ready: one line on
stderr, exit 130, and no server process left, also when the Ctrl-C comes while the process is being made (between
its fork and ``Popen`` returning, where it used to be left running with nothing to stop it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.scripts.launch.test_judge_server import _alive
from tests.scripts.workflows.test_pipeline import ROOT

# the command line with a stand-in server that never answers; "spawning": the Ctrl-C arrives inside services.spawn,
# once the process exists and before spawn returns it. A job started in the background by a non-interactive shell
# inherits SIGINT ignored (POSIX), and Python then keeps it ignored: the driver restores Python's own handler
DRIVER = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # a terminal's Ctrl-C, also where SIGINT came in ignored
from scripts.launch import judge_server, services
mode, pid_file, log = sys.argv[1:4]
judge_server.command = lambda settings, port, python=None: [sys.executable, "-c", "import time; time.sleep(600)"]
real_spawn = services.spawn
def spawn(*args, **kwargs):
    proc = real_spawn(*args, **kwargs)
    open(pid_file, "w").write(str(proc.pid))
    if mode == "spawning":
        signal.raise_signal(signal.SIGINT)
    return proc
services.spawn = spawn
sys.exit(judge_server.main(["--model", "/m", "--engine", "cpu_judge", "--log", log]))
"""
LINE = "judge_server: interrupted (Ctrl-C) before the server was ready; no server is left running\n"


@pytest.mark.parametrize("mode", ["spawning", "waiting"])
def test_ctrl_c_before_the_server_is_ready(mode, tmp_path):
    pid_file = tmp_path / "server.pid"
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, mode, str(pid_file), str(tmp_path / "server.log")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    server = None
    try:
        while not (pid_file.exists() and pid_file.read_text()) and proc.poll() is None:
            time.sleep(0.05)
        server = int(pid_file.read_text())
        if mode == "waiting":
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        assert (proc.returncode, err) == (130, LINE), out + err
        assert not _alive(server)
    finally:
        if proc.poll() is None:
            proc.kill()
        if server is not None and _alive(server):  # left running (the bug): ours to end
            os.killpg(server, signal.SIGKILL)


# the command line whose stand-in server is "ready" at once; a SIGTERM arrives the moment READY is printed
READY_DRIVER = """
import builtins, signal, sys
from scripts.launch import judge_server, services
pid_file, log = sys.argv[1:3]
def start(settings, env, log_path, port=0):
    proc = services.spawn([sys.executable, "-c", "import time; time.sleep(600)"], env, log_path, group=True)
    open(pid_file, "w").write(str(proc.pid))
    return judge_server.Server(proc=proc, port=1, log_path=log_path)
judge_server.start = start
real_print = builtins.print
def print_then_term(*args, **kwargs):
    real_print(*args, **kwargs)
    if args and str(args[0]).startswith("READY"):
        signal.raise_signal(signal.SIGTERM)
builtins.print = print_then_term
sys.exit(judge_server.main(["--model", "/m", "--engine", "cpu_judge", "--log", log]))
"""


def test_a_sigterm_right_after_ready_stops_the_server(tmp_path):
    """The race a loaded machine showed (a server left running after the command line exited 0): the SIGTERM is
    handled between printing READY and entering the block that stops the server on its way out."""
    pid_file = tmp_path / "server.pid"
    r = subprocess.run(
        [sys.executable, "-c", READY_DRIVER, str(pid_file), str(tmp_path / "server.log")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    server = int(pid_file.read_text())
    try:
        assert (r.returncode, r.stdout) == (0, "READY http://127.0.0.1:1/v1\n[judge_server] judge server stopped\n"), (
            r.stderr
        )
        assert not _alive(server)
    finally:
        if _alive(server):  # left running (the bug): ours to end
            os.killpg(server, signal.SIGKILL)
