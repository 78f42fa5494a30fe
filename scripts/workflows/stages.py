"""Resumable stages, for the workflows of ``scripts.workflows.pipeline`` and ``scripts.lab.policy_learns`` (no
command of its own).

``Stages(out, env, py, quiet)`` is one workflow's run. A stage runs unless ``<out>/.<name>.done`` and its output
exist, and writes that marker when it succeeds, so a rerun resumes. ``stage(..., background=True)`` runs one beside
the next stage; ``chain`` runs stages in a thread of its own until ``join``; a thread's error is re-raised in the main
thread. ``guarded(fn)`` stops the workflow at the first failure (or SIGTERM / SIGHUP / Ctrl-C): it stops every child
process still running (``scripts/launch/services.py``), waits for the threads and exits non-zero with
``stage <name> failed: ...`` (Ctrl-C: ``services.Interrupted``, the command line dies of SIGINT, ``$?`` 130).

    flow = Stages("runs/x"); flow.guarded(lambda: flow.stage("data", flow.path("data"), build_data))
"""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
import signal
import subprocess
import sys
import threading
import time

import scripts
from scripts import console
from scripts.launch import launcher as launch
from scripts.launch import services

say = functools.partial(console.say, "pipeline")


class Stages:
    def __init__(self, out: str, env: dict | None = None, py: str | None = None, quiet: bool = False):
        self.out = os.path.abspath(out)
        self.env = dict(os.environ if env is None else env)  # every command's environment
        self.py = py or sys.executable
        self.quiet = quiet  # stage output only to the logs
        self.t0 = time.time()
        self._background: list[dict] = []  # stages running in a thread beside the next stage
        self._local = threading.local()  # .background: this thread runs a background stage (its output: log only)
        self._jobs: list[dict] = []  # every chain started
        self._failures: list[SystemExit] = []  # stage failures, first first

    def path(self, *parts: str) -> str:
        return os.path.join(self.out, *parts)

    def sh(self, cmd: list[str], log: str, env: dict | None = None, ok=None) -> None:
        """Run ``cmd``, its output to the terminal and to ``logs/<log>.log``; a non-zero exit stops the workflow
        unless ``ok()`` says the stage's output was written anyway (an evaluator's report)."""
        say("$ " + shlex.join(cmd))
        log = self.log(log)
        os.makedirs(os.path.dirname(log), exist_ok=True)
        proc = subprocess.Popen(
            cmd,
            cwd=scripts.ROOT,
            env=env or self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
        with services.tracked(proc), open(log, "a", encoding="utf-8") as f:
            echo = not self.quiet and not getattr(self._local, "background", False)
            for line in proc.stdout:
                f.write(line)
                if echo:
                    sys.stdout.write(line)
            rc = proc.wait()
        if rc != 0 and ok is not None and ok():
            say(f"exit {rc}, output written: continuing (see {log})")
        elif rc != 0:
            raise SystemExit(f"[pipeline] stage failed (exit {rc}): {cmd[0]} ... ; log: {log}")

    def train(self, name: str, recipe: str, overrides: list[str], metrics: str, env: dict | None = None) -> None:
        """A training stage: ``recipe`` with ``overrides`` through the launcher (checked, then run), its metrics in
        ``<metrics>``, its log ``logs/<name>.log``; ``env``: the stage's environment instead of the run's (another
        GPU)."""
        env, quiet = dict(env or self.env, PYTHON=self.py), self.quiet
        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null) if quiet else contextlib.nullcontext():
            rc = launch.run_recipe(recipe, overrides, env, **self.where(name, metrics))
        if rc != 0:
            raise SystemExit(f"[pipeline] stage failed (exit {rc}): recipe {recipe}; log: {self.log(name)}")

    def where(self, name: str, metrics: str) -> dict:
        """The launcher's outputs of training stage ``name``: the run folder, its metrics file and its log."""
        return {"output_dir": self.out, "metrics_file": self.path(metrics), "log_file": self.log(name)}

    def log(self, name: str) -> str:
        return self.path("logs", f"{name}.log")

    def stage(self, name: str, output: str, fn, background: bool = False) -> str:
        """Run stage ``name`` unless it is done (``done``). ``background``: start it in a thread and return; it runs
        beside the next stage (its output goes to its log only) and is joined before the stage after. Every stage,
        run or skipped, first joins the background stages that a stage before it ran beside (a stage skipped as done
        counts: on a resume the background stage is joined before the stage after the skipped one)."""
        self.wait_background(had_company=True)
        if background and not self.done(name, output):
            job = self.chain(name, [(name, output, fn)], note=" (in the background, beside the next stage; log only)")
            self._background.append({**job, "had_company": False})
            return output
        self.marked(name, output, fn)
        if not background:
            for job in self._background:
                job["had_company"] = True
        return output

    def done(self, name: str, output: str) -> bool:
        """Stage ``name`` is done: its ``.done`` marker exists and so does its ``output`` (relative: in the run
        folder); a stage marked done whose output was removed since is made again."""
        return os.path.exists(self.path(f".{name}.done")) and os.path.exists(self.path(output))

    def marked(self, name: str, output: str, fn, note: str = "") -> str:
        """Stage ``name`` without ``stage``'s joins (a chain in a thread of its own): skipped if done, else
        ``fn()``."""
        done = self.path(f".{name}.done")
        os.makedirs(self.out, exist_ok=True)
        if self.done(name, output):
            say(f"stage {name} skipped ({done} exists); output: {output}")
            return output
        if os.path.exists(done):  # its marker goes first: a failure now leaves the stage not done
            say(f"stage {name}: marked done, but its output {output} is gone: made again")
            os.remove(done)
            if os.path.islink(self.path(output)):  # a link to a folder removed since (``--reuse``): made here
                os.remove(self.path(output))
        say(f"stage {name} ...{note}")
        t0 = time.time()
        try:
            fn()
        except KeyboardInterrupt:  # a Ctrl-C is no failure of the stage: ``guarded`` says so (status 130)
            raise
        except BaseException as e:
            failure = SystemExit(f"[pipeline] stage {name} failed after {time.time() - t0:.0f}s: {describe(e)}")
            self._failures.append(failure)
            say(f"stage {name} FAILED: {describe(e)}")
            if threading.current_thread() is not threading.main_thread():  # the workflow stops now, not later
                services.stop_all(f"stage {name} failed")
            raise failure from e
        with open(done, "w") as f:
            f.write(f"{time.time() - t0:.1f}\n")
        say(f"stage {name} done in {time.time() - t0:.0f}s; output: {output}")
        return output

    def chain(self, name: str, stages: list[tuple], note: str = "") -> dict:
        """Start ``stages`` (``(name, output, fn)``) one after the other in a thread of their own (log only);
        ``join`` waits for it and re-raises its first error."""
        job, note = {"name": name, "errors": []}, note or f" (beside the main stages, in chain {name}; log only)"

        def target() -> None:
            self._local.background = True
            try:
                for stage_name, output, fn in stages:
                    self.marked(stage_name, output, fn, note=note)
            except BaseException as e:  # re-raised in the main thread by join
                job["errors"].append(e)

        job["thread"] = threading.Thread(target=target, name=name)
        self._jobs.append(job)
        job["thread"].start()
        return job

    def guarded(self, fn):
        """``fn()`` (the workflow); on a failure or a signal, stop every child process, wait for the threads, and
        raise the first stage failure (``SystemExit`` naming the stage)."""

        def on_signal(signum, _frame):
            raise SystemExit(f"[pipeline] stopped by signal {signal.Signals(signum).name}")

        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, on_signal)
        try:
            return fn()
        except BaseException as e:
            services.stop_all(f"the pipeline is stopping ({describe(e)})")
            for job in self._jobs:
                while job["thread"].is_alive():  # each launcher stops its judge server and Ray head, then returns
                    job["thread"].join(timeout=5)
                    services.stop_all("the pipeline is stopping")
            if isinstance(e, KeyboardInterrupt):  # one line, not a traceback: everything started is stopped by now
                say("interrupted (Ctrl-C): every stage and the processes they started are stopped; exit 130")
                raise services.Interrupted from None  # the command line then dies of SIGINT (services.as_command)
            if self._failures:
                raise self._failures[0] from None
            raise

    @staticmethod
    def join(job: dict) -> None:
        if job["thread"].is_alive():
            say(f"waiting for {job['name']} ...")
        job["thread"].join()
        if job["errors"]:
            raise job["errors"][0]

    def wait_background(self, had_company: bool = False) -> None:
        """Join the stages running in the background (``had_company``: only those a stage already ran beside);
        the first one that failed stops the pipeline."""
        joined = [j for j in self._background if j["had_company"] or not had_company]
        self._background = [j for j in self._background if j not in joined]
        for job in joined:
            self.join(job)


def describe(e: BaseException) -> str:
    """One line for an exception (a SystemExit's message, else its type and text)."""
    if isinstance(e, SystemExit):
        return str(e.code) if e.code is not None else "exit"
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
