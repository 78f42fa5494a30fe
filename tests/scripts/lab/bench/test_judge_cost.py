"""scripts/lab/bench/judge_cost.py on CPU: the report's medians and ratios from known timings, the arms'
composed configs
(through the launcher), failing, late and interrupted children, DRY_RUN with the real launcher, arms of yours
(``--arm``: the comma rule, ``--base``, ``--gpus-per-arm``) and scripts/lab/bench/shapes.sh through the bench. No time
assertions: deadlines are settings of the bench, and each subprocess wait of a test has its own limit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from omegaconf import OmegaConf

import scripts
from scripts.lab.bench import cost_report as cr
from scripts.lab.bench import judge_cost as jc
from scripts.launch import knobs, launcher

ROOT = scripts.ROOT


def _metrics(path, steps: list[dict], validation_first: bool = True) -> str:
    """verl's file-logger lines: {"step": n, "data": {...}}; a step-0 validation line (no step time) first."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        if validation_first:
            f.write(json.dumps({"step": 0, "data": {"val-core/openai/gsm8k/acc/mean@1": 0.1}}) + "\n")
        for i, data in enumerate(steps, 1):
            f.write(json.dumps({"step": i, "data": data}) + "\n")
    return path


def _steps(step, gen, reward, old=None):
    rows = [{"timing_s/step": s, "timing_s/gen": g, "timing_s/reward": r} for s, g, r in zip(step, gen, reward)]
    if old is not None:
        for row, o in zip(rows, old):
            row["timing_s/old_log_prob"] = o
    return rows


# ------------------------------------------------------------------------------------------------ report
def test_report_gives_exact_medians_over_steps_2_to_n_and_ratios_to_the_rule(tmp_path):
    """Known timings: each run's first step is left out (a huge value there would move every median), an arm's runs
    are pooled (two rounds of colocated), the rule's reward (microseconds, under MIN_BASE_S) has no ratio, and a stage
    the rule arm lacks has none either."""
    rule = _metrics(
        tmp_path / "rule/metrics.jsonl", _steps([100, 4, 2, 3, 5], [90, 2, 2, 2, 2], [9, 0.001, 0.001, 0.002, 0.001])
    )
    col1 = _metrics(
        tmp_path / "colocated/round-1/metrics.jsonl", _steps([50, 6, 8], [40, 3, 3], [5, 1, 3], old=[7, 1, 1])
    )
    col2 = _metrics(tmp_path / "colocated/round-2/metrics.jsonl", _steps([60, 7, 7], [40, 3, 3], [5, 2, 2]))
    runs = [
        jc.Run("rule", 1, "0", os.path.dirname(rule), [], rc=0, seconds=10.0),
        jc.Run("colocated", 1, "0", os.path.dirname(col1), [], rc=0, seconds=11.0),
        jc.Run("colocated", 2, "0", os.path.dirname(col2), [], rc=0, seconds=12.0),
    ]
    arms = cr.summarize(runs, 1, "rule", jc.ARMS, cr.rounds_together(runs, 1))
    assert {a: (v["steps"], v["runs"], v["median"], v["ratio"]) for a, v in arms.items()} == {
        "rule": (
            4,
            1,
            {"timing_s/step": 3.5, "timing_s/gen": 2.0, "timing_s/reward": 0.001},
            {"timing_s/step": 1.0, "timing_s/gen": 1.0},
        ),
        "colocated": (
            4,
            2,
            {"timing_s/step": 7.0, "timing_s/gen": 3.0, "timing_s/reward": 2.0, "timing_s/old_log_prob": 1.0},
            {"timing_s/step": 2.0, "timing_s/gen": 1.5},
        ),
    }
    rep = {
        "date": "d",
        "command": "python -m scripts.lab.bench.judge_cost --interleave --rounds 2",
        "commit": "abc",
        "machine": {"host": "h", "gpus": ["0, H100, 80 GiB"], "packages": {"verl": "0.9.1"}},
        "settings": {
            "arms": ["rule", "colocated"],
            "placement": "interleaved on GPU 0",
            "steps": 5,
            "rounds": 2,
            "skip_first": 1,
            "base": "rule",
        },
        "runs": [
            {"arm": r.arm, "round": r.round, "gpu": r.gpu, "exit": r.rc, "seconds": r.seconds, "folder": r.folder}
            for r in runs
        ],
        "arms": arms,
    }
    table = [ln for ln in cr.markdown(rep).splitlines() if ln.startswith("| ")]
    assert table[:6] == [
        "| stage | rule | colocated |",
        "| timing_s/step | 3.500 s | 7.000 s (2.00x) |",
        "| timing_s/gen | 2.000 s | 3.000 s (1.50x) |",
        "| timing_s/reward | 0.001 s | 2.000 s |",
        "| timing_s/old_log_prob |  | 1.000 s |",
        "| steps in the medians | 4 | 4 |",
    ]


def _clocked(steps):
    """Training rows from (clock at the metrics, step seconds[, validation seconds after the step])."""
    return [
        {"timing_s/step": s[1], "perf/step_end_unix_s": s[0], "timing_s/testing": (s[2:] or [0.0])[0]} for s in steps
    ]


# (first run's steps as (end, duration), second run's, the window, each run's steps inside it after the first)
TOGETHER = [
    # the fast run ended (18) before the slow one's second step started (20): they never stepped together
    ([(10, 9), (12, 2), (14, 2), (16, 2), (18, 2)], [(20, 19), (24, 4), (28, 4), (32, 4)], None, None),
    # both from 20; the fast run ends at 28, so the slow one's step ending at 32 is left out
    ([(10, 9), (22, 2), (24, 2), (26, 2), (28, 2)], [(20, 19), (24, 4), (28, 4), (32, 4)], (20, 28), [4, 2]),
    # the slow run started at 23: the fast run's steps 2-3 (20-24) are left out
    ([(10, 9), (22, 2), (24, 2), (26, 2), (28, 2)], [(20, 19), (27, 4), (31, 4)], (23, 28), [2, 1]),
    # the fast run's last step validated for 3 s after it ended at 28: the clock reads 31, the step ended at 28
    ([(10, 9), (22, 2), (24, 2), (26, 2), (31, 2, 3)], [(20, 19), (24, 4), (28, 4), (32, 4)], (20, 28), [4, 2]),
    ([(10, 9), (12, 2)], [(10, 9), (12, 2)], (10, 12), [1, 1]),  # one kept step each, the same span
]


@pytest.mark.parametrize("a, b, span, inside", TOGETHER)
def test_together_is_the_window_every_run_stepped_in(tmp_path, a, b, span, inside):
    """``cost_report.together``: from the latest first kept step's start to the earliest last step's end (None when the
    runs never stepped together); ``medians`` with it counts only the steps wholly inside."""
    fa = str(_metrics(tmp_path / "a.jsonl", _clocked(a)))
    fb = str(_metrics(tmp_path / "b.jsonl", _clocked(b)))
    window = cr.together([fa, fb])
    assert window == span
    if window is not None:
        assert [len(cr.step_rows(f, 1, window)) for f in (fa, fb)] == inside
    assert cr.medians([fa])[1] == len(a) - 1  # no window: every step after the first
    assert cr.together([fa, str(_metrics(tmp_path / "c.jsonl", _steps([1, 2], [1, 1], [0, 0])))]) is None  # no clock
    assert cr.together([]) is None


