"""The launcher running a recipe, on CPU: secrets, Ray jobs, the private Ray head.

* Secrets: runtime_env.yaml holds no values; the launcher passes them to a Ray job by name and never
  prints or writes one; paths the job's upload leaves out stay absolute, with notes.
* The local path: a private Ray head is started, the trainer runs against it with the repo on
  PYTHONPATH and the knobs in its environment, its exit code is returned, and that head is stopped.
* A Ray job: ``ray job submit`` with runtime_env.yaml, submitted again while the job agent is not ready.
* Every run.sh hands over to the launcher (judge_to_reward/run.sh and scripts/main.sh with a GPU: to the
  pipeline); the knobs table in recipes/README.md is the launcher's --knobs output.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from scripts import console
from scripts.launch import knobs, ray_head, ray_job, services
from scripts.launch import launcher as launch
from tests.scripts.launch.test_recipes import (  # noqa: F401  (fx: the module fixture)
    ALL_RECIPES,
    HF_SECRET,
    INLINE_SECRET,
    OTHER_SECRET,
    RECIPES,
    ROOT,
    SECRET,
    SWAN_SECRET,
    base_env,
    fx,
    plan,
    recipe_files,
    run_recipe,
)

pytest.importorskip("verl")


# ----------------------------------------------------------------------------------------------- secrets
SECRET_VALUE = re.compile(r"(sk-[A-Za-z0-9-]{10,}|hf_[A-Za-z0-9]{10,}|[A-Za-z0-9+/]{32,})")


def test_runtime_env_has_no_secret_values():
    import yaml

    text = open(os.path.join(ROOT, "runtime_env.yaml"), encoding="utf-8").read()
    rt = yaml.safe_load(text)
    assert rt["working_dir"] == "."
    for pat in (".git", ".venv*", "/data/", "/checkpoints/", "/outputs/", "*.parquet", "__pycache__"):
        assert pat in rt["excludes"], pat
    for k, v in rt["env_vars"].items():
        assert not console.SECRET_NAME.search(k), f"secret-like variable {k} in runtime_env.yaml"
        assert not SECRET_VALUE.search(str(v)), f"{k} looks like a secret value"
    for k in ("TOKENIZERS_PARALLELISM", "NCCL_DEBUG", "VLLM_LOGGING_LEVEL"):
        assert k in rt["env_vars"]
    for v in os.environ.values():  # no value of this machine's environment that looks secret
        if v and len(v) >= 12 and SECRET_VALUE.fullmatch(v):
            assert v not in text
    assert not any(SECRET_VALUE.fullmatch(tok) for tok in re.findall(r"\S+", text) if not tok.startswith("#"))


@pytest.mark.slow
def test_job_submission_passes_secrets_by_name_never_prints_or_writes_them(fx, model_path, tmp_path):
    rt_path = os.path.join(ROOT, "runtime_env.yaml")
    before = open(rt_path, "rb").read()
    env = base_env(
        MODEL=model_path,
        RAY_ADDRESS="http://127.0.0.1:1",
        OPENAI_API_KEY=SECRET,
        HF_TOKEN=HF_SECRET,
        MY_EXTRA=SWAN_SECRET,
        PASS_ENV="MY_EXTRA",
        OTHER_CRED=OTHER_SECRET,
        OUTPUT_DIR=tmp_path / "out",
        **recipe_files(fx, "gsm8k_api_judge"),
    )
    # the key variable named by an argument (not *KEY/*TOKEN), and a key passed inline (in the request body: llm_judge
    # has no api_key option, and the config check refuses one): masked too
    args = [
        "+reward.custom_reward_function.reward_kwargs.api_key_env=OTHER_CRED",
        "+reward.custom_reward_function.reward_kwargs.extra_body.api_key=" + INLINE_SECRET,
    ]
    printed = run_recipe("gsm8k_api_judge", {**env, "DRY_RUN": "print"}, *args)
    dry = run_recipe("gsm8k_api_judge", {**env, "DRY_RUN": "1"}, *args)
    assert printed.returncode == 0, printed.stdout + printed.stderr
    assert dry.returncode == 0, dry.stdout + dry.stderr
    for r in (printed, dry):
        text = r.stdout + r.stderr
        for s in (SECRET, HF_SECRET, SWAN_SECRET, INLINE_SECRET, OTHER_SECRET):
            assert s not in text
    cmd = json.loads(printed.stdout)["command"]
    assert cmd.startswith(f"{os.path.dirname(sys.executable)}/ray job submit --runtime-env-json ") or cmd.startswith(
        "ray job submit --runtime-env-json "
    )
    assert f" -- env MODEL={model_path} " in cmd  # the knobs reach the job's driver, which resolves the config
    assert " python3 -m scripts.train --config-path ../../recipes/gsm8k_api_judge --config-name config " in cmd
    for name in ("OPENAI_API_KEY", "HF_TOKEN", "MY_EXTRA", "OTHER_CRED"):
        assert f'"{name}": "***"' in cmd
    assert "secrets passed to the job by name: HF_TOKEN, OPENAI_API_KEY, OTHER_CRED, MY_EXTRA" in dry.stdout
    assert "[launch] config OK: recipe gsm8k_api_judge" in dry.stdout
    assert open(rt_path, "rb").read() == before
    for dirpath, _, files in os.walk(tmp_path):
        for f in files:
            data = open(os.path.join(dirpath, f), "rb").read()
            assert SECRET.encode() not in data and HF_SECRET.encode() not in data
    # the plan handed to Ray (in memory) does carry the values, by name
    p = plan("gsm8k_api_judge", env, *args)
    assert (
        p.runtime_env["env_vars"]["OPENAI_API_KEY"],
        p.runtime_env["env_vars"]["MY_EXTRA"],
        p.runtime_env["env_vars"]["OTHER_CRED"],
    ) == (SECRET, SWAN_SECRET, OTHER_SECRET)
    assert p.metrics_file == f"{tmp_path / 'out'}/verl-judge/gsm8k_api_judge.jsonl"
    assert f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_ROOT={tmp_path / 'out'}" in p.overrides
    # without any secret set, runtime_env.yaml is passed as is; paths inside the repo become repo-relative
    clean = plan(
        "gsm8k_rule",
        base_env(
            MODEL=model_path,
            RAY_ADDRESS="http://127.0.0.1:1",
            REWARD_FN=f"{ROOT}/reward_fns/gsm8k.py",
            **recipe_files(fx, "gsm8k_rule"),
        ),
    )
    i = clean.command.index("submit")
    assert clean.command[i : i + 4] == ["submit", "--runtime-env", "runtime_env.yaml", "--"]
    assert clean.command[i + 4 : i + 9] == [
        "env",
        f"MODEL={model_path}",
        f"TRAIN_FILES={fx[('policy', 'train')]}",
        f"VAL_FILES={fx[('policy', 'test')]}",
        "REWARD_FN=reward_fns/gsm8k.py",
    ]
    assert clean.command[i + 9 : i + 16] == [
        "python3",
        "-m",
        "scripts.train",
        "--config-path",
        "../../recipes/gsm8k_rule",
        "--config-name",
        "config",
    ]
    assert not [n for n in clean.notes if "flash" in n]  # the cluster's driver decides (NO_FLASH_ATTN=auto)


# repo path -> does `ray job submit` leave it out of the job's working_dir (runtime_env.yaml excludes + .gitignore)
UPLOAD = {
    "reward_fns/gsm8k.py": False,
    "recipes/gsm8k_rule/config.yaml": False,
    "tests/fixtures/gsm8k/train.parquet": False,  # .gitignore's !tests/fixtures/**/*.parquet
    "data/gsm8k_p512/train.parquet": True,  # /data/
    "outputs/verl-judge/gsm8k_rule": True,  # /outputs/
    "checkpoints/x/global_step_1": True,  # /checkpoints/
    "mine/train.parquet": True,  # *.parquet
    "mine/__pycache__/m.cpython-311.pyc": True,
    ".git/config": True,
}


@pytest.mark.parametrize("rel", list(UPLOAD))
def test_job_paths_left_out_of_the_upload_stay_absolute(rel):
    """A repo path the job's upload leaves out keeps its absolute path (seen on an H100 Ray cluster: the default data
    under data/ was passed repo-relative and the job found no data/gsm8k_p512/train.parquet in its working_dir)."""
    job = {"RAY_ADDRESS": "http://127.0.0.1:1"}
    assert ray_job.not_uploaded(rel, job) is UPLOAD[rel]
    assert ray_job.local_path(os.path.join(ROOT, rel), job) == (os.path.join(ROOT, rel) if UPLOAD[rel] else rel)
    assert ray_job.local_path(os.path.join(ROOT, rel), {}) == os.path.join(ROOT, rel)  # local runs: always absolute


def test_job_notes_for_paths_and_checkpoints_the_job_cannot_upload(fx, model_path):
    env = base_env(
        MODEL=model_path,
        RAY_ADDRESS="http://127.0.0.1:1",
        NO_FLASH_ATTN="1",
        TRAIN_FILES=f"{ROOT}/data/t.parquet",
        VAL_FILES=f"{ROOT}/tests/fixtures/v.parquet",
    )
    p = plan("gsm8k_rule", env)
    out = f"{ROOT}/outputs/verl-judge/gsm8k_rule"
    assert (p.knobs["TRAIN_FILES"], p.knobs["VAL_FILES"]) == (f"{ROOT}/data/t.parquet", "tests/fixtures/v.parquet")
    assert [n for n in p.notes if "not uploaded" in n] == [
        "Ray job: not uploaded with the repo (runtime_env excludes / .gitignore), "
        "so the job opens these where they are; "
        f"every node must see them (one host, or shared storage): {ROOT}/data/t.parquet, {out}"
    ]
    assert [n for n in p.notes if "checkpoints go to" in n] == [
        "Ray job: checkpoints go to checkpoints/verl-judge/gsm8k_rule inside the job's temporary working_dir "
        "on the node "
        "running verl's TaskRunner: set trainer.default_local_dir=<shared storage> to keep them"
    ]
    p = plan("gsm8k_rule", env, "trainer.default_local_dir=/shared/ckpt")
    assert not [n for n in p.notes if "checkpoints go to" in n]


def test_mask():
    env = {
        "OPENAI_API_KEY": SECRET,
        "MY_TOKEN": "abcdefghij",
        "SHORT_KEY": "abc",
        console.KEY_ENV: "OTHER_CRED",
        "OTHER_CRED": OTHER_SECRET,
    }
    out = console.mask(
        f"key {SECRET} tok abcdefghij api_key=zzzzzzzz token: 'qqqqqqq' api_key_env=OPENAI_API_KEY {OTHER_SECRET} abc",
        env,
    )
    assert SECRET not in out and "abcdefghij" not in out and "zzzzzzzz" not in out and "qqqqqqq" not in out
    assert (
        OTHER_SECRET not in out and "api_key_env=OPENAI_API_KEY" in out and out.endswith(" ***")
    )  # E2: short ones too


# ----------------------------------------------------------------------------------------------- running
FAKE_TRAINER = r"""
import os, sys, json
import ray
print("fake trainer args:", len(sys.argv) - 1, "overrides")
print("the key is", os.environ.get("OPENAI_API_KEY"))  # a leaky trainer: the launcher must mask it
ray.init()
@ray.remote
def probe():
    import reward_fns.gsm8k  # the repo root is on PYTHONPATH in Ray workers
    return os.environ.get("OPENAI_API_KEY") is not None
