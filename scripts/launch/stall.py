"""The stall watchdog: a training run that completes no step for too long is stopped, with a message naming the run,
its last step, the wait and its log's last lines. The launcher runs one beside every local training run.

A step counts when verl reports a step number not seen before (metrics JSONL ``step`` or a ``step:N`` console line,
so ``trainer.logger`` needs ``file`` or ``console``). Limits (``verl_judge.watchdog`` in ``recipes/base.yaml``):
``startup_s`` until the first step, then ``factor`` x the median step within [``min_step_s``, ``step_s``]. A stalled
trainer gets SIGTERM, SIGKILL after ``KILL_GRACE_S``; the launcher exits with ``STALL_EXIT``.

    watch = Stall(settings, "judge"); ... watch.saw(step) ...; watch.overdue() -> seconds waited, or None
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import threading
import time

from scripts.console import say
from scripts.launch import services

STALL_EXIT = 5  # scripts.train's silent judge is 3, a dead judge server 4
KILL_GRACE_S = 30.0
DEFAULTS = {"enable": True, "startup_s": 1800.0, "step_s": 600.0, "min_step_s": 300.0, "factor": 20.0}
MIN_STARTUP_S = 5.0  # no trainer reports a step sooner: a smaller startup_s is a typo (ms for s, a dropped digit)
STEP_LOGGERS = ("console", "file")  # verl's loggers the watchdog reads steps from
STEP_LINE = re.compile(r"(?<![\w.])step:(\d+)\b")


def settings_errors(settings: dict) -> list[str]:
    """Messages naming each ``verl_judge.watchdog`` value that is not a positive number (or a boolean ``enable``),
    a ``startup_s`` under ``MIN_STARTUP_S`` and a ``min_step_s`` above ``step_s``."""
    errors, s = [], {**DEFAULTS, **settings}
    for key, value in s.items():
        if key not in DEFAULTS:
            errors.append(f"verl_judge.watchdog.{key}: unknown setting (known: {', '.join(DEFAULTS)})")
        elif key == "enable":
            if not isinstance(value, bool):
                errors.append(f"verl_judge.watchdog.enable must be true or false, got {value!r}")
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            errors.append(f"verl_judge.watchdog.{key} must be a number > 0, got {value!r}")
    if errors:
        return errors
    if s["startup_s"] < MIN_STARTUP_S:
        errors.append(
            f"verl_judge.watchdog.startup_s must be at least {MIN_STARTUP_S:g} seconds (the time until a run's first "
            f"step), got {s['startup_s']!r}"
        )
    if s["min_step_s"] > s["step_s"]:
        errors.append(
            f"verl_judge.watchdog.min_step_s ({s['min_step_s']!r}) is above step_s ({s['step_s']!r}): the limit "
            "between steps lies within [min_step_s, step_s]"
        )
    return errors


def planned(cfg) -> dict | None:
    """``verl_judge.watchdog`` of a composed config the launcher checked (``settings_errors``): its settings when on,
    None when off."""
    from omegaconf import OmegaConf

    watchdog = OmegaConf.select(cfg, "verl_judge.watchdog", default=None)
    watchdog = OmegaConf.to_container(watchdog, resolve=True) if watchdog is not None else {}
    return watchdog if watchdog.get("enable", True) else None


def source_errors(settings: dict, loggers) -> list[str]:
    """An enabled watchdog whose run reports no steps it can read: ``trainer.logger`` (``loggers``, a list or one
    name) without ``console`` and ``file``."""
    if not {**DEFAULTS, **(settings or {})}["enable"]:
        return []
    names = [loggers] if isinstance(loggers, str) else list(loggers or ())
    if any(str(n) in STEP_LOGGERS for n in names):
        return []
    return [
        f"verl_judge.watchdog has no step source: trainer.logger={names} has neither console nor file, so every run "
        "would be stopped as stalled after startup_s; add console or file to trainer.logger, or set "
        "verl_judge.watchdog.enable=false"
    ]


class Stall:
    """The steps a run has completed and when; ``overdue()`` says when it has waited past its limit."""

    def __init__(self, settings: dict, run: str, clock=time.monotonic):
        s = {**DEFAULTS, **(settings or {})}
        self.run, self.clock = run, clock
        self.startup_s, self.step_s = float(s["startup_s"]), float(s["step_s"])
        self.min_step_s, self.factor = float(s["min_step_s"]), float(s["factor"])
        self.t0 = clock()
        self.last_step: int | None = None  # the last new step number seen
        self.last_t: float | None = None
        self.seen: set[int] = set()
        self.gaps: list[float] = []
        self._lock = threading.Lock()

    def saw(self, step: int) -> None:
        """Step ``step`` was reported: progress when no report named it before (a step reported again by the other
        logger, or late, is nothing new; a stray huge number does not hide the steps after it)."""
        with self._lock:
            if step in self.seen:
                return
            self.seen.add(step)
            now = self.clock()
            if self.last_t is not None:
                self.gaps.append(now - self.last_t)
            self.last_step, self.last_t = step, now

    def line(self, text: str) -> None:
        """A line of the run's console output (``step:N - ...`` from verl's console logger)."""
        m = STEP_LINE.search(text)
        if m:
            self.saw(int(m.group(1)))

    def limit(self) -> float:
        """Seconds the run may now go without a new step."""
        if self.last_t is None:
            return self.startup_s
        if not self.gaps:
            return self.step_s
        return min(self.step_s, max(self.min_step_s, self.factor * statistics.median(self.gaps)))

    def waited(self) -> float:
        return self.clock() - (self.t0 if self.last_t is None else self.last_t)

    def overdue(self) -> float | None:
        waited = self.waited()
        return waited if waited > self.limit() else None

    def message(self, tail: str) -> str:
        step = "none yet (still starting)" if self.last_step is None else str(self.last_step)
        what = "startup_s" if self.last_t is None else "factor x median step, within [min_step_s, step_s]"
        return (
            f"run {self.run} completed no step for {self.waited():.0f}s (limit {self.limit():.0f}s: "
            f"verl_judge.watchdog.{what}); last step: {step}; stopping it (exit {STALL_EXIT}). Its log ends:\n"
            f"{tail.rstrip()}"
        )


class MetricsTail:
    """New lines of a growing metrics JSONL, their ``step`` values."""

    def __init__(self, path: str):
        self.path, self.offset = path, 0

    def steps(self) -> list[int]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        end = data.rfind(b"\n") + 1  # a line still being written waits for the next read
        self.offset += end
        out = []
        for raw in data[:end].splitlines():
            try:
                step = json.loads(raw).get("step")
            except (ValueError, AttributeError):
                continue
            if isinstance(step, int) and not isinstance(step, bool):
                out.append(step)
        return out


class Watch:
    """A thread beside a training process: feeds ``stall`` from the metrics file, and when the run is overdue, says
    why (``cause``) and stops the process. ``tail()`` gives the run's last log lines."""

    def __init__(self, stall: Stall, metrics_file: str | None, tail, interval: float = 5.0):
        self.stall, self.tail, self.interval = stall, tail, interval
        self.metrics = MetricsTail(metrics_file) if metrics_file and "://" not in metrics_file else None
        self.proc: subprocess.Popen | None = None
        self.cause: str | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=f"stall-watch-{stall.run}", daemon=True)

    def attach(self, proc: subprocess.Popen) -> None:
        self.proc = proc

    def __enter__(self) -> "Watch":
        if self.metrics is not None and os.path.exists(self.metrics.path):
            self.metrics.offset = os.path.getsize(self.metrics.path)  # an earlier run's lines are not progress
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._done.wait(self.interval):
            for step in self.metrics.steps() if self.metrics else ():
                self.stall.saw(step)
            if self.stall.overdue() is None:
                continue
            self.cause = self.stall.message(self.tail())
            say("watchdog", f"ERROR: {self.cause}")
            services.stop(self.proc, KILL_GRACE_S)
            return