def test_the_report_of_a_bench_with_no_rule_arm_has_no_ratios(tmp_path):
    f = _metrics(tmp_path / "server/metrics.jsonl", _steps([9, 2, 4], [1, 1, 1], [1, 1, 1]))
    arms = cr.summarize([jc.Run("server", 1, "0", os.path.dirname(f), [], rc=0)], 1, "rule", jc.ARMS, {})
    assert arms["server"]["median"]["timing_s/step"] == 3.0 and arms["server"]["ratio"] == {}


def test_a_round_run_side_by_side_counts_only_the_steps_its_runs_ran_together(tmp_path, monkeypatch):
    """``summarize`` / ``report``: round 1's two runs stepped at the same time, so each arm's medians keep only the
    steps inside their common window (the rule's early steps, run while the judged run was starting, are out); round
    2 ran one arm after the other, so every step counts; the report names the windowed round."""
    monkeypatch.setattr(cr, "commit", lambda: "abc")
    monkeypatch.setattr(cr, "machine", lambda: {"host": "h", "gpus": [], "packages": {}})
    rule1 = _metrics(tmp_path / "r1/metrics.jsonl", _clocked([(10, 9), (12, 1), (13, 1), (21, 1), (22, 1)]))
    col1 = _metrics(tmp_path / "c1/metrics.jsonl", _clocked([(20, 19), (22, 2), (24, 2)]))
    rule2 = _metrics(tmp_path / "r2/metrics.jsonl", _clocked([(100, 9), (101, 1), (102, 1)]))
    col2 = _metrics(tmp_path / "c2/metrics.jsonl", _clocked([(120, 9), (123, 3), (126, 3)]))
    runs = [
        jc.Run("rule", 1, "0", os.path.dirname(rule1), [], rc=0),
        jc.Run("colocated", 1, "0", os.path.dirname(col1), [], rc=0),
        jc.Run("rule", 2, "0", os.path.dirname(rule2), [], rc=0),
        jc.Run("colocated", 2, "0", os.path.dirname(col2), [], rc=0),
    ]
    assert cr.rounds_together(runs, 1) == {1: (20, 22)}
    arms = cr.summarize(runs, 1, "rule", jc.ARMS, cr.rounds_together(runs, 1))
    # round 1 keeps the rule's steps 4-5 (20-21, 21-22) and colocated's step 2 (20-22); round 2 keeps all
    assert {a: (v["steps"], v["median"]["timing_s/step"]) for a, v in arms.items()} == {
        "rule": (4, 1.0),
        "colocated": (3, 3.0),
    }
    settings = {"arms": ["rule", "colocated"], "placement": "p", "steps": 5, "rounds": 2, "base": "rule"}
    rep = cr.report(runs, settings, "cmd", 1, jc.ARMS)
    assert rep["together"] == {"1": [20, 22]}
    assert "(round(s) 1: only the steps all its runs ran together)" in cr.markdown(rep)


# ------------------------------------------------------------------------------------------------ configs
def _flat(d, pre=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flat(v, f"{pre}{k}."))
        else:
            out[f"{pre}{k}"] = v
    return out


#: keys every run sets for itself (its name and folders), left out of the comparison
RUN_KEYS = {
    "trainer.experiment_name",
    "actor_rollout_ref.rollout.trace.experiment_name",
    "trainer.default_local_dir",
    "ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH",
}
RESIDENT_JUDGE = {  # the judge's reward model, as recipes/gsm8k_local_judge's colocated placement loads it
    "reward.reward_model.enable",
    "reward.reward_model.model_path",
    "reward.reward_model.n_gpus_per_node",
    "reward.reward_model.nnodes",
    "reward.reward_model.rollout.enforce_eager",
    "reward.reward_model.rollout.free_cache_engine",
    "reward.reward_model.rollout.gpu_memory_utilization",
    "reward.reward_model.rollout.name",
    "reward.reward_model.rollout.tensor_model_parallel_size",
    "verl_judge.judge_server.model",  # ${reward.reward_model.model_path}; the server is off in both
}
SERVED = {
    "reward.custom_reward_function.reward_kwargs.api_key_env",
    "reward.custom_reward_function.reward_kwargs.base_url",
    "reward.custom_reward_function.reward_kwargs.model",
    "reward.max_concurrent",
    "reward.reward_manager.name",
    "verl_judge.judge_server.enable",
}
# (arm, other arm, the keys whose resolved values differ between them)
DIFFS = [
    ("resident", "colocated", {"reward.custom_reward_function.path"}),
    ("resident", "rule", RESIDENT_JUDGE),
    ("colocated", "rule", RESIDENT_JUDGE | {"reward.custom_reward_function.path"}),
    (
        "server",
        "colocated",
        (RESIDENT_JUDGE - {"reward.reward_model.model_path", "verl_judge.judge_server.model"}) | SERVED,
    ),
    ("route", "server", {"reward.custom_reward_function.reward_kwargs.mode"}),
    ("colocated_deferred", "colocated", {"verl_judge.deferred_reward"}),
]


@pytest.fixture(scope="module")
def composed(tmp_path_factory):
    """Each arm's config as the launcher plans and composes it (resolved), flattened."""
    out = str(tmp_path_factory.mktemp("arms"))
    env = {k: v for k, v in os.environ.items() if k not in jc.FIXED_BY_ARMS}
    cfgs = {}
    for arm, (recipe, _own) in jc.ARMS.items():
        folder = os.path.join(out, arm)
        p = launcher.plan(env, jc.arm_overrides(arm, 40, folder, []), recipe, materialize=False, output_dir=folder)
        cfg = launcher.compose(recipe, p.overrides, {**env, **p.knobs})
        with knobs.environ({**env, **p.knobs}):
            cfgs[arm] = _flat(OmegaConf.to_container(cfg, resolve=True))
    return cfgs


@pytest.mark.parametrize("arm,other,keys", DIFFS, ids=[f"{a}-vs-{b}" for a, b, _k in DIFFS])
def test_the_arms_configs_differ_only_in_the_intended_keys(composed, arm, other, keys):
    a, b = composed[arm], composed[other]
    differ = {k for k in set(a) | set(b) if a.get(k, "<absent>") != b.get(k, "<absent>")} - RUN_KEYS
    assert differ == keys


def test_the_arms_carry_the_reward_and_placement_they_claim(composed):
    got = {
        arm: (
            c["reward.reward_model.enable"],
            c["reward.custom_reward_function.path"],
            c["verl_judge.judge_server.enable"],
            c["verl_judge.deferred_reward"],
            c.get("reward.custom_reward_function.reward_kwargs.mode"),
            c["trainer.total_training_steps"],
            c["trainer.n_gpus_per_node"],
            c["actor_rollout_ref.rollout.gpu_memory_utilization"],
            c["trainer.experiment_name"],
        )
        for arm, c in composed.items()
    }
    rule, judge = "pkg://reward_fns.gsm8k", "pkg://reward_fns.llm_judge"
    assert got == {
        "rule": (False, rule, False, False, None, 40, 1, 0.3, "judge-cost-rule"),
        "resident": (True, rule, False, False, None, 40, 1, 0.3, "judge-cost-resident"),
        "colocated": (True, judge, False, False, None, 40, 1, 0.3, "judge-cost-colocated"),
        "colocated_deferred": (True, judge, False, True, None, 40, 1, 0.3, "judge-cost-colocated_deferred"),
        "server": (False, judge, True, False, None, 40, 1, 0.3, "judge-cost-server"),
        "route": (False, judge, True, False, "route", 40, 1, 0.3, "judge-cost-route"),
    }