print("worker sees the repo and the key:", ray.get(probe.remote()))
metrics = [a.split("=", 1)[1] for a in sys.argv if "VERL_FILE_LOGGER_PATH=" in a][0]
open(metrics, "a").write(json.dumps({"step": 1, "data": {"critic/score/mean": 0.5}}) + "\n")
ray.shutdown()
sys.exit(3)
"""
# plan() of a recipe, its trainer command swapped for a stand-in (argv[1]: the stand-in's command, as JSON),
# then execute()
DRIVER = r"""
import json, os, sys
from scripts.launch import launcher as launch
env = dict(os.environ)
p = launch.plan(env, [], "gsm8k_rule")
swap = json.loads(sys.argv[1])
i = p.command.index("scripts.train") - 1
p.command = p.command[:i] + swap + p.command[i + 2:]
sys.exit(launch.execute(p, env))
"""


def _drive(env, swap, timeout=600):
    return subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(swap)],
        cwd=ROOT,
        env={**env, "PYTHONPATH": ROOT},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.slow
def test_local_run_starts_and_stops_its_own_ray_head(fx, model_path, tmp_path):
    fake = tmp_path / "fake_trainer.py"
    fake.write_text(FAKE_TRAINER)
    out = tmp_path / "out"
    out.mkdir()
    (out / "metrics.jsonl").write_text('{"step": 1, "data": {}}\n')  # a previous run's file: kept, renamed
    env = base_env(MODEL=model_path, OUTPUT_DIR=out, OPENAI_API_KEY=SECRET, **recipe_files(fx, "gsm8k_rule"))
    r = _drive(env, [str(fake)])
    text = r.stdout + r.stderr
    assert r.returncode == 3, text[-4000:]  # the trainer's exit code
    assert SECRET not in text and "the key is ***" in text
    assert "worker sees the repo and the key: True" in text
    m = re.search(r"stopping the private Ray head \(pid (\d+)\)", text)
    assert m, text[-3000:]
    pid = int(m.group(1))
    for _ in range(60):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"Ray head {pid} still running")
    kept = re.search(r"Ray's session logs kept in (\S+)", text)  # the run failed (exit 3): its Ray logs are kept
    assert kept and os.path.isdir(kept.group(1))
    shutil.rmtree(kept.group(1))
    log = (out / "launch.log").read_text()
    assert "the key is ***" in log and SECRET not in log
    assert f"{fake} --config-path {ROOT}/recipes/gsm8k_rule --config-name config " in log  # the planned arguments
    assert json.loads((out / "metrics.jsonl").read_text().splitlines()[0])["step"] == 1
    assert len(list(out.glob("metrics.*.jsonl"))) == 1


JOB_MAIN = r"""
import os, sys
import ray
print("the key is", os.environ.get("OPENAI_API_KEY"))
ray.init()
@ray.remote
def probe():
    import reward_fns.gsm8k  # the uploaded working_dir is on PYTHONPATH
    return (os.environ.get("OPENAI_API_KEY") is not None, os.path.exists("runtime_env.yaml"),
            os.path.exists(".git") or os.path.exists("data") or os.path.exists(".venv"))
