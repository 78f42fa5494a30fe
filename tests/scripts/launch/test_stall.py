"""The stall watchdog (``scripts/launch/stall.py``) and runs that cannot disturb each other
(``scripts/launch/ray_head.py``, ``scripts/train/trainer.py``'s job id), on CPU.

* ``Stall``: limits at start-up and between steps, steps read from console lines and from the metrics JSONL.
* ``Watch``: one check of its thread stops an overdue run (``services.stop`` with ``KILL_GRACE_S``) and says why.
* Through the launcher with a stand-in trainer against a real private Ray head: a trainer that stalls at start-up
  and one that stalls mid-run are stopped (exit 5) with the run, last step, wait and log tail named; the Ray head
  is stopped and its session logs kept.
* Two launchers side by side, each with its private Ray head: the first ends (its head stopped) while a job on the
  second keeps making actor calls, and the second finishes; job ids, Ray temp directories and logs are their own.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import types

import pytest

from scripts.launch import stall
from tests.scripts.launch.test_config_schema import data_files  # noqa: F401  (a module fixture)
from tests.scripts.launch.test_recipes import ROOT, base_env, fx, recipe_files  # noqa: F401  (fx: the module fixture)


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


SETTINGS = {"startup_s": 100.0, "step_s": 60.0, "min_step_s": 10.0, "factor": 4.0}


# (what happens: list of (advance clock by, step seen or None)), expected limit, expected overdue
@pytest.mark.parametrize(
    "events, limit, overdue",
    [
        ([], 100.0, None),  # starting: startup_s
        ([(100.5, None)], 100.0, 100.5),  # no step within startup_s
        ([(50, 0)], 60.0, None),  # step 0 (validation): step_s until there is a median
        ([(50, 0), (61, None)], 60.0, 61.0),  # then no step 2 within step_s
        ([(50, 1), (2, 2), (2, 3)], 10.0, None),  # median 2 s x 4 = 8 -> floor min_step_s
        ([(50, 1), (2, 2), (2, 3), (10.5, None)], 10.0, 10.5),  # ... overdue past the floor
        ([(50, 1), (5, 2), (5, 3)], 20.0, None),  # median 5 s x 4 = 20
        ([(50, 1), (30, 2), (30, 3)], 60.0, None),  # median 30 s x 4 = 120 -> ceiling step_s
        ([(50, 1), (5, 2), (5, 2), (5, 1)], 20.0, None),  # a step reported again, or an older one: not progress
        # the boundary: a run may go exactly its limit without a step; a moment more is overdue
        ([(100.0, None)], 100.0, None),
        ([(100.25, None)], 100.0, 100.25),
        ([(50, 1), (5, 2), (5, 3), (20.0, None)], 20.0, None),
        ([(50, 1), (5, 2), (5, 3), (20.25, None)], 20.0, 20.25),
        # step 2 reported again and again (console line, metrics file): not progress, so the run is overdue
        ([(50, 1), (5, 2), (5, 2), (5, 2), (5, 2), (5, 2), (5, 2)], 20.0, 25.0),
        # the median step, not the mean: gaps 5, 5, 11 -> median 5 x 4 = 20 (the mean, 7, would give 28)
        ([(50, 1), (5, 2), (5, 3), (11, 4), (20.5, None)], 20.0, 20.5),
    ],
)
def test_stall_limits(events, limit, overdue):
    clock = Clock()
    s = stall.Stall(SETTINGS, "run", clock=clock)
    for dt, step in events:
        clock.t += dt
        if step is not None:
            s.saw(step)
    assert s.limit() == limit
    assert s.overdue() == overdue


# (what happens: list of (advance clock by, "console line" or metrics JSON line)), whether overdue at the end
@pytest.mark.parametrize(
    "events, overdue",
    [
        # steady 5 s steps; a worker prints step:999999 after step 2: steps 3.. still count, the run is never stopped
        ([(50, "step:1"), (5, "step:2"), (1, "step:999999"), (4, "step:3"), (5, "step:4"), (5, "step:5")], None),
        # the same with a huge step number in the metrics file
        (
            [
                (50, '{"step": 1}'),
                (5, '{"step": 2}'),
                (1, '{"step": 1000000000}'),
                (4, '{"step": 3}'),
                (5, '{"step": 4}'),
            ]
            + [(5, '{"step": 5}')],
            None,
        ),
        # ... and with both, the console ahead of the file (each step reported twice, whichever first)
        (
            [(50, "step:1"), (0, '{"step": 1}'), (5, "step:2"), (1, "step:999999"), (4, "step:3"), (0, '{"step": 2}')]
            + [(0, '{"step": 3}'), (5, "step:4"), (5, "step:5"), (0, '{"step": 4}'), (0, '{"step": 5}')],
            None,
        ),
        # a real stall after the stray number is still caught: 21 s past step 4 (gaps 5, 1, 4, 5: 4 x 4.5 s = 18 s)
        ([(50, "step:1"), (5, "step:2"), (1, "step:999999"), (4, "step:3"), (5, "step:4"), (21, "step:4")], 21.0),
    ],
)
def test_a_stray_step_number_does_not_stop_a_steady_run(events, overdue, tmp_path):
    clock = Clock()
    s = stall.Stall(SETTINGS, "run", clock=clock)
    f = tmp_path / "metrics.jsonl"
    f.write_text("")
    tail = stall.MetricsTail(str(f))
    seen = []
    for dt, event in events:
        clock.t += dt
        if event.startswith("{"):
            with open(f, "a") as out:
                out.write(event + "\n")
            for step in tail.steps():
                s.saw(step)
        else:
            s.line(event + " - critic/score/mean:0.5\n")
        seen.append(s.overdue())
    assert seen == [None] * (len(events) - 1) + [overdue]


def test_default_limits():
    """recipes/base.yaml's watchdog settings are the defaults; with 20 s steps the limit is 20 x 20 = 400 s."""
    from omegaconf import OmegaConf

    assert OmegaConf.load(os.path.join(ROOT, "recipes", "base.yaml")).verl_judge.watchdog == stall.DEFAULTS
    clock = Clock()
    s = stall.Stall({}, "run", clock=clock)
    for step in range(4):
        clock.t += 20.0
        s.saw(step)
    assert (s.startup_s, s.step_s, s.min_step_s, s.factor, s.limit()) == (1800.0, 600.0, 300.0, 20.0, 400.0)