# ------------------------------------------------------------------------------------------------ children
FAKE_LAUNCHER = """
import json, os, signal, subprocess, sys, time
SPEC = json.loads({spec!r})
arm = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("trainer.experiment_name=")).removeprefix("judge-cost-")
out = os.environ["OUTPUT_DIR"]
what = SPEC.get(arm, SPEC.get("*"))
with open(os.path.join(out, "args.txt"), "w") as f:
    f.write("".join(a + "\\n" for a in sys.argv[2:]))
with open(os.path.join(out, "child.json"), "w") as f:
    json.dump({{"pid": os.getpid(), "gpu": os.environ["CUDA_VISIBLE_DEVICES"], "recipe": sys.argv[1],
               "dry": os.environ.get("DRY_RUN"), "model": os.environ.get("MODEL")}}, f)
if what.get("hang"):
    if what.get("ignore_term"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # left in the group
    with open(os.path.join(out, "kid.pid"), "w") as f:
        f.write(str(kid.pid))
    while True:
        time.sleep(0.2)
if what.get("nometrics"):  # exits 0 having logged nowhere the bench reads (trainer.logger=[console], a Ray job)
    sys.exit(0)
with open(os.path.join(out, "metrics.jsonl"), "w") as f:
    for i, s in enumerate(what["steps"], 1):
        f.write(json.dumps({{"step": i, "data": {{"timing_s/step": s}}}}) + "\\n")
sys.exit(what.get("rc", 0))
"""


def _fake(tmp_path, spec: dict) -> str:
    path = tmp_path / "fake_launch.py"
    path.write_text(FAKE_LAUNCHER.format(spec=json.dumps(spec)))
    return f"{sys.executable} {path}"


def _env():
    return {k: v for k, v in os.environ.items() if k not in ("DRY_RUN", *jc.FIXED_BY_ARMS)}


def _dry_command(*args) -> subprocess.CompletedProcess:
    """``python -m scripts.lab.bench.judge_cost ARGS`` with ``DRY_RUN=1``: every arm through the real launcher."""
    return subprocess.run(
        [sys.executable, "-m", "scripts.lab.bench.judge_cost", *args],
        cwd=ROOT,
        env={**_env(), "DRY_RUN": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent) counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def reap():
    """Pid files of the fake children: whatever is left of them when the test ends (a broken bench) is SIGKILLed."""
    files: list = []
    yield files
    for f in files:
        try:
            pid = json.load(open(f))["pid"] if str(f).endswith(".json") else int(open(f).read())
        except (OSError, ValueError):
            continue
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_failing_child_makes_the_bench_exit_1_with_the_table_of_those_that_finished(tmp_path):
    spec = {
        "rule": {"steps": [9, 2, 4]},
        "colocated": {"steps": [9, 6, 6]},
        "server": {"steps": [9, 5], "rc": 3},  # logged steps, then failed: not in the table
    }
    out = tmp_path / "out"
    args = ["--arms", "rule,colocated,server", "--gpus", "0,1,2", "--steps", "3", "--out", str(out)]
    rc = jc.main([*args, "--launcher", _fake(tmp_path, spec), "--", "data.train_batch_size=8"], env=_env())
    assert rc == 1
    rep = json.load(open(out / "cost.json"))
    assert {r["arm"]: r["exit"] for r in rep["runs"]} == {"rule": 0, "colocated": 0, "server": 3}
    assert {a: v["median"] for a, v in rep["arms"].items()} == {
        "rule": {"timing_s/step": 3.0},
        "colocated": {"timing_s/step": 6.0},
    }
    assert rep["arms"]["colocated"]["ratio"] == {"timing_s/step": 2.0}
    md = (out / "cost.md").read_text()
    assert "| stage | rule | colocated |" in md and "| timing_s/step | 3.000 s | 6.000 s (2.00x) |" in md
    children = {a: json.load(open(out / a / "child.json")) for a in spec}
    assert {a: (c["gpu"], c["recipe"]) for a, c in children.items()} == {
        "rule": ("0", "gsm8k_rule"),
        "colocated": ("1", "gsm8k_local_judge"),
        "server": ("2", "gsm8k_local_judge"),
    }
    cmd = {r["arm"]: r["command"] for r in rep["runs"]}
    assert cmd["server"].endswith("judge_placement=server data.train_batch_size=8")
    assert "trainer.total_training_steps=3" in cmd["rule"]


@pytest.mark.parametrize("ignore_term", [False, True], ids=["stops-on-sigterm", "ignores-sigterm"])
def test_a_child_past_its_deadline_is_stopped_with_its_process_group(tmp_path, ignore_term, reap):
    spec = {"rule": {"steps": [9, 2, 4]}, "server": {"hang": True, "ignore_term": ignore_term}}
    out = tmp_path / "out"
    reap += [out / "server" / "child.json", out / "server" / "kid.pid"]
    args = ["--arms", "rule,server", "--gpus", "0,1", "--steps", "3", "--out", str(out), "--run-timeout", "3"]
    rc = jc.main([*args, "--stop-grace", "1", "--launcher", _fake(tmp_path, spec)], env=_env())
    assert rc == 1
    rep = json.load(open(out / "cost.json"))
    assert {r["arm"]: r["exit"] for r in rep["runs"]} == {"rule": 0, "server": 124}
    assert list(rep["arms"]) == ["rule"]
    pids = [json.load(open(out / "server" / "child.json"))["pid"], int((out / "server" / "kid.pid").read_text())]
    assert [p for p in pids if _alive(p)] == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["int", "term", "hup"])