key, repo, excluded_present = ray.get(probe.remote())
print(f"job worker: key={key} repo={repo} excluded_present={excluded_present}")
"""


@pytest.mark.slow
def test_ray_job_submission_end_to_end(fx, model_path, tmp_path):
    """RAY_ADDRESS set: ray job submit with runtime_env.yaml; the key reaches the job by name only."""
    pytest.importorskip("aiohttp")
    mod = f"_job_main_{os.getpid()}"
    entry = os.path.join(ROOT, "tests", mod + ".py")  # must be inside the uploaded working_dir
    with open(entry, "w") as f:
        f.write(JOB_MAIN)
    env = base_env()
    head = None
    try:
        head, _ = ray_head.start(env, str(tmp_path / "head.log"), dashboard_port=services.free_port())
        log = (tmp_path / "head.log").read_text()
        m = re.search(r"dashboard at[\s\S]*?(127\.0\.0\.1:\d+)", log)
        assert m, log[-2000:]
        import urllib.error
        import urllib.request

        for _ in range(120):  # the dashboard's HTTP server comes up a little after the head
            try:
                urllib.request.urlopen(f"http://{m.group(1)}/api/version", timeout=2)
                break
            except urllib.error.HTTPError:
                break  # 401 with token auth: it is up
            except OSError:
                time.sleep(0.5)
        job_env = {
            **env,
            "MODEL": model_path,
            "RAY_ADDRESS": f"http://{m.group(1)}",
            "JOB_PYTHON": sys.executable,
            "OPENAI_API_KEY": SECRET,
            "OUTPUT_DIR": str(tmp_path / "out"),
            **recipe_files(fx, "gsm8k_rule"),
        }
        r = _drive(job_env, ["-m", f"tests.{mod}"])
        text = r.stdout + r.stderr
        assert r.returncode == 0, text[-4000:]
        assert "job worker: key=True repo=True excluded_present=False" in text, text[-4000:]
        assert SECRET not in text and "the key is ***" in text
        assert SECRET not in (tmp_path / "out" / "launch.log").read_text()
    finally:
        os.remove(entry)
        if head is not None:
            ray_head.stop(head)


def test_job_submission_retried_while_the_job_agent_is_not_ready(tmp_path, monkeypatch):
    """A fresh cluster answers "No available agent to submit job" for a while: submit again, then stop."""
    counter = tmp_path / "tries"
    fake_submit = (
        "import pathlib, sys; p = pathlib.Path(sys.argv[1]); n = int(p.read_text() or 0) + 1 if p.exists() else 1; "
        "p.write_text(str(n)); "
        "print('RuntimeError: Request failed with status code 500: No available agent to submit job') if n < 3 "
        "else print('job submitted'); sys.exit(1 if n < 3 else 0)"
    )
    p = launch.Plan(
        recipe="x",
        mode="job",
        command=[sys.executable, "-c", fake_submit, str(counter)],
        output_dir=str(tmp_path / "out"),
        metrics_file=str(tmp_path / "out" / "m.jsonl"),
    )
    monkeypatch.setattr(ray_job.time, "sleep", lambda s: None)
    assert launch.execute(p, dict(os.environ), tries=5) == 0
    assert counter.read_text() == "3"
    counter.write_text("0")
    assert launch.execute(p, dict(os.environ), tries=2) == 1  # gives up after 2 tries, returns the failure
    assert counter.read_text() == "2"
    assert ray_job.SUBMIT_TRIES == 6


# a stand-in trainer, started once per try: each try's behaviour is the next word of ``plan``
RACE_TRAINER = r"""
import os, pathlib, signal, sys
n = pathlib.Path(sys.argv[1]); i = int(n.read_text()) if n.exists() else 0; n.write_text(str(i + 1))
what, metrics = sys.argv[2].split(",")[i], pathlib.Path(sys.argv[3])
print("RAY_ADDRESS at start:", os.environ.get("RAY_ADDRESS"), flush=True)
if what in ("ok", "race_after_step"):
    metrics.write_text('{"step": 1, "data": {}}\n')