@pytest.mark.parametrize(
    "line, step",
    [
        ("step:12 - critic/score/mean:0.5 - timing_s/step:4.7\n", 12),
        ("(TaskRunner pid=4242) step:3 - actor/lr:1e-06\n", 3),
        ("global_step:7 saved\n", None),  # a checkpoint line is not a step
        ("training/global_step:9\n", None),
        ("[validate] step:0 - val-core/x:0.2\n", 0),
        ("steps: 4\n", None),
    ],
)
def test_step_lines(line, step):
    clock = Clock()
    s = stall.Stall(SETTINGS, "run", clock=clock)
    s.line(line)
    assert s.last_step == step


def test_metrics_tail_reads_whole_new_lines(tmp_path):
    f = tmp_path / "m.jsonl"
    f.write_text('{"step": 0, "data": {}}\n{"step": 1, "da')
    tail = stall.MetricsTail(str(f))
    assert tail.steps() == [0]
    with open(f, "a") as out:
        out.write('ta": {}}\nnot json\n{"step": 2, "data": {}}\n')
    assert tail.steps() == [1, 2]
    assert tail.steps() == []
    assert stall.MetricsTail(str(tmp_path / "absent.jsonl")).steps() == []


# (metrics lines written before the check, clock at the check), the grace stop() was called with, the cause
@pytest.mark.parametrize(
    "lines, t, graces, cause",
    [
        (
            [],
            101.0,
            [30.0],  # KILL_GRACE_S: SIGTERM, SIGKILL 30 s later
            "run r completed no step for 101s (limit 100s: verl_judge.watchdog.startup_s); last step: none yet "
            "(still starting); stopping it (exit 5). Its log ends:\nwaiting for weights",
        ),
        ([], 100.0, [], None),  # exactly its limit: not yet
        (['{"step": 0}'], 101.0, [], None),  # a step in the metrics file, read at the check: progress
    ],
)
def test_the_watch_stops_an_overdue_run(lines, t, graces, cause, tmp_path, monkeypatch):
    """One check of ``Watch``'s thread (run here, on a fake clock): an overdue run is stopped through services.stop
    with ``KILL_GRACE_S``, and the cause is said and kept."""
    clock, stops, said = Clock(), [], []
    f = tmp_path / "metrics.jsonl"
    f.write_text("".join(line + "\n" for line in lines))
    watch = stall.Watch(stall.Stall(SETTINGS, "r", clock=clock), str(f), tail=lambda: "waiting for weights\n")
    checks = iter([False, True])  # one check, then the run ends
    watch._done = types.SimpleNamespace(wait=lambda _interval: next(checks))
    proc = object()
    watch.attach(proc)
    monkeypatch.setattr(stall.services, "stop", lambda p, grace: stops.append((p, grace)))
    monkeypatch.setattr(stall, "say", lambda who, msg: said.append((who, msg)))
    clock.t = t
    watch._watch()
    assert stops == [(proc, g) for g in graces]
    assert watch.cause == cause
    assert said == ([] if cause is None else [("watchdog", f"ERROR: {cause}")])