def test_an_interrupted_bench_stops_every_child_and_exits_130(tmp_path, reap, sig):
    """Ctrl-C, SIGTERM or a hangup (the terminal closed): the children run in sessions of their own, so the bench
    must stop them itself. SIGTERM and SIGHUP: exit 130; a Ctrl-C: dead of SIGINT (returncode -2, a shell's ``$?``
    130), as Python ends on an unhandled Ctrl-C, so that a bash script running the bench stops too."""
    spec = {"rule": {"hang": True}, "resident": {"hang": True, "ignore_term": True}}
    out = tmp_path / "out"
    reap += [out / a / f for a in spec for f in ("child.json", "kid.pid")]
    cmd = [sys.executable, "-m", "scripts.lab.bench.judge_cost", "--arms", "rule,resident", "--gpus", "0,1"]
    cmd += ["--out", str(out), "--stop-grace", "2", "--launcher", _fake(tmp_path, spec)]
    # a test worker may run with SIGINT ignored (started in the background), and a child inherits that (POSIX): the
    # bench gets a terminal's default disposition back, so that Python turns Ctrl-C into KeyboardInterrupt
    bench = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        kids = [out / a / "kid.pid" for a in spec]
        for _ in range(600):  # the children started their own children (at most 60 s)
            if all(k.exists() and k.read_text() for k in kids):
                break
            try:
                bench.wait(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                pass
        assert bench.poll() is None, bench.stdout.read()
        bench.send_signal(sig)
        text = bench.communicate(timeout=120)[0]
    finally:
        if bench.poll() is None:
            bench.kill()
    want = -signal.SIGINT if sig == signal.SIGINT else 130
    assert (bench.returncode, "Traceback" in text) == (want, False), text
    pids = [json.load(open(out / a / "child.json"))["pid"] for a in spec] + [int(k.read_text()) for k in kids]
    assert [p for p in pids if _alive(p)] == []
    rep = json.load(open(out / "cost.json"))
    assert {r["arm"]: r["exit"] is not None and r["exit"] != 0 for r in rep["runs"]} == {"rule": True, "resident": True}
    assert rep["arms"] == {}


# ------------------------------------------------------------------------------------------------ DRY_RUN, errors
@pytest.mark.slow  # every arm through the real launcher; test_dry_run_checks_your_arms_... stays in the default set
def test_dry_run_checks_every_arm_with_the_real_launcher(tmp_path):
    out = tmp_path / "dry"
    r = _dry_command("--gpus", "0,1,2,3,4,5", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert [ln for ln in r.stdout.splitlines() if "DRY_RUN " in ln] == [
        f"[judge_cost] DRY_RUN {arm}: config OK" for arm in jc.ARMS
    ]
    for arm in jc.ARMS:
        log = (out / arm / "run.log").read_text()
        assert "validates against verl's ppo_trainer schema" in log and "DRY_RUN=1: stopping before training" in log
    assert (
        "judge_placement=colocated reward.custom_reward_function.path=pkg://reward_fns.gsm8k"
        in (out / "resident" / "run.log").read_text()
    )
    assert not (out / "cost.md").exists()


def test_a_dry_run_with_a_bad_setting_exits_1(tmp_path):
    out = tmp_path / "dry"
    rc = jc.main(
        ["--arms", "rule", "--out", str(out), "--", "actor_rollout_ref.rollout.gpu_memory_utilization=0"],
        env={**_env(), "DRY_RUN": "1"},
    )
    assert rc == 1
    assert "gpu_memory_utilization" in (out / "rule" / "run.log").read_text()


def test_dry_run_reaches_the_launcher_as_dry_run(tmp_path):
    spec = {"rule": {"steps": [1]}, "route": {"steps": [1]}}
    out = tmp_path / "out"
    rc = jc.main(
        ["--arms", "rule,route", "--out", str(out), "--launcher", _fake(tmp_path, spec)],
        env={**_env(), "DRY_RUN": "1"},
    )
    assert rc == 0
    assert {a: json.load(open(out / a / "child.json"))["dry"] for a in spec} == {"rule": "1", "route": "1"}
    assert not (out / "cost.json").exists()


#: DRY_RUN -> dry, as the launcher reads it (scripts/launch/launcher.py: truthy, or print for its JSON plan)
DRY_VALUES = {
    "": False,
    "0": False,
    "false": False,
    "no": False,
    "off": False,
    "FALSE": False,
    "1": True,
    "true": True,
    "yes": True,
    "on": True,
    " On ": True,
    "print": True,
}


@pytest.mark.parametrize("value", list(DRY_VALUES))
def test_dry_run_is_read_as_the_launcher_reads_it(value):
    assert set(DRY_VALUES) == set(knobs.DRY_RUN_VALUES) | {"FALSE", " On "}
    assert jc.is_dry({"DRY_RUN": value}) is DRY_VALUES[value]


def test_a_dry_run_says_its_arms_take_turns(tmp_path, capsys):
    """DRY_RUN checks one arm after another even with a GPU per arm: the bench says so."""
    out = tmp_path / "out"
    spec = {"*": {"steps": [1]}}
    args = ["--arms", "rule,route", "--gpus", "0,1", "--out", str(out), "--launcher", _fake(tmp_path, spec)]
    assert jc.main(args, env={**_env(), "DRY_RUN": "1"}) == 0
    assert f"[judge_cost] 2 run(s), interleaved on GPU 0 (DRY_RUN: config checks only); results: {out}" in (
        capsys.readouterr().out.splitlines()
    )


def test_a_run_that_exits_0_without_logging_a_step_is_a_failure(tmp_path):
    """trainer.logger=[console] (or a Ray job) logs no step where the bench reads them: the run failed, and a metrics
    file an earlier bench left in its folder does not stand in for it."""
    out = tmp_path / "out"
    _metrics(out / "server" / "metrics.jsonl", _steps([9, 1, 1], [1, 1, 1], [1, 1, 1]))  # stale, from an earlier run
    spec = {"rule": {"steps": [9, 2, 2]}, "server": {"nometrics": True}, "route": {"steps": [9]}}
    args = ["--arms", "rule,server,route", "--gpus", "0,1,2", "--steps", "3", "--skip-first", "1", "--out", str(out)]
    assert jc.main([*args, "--launcher", _fake(tmp_path, spec)], env=_env()) == 1
    assert not (out / "server" / "metrics.jsonl").exists()
    rep = json.load(open(out / "cost.json"))
    assert [(r["arm"], r["exit"], r["error"]) for r in rep["runs"]] == [
        ("rule", 0, None),
        ("server", 0, "finished but logged no steps"),
        ("route", 0, "finished but logged no steps"),  # its one step is the one --skip-first leaves out
    ]
    assert list(rep["arms"]) == ["rule"]
    md = _lines(out / "cost.md")
    row = next(ln for ln in md if ln.startswith("| server | "))
    assert row.split(" | ")[:4] + row.split(" | ")[5:] == [
        "| server",
        "1",
        "1",
        "0 (finished but logged no steps)",
        f"{out}/server |",
    ]


def test_without_base_and_without_the_rule_arm_there_is_no_base(tmp_path):
    out = tmp_path / "out"
    spec = {"*": {"steps": [9, 3, 3]}}
    args = ["--arms", "colocated,server", "--gpus", "0,1", "--steps", "3", "--out", str(out)]
    assert jc.main([*args, "--launcher", _fake(tmp_path, spec)], env=_env()) == 0
    rep = json.load(open(out / "cost.json"))
    assert (rep["settings"]["base"], {a: v["ratio"] for a, v in rep["arms"].items()}) == (
        None,
        {"colocated": {}, "server": {}},
    )
    md = _lines(out / "cost.md")
    assert md[2] == (
        "Placement: one arm per GPU, started together; 3 steps a run, 1 round(s); medians over steps 2..N of each "
        "run; no ratios: no base arm in this run (--base names one)."
    )
    assert "| timing_s/step | 3.000 s | 3.000 s |" in md and not [ln for ln in md if "did not finish" in ln]


def test_the_default_stop_grace_outlasts_the_launchers_teardown():
    """The launcher's worst case: the trainer 30 s, the Ray head 60 s, the judge server 20 s; a SIGKILL before that
    leaves the judge server (a session of its own) running."""
    assert jc.parse(["--gpus", "0"]).stop_grace == 150


BAD_ARGS = [
    (["--launcher", "/no/such/launcher --x"], "--launcher '/no/such/launcher --x': /no/such/launcher is not an exec"),
    (["--launcher", f"{ROOT}/pyproject.toml"], f"--launcher '{ROOT}/pyproject.toml': {ROOT}/pyproject.toml is not an"),
    (["--launcher", " "], "--launcher ' ': no command"),
    (["--arms", "rule,judge"], "unknown arm(s) judge"),
    (["--arms", "rule,rule"], "an arm is named twice"),
    (
        ["--gpus", "0,1,2,3"],
        "6 arms (rule, resident, colocated, colocated_deferred, server, route) for 4 GPU(s) (0,1,2,3)",
    ),
    (["--interleave", "--gpus", "0,1"], "--interleave runs every arm on one GPU"),
    (["--steps", "0"], "--steps must be >= 1"),
    (["--rounds", "0"], "--rounds must be >= 1"),
    (["--steps", "2", "--skip-first", "2"], "--skip-first must be in [0, --steps)"),
    (["--", "trainer.total_epochs"], "not a Hydra override KEY=VALUE: trainer.total_epochs"),
    (["--gpus", "x"], "--gpus 'x': x is no GPU id (an index >= 0 as nvidia-smi lists it, or a GPU-/MIG- UUID)"),
    (["--gpus=-1"], "--gpus '-1': -1 is no GPU id"),
    (["--gpus", "0,1.5", "--arms", "rule,server"], "--gpus '0,1.5': 1.5 is no GPU id"),
    (["--run-timeout", "nan"], "--run-timeout nan: give a finite number of seconds > 0"),
    (["--run-timeout", "inf"], "--run-timeout inf: give a finite number of seconds > 0"),
    (["--run-timeout", "0"], "--run-timeout 0.0: give a finite number of seconds > 0"),
    (["--stop-grace", "nan"], "--stop-grace nan: give a finite number of seconds > 0"),
    (["--stop-grace", "inf"], "--stop-grace inf: give a finite number of seconds > 0"),
    (["--stop-grace", "-1"], "--stop-grace -1.0: give a finite number of seconds > 0"),
    (
        ["--arm", "rule=gsm8k_local_judge"],
        "--arm 'rule=gsm8k_local_judge': 'rule' is the strict rule, the arm the ratios are against by default; give "
        "your arm another name (--base NAME takes the ratios against it)",
    ),
    (["--out", f"{ROOT}/pyproject.toml"], f"--out {ROOT}/pyproject.toml: exists and is not a folder"),
    (
        ["--out", f"{ROOT}/pyproject.toml/cost"],
        f"--out {ROOT}/pyproject.toml/cost: cannot create the folder: {ROOT}/pyproject.toml is not a folder",
    ),
]


@pytest.mark.parametrize("args,message", BAD_ARGS, ids=[m.split(":")[0][:30] for _a, m in BAD_ARGS])
def test_bad_arguments_exit_2_with_a_message(args, message, capsys):
    with pytest.raises(SystemExit) as e:
        jc.main(args, env=_env())
    assert e.value.code == 2
    assert message in capsys.readouterr().err


SECRET_URL = "https://svc:S3cret@judge.example/v1?key=QueryK3y"


def test_the_report_masks_credentials_in_every_file_it_writes(tmp_path, capsys):
    """A credentialed judge URL in an arm's overrides and in the overrides of every arm: ``cost.json`` and
    ``cost.md`` (and the printed table) record the command line, the arms' overrides and each run's command masked."""
    spec = {"rule": {"steps": [9, 2, 2]}, "api": {"steps": [9, 4, 4]}}
    out = tmp_path / "out"
    url = f"{RKW}.base_url='{SECRET_URL}'"
    args = ["--arms", "rule,api", "--steps", "3", "--out", str(out), "--arm", f"api=gsm8k_api_judge:{url}"]
    rc = jc.main([*args, "--launcher", _fake(tmp_path, spec), "--", url.replace("+", "++", 1)], env=_env())
    assert rc == 0
    printed = capsys.readouterr().out
    written = {name: (out / name).read_text() for name in ("cost.json", "cost.md")}
    assert [w for w in ("S3cret", "QueryK3y") for text in [*written.values(), printed] if w in text] == []
    masked = f"{RKW}.base_url='https://***@judge.example/v1?key=***'"
    rep = json.loads(written["cost.json"])
    assert rep["settings"]["definitions"]["api"]["overrides"] == [masked]
    assert rep["settings"]["overrides"] == [masked.replace("+", "++", 1)]
    assert rep["command"].count("https://***@judge.example/v1?key=***") == 2
    # each run's command: the key once (the overrides after -- win over the arm's own)
    assert [r["command"].count("https://***@judge.example/v1?key=***") for r in rep["runs"]] == [1, 1]
    assert f"| api | gsm8k_api_judge | `{masked}` |" in written["cost.md"].splitlines()


@pytest.mark.parametrize(
    "env,message",
    [
        ({"REWARD_FN": "x.py"}, "REWARD_FN set: each arm sets its reward and placement itself"),
        ({"JUDGE_GPUS": "1"}, "JUDGE_GPUS set"),
        ({}, "no GPU (nvidia-smi fails or is missing); DRY_RUN=1 checks"),
        (
            {"JUDGE_MAX_TOKENS": "128"},
            "[judge_cost] ERROR: JUDGE_MAX_TOKENS=128 is set, but no script reads it: it is not one of the knobs "
            "(python -m scripts.launch --knobs); give the setting as a Hydra override argument (KEY=VALUE), or unset "
            "JUDGE_MAX_TOKENS",
        ),
        ({"DRY_RUN": "maybe"}, "[judge_cost] ERROR: DRY_RUN=maybe is not one of"),
        ({"DRY_RUN": "false"}, "no GPU (nvidia-smi fails or is missing)"),  # the launcher's off: a real run
        ({"DRY_RUN": "off"}, "no GPU (nvidia-smi fails or is missing)"),
        (
            {"RAY_ADDRESS": "http://head:8265"},
            "[judge_cost] ERROR: RAY_ADDRESS=http://head:8265 is set: the bench runs local runs, one per GPU "
            "(a Ray job logs its metrics where the bench does not read them); unset it",
        ),
    ],
    ids=["reward-fn", "judge-gpus", "no-gpu", "not-a-knob", "bad-dry-run", "dry-false", "dry-off", "ray-address"],
)
def test_what_the_bench_refuses_before_starting_anything(tmp_path, monkeypatch, capsys, env, message):
    monkeypatch.setattr(jc, "gpu_names", lambda: None)
    out = tmp_path / "out"
    assert jc.main(["--out", str(out)], env={**_env(), **env}) == 2
    assert message in capsys.readouterr().out
    assert not out.exists()


def test_a_variable_that_looks_like_a_knob_stops_the_bench_even_with_a_launcher_that_would_run(tmp_path, capsys):
    """Ported from the shell bench's knob check: refused once, before any run, rather than by every run's launcher."""
    out = tmp_path / "out"
    rc = jc.main(["--arms", "rule", "--out", str(out), "--launcher", "true"], env={**_env(), "JUDGE_MAX_TOKENS": "128"})
    assert (rc, capsys.readouterr().out.splitlines(), out.exists()) == (
        2,
        [
            "[judge_cost] ERROR: JUDGE_MAX_TOKENS=128 is set, but no script reads it: it is not one of the knobs "
            "(python -m scripts.launch --knobs); give the setting as a Hydra override argument (KEY=VALUE), or unset "
            "JUDGE_MAX_TOKENS"
        ],
        False,
    )


def test_help():
    r = subprocess.run(
        [sys.executable, "-m", "scripts.lab.bench.judge_cost", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0 and r.stdout.startswith("usage: python -m scripts.lab.bench.judge_cost ")
    assert [
        o for o in ("--arms", "--gpus", "--interleave", "--rounds", "--steps", "DRY_RUN") if o not in r.stdout
    ] == []


def test_runs_take_turns_on_one_gpu_in_rotated_rounds_or_start_together_one_per_gpu():
    waves = jc.plan_runs(["rule", "server", "route"], ["3"], True, 2, 5, "/o", [], ["L"])
    assert [[(r.arm, r.round, r.gpu, r.folder) for r in w] for w in waves] == [
        [("rule", 1, "3", "/o/rule/round-1")],
        [("server", 1, "3", "/o/server/round-1")],
        [("route", 1, "3", "/o/route/round-1")],
        [("server", 2, "3", "/o/server/round-2")],
        [("route", 2, "3", "/o/route/round-2")],
        [("rule", 2, "3", "/o/rule/round-2")],
    ]
    waves = jc.plan_runs(["rule", "server"], ["0", "1"], False, 1, 5, "/o", [], ["L"])
    assert [[(r.arm, r.gpu, r.folder, r.command[:2]) for r in w] for w in waves] == [
        [("rule", "0", "/o/rule", ["L", "gsm8k_rule"]), ("server", "1", "/o/server", ["L", "gsm8k_local_judge"])]
    ]


# ------------------------------------------------------------------------------------------------ arms of yours
RKW = "+reward.custom_reward_function.reward_kwargs"
# --arm SPEC -> (name, recipe, overrides): a comma not followed by KEY= stays in the value before it
ARM_SPECS = [
    (f"tok128=gsm8k_local_judge:{RKW}.max_tokens=128", ("tok128", "gsm8k_local_judge", [f"{RKW}.max_tokens=128"])),
    (
        f"broken=gsm8k_local_judge:{RKW}.mode=broken,trainer.logger=[console,file]",
        ("broken", "gsm8k_local_judge", [f"{RKW}.mode=broken", "trainer.logger=[console,file]"]),
    ),
    ("a=gsm8k_local_judge:x.y=[1,2,3],b.c=4", ("a", "gsm8k_local_judge", ["x.y=[1,2,3]", "b.c=4"])),
    (
        "srv=gsm8k_local_judge:judge_placement=server,verl_judge.judge_server.devices=1",  # a group: no dot
        ("srv", "gsm8k_local_judge", ["judge_placement=server", "verl_judge.judge_server.devices=1"]),
    ),
    ("p=gsm8k_rule:data.train_files=/a:b,c", ("p", "gsm8k_rule", ["data.train_files=/a:b,c"])),  # a ':' in a value
    ("x.1-y_z=gsm8k_rule:++a.b=1,~c.d=2", ("x.1-y_z", "gsm8k_rule", ["++a.b=1", "~c.d=2"])),
    ("r=gsm8k_rule", ("r", "gsm8k_rule", [])),
    ("r=gsm8k_rule:", ("r", "gsm8k_rule", [])),
]


@pytest.mark.parametrize("spec,want", ARM_SPECS, ids=[w[0] for _s, w in ARM_SPECS])
def test_an_arm_spec_gives_its_name_recipe_and_overrides(spec, want):
    assert jc.parse_arm(spec) == want


BAD_ARMS = {
    f"tok128:{RKW}.max_tokens=128": "no '=' between the name and the recipe",  # the old VARIANTS form
    "a/b=gsm8k_rule": "the name may hold letters, digits, _ . - only",
    "..=gsm8k_rule": "the name may hold letters, digits, _ . - only",  # OUT/.. is not a folder of the bench's
    "x=nope:a.b=1": "no recipe 'nope' (recipes/<RECIPE>/config.yaml)",
    "x=../recipes/gsm8k_rule": "no recipe '../recipes/gsm8k_rule' (recipes/<RECIPE>/config.yaml)",
    "x=gsm8k_local_judge:JUDGE_MAX_TOKENS=128": "JUDGE_MAX_TOKENS is an environment variable, give the Hydra override",
    "x=gsm8k_local_judge:max_tokens": "'max_tokens' is not a Hydra override KEY=VALUE",
    "x=gsm8k_local_judge:,a.b=1": "'' is not a Hydra override KEY=VALUE",
}


@pytest.mark.parametrize("spec", list(BAD_ARMS))
def test_a_bad_arm_spec_exits_2_before_anything_runs(spec, tmp_path, capsys):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as e:
        jc.main(["--arm", spec, "--out", str(out), "--launcher", "false"], env=_env())
    assert e.value.code == 2 and not out.exists()
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"python -m scripts.lab.bench.judge_cost: error: --arm {spec!r}: {BAD_ARMS[spec]} (want {jc.ARM_FORM})"
    )


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["--arm", "a=gsm8k_rule", "--arm", "a=gsm8k_rule:x.y=1"],
            "--arm 'a=gsm8k_rule:x.y=1': the name 'a' is given twice",
        ),
        (
            ["--arm", "a=gsm8k_rule", "--arms", "rule,b"],
            "--arms: unknown arm(s) b; the arms: " + ", ".join([*jc.ARMS, "a"]),
        ),
        (["--arms", "colocated,server", "--base", "rule"], "--base rule: not one of the arms run (colocated, server)"),
        (
            ["--gpus", "0,1,2", "--gpus-per-arm", "2"],
            "--gpus-per-arm 2: give a number >= 1 that divides the 3 GPU id(s)",
        ),
        (
            ["--gpus", "0,1,2,3", "--gpus-per-arm", "2", "--arms", "rule,server,route"],
            "3 arms (rule, server, route) for 2 groups of 2 GPUs (0,1,2,3)",
        ),
        (["--gpus", "0,1,2,3", "--gpus-per-arm", "2", "--interleave"], "--interleave runs every arm on one GPU"),
    ],
    ids=["twice", "unknown", "base", "divides", "groups", "interleave"],
)
def test_bad_arm_choices_exit_2_with_a_message(args, message, capsys):
    with pytest.raises(SystemExit) as e:
        jc.main(args, env=_env())
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def _lines(path) -> list[str]:
    return path.read_text().splitlines()


