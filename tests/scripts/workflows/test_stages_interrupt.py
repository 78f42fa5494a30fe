"""scripts/workflows/stages.py: a Ctrl-C (``KeyboardInterrupt`` in the main thread) while a stage runs beside it, such
as a training whose launcher is starting its judge server, ends the workflow with one line and exit 130, not a
traceback, with every child process stopped first (``scripts.policy_learns`` and ``scripts.pipeline`` run in
``Stages.guarded``)."""

from __future__ import annotations

import signal

import pytest

from scripts.launch import services
from scripts.workflows.stages import Stages
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
            while not SLEEPERS:  # the chain's child runs
                pass
        if where.startswith("in a stage"):
            flow.stage("judge", flow.path("judge"), _interrupted)
        else:  # the main thread waits for the chain (``join``) or goes to the next stage
            _interrupted()
        flow.join(job)

    SLEEPERS.clear()
    with pytest.raises((SystemExit, KeyboardInterrupt)) as e:  # a KeyboardInterrupt let through: a traceback
        flow.guarded(workflow)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert (e.type, getattr(e.value, "code", None), last) == (SystemExit, 130, LINE)
    stopped = ([],) if "chain" not in where else ([-signal.SIGTERM], [-signal.SIGKILL])  # by a signal, not waited for
    assert [p.returncode for p in SLEEPERS] in stopped
    assert services.live() == [] and not any((tmp_path / f".{n}.done").exists() for n in ("rule", "judge"))