@pytest.mark.parametrize(
    "settings, errors",
    [
        ({}, []),
        ({"startup_s": 0}, ["verl_judge.watchdog.startup_s must be a number > 0, got 0"]),
        ({"factor": "20"}, ["verl_judge.watchdog.factor must be a number > 0, got '20'"]),
        ({"enable": "yes"}, ["verl_judge.watchdog.enable must be true or false, got 'yes'"]),
        (
            {"step": 5},
            ["verl_judge.watchdog.step: unknown setting (known: enable, startup_s, step_s, min_step_s, factor)"],
        ),
        ({"min_step_s": 600, "step_s": 600}, []),  # the limit between steps may be fixed
        ({"startup_s": 5}, []),
        (
            {"min_step_s": 601, "step_s": 600},
            [
                "verl_judge.watchdog.min_step_s (601) is above step_s (600): the limit between steps lies within "
                "[min_step_s, step_s]"
            ],
        ),
        (
            {"startup_s": 4.5},
            ["verl_judge.watchdog.startup_s must be at least 5 seconds (the time until a run's first step), got 4.5"],
        ),
    ],
)
def test_settings_errors(settings, errors):
    assert stall.settings_errors(settings) == errors


@pytest.mark.parametrize(
    "extra, errors",
    [
        ([], []),
        (["trainer.logger=[file]"], []),
        (["trainer.logger=[swanlab]", "verl_judge.watchdog.enable=false"], []),  # no watchdog: nothing to read
        (
            ["verl_judge.watchdog.min_step_s=900"],
            [
                "verl_judge.watchdog.min_step_s (900) is above step_s (600): the limit between steps lies within "
                "[min_step_s, step_s]"
            ],
        ),
        (
            ["verl_judge.watchdog.startup_s=2"],
            ["verl_judge.watchdog.startup_s must be at least 5 seconds (the time until a run's first step), got 2"],
        ),
        (
            ["trainer.logger=[swanlab]"],
            [
                "verl_judge.watchdog has no step source: trainer.logger=['swanlab'] has neither console nor file, so "
                "every run would be stopped as stalled after startup_s; add console or file to trainer.logger, or "
                "set verl_judge.watchdog.enable=false"
            ],
        ),
    ],
)
def test_the_config_check_refuses_a_watchdog_that_cannot_work(extra, errors, model_path, data_files):
    """``python -m scripts.launch.verl_config`` (and the launcher's check): the watchdog's settings, before a run."""
    from scripts.launch import config_compose, verl_config

    overrides = [f"actor_rollout_ref.model.path={model_path}", f"data.train_files={data_files[0]}"]
    overrides += [f"data.val_files={data_files[1]}", *extra]
    if not errors:
        verl_config.check(overrides, recipe="gsm8k_rule")
        return
    with pytest.raises(config_compose.ConfigError) as ei:
        verl_config.check(overrides, recipe="gsm8k_rule")
    assert ei.value.errors == errors