def _shared(out, arm, steps=3, save_freq="-1"):
    return [
        f"trainer.total_training_steps={steps}",
        "trainer.n_gpus_per_node=1",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.3",
        *([f"trainer.save_freq={save_freq}"] if save_freq else []),
        "trainer.test_freq=-1",
        "trainer.resume_mode=disable",
        f"trainer.default_local_dir={out}/{arm}/checkpoints",
        f"trainer.experiment_name=judge-cost-{arm}",
    ]


def test_your_arms_run_beside_the_named_ones_and_a_failed_one_is_left_out_of_the_table(tmp_path):
    """Ported from the shell bench: every arm gets the shared overrides, then its own, then the arguments (a later key
    wins: trainer.save_freq=5 replaces the shared -1); an arm that fails after logging steps makes the bench exit 1,
    and the table holds the arms that finished, with their ratios to the rule."""
    spec = {
        "rule": {"steps": [9, 2, 2]},
        "colocated": {"steps": [9, 3, 3]},
        "tok128": {"steps": [9, 2.5, 2.5]},
        "broken": {"steps": [9, 5], "rc": 4},
    }
    out = tmp_path / "out"
    broken = f"broken=gsm8k_local_judge:{RKW}.mode=broken,trainer.logger=[console,file]"
    args = ["--arms", "rule,colocated,tok128,broken", "--steps", "3", "--out", str(out)]
    args += ["--arm", f"tok128=gsm8k_local_judge:{RKW}.max_tokens=128", "--arm", broken]
    user = ["data.train_batch_size=8", "trainer.save_freq=5"]
    rc = jc.main([*args, "--launcher", _fake(tmp_path, spec), "--", *user], env=_env())
    assert rc == 1
    assert {a: _lines(out / a / "args.txt") for a in spec} == {
        "rule": _shared(out, "rule", save_freq=None) + user,
        "colocated": _shared(out, "colocated", save_freq=None) + ["judge_placement=colocated"] + user,
        "tok128": _shared(out, "tok128", save_freq=None) + [f"{RKW}.max_tokens=128"] + user,
        "broken": _shared(out, "broken", save_freq=None)
        + [f"{RKW}.mode=broken", "trainer.logger=[console,file]"]
        + user,
    }
    assert {a: json.load(open(out / a / "child.json"))["recipe"] for a in spec} == {
        "rule": "gsm8k_rule",
        "colocated": "gsm8k_local_judge",
        "tok128": "gsm8k_local_judge",
        "broken": "gsm8k_local_judge",
    }
    md = _lines(out / "cost.md")
    assert [ln for ln in md if ln.startswith("| ")][:3] == [
        "| stage | rule | colocated | tok128 |",
        "| timing_s/step | 2.000 s | 3.000 s (1.50x) | 2.500 s (1.25x) |",
        "| steps in the medians | 2 | 2 | 2 |",
    ]
    assert md[-6:] == [
        "| arm | recipe | its overrides (after the shared ones) |",
        "|---|---|---|",
        "| rule | gsm8k_rule | none |",
        "| colocated | gsm8k_local_judge | `judge_placement=colocated` |",
        f"| tok128 | gsm8k_local_judge | `{RKW}.max_tokens=128` |",
        f"| broken | gsm8k_local_judge | `{RKW}.mode=broken` `trainer.logger=[console,file]` |",
    ]
    rep = json.load(open(out / "cost.json"))
    assert {r["arm"]: r["exit"] for r in rep["runs"]} == {"rule": 0, "colocated": 0, "tok128": 0, "broken": 4}
    assert rep["arms"]["tok128"]["overrides"] == [f"{RKW}.max_tokens=128"]