if what == "step_then_race":  # a step logged to the console only (no file logger)
    print("step:3 - critic/score/mean:0.1", flush=True)
if what.startswith("race") or what == "step_then_race":
    print("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
          "port: 41901, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use", flush=True)
if what == "errno98":
    print("OSError: [Errno 98] Address already in use", flush=True)
if what == "killed_after_race":
    print("name: EADDRINUSE", flush=True)
    os.kill(os.getpid(), signal.SIGTERM)
if what == "fail":
    print("RuntimeError: CUDA out of memory", flush=True)
sys.exit(0 if what == "ok" else 1)
"""


@pytest.mark.parametrize(
    "plan_, rc, starts",
    [
        ("race,ok", 0, 2),  # a port race while starting: started again, and it runs
        ("errno98,ok", 0, 2),  # Python's and ZMQ's wording of the same race
        ("race,race,ok", 0, 3),
        ("race,race,race", 1, 3),  # START_TRIES starts, then the failure is returned
        ("fail,ok", 1, 1),  # another failure: no second start
        ("race_after_step,ok", 1, 1),  # the port error after a step in the metrics file: no start-up race
        ("step_then_race,ok", 1, 1),  # ... or after a step the console showed (no file logger)
        ("killed_after_race,ok", -15, 1),  # stopped by a signal: never started again
        ("ok", 0, 1),
    ],
)
def test_local_run_started_again_after_a_port_race(plan_, rc, starts, tmp_path, monkeypatch, capsys):
    """verl picks free ports for torch.distributed and binds them later; a run starting beside others can find its
    port taken (EADDRINUSE, seen with six runs started together on one host). The launcher starts it again, with a
    fresh Ray head each time, only when the failure came before any training step; no try sees an earlier try's
    Ray address."""
    from scripts.launch import local_run

    counter, metrics = tmp_path / "starts", tmp_path / "out" / "m.jsonl"
    heads, stopped = [], []

    def start(env, log):
        heads.append(env.get("RAY_ADDRESS"))
        env["RAY_ADDRESS"] = f"127.0.0.1:{1000 + len(heads)}"  # as the real one does
        return len(heads), env["RAY_ADDRESS"]

    monkeypatch.setattr(launch.ray_head, "start", start)
    monkeypatch.setattr(launch.ray_head, "stop", lambda head, keep=False: stopped.append(head))
    p = launch.Plan(
        recipe="gsm8k_rule",
        mode="local",
        command=[sys.executable, "-c", RACE_TRAINER, str(counter), plan_, str(metrics)],
        output_dir=str(tmp_path / "out"),
        metrics_file=str(metrics),
        log_file=str(tmp_path / "out" / "l.log"),
    )
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    assert launch.execute(p, env) == rc
    out = capsys.readouterr().out
    assert int(counter.read_text()) == starts and stopped == list(range(1, starts + 1))
    assert heads == [None] * starts  # each try starts from the caller's environment
    assert [line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("RAY_ADDRESS at start")] == [
        f"127.0.0.1:{1001 + i}" for i in range(starts)
    ]
    assert out.count("a port it had picked was taken meanwhile") == starts - 1
    assert local_run.START_TRIES == 3


# ----------------------------------------------------------------------------------------------- hand-over
def test_knobs_table_in_recipes_readme_is_the_launchers():
    r = subprocess.run(
        [sys.executable, "-m", "scripts.launch", "--knobs"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    readme = open(os.path.join(ROOT, "recipes", "README.md"), encoding="utf-8").read()
    m = re.search(r"<!-- knobs:[^\n]*-->\n(.*?)\n<!-- /knobs -->", readme, re.S)
    assert m, "no generated table in recipes/README.md"
    assert m.group(1) == r.stdout.rstrip("\n") == knobs.markdown()
    assert len(m.group(1).splitlines()) == 2 + len(knobs.KNOBS)
    h = subprocess.run(
        [sys.executable, "-m", "scripts.launch", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert h.returncode == 0 and knobs.markdown() in h.stdout and "DRY_RUN=1" in h.stdout


def test_run_sh_files_hand_over():
    for recipe in RECIPES:
        lines = [
            ln.strip()
            for ln in open(os.path.join(ROOT, "recipes", recipe, "run.sh"))
            if ln.strip() and not ln.startswith("#")
        ]
        assert lines == [f'exec bash "$(dirname "$0")/../../scripts/launch.sh" {recipe} "$@"'], recipe


def _fake_python(tmp_path):
    py = tmp_path / "fakepy"
    py.write_text('#!/bin/bash\necho "fake python: $*"\n')
    py.chmod(0o755)
    return str(py)


def test_judge_to_reward_runs_the_pipeline(tmp_path):
    r = run_recipe(
        "judge_to_reward", base_env(PYTHON=_fake_python(tmp_path)), "--grpo-steps", "3", "data.train_batch_size=8"
    )
    assert r.returncode == 0, r.stderr
    assert (
        r.stdout == f"fake python: -m scripts.pipeline judge_to_reward --out {ROOT}/outputs/judge_to_reward "
        "--grpo-steps 3 data.train_batch_size=8\n"
    )
    h = run_recipe("judge_to_reward", base_env(), "--help", timeout=120)
    assert (
        h.returncode == 0
        and h.stdout.startswith("usage: python -m scripts.pipeline")
        and "--policy-override" in h.stdout
    )
    bad = run_recipe("judge_to_reward", base_env(DRY_RUN="1"), "--bogus", timeout=120)
    assert bad.returncode == 2 and "unrecognized arguments: --bogus" in bad.stderr
    not_knob = run_recipe("judge_to_reward", base_env(POLICY_STEPS="5"), timeout=120)  # an option of the pipeline
    assert (
        not_knob.returncode == 2
        and not_knob.stdout == ""
        and "POLICY_STEPS=5 is set, but no script reads it" in not_knob.stderr
    )


def test_main_sh_gpu_path_is_the_experiment(tmp_path):
    """With a GPU, scripts/main.sh is one call: python -m scripts.lab.policy_learns --out outputs/main."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "nvidia-smi").write_text("#!/bin/bash\necho 'GPU 0: fake'\n")
    (bindir / "nvidia-smi").chmod(0o755)
    env = base_env(
        PYTHON=_fake_python(tmp_path), GSM8K_DIR="/data/gsm8k", PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}"
    )
    r = subprocess.run(
        ["bash", os.path.join(ROOT, "scripts", "main.sh"), "--grpo-steps", "2"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "fake python: -m scripts.lab.policy_learns --out outputs/main --grpo-steps 2"
    assert "[main] GSM8K: /data/gsm8k" in r.stdout


# arguments -> (what each recipe's dry run gets, what the experiment's dry run gets)
MAIN_CPU_ARGS = [
    ([], "", ""),
    (["trainer.total_training_steps=3"], " trainer.total_training_steps=3", " trainer.total_training_steps=3"),
    (["--testbed", "none"], "", " --testbed none"),  # policy_learns options are no Hydra overrides of a recipe
    (["--steps", "30", "trainer.logger=[console]"], "", " --steps 30 trainer.logger=[console]"),
]


@pytest.mark.parametrize("args, to_recipes, to_experiment", MAIN_CPU_ARGS, ids=["none", "override", "option", "mixed"])
def test_main_sh_cpu_path_gives_options_to_the_experiment_only(tmp_path, args, to_recipes, to_experiment):
    """Without a GPU, scripts/main.sh dry-runs every recipe and the experiment; the README's
    `bash scripts/main.sh --testbed none` must not reach a recipe as a Hydra override."""
    env = base_env(PYTHON=_fake_python(tmp_path), PATH="/usr/bin:/bin")  # no nvidia-smi
    main = os.path.join(ROOT, "scripts", "main.sh")
    r = subprocess.run(["bash", main, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    calls = [line.removeprefix("fake python: ") for line in r.stdout.splitlines() if line.startswith("fake python: ")]
    launches = [c for c in calls if c.startswith("-m scripts.launch ")]
    assert [c.split()[2] for c in launches] == [
        "judge_pointwise",
        "judge_pairwise",
        "gsm8k_rule",
        "gsm8k_api_judge",
        "gsm8k_local_judge",
    ]
    assert {" ".join(c.split()[3:]) for c in launches} == {to_recipes.strip()}
    assert f"-m scripts.pipeline judge_to_reward --out {ROOT}/outputs/judge_to_reward{to_recipes}" in calls
    assert calls[-1] == f"-m scripts.lab.policy_learns --out outputs/main{to_experiment}"
    assert "[main] dry runs: 7/7 passed" in r.stdout


@pytest.mark.slow
def test_main_sh_offline_in_a_fresh_copy(model_path, tmp_path):
    """D10: the README's main job on a machine with no GPU, no network and no ../shared: every dry run passes (the
    word-problem testbed stands in for GSM8K)."""
    repo = tmp_path / "clone" / "repo"
    files = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    )
    for f in filter(None, files):
        os.makedirs(repo / os.path.dirname(f), exist_ok=True)
        if os.path.isfile(os.path.join(ROOT, f)):
            shutil.copy2(os.path.join(ROOT, f), repo / f)
    env = base_env(
        MODEL=model_path, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PATH="/usr/bin:/bin"
    )  # no nvidia-smi
    r = subprocess.run(["bash", "scripts/main.sh"], cwd=repo, env=env, capture_output=True, text=True, timeout=1200)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "[main] dry runs: 7/7 passed" in out, out[-4000:]
    assert "the word-problem testbed stands in for it" in out and not (tmp_path / "clone" / "shared").exists()


@pytest.mark.parametrize(
    "text, env, masked",
    [
        # E1: credentials inside a URL
        ("JUDGE_BASE_URL=https://user:pass@judge.example/v1", {}, "JUDGE_BASE_URL=https://***@judge.example/v1"),
        ("base_url: http://h:8/v1?key=abc123&model=m", {}, "base_url: http://h:8/v1?key=***&model=m"),
        ("GET https://h/v1?sig=x1&x_auth_token=y2", {}, "GET https://h/v1?sig=***&x_auth_token=***"),
        # E2: escaped and short secrets
        ('{"k": "se\\"cret-value"}', {"MY_API_KEY": 'se"cret-value'}, '{"k": "***"}'),
        ("q=se%22cret-value", {"MY_API_KEY": 'se"cret-value'}, "q=***"),
        ("token abc and abcdef", {"SHORT_TOKEN": "abc"}, "token *** and abcdef"),
    ],
)
def test_mask_urls_and_escaped_secrets(text, env, masked):
    assert console.mask(text, env) == masked


def test_judge_client_repr_and_errors_mask_url_credentials():
    from reward_fns.judge_client import JudgeClient
    from reward_fns.judge_errors import scrub_message

    c = JudgeClient("https://user:pw@judge.example/v1?key=k123", "m", api_key_env=None)
    assert "pw" not in repr(c) and "k123" not in repr(c) and "https://***@judge.example" in repr(c)
    assert scrub_message(f"failed at {c.url}", []) == "failed at https://***@judge.example/v1/chat/completions?key=***"


# child: through run.sh in a child process, as a user runs it (the other rows: the launcher's main in-process, the
# same code path without an interpreter's start)
@pytest.mark.parametrize(
    "content, message, child",
    [
        (
            "- a\n- b\n",
            "must be a mapping of runtime-env fields (working_dir, env_vars, excludes, ...), got a list",
            True,
        ),
        (
            "just text\n",
            "must be a mapping of runtime-env fields (working_dir, env_vars, excludes, ...), got a str",
            False,
        ),
        ("env_vars: [1, 2]\n", "env_vars must be a mapping and excludes a list", False),
        ("a: [b\n", "not YAML", False),
    ],
)
def test_bad_runtime_env_is_a_clear_error(content, message, child, fx, model_path, tmp_path, capsys):
    """D9: a RUNTIME_ENV that is not a mapping stops the submission with a message naming the file, no traceback."""
    rt = tmp_path / "rt.yaml"
    rt.write_text(content)
    env = base_env(
        MODEL=model_path,
        RAY_ADDRESS="http://127.0.0.1:8265",
        RUNTIME_ENV=str(rt),
        DRY_RUN="1",
        **recipe_files(fx, "gsm8k_rule"),
    )
    if child:
        r = run_recipe("gsm8k_rule", env)
        rc, out = r.returncode, r.stdout + r.stderr
    else:
        rc = launch.main(["gsm8k_rule"], env)
        out = "".join(capsys.readouterr())
    assert rc == 2 and f"RUNTIME_ENV {rt}: {message}" in out and "Traceback" not in out, out[-2000:]