# ------------------------------------------------------------------------------------------- through the launcher
# A stand-in trainer: connects to the run's Ray head (through scripts.train's job id), prints steps as verl's console
# logger does, writes them to the metrics file, then sleeps (a stall) or makes actor calls for a while.
TRAINER = r"""
import json, os, sys, time
mode, steps, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
if mode == "stall" and steps == 0:  # stuck while starting: said at once, however slow the machine is
    print("waiting for weights that never come", flush=True)
import ray
from scripts.train.trainer import unique_job_id
job = unique_job_id()
ray.init()
print("job id", ray.get_runtime_context().get_job_id(),
      "temp dir", ray.get_runtime_context().get_temp_dir(), flush=True)
metrics = [a.split("=", 1)[1] for a in sys.argv if "VERL_FILE_LOGGER_PATH=" in a][0]
@ray.remote
class Counter:
    def __init__(self):
        self.n = 0
    def add(self):
        self.n += 1
        return self.n
c = Counter.remote()
for step in range(1, steps + 1):
    ray.get(c.add.remote())
    print(f"step:{step} - critic/score/mean:0.5", flush=True)
    open(metrics, "a").write(json.dumps({"step": step, "data": {}}) + "\n")
    time.sleep(0.2)
if mode == "stall":
    if steps:
        print("waiting for weights that never come", flush=True)
    time.sleep(3600)
t_end = time.time() + seconds
calls = 0
while time.time() < t_end:
    calls += 1
    ray.get(c.add.remote(), timeout=30)
    time.sleep(0.25)
print("actor calls after the steps:", calls, flush=True)
ray.shutdown()
"""
DRIVER = r"""
import json, os, sys
from scripts.launch import launcher as launch
env = dict(os.environ)
args = json.loads(sys.argv[1])
p = launch.plan(env, args["overrides"], "gsm8k_rule", output_dir=args["out"], log_file=args["log"])
i = p.command.index("scripts.train") - 1
p.command = p.command[:i] + args["swap"] + p.command[i + 2:]
sys.exit(launch.execute(p, env))
"""


def _launcher(fx, tmp_path, name, swap, overrides=()) -> subprocess.Popen:
    out = tmp_path / "run"
    out.mkdir(exist_ok=True)
    env = base_env(MODEL=tmp_path, PYTHONPATH=ROOT, **recipe_files(fx, "gsm8k_rule"))
    args = {
        "overrides": [f"trainer.experiment_name={name}", *overrides],
        "out": str(out),
        "log": str(out / "logs" / f"{name}.log"),
        "swap": swap,
    }
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, json.dumps(args)],
        cwd=ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def _trainer(tmp_path, *args) -> list[str]:
    f = tmp_path / "trainer.py"
    f.write_text(TRAINER)
    return [str(f), *map(str, args)]


def _gone(pid: int, seconds: float = 60) -> bool:
    for _ in range(int(seconds * 2)):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.5)
    return False


@pytest.mark.slow
@pytest.mark.parametrize(
    "case, steps, overrides, limits, last",
    [
        ("startup", 0, ["verl_judge.watchdog.startup_s=8"], (8,), "last step: none yet (still starting)"),
        (
            "mid_run",
            3,
            ["verl_judge.watchdog.startup_s=600", "verl_judge.watchdog.step_s=6", "verl_judge.watchdog.min_step_s=5"],
            (5, 6),  # 20 x the median step (0.2 s and up), within [min_step_s, step_s]
            "last step: 3",
        ),
    ],
)
def test_stalled_run_is_stopped(fx, tmp_path, case, steps, overrides, limits, last):
    proc = _launcher(fx, tmp_path, "stuck", _trainer(tmp_path, "stall", steps, 0), overrides)
    out, _ = proc.communicate(timeout=300)
    # the stand-in sleeps an hour once stuck: only the watchdog ends it, with its exit code, past the limit it states
    assert proc.returncode == stall.STALL_EXIT, out[-3000:]
    m = re.search(r"\[watchdog\] ERROR: run stuck completed no step for (\d+)s \(limit (\d+)s", out)
    assert m, out[-3000:]
    assert int(m.group(2)) in limits and int(m.group(1)) >= int(m.group(2)), m.group(0)
    assert last in out
    assert "waiting for weights that never come" in out.split("[watchdog] ERROR")[1]  # the log's tail is shown
    head = re.search(r"stopping the private Ray head \(pid (\d+)\)", out)
    assert head and _gone(int(head.group(1))), out[-2000:]
    kept = re.search(r"Ray's session logs kept in (\S+)", out)
    assert kept and os.path.isdir(kept.group(1))
    shutil.rmtree(kept.group(1))
    assert os.path.exists(tmp_path / "run" / "logs" / "stuck.ray_head.log")