def test_an_arm_of_yours_replaces_a_named_arm_of_its_name_and_base_names_the_ratios_arm(tmp_path):
    spec = {"mine": {"steps": [9, 4, 4]}, "colocated": {"steps": [9, 2, 2]}}
    out = tmp_path / "out"
    args = ["--arms", "mine,colocated", "--base", "mine", "--steps", "3", "--out", str(out)]
    args += ["--arm", "mine=gsm8k_rule:data.max_response_length=512", "--arm", "colocated=gsm8k_local_judge:a.b=1"]
    assert jc.main([*args, "--launcher", _fake(tmp_path, spec)], env=_env()) == 0
    assert _lines(out / "colocated" / "args.txt") == _shared(out, "colocated") + ["a.b=1"]
    rep = json.load(open(out / "cost.json"))
    assert {a: v["ratio"] for a, v in rep["arms"].items()} == {
        "mine": {"timing_s/step": 1.0},
        "colocated": {"timing_s/step": 0.5},
    }
    assert "| timing_s/step | 4.000 s | 2.000 s (0.50x) |" in _lines(out / "cost.md")


def test_the_default_arms_are_the_named_ones_then_yours():
    args = jc.parse(["--arm", "tok=gsm8k_local_judge:a.b=1", "--arm", "server=gsm8k_local_judge", "--gpus", "0"])
    assert args.arms == [*jc.ARMS, "tok"] and args.base == "rule"
    assert (args.table["tok"], args.table["server"], args.table["rule"]) == (
        ("gsm8k_local_judge", ["a.b=1"]),
        ("gsm8k_local_judge", []),
        jc.ARMS["rule"],
    )


