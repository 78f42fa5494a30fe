"""scripts/workflows/stages.py: a Ctrl-C (``KeyboardInterrupt`` in the main thread) while a stage runs beside it, such
as a training whose launcher is starting its judge server, ends the workflow with one line, not a traceback, with
every child process stopped first (``scripts.lab.policy_learns`` and ``scripts.pipeline`` run in
``Stages.guarded``), and
``services.Interrupted`` (status 130): their command lines then die of SIGINT, as an unhandled Ctrl-C ends Python, so
that a shell script running them stops too (bash goes on after a child that merely exits 130)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from scripts.launch import services
from scripts.workflows.stages import Stages
from tests.scripts.workflows.test_pipeline import ROOT
from tests.scripts.workflows.test_stages import SLEEPERS, _sleeper

LINE = "[pipeline] interrupted (Ctrl-C): every stage and the processes they started are stopped; exit 130"


def _interrupted() -> None:
    raise KeyboardInterrupt


@pytest.mark.parametrize("where", ["in a stage", "in a stage, a chain beside it", "between stages, a chain beside"])
def test_ctrl_c_ends_the_workflow_with_one_line(where, tmp_path, capsys):
    flow = Stages(str(tmp_path))

    def workflow() -> None:
        job = None
        if "chain" in where:
            job = flow.chain("rule", [("rule", flow.path("rule"), _sleeper)])
            deadline = time.monotonic() + 60
            while not SLEEPERS:  # the chain's child runs
                if time.monotonic() > deadline or not job["thread"].is_alive():
                    pytest.fail(f"the chain's child never started within 60 s: {job['errors']}")
                time.sleep(0.01)
        if where.startswith("in a stage"):
            flow.stage("judge", flow.path("judge"), _interrupted)
        else:  # the main thread waits for the chain (``join``) or goes to the next stage
            _interrupted()
        flow.join(job)

    SLEEPERS.clear()
    with pytest.raises((SystemExit, KeyboardInterrupt)) as e:  # a KeyboardInterrupt let through: a traceback
        flow.guarded(workflow)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert (e.type, getattr(e.value, "code", None), last) == (services.Interrupted, 130, LINE)
    stopped = ([],) if "chain" not in where else ([-signal.SIGTERM], [-signal.SIGKILL])  # by a signal, not waited for
    assert [p.returncode for p in SLEEPERS] in stopped
    assert services.live() == [] and not any((tmp_path / f".{n}.done").exists() for n in ("rule", "judge"))


# the command line itself (``python -m <command>``), its workflow a Ctrl-C in a stage: both commands parse their
# arguments through ``cli.parse`` first, which here runs that workflow (``python -m`` runs a fresh copy of the module)
ENTRY = """
import runpy, sys
from scripts.workflows import cli
from scripts.workflows.stages import Stages
command, out = sys.argv[1:3]
sys.argv = [command]
def parse(parser, argv):
    flow = Stages(out)
    def interrupted():
        raise KeyboardInterrupt
    flow.guarded(lambda: flow.stage("judge", flow.path("judge"), interrupted))
cli.parse = parse
runpy.run_module(command, run_name="__main__")
"""


@pytest.mark.parametrize("command", ["scripts.pipeline", "scripts.lab.policy_learns"])
def test_an_interrupted_workflow_command_dies_of_sigint(command, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", ENTRY, command, str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert (proc.returncode, proc.stdout.strip().splitlines()[-1], proc.stderr) == (-signal.SIGINT, LINE, "")
