"""scripts/workflows/stages.py: a stage that fails stops the whole workflow at once, naming the stage, with every child
process it started stopped (``Stages.guarded``), whether the failure is in the main thread or in a chain beside it."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from scripts.launch import services
from scripts.workflows.stages import Stages

#: the sleeper stages' children, to see how each one ended
SLEEPERS: list[subprocess.Popen] = []


def _sleeper() -> None:
    """A stage whose child runs for a minute unless stopped (a training run, say)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    SLEEPERS.append(proc)
    services.started(proc)
    try:
        if proc.wait() != 0:
            raise SystemExit(f"stage failed (exit {proc.returncode})")
    finally:
        services.ended(proc)


def _fails_after(seconds: float, what: str):
    def fn() -> None:
        time.sleep(seconds)
        raise RuntimeError(what)

    return fn


@pytest.mark.parametrize("where", ["chain", "main"])
def test_a_failing_stage_stops_the_workflow_at_once(where, tmp_path):
    flow = Stages(str(tmp_path))

    def workflow() -> None:
        if where == "chain":  # the rule run fails while the main thread runs the judge run
            job = flow.chain("rule", [("rule", flow.path("rule"), _fails_after(0.5, "the rule run broke"))])
            flow.stage("judge", flow.path("judge"), _sleeper)
            flow.join(job)
        else:  # the judge run fails while a chain runs the rule run
            job = flow.chain("rule", [("rule", flow.path("rule"), _sleeper)])
            flow.stage("judge", flow.path("judge"), _fails_after(0.5, "the judge run broke"))
            flow.join(job)

    SLEEPERS.clear()
    with pytest.raises(SystemExit) as e:
        flow.guarded(workflow)
    # the other stage's child was stopped by a signal, not waited for: its minute of sleep never ended
    assert [p.returncode for p in SLEEPERS] in ([-signal.SIGTERM], [-signal.SIGKILL])
    name, what = ("rule", "the rule run broke") if where == "chain" else ("judge", "the judge run broke")
    assert str(e.value.code).startswith(f"[pipeline] stage {name} failed after ")
    assert str(e.value.code).endswith(f"RuntimeError: {what}")
    assert services.live() == [] and not any((tmp_path / f".{n}.done").exists() for n in ("rule", "judge"))
