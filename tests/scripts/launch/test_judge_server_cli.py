"""scripts/launch/judge_server.py's command line, interrupted (Ctrl-C) before its server is ready: one line on
stderr, no server process left, also when the Ctrl-C comes while the process is being made (between its fork and
``Popen`` returning, where it used to be left running with nothing to stop it); the command line then dies of SIGINT
(``services.as_command``; a shell's ``$?``: 130), so that a bash script running it stops there too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.scripts.launch.test_judge_server import _alive
from tests.scripts.launch.test_launcher_interrupt import DEFAULT_SIGINT
from tests.scripts.workflows.test_pipeline import ROOT

# the command line itself (python -m scripts.launch.judge_server) with a stand-in server that never answers, put in
# by services.spawn; "spawning": the Ctrl-C arrives inside services.spawn, once the process exists and before spawn
# returns it. A job started in the background by a non-interactive shell inherits SIGINT ignored (POSIX), and Python
# then keeps it ignored: the driver restores Python's own handler
DRIVER = """
import runpy, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # a terminal's Ctrl-C, also where SIGINT came in ignored
from scripts.launch import services
mode, pid_file, log = sys.argv[1:4]
real_spawn = services.spawn
def spawn(cmd, *args, **kwargs):
    proc = real_spawn([sys.executable, "-c", "import time; time.sleep(600)"], *args, **kwargs)
    open(pid_file, "w").write(str(proc.pid))
    if mode == "spawning":
        signal.raise_signal(signal.SIGINT)
    return proc
services.spawn = spawn
sys.argv = ["scripts.launch.judge_server", "--model", "/m", "--engine", "cpu_judge", "--log", log]
runpy.run_module("scripts.launch.judge_server", run_name="__main__")
"""
LINE = "judge_server: interrupted (Ctrl-C) before the server was ready; no server is left running\n"


# "spawning" and "waiting" (SIGINT to the command line while it waits for the server); "terminal": the command line
# run by a bash script that has a command after it, SIGINT to the whole process group as a terminal's Ctrl-C sends it:
# the script must stop there (no AFTER line). Each: dead of SIGINT (returncode -2; bash the same, having seen its child
# die of it), as Python ends on an unhandled Ctrl-C
@pytest.mark.parametrize("mode", ["spawning", "waiting", "terminal"])
def test_ctrl_c_before_the_server_is_ready(mode, tmp_path):
    pid_file = tmp_path / "server.pid"
    driver = [sys.executable, "-c", DRIVER, "spawning" if mode == "spawning" else "waiting", str(pid_file)]
    driver.append(str(tmp_path / "server.log"))
    if mode == "terminal":
        driver = ["bash", "-c", '"$@"; echo "AFTER $?"', "bash", *driver]
    proc = subprocess.Popen(
        [*DEFAULT_SIGINT, *driver],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the Ctrl-C reaches no process of this test
    )
    server = None
    try:
        while not (pid_file.exists() and pid_file.read_text()) and proc.poll() is None:
            time.sleep(0.05)
        server = int(pid_file.read_text())
        if mode == "waiting":
            proc.send_signal(signal.SIGINT)
        elif mode == "terminal":
            os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        said = (proc.returncode, out.splitlines()[-1:], "AFTER" in out, err)
        assert said == (-signal.SIGINT, ["[judge_server] judge server stopped"], False, LINE), out + err
        assert not _alive(server)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
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