def test_each_run_sees_its_group_of_gpus(tmp_path):
    spec = {"*": {"steps": [9, 2, 2]}}
    out = tmp_path / "out"
    args = ["--arms", "rule,server", "--gpus", "0,1,2,3", "--gpus-per-arm", "2", "--steps", "3", "--out", str(out)]
    assert jc.main([*args, "--launcher", _fake(tmp_path, spec)], env=_env()) == 0
    assert {a: json.load(open(out / a / "child.json"))["gpu"] for a in ("rule", "server")} == {
        "rule": "0,1",
        "server": "2,3",
    }
    assert (
        json.load(open(out / "cost.json"))["settings"]["placement"] == "one arm per group of 2 GPUs, started together"
    )


def test_your_arms_compose_through_the_launcher(tmp_path):
    """The comma rule's value reaches verl's config as a list; an arm's overrides land where the launcher puts them."""
    env = {k: v for k, v in os.environ.items() if k not in jc.FIXED_BY_ARMS}
    name, recipe, own = jc.parse_arm(f"tok=gsm8k_local_judge:{RKW}.max_tokens=128,trainer.logger=[console,file]")
    folder = str(tmp_path / name)
    table = {name: (recipe, own)}
    p = launcher.plan(env, jc.arm_overrides(name, 3, folder, [], table), recipe, materialize=False, output_dir=folder)
    cfg = launcher.compose(recipe, p.overrides, {**env, **p.knobs})
    assert (
        cfg.reward.custom_reward_function.reward_kwargs.max_tokens,
        list(cfg.trainer.logger),
        cfg.trainer.total_training_steps,
        cfg.trainer.experiment_name,
    ) == (128, ["console", "file"], 3, "judge-cost-tok")


def test_dry_run_checks_your_arms_with_the_real_launcher(tmp_path, capsys):
    """DRY_RUN=1 with arms of yours: a good one is config OK, one with a key verl's config lacks fails (exit 1). The
    bench's main in-process (test_dry_run_checks_every_arm_with_the_real_launcher: python -m), each arm's launcher
    a child as always."""
    out = tmp_path / "dry"
    arms = ["--arm", f"tok128=gsm8k_local_judge:{RKW}.max_tokens=128,trainer.logger=[console,file]"]
    arms += ["--arm", "bad=gsm8k_rule:trainer.no_such_key=1"]
    rc = jc.main(["--arms", "tok128,bad", "--out", str(out), *arms], env={**_env(), "DRY_RUN": "1"})
    stdout = capsys.readouterr().out
    assert rc == 1, stdout
    assert [ln for ln in stdout.splitlines() if "DRY_RUN " in ln] == [
        "[judge_cost] DRY_RUN tok128: config OK",
        f"[judge_cost] DRY_RUN bad: exit 2, see {out}/bad/run.log",
    ]
    assert "DRY_RUN=1: stopping before training" in (out / "tok128" / "run.log").read_text()
    assert "no_such_key" in (out / "bad" / "run.log").read_text()
    assert not (out / "cost.md").exists()