@pytest.mark.slow
def test_two_runs_side_by_side_do_not_disturb_each_other(fx, tmp_path):
    """Run a ends (its Ray head stopped) while run b's job keeps calling its actor; b finishes, exit 0."""
    a = _launcher(fx, tmp_path, "a", _trainer(tmp_path, "calls", 2, 0))
    b = _launcher(fx, tmp_path, "b", _trainer(tmp_path, "calls", 2, 40))
    out_a, _ = a.communicate(timeout=300)
    assert a.returncode == 0, out_a[-3000:]
    assert "stopping the private Ray head" in out_a
    assert b.poll() is None, "b ended before a's head was stopped: the test proves nothing"
    out_b, _ = b.communicate(timeout=300)
    assert b.returncode == 0, out_b[-3000:]
    calls = re.search(r"actor calls after the steps: (\d+)", out_b)
    assert calls and int(calls.group(1)) >= 40, out_b[-2000:]
    ids = [re.search(r"job id (\w+) temp dir (\S+)", o).groups() for o in (out_a, out_b)]
    assert ids[0][0] != ids[1][0] and "01000000" not in (ids[0][0], ids[1][0])
    assert ids[0][1] != ids[1][1] and all(t.startswith("/tmp/vj-ray-") for _, t in ids)
    assert not any(os.path.exists(t) for _, t in ids)  # clean exits remove their Ray temp dirs
    logs = tmp_path / "run" / "logs"
    assert sorted(p.name for p in logs.iterdir()) == ["a.log", "a.ray_head.log", "b.log", "b.ray_head.log"]
    assert "step:2" in (logs / "b.log").read_text() and "step:2" not in (logs / "a.ray_head.log").read_text()


def test_a_node_that_exits_while_starting_is_started_again(tmp_path, monkeypatch):
    """A port chosen free can be taken before Ray binds it: the node exits, and is started again with other ports."""
    from scripts.launch import ray_head

    fake = tmp_path / "ray.py"
    fake.write_text(
        "import os, sys, time\n"
        f"marker = {str(tmp_path / 'tried')!r}\n"
        "if not os.path.exists(marker):\n"
        "    open(marker, 'w').close(); print('Failed to bind port: address already in use'); sys.exit(1)\n"
        "print('Ray runtime started.'); print(\"  ray start --address='127.0.0.1:6399'\"); sys.stdout.flush()\n"
        "time.sleep(60)\n"
    )
    monkeypatch.setattr(ray_head, "RAY_CLI", (sys.executable, str(fake)))
    env = {}
    proc, address = ray_head.start(env, str(tmp_path / "head.log"))
    try:
        assert (address, env["RAY_ADDRESS"]) == ("127.0.0.1:6399", "127.0.0.1:6399")
    finally:
        ray_head.stop(proc)
    assert proc.poll() is not None and not os.path.exists(proc.temp_dir)
    monkeypatch.setattr(ray_head, "RAY_CLI", (sys.executable, "-c", "import sys; print('no'); sys.exit(1)"))
    with pytest.raises(
        ray_head.RayStartError,
        match=r"ray start \(a Ray head\) exited with 1 before it was ready; its log .* ends:\nno \(after 3 tries\)",
    ):
        ray_head.start({}, str(tmp_path / "head2.log"))


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
def test_a_node_interrupted_while_starting_is_stopped(interrupt, tmp_path, monkeypatch):
    """Ctrl-C or SIGTERM (SystemExit in the launcher) while `ray start` has not yet said it started: that process and
    its temp dir go too, nothing is left behind."""
    import glob

    from scripts.launch import ray_head, services

    fake = tmp_path / "ray.py"
    fake.write_text("import time\nprint('starting', flush=True)\ntime.sleep(120)\n")
    monkeypatch.setattr(ray_head, "RAY_CLI", (sys.executable, str(fake)))
    started = []
    real_popen = ray_head.subprocess.Popen
    monkeypatch.setattr(
        ray_head.subprocess, "Popen", lambda *a, **k: started.append(real_popen(*a, **k)) or started[-1]
    )

    def interrupted(_seconds):
        raise interrupt()

    monkeypatch.setattr(services, "time", types.SimpleNamespace(time=time.time, sleep=interrupted))  # the module only
    before = set(glob.glob("/tmp/vj-ray-*"))
    with pytest.raises(interrupt):
        ray_head.start({}, str(tmp_path / "head.log"))
    (proc,) = started
    assert proc.poll() is not None and not os.path.exists(proc.temp_dir)
    assert set(glob.glob("/tmp/vj-ray-*")) <= before