# ------------------------------------------------------------------------------------------------ shapes.sh
def _shapes(tmp_path, *args, **env):
    return subprocess.run(
        ["bash", "scripts/lab/bench/shapes.sh", *args],
        cwd=ROOT,
        env={**_env(), "PYTHON": sys.executable, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_shapes_help_and_a_bad_gpus(tmp_path):
    subprocess.run(["bash", "-n", "scripts/lab/bench/shapes.sh"], cwd=ROOT, check=True)
    r = _shapes(tmp_path, "--help")
    assert r.returncode == 0 and r.stdout.startswith("Judge cost at anchor shapes: "), r.stdout + r.stderr
    r = _shapes(tmp_path, GPUS="3", COST_DIR=str(tmp_path / "bad"))
    assert (r.returncode, r.stderr, (tmp_path / "bad").exists()) == (
        2,
        "shapes: GPUS=3: 1 (the judge colocated with the policy) or 2 (the judge on its own GPU)\n",
        False,
    )


SHAPES_STEPS = {"rule_1gpu": [9, 2, 2, 2, 2], "rule_pool": [9, 2, 2, 2, 2], "*": [9, 3, 3, 3, 3]}


@pytest.mark.parametrize("gpus", ["1", "2"])
def test_shapes_runs_its_arms_through_the_bench(gpus, tmp_path, model_path):
    """scripts/lab/bench/shapes.sh makes or reuses the random 360M / 1.7B models and hands the bench its arms: one GPU:
    rule_1gpu vs colocated (the recipe: judge awake, CUDA graphs), colocated_sleep, colocated_eager and server; two
    GPUs (each run sees both): rule_pool vs pool (the judge's own pool, kept awake) and server_gpu1."""
    from scripts.lab.bench import random_model as rm

    models = tmp_path / "models"  # the two models already there (config + weights file): reused, not rebuilt
    for arch in ("smollm2-360m", "smollm2-1.7b"):
        rm.config_for(arch, rm.read_token_ids(model_path)).save_pretrained(models / f"random-{arch}")
        (models / f"random-{arch}" / "model.safetensors").write_bytes(b"")
    policy, judge = models / "random-smollm2-360m", models / "random-smollm2-1.7b"
    where = {"MODELS_DIR": str(models)} if gpus == "1" else {"POLICY_DIR": str(policy), "JUDGE_DIR": str(judge)}
    cost = tmp_path / f"shapes{gpus}"
    spec = {a: {"steps": s} for a, s in SHAPES_STEPS.items()}
    r = _shapes(
        tmp_path,
        "--launcher",
        _fake(tmp_path, spec),
        "data.train_batch_size=8",
        GPUS=gpus,
        COST_DIR=str(cost),
        TOKENIZER_FROM=model_path,
        MODEL="/elsewhere",
        STEPS="",
        CUDA_VISIBLE_DEVICES="",
        **where,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    every = ["data.max_response_length=512", "verl_judge.fail_fast.enable=false"]
    judged = every + [
        f"reward.reward_model.model_path={judge}",
        "+reward.custom_reward_function.reward_kwargs.max_tokens=256",
        "reward.reward_model.rollout.response_length=256",
    ]
    sleep = ["reward.reward_model.rollout.free_cache_engine=true"]  # verl's default: asleep between reward stages
    pool = [
        "reward.reward_model.enable_resource_pool=true",
        "reward.reward_model.n_gpus_per_node=1",
        "reward.reward_model.nnodes=1",
        "reward.reward_model.rollout.free_cache_engine=false",
    ]
    own = (
        {
            "rule_1gpu": every,
            "colocated": judged,
            "colocated_sleep": judged + sleep,
            "colocated_eager": judged + sleep + ["reward.reward_model.rollout.enforce_eager=true"],
            "server": judged + ["judge_placement=server"],
        }
        if gpus == "1"
        else {
            "rule_pool": every,
            "pool": judged + pool,
            "server_gpu1": judged + ["judge_placement=server", "verl_judge.judge_server.devices=1"],
        }
    )
    assert sorted(p.name for p in cost.iterdir()) == sorted([*own, "cost.md", "cost.json"])
    user = ["data.train_batch_size=8"]
    assert {a: _lines(cost / a / "args.txt") for a in own} == {
        a: _shared(cost, a, steps=5) + o + user for a, o in own.items()
    }
    children = {a: json.load(open(cost / a / "child.json")) for a in own}
    assert {(c["model"], c["gpu"]) for c in children.values()} == {(str(policy), "0" if gpus == "1" else "0,1")}
    rule = next(iter(own))
    cells = " | ".join(["2.000 s"] + ["3.000 s (1.50x)"] * (len(own) - 1))
    md = _lines(cost / "cost.md")
    assert f"| stage | {' | '.join(own)} |" in md and f"| timing_s/step | {cells} |" in md
    assert json.load(open(cost / "cost.json"))["settings"]["base"] == rule
    made = [ln for ln in r.stdout.splitlines() + r.stderr.splitlines() if ln.startswith("[random_model]")]
    assert made == (
        [
            f"[random_model] {m} already holds this model ({n:,} parameters); nothing to do"
            for m, n in ((policy, 361_821_120), (judge, 1_711_376_384))
        ]
        if gpus == "1"
        else []
    )


def test_shapes_runs_without_the_rule_run_have_no_ratios(tmp_path):
    cost = tmp_path / "cost"
    spec = {"*": {"steps": [9, 3, 3]}}
    r = _shapes(
        tmp_path,
        "--launcher",
        _fake(tmp_path, spec),
        RUNS="colocated  server",
        STEPS="3",
        COST_DIR=str(cost),
        POLICY_DIR=str(tmp_path / "p"),
        JUDGE_DIR=str(tmp_path / "j"),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.load(open(cost / "cost.json"))
    assert (rep["settings"]["arms"], rep["settings"]["base"]) == (["colocated", "server"], None)
    assert {a: v["ratio"] for a, v in rep["arms"].items()} == {"colocated": {}, "server": {}}
    assert "no ratios: no base arm in this run (--base names one)." in _lines(cost / "cost.md")[2]


@pytest.mark.parametrize(
    "argv,gpus,slots,interleave",
    [
        (["--gpus", "0"], ["0"], ["0"], True),  # one GPU: the arms take turns
        (["--gpus", "0,1"], ["0", "1"], ["0", "1"], False),
        (["--gpus", "0,1", "--gpus-per-arm", "2"], ["0", "1"], ["0,1"], True),  # one group: turns
    ],
)
def test_parse_resolves_the_placement(argv, gpus, slots, interleave):
    """``parse``'s frozen settings: the GPU ids of --gpus, their groups, and whether the arms take turns."""
    import dataclasses

    cfg = jc.parse(["--arms", "rule,server", *argv])
    assert (cfg.arms, cfg.base, cfg.gpus, cfg.slots, cfg.interleave) == (
        ["rule", "server"],
        "rule",
        gpus,
        slots,
        interleave,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.steps = 1
