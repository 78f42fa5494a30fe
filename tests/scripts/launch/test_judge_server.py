"""judge_placement=server on CPU: the placement switch composes valid configs, and the launcher's judge server
(``scripts/launch/judge_server.py``) lives exactly as long as training: started and answering before it, stopped after
success, failure and SIGTERM, and a server that dies mid-run stops training at once (exit 4).

The server is a real process: the project's CPU judge server (``engine=cpu_judge``) with the test model. Training is
a stand-in interpreter that asks the judge through ``reward_fns.llm_judge`` as verl's reward loop would (its base
URL from the composed config's port) and otherwise runs the real Python; the launcher's private Ray head is a
stand-in too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from scripts.launch import config_checks, config_compose, judge_server, services
from tests.scripts.workflows.test_pipeline import ROOT, fake  # noqa: F401  (fake: the fixture)

MODEL = os.environ.get("VERL_JUDGE_MODEL", "")
needs_model = pytest.mark.skipif(not MODEL, reason=os.environ.get("VERL_JUDGE_MODEL_MISSING", "no test model"))

# the trainer: reads the port the launcher chose, asks the judge once a second (FAKE_STEPS times), then exits
TRAINER = textwrap.dedent("""\
    #!{python}
    import asyncio, json, os, sys, time
    args = sys.argv[1:]
    if args[:2] != ["-m", "scripts.train"]:
        os.execv({python!r}, [{python!r}] + args)
    from reward_fns import llm_judge
    port = next(a.split("=", 1)[1] for a in args if a.startswith("verl_judge.judge_server.port="))
    state = os.environ["FAKE_STATE"]
    open(state + ".port", "w").write(port)
    open(state + ".gpus", "w").write(os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)"))
    from scripts.train.hooks import wait_for_judge  # what the real trainer does before its first step
    wait_for_judge({{"judge_server": {{"enable": True, "port": port, "start_timeout": 240}}}})
    for step in range(int(os.environ.get("FAKE_STEPS", "3"))):
        out = asyncio.run(llm_judge.compute_score("openai/gsm8k", "So 72 clips.\\n#### 72", "72",
                                                  {{"question": "How many clips?", "answer": "#### 72"}},
                                                  base_url=f"http://127.0.0.1:{{port}}/v1", model="judge",
                                                  api_key_env=None, timeout=30, max_retries=0, max_tokens=24))
        with open(state + ".steps", "a") as f:
            f.write(json.dumps(out) + "\\n")
        time.sleep(1)
    open(state + ".done", "w").write("ok")
    """)

DRIVER = """
import sys
from scripts.launch import launcher as launch
from scripts.launch import ray_head
ray_head.start = lambda env, log, **kw: (None, "stand-in")
ray_head.stop = lambda proc, **kw: None
sys.exit(launch.main(sys.argv[1:]))
"""
SERVER = [
    "judge_placement=server",
    "verl_judge.judge_server.engine=cpu_judge",
    "verl_judge.judge_server.start_timeout=240",
]


@pytest.mark.parametrize(
    "placement, enable, pool, manager, base_url, served",
    [
        ("colocated", True, False, "naive", None, False),
        ("pool", True, True, "naive", None, False),
        ("server", False, False, "rate_limited", "http://127.0.0.1:0/v1", True),
    ],
)
def test_placement_switch_composes(placement, enable, pool, manager, base_url, served, monkeypatch):
    monkeypatch.setenv("MODEL", "/m")
    monkeypatch.setenv("TRAIN_FILES", "t.parquet")
    monkeypatch.setenv("VAL_FILES", "v.parquet")
    cfg = config_compose.compose([f"judge_placement={placement}"], recipe="gsm8k_local_judge")
    rm = cfg.reward.reward_model
    assert (rm.enable, rm.enable_resource_pool, cfg.reward.reward_manager.name) == (enable, pool, manager)
    kwargs = cfg.reward.custom_reward_function.get("reward_kwargs") or {}
    assert kwargs.get("base_url") == base_url and cfg.verl_judge.judge_server.enable is served
    assert cfg.verl_judge.judge_server.model == "/m" == rm.model_path  # the judge model knob serves both
    assert config_checks.unknown_recipe_keys(cfg, "gsm8k_local_judge") == []
    assert config_checks.value_errors(cfg) == [] and config_checks.verl_checks(cfg) == []


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"engine": "tgi", "model": "/m"}, "engine must be one of ('vllm', 'cpu_judge')"),
        ({"engine": "vllm", "model": None}, "verl_judge.judge_server.model is empty"),
        ({"engine": "vllm", "model": "/m", "gpu_memory_utilization": 1.5}, "gpu_memory_utilization must be in (0, 1]"),
        (
            {"engine": "vllm", "model": "/m", "start_timeout": "soon"},
            "start_timeout must be a number of seconds > 0, got 'soon'",
        ),
        (
            {"engine": "vllm", "model": "/m", "wait_for_timeout": 0},
            "wait_for_timeout must be a number of seconds > 0, got 0",
        ),
        ({"engine": "vllm", "model": "/m", "port": 70000}, "port must be 0 (a free port) or a port number, got 70000"),
        ({"engine": "vllm", "model": "/m", "max_num_seqs": "many"}, "max_num_seqs must be a whole number >= 1 or null"),
        (
            {"engine": "vllm", "model": "/m", "kv_cache_memory_bytes": 0},
            "kv_cache_memory_bytes must be a whole number >= 1",
        ),
    ],
)
def test_bad_server_settings(settings, message):
    with pytest.raises(ValueError) as e:
        judge_server.command(settings, 8000)
    assert message in str(e.value)


@pytest.mark.parametrize("port", [None, False, "", 0, 0.0, 8001])
def test_an_unset_port_means_a_free_one(port):
    """Any false port means a free port, as ``start`` reads it; the command has the port it is given."""
    cmd = judge_server.command({"engine": "cpu_judge", "model": "/m", "port": port}, 8000, python="py")
    assert cmd[cmd.index("--port") + 1] == "8000"


def test_vllm_command():
    cmd = judge_server.command(
        {
            "engine": "vllm",
            "model": "/j",
            "gpu_memory_utilization": 0.25,
            "kv_cache_memory_bytes": 2**30,
            "max_num_seqs": 64,
            "enable_prefix_caching": True,
            "enforce_eager": False,
            "extra_args": ["--seed", 0],
        },
        8011,
        python="py",
    )
    assert cmd == [
        "py",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "/j",
        "--served-model-name",
        "judge",
        "--host",
        "127.0.0.1",
        "--port",
        "8011",
        "--gpu-memory-utilization",
        "0.25",
        "--max-num-seqs",
        "64",
        "--disable-uvicorn-access-log",
        "--kv-cache-memory-bytes",
        "1073741824",
        "--enable-prefix-caching",
        "--seed",
        "0",
    ]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie has exited
        return f.read().split(")")[-1].split()[0] != "Z"


def _server_pids(port: str) -> list[int]:
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                cmd = open(f"/proc/{d}/cmdline", "rb").read().split(b"\0")
            except OSError:
                continue
            if b"scripts.serve.cpu_judge" in cmd and port.encode() in cmd:
                pids.append(int(d))
    return [p for p in pids if _alive(p)]


@pytest.fixture()
def launcher(fake):
    tmp_path, env = (
        fake  # tests/scripts/workflows/test_pipeline.py's: a GSM8K fixture folder as GSM8K_DIR, the test model as MODEL
    )
    py = tmp_path / "python"
    py.write_text(TRAINER.format(python=sys.executable))
    py.chmod(0o755)
    env.update(PYTHON=str(py), FAKE_STATE=str(tmp_path / "state"), OUTPUT_DIR=str(tmp_path / "out"))

    def start(*args, steps=3, gpus="keep"):
        env["FAKE_STEPS"] = str(steps)
        if gpus is None:
            env.pop("CUDA_VISIBLE_DEVICES", None)
        return subprocess.Popen(
            [sys.executable, "-c", DRIVER, "gsm8k_local_judge", *SERVER, *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    return tmp_path, start


def _wait(path, proc, timeout=240):
    end = time.time() + timeout
    while not os.path.exists(path):
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        assert time.time() < end, f"{path} never appeared"
        time.sleep(0.2)


@pytest.mark.slow
@needs_model
def test_server_lives_exactly_as_long_as_training(launcher):
    tmp, start = launcher
    proc = start(steps=3)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    steps = [json.loads(line) for line in open(tmp / "state.steps")]
    assert len(steps) == 3 and all(s["judge_error"] == 0.0 and s["judge_fallback"] == 0.0 for s in steps), steps
    port = (tmp / "state.port").read_text()
    assert f"judge server ready at http://127.0.0.1:{port}/v1" in out and "judge server stopped" in out
    assert _server_pids(port) == [] and not judge_server.ready(f"http://127.0.0.1:{port}/v1")
    assert (tmp / "out" / "launch.judge_server.log").exists()  # beside the run's own log, named after it


@pytest.mark.parametrize(
    "devices, visible, n_train, machine, split",
    [
        (None, None, 1, 2, None),
        ("", "0,1", 1, 0, None),
        ([], "0,1", 1, 0, None),
        (1, None, 1, 2, ("1", "0")),
        (1, None, 1, 0, ("1", "0")),  # GPUs unknown (no nvidia-smi): 0 .. n_train + k - 1
        (1, None, 1, 4, ("1", "0,2,3")),  # training gets every other GPU of the machine
        (3, None, 1, 4, ("3", "0,1,2")),
        ("1", "0,1", 1, 0, ("1", "0")),
        ("3", "2,3", 1, 0, ("3", "2")),
        ("0", "0,1,2", 2, 0, ("0", "1,2")),
        (" 2 , 3", None, 2, 0, ("2,3", "0,1")),
        ([2, 3], "0,1,2,3", 2, 0, ("2,3", "0,1")),  # Hydra's list form
        ("GPU-bbb", "GPU-aaa,GPU-bbb", 1, 0, ("GPU-bbb", "GPU-aaa")),  # UUIDs, as device plugins set them
        ("5", "4,5,6,7", 3, 0, ("5", "4,6,7")),
    ],
)
def test_server_devices_split(devices, visible, n_train, machine, split):
    """devices=: the server gets those GPUs, training the rest of CUDA_VISIBLE_DEVICES (unset: the machine's)."""
    assert judge_server.split_devices(devices, visible, n_train, machine=machine) == split


@pytest.mark.parametrize(
    "devices, visible, n_train, machine, message",
    [
        (True, None, 1, 0, 'devices must be GPU ids such as 1, "2,3" or [2,3] (distinct), got True'),
        ("1,1", None, 1, 0, "(distinct), got '1,1'"),
        ("1,", None, 1, 0, "(distinct), got '1,'"),
        (-1, None, 1, 0, "got -1"),
        ("gpu1", None, 1, 0, "devices=gpu1: GPU gpu1 is not visible (CUDA_VISIBLE_DEVICES is unset)"),
        (5, None, 1, 0, "GPU 5 is not visible (CUDA_VISIBLE_DEVICES is unset)"),
        (5, None, 1, 4, "GPU 5 is not visible (this machine has 4)"),
        ("1", "2,3", 1, 0, "GPU 1 is not visible (CUDA_VISIBLE_DEVICES=2,3)"),
        ("1", "", 1, 0, "GPU 1 is not visible (CUDA_VISIBLE_DEVICES=)"),
        ("1", "0,1", 2, 0, "devices=1 leaves 1 GPU(s) of 0,1 for training, which needs trainer.n_gpus_per_node=2"),
        ("1", "0,0,1", 2, 0, "leaves 1 GPU(s) of 0,1 for training"),  # a GPU named twice is one GPU
        ("0,1", "0,1", 1, 0, "leaves 0 GPU(s)"),
    ],
)
def test_bad_server_devices(devices, visible, n_train, machine, message):
    with pytest.raises(ValueError) as e:
        judge_server.split_devices(devices, visible, n_train, machine=machine)
    assert message in str(e.value)


@pytest.mark.slow
@needs_model
def test_server_on_a_gpu_of_its_own(launcher, monkeypatch):
    """devices=1 on a two-GPU machine: the server runs with CUDA_VISIBLE_DEVICES=1, training (and its Ray head)
    with 0, and the reward still reaches the server."""
    tmp, start = launcher
    proc = start("verl_judge.judge_server.devices=1", steps=4, gpus=None)
    _wait(tmp / "state.steps", proc)
    port = (tmp / "state.port").read_text()
    (pid,) = _server_pids(port)
    server_env = dict(kv.split(b"=", 1) for kv in open(f"/proc/{pid}/environ", "rb").read().split(b"\0") if b"=" in kv)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-3000:]
    assert (server_env.get(b"CUDA_VISIBLE_DEVICES"), (tmp / "state.gpus").read_text()) == (b"1", "0")
    assert "judge server on GPU 1, training on GPU 0" in out
    steps = [json.loads(line) for line in open(tmp / "state.steps")]
    assert len(steps) == 4 and all(s["judge_error"] == 0.0 for s in steps), steps


@pytest.mark.slow
@needs_model
@pytest.mark.parametrize("stop", ["server dies", "launcher gets SIGTERM"])
def test_run_stopped_mid_training(stop, launcher):
    """The server killed: training stops at once with exit 4 and the cause. The launcher sent SIGTERM: training
    and server both end. Either way the 60-step stand-in never finishes and no server process is left."""
    tmp, start = launcher
    proc = start(steps=60)
    _wait(tmp / "state.steps", proc)
    port = (tmp / "state.port").read_text()
    (pid,) = _server_pids(port)
    if stop == "server dies":
        os.kill(pid, signal.SIGKILL)
    else:
        proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    # stopped, not finished: the stand-in's 60 steps were never all made (state.done), no server process is left
    assert not (tmp / "state.done").exists() and _server_pids(port) == []
    if stop == "server dies":
        assert proc.returncode == judge_server.SERVER_DIED_EXIT, out[-3000:]
        assert f"the judge server (http://127.0.0.1:{port}/v1) exited with -9 during training" in out
        assert "exit 4" in out
    else:
        assert proc.returncode == 128 + signal.SIGTERM, out[-3000:]
        assert "judge server stopped" in out


@pytest.mark.slow
@needs_model
def test_server_that_cannot_start_stops_training(launcher):
    """The server starts beside training; one that exits before it answers stops training at once (exit 4), and
    the reward, which was waiting for it, never scored a step."""
    tmp, start = launcher
    broken = tmp / "broken_judge"  # passes the config's path check (config.json), has no weights to load
    broken.mkdir()
    (broken / "config.json").write_text(open(os.path.join(MODEL, "config.json")).read())
    proc = start(f"reward.reward_model.model_path={broken}")
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == judge_server.SERVER_DIED_EXIT, out[-3000:]
    assert "the judge server exited with" in out and "before it was ready" in out
    assert (tmp / "state.port").exists() and not (tmp / "state.steps").exists()  # started, never scored


@pytest.mark.slow
def test_ray_job_refuses_server_placement(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DRY_RUN"}
    env.update(
        RAY_ADDRESS="http://127.0.0.1:8265",
        DRY_RUN="1",
        MODEL=MODEL or "/m",
        TRAIN_FILES="t.parquet",
        VAL_FILES="v.parquet",
    )
    r = subprocess.run(
        [sys.executable, "-m", "scripts.launch", "gsm8k_local_judge", "judge_placement=server"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (
        r.returncode == 2 and "judge_placement=server starts the judge server beside a local run" in r.stdout + r.stderr
    )


@needs_model
def test_command_line_serves_until_sigterm(tmp_path):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "scripts.launch.judge_server",
            "--model",
            MODEL,
            "--engine",
            "cpu_judge",
            "--log",
            str(tmp_path / "server.log"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    lines = [proc.stdout.readline() for _ in range(3)]  # starting ..., ready at ..., READY <url>
    line = lines[-1]
    assert line.startswith("READY http://127.0.0.1:") and "ready at" in lines[1], lines
    url = line.split()[1]
    port = url.rsplit(":", 1)[1].split("/")[0]
    served = _server_pids(port)
    assert judge_server.ready(url) and len(served) == 1
    proc.send_signal(signal.SIGTERM)
    # the server this command started is gone (a server of a test beside this one may take the freed port)
    assert proc.wait(timeout=60) == 0 and not any(_alive(pid) for pid in served)


# ----------------------------------------------------------------------------------------- no orphan, ever
# A stand-in judge server: serves GET /v1/models as model "judge" after DELAY seconds, in one of these ways
STANDIN = textwrap.dedent("""\
    import http.server, json, os, signal, subprocess, sys, time
    mode, port, delay = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    if mode == "ignores_sigterm":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if mode == "spawns_a_child":  # vLLM's engine core: a child in the server's process group
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        open(os.environ["STANDIN_CHILD"], "w").write(str(child.pid))
    if mode == "never_ready":
        time.sleep(600)
    time.sleep(delay)
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"object": "list", "data": [{"id": os.environ.get("STANDIN_NAME", "judge")}]}).encode()
            self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
            self.wfile.write(body)
        def log_message(self, *a):
            pass
    http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
    """)


def _standin(tmp_path, monkeypatch, mode, delay=0.0):
    script = tmp_path / "standin.py"
    script.write_text(STANDIN)
    monkeypatch.setattr(
        judge_server,
        "command",
        lambda settings, port, python=sys.executable: [sys.executable, str(script), mode, str(port), str(delay)],
    )
    return {"engine": "cpu_judge", "model": "/m", "served_model_name": "judge", "start_timeout": 5}


def _gone(pid: int, seconds: float = 10.0) -> bool:
    end = time.time() + seconds
    while time.time() < end:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("mode", ["ignores_sigterm", "spawns_a_child"])
def test_every_server_process_is_stopped(mode, tmp_path, monkeypatch):
    """C2, C3: a server that ignores SIGTERM is killed after the grace; a child in its process group goes with it."""
    monkeypatch.setenv("STANDIN_CHILD", str(tmp_path / "child"))
    settings = _standin(tmp_path, monkeypatch, mode)
    with judge_server.Served(settings, dict(os.environ), str(tmp_path / "s.log"), grace=1.0) as served:
        for _ in range(100):
            if served.server is not None and judge_server.ready(served.url, "judge"):
                break
            time.sleep(0.1)
        assert judge_server.ready(served.url, "judge")
        leader = served.server.proc.pid
    assert served.cause is None and _gone(leader)
    if mode == "spawns_a_child":
        assert _gone(int((tmp_path / "child").read_text()))


def test_a_server_that_never_answers_stops_the_run(tmp_path, monkeypatch):
    settings = _standin(tmp_path, monkeypatch, "never_ready")
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with judge_server.Served(
        {**settings, "start_timeout": 2}, dict(os.environ), str(tmp_path / "s.log"), grace=1.0
    ) as served:
        served.attach(victim)
        assert victim.wait(timeout=30) != 0  # the training process is stopped
        leader = served.server.proc.pid
    assert "was not ready within 2s (verl_judge.judge_server.start_timeout)" in served.cause and _gone(leader)


def test_a_port_someone_else_answers_is_not_ready(tmp_path, monkeypatch):
    """C4: another OpenAI-compatible server already answers on the port: ours cannot bind and exits, and the other's
    answer (another model) never counts as ours being ready."""
    settings = _standin(tmp_path, monkeypatch, "plain")
    port = services.free_port()
    other = subprocess.Popen(
        [sys.executable, str(tmp_path / "standin.py"), "plain", str(port), "0"],
        env={**os.environ, "STANDIN_NAME": "someone-else"},
    )
    try:
        for _ in range(100):
            if judge_server.ready(f"http://127.0.0.1:{port}/v1"):
                break
            time.sleep(0.1)
        assert judge_server.ready(f"http://127.0.0.1:{port}/v1") and not judge_server.ready(
            f"http://127.0.0.1:{port}/v1", "judge"
        )
        with judge_server.Served(
            {**settings, "port": port}, dict(os.environ), str(tmp_path / "s.log"), grace=1.0
        ) as served:
            for _ in range(100):
                if served.cause:
                    break
                time.sleep(0.1)
        assert "exited with" in served.cause and "before it was ready" in served.cause
    finally:
        other.kill()
        other.wait()


@pytest.mark.slow
@needs_model
def test_sigterm_while_the_server_starts_leaves_nothing(launcher):
    """C1: the launcher gets SIGTERM while its judge server is still loading the model (the trainer has started and
    waits for it): the launcher ends, and no process of the server is left."""
    tmp, start = launcher
    proc = start(steps=60)
    _wait(tmp / "state.port", proc)
    port = (tmp / "state.port").read_text()
    still_starting = not judge_server.ready(f"http://127.0.0.1:{port}/v1")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert still_starting and proc.returncode == 128 + signal.SIGTERM, out[-3000:]
    assert _server_pids(port) == [] and not (tmp / "state.steps").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    "setting, message",
    [
        ("verl_judge.judge_server.start_timeout=soon", "start_timeout must be a number of seconds > 0, got 'soon'"),
        ("verl_judge.judge_server.port=70000", "port must be 0 (a free port) or a port number, got 70000"),
        ("verl_judge.judge_server.devices=5", "devices=5: GPU 5 is not visible (CUDA_VISIBLE_DEVICES is unset)"),
    ],
)
def test_bad_server_setting_stops_the_plan(setting, message, tmp_path):
    """C5: checked when the run is planned (dry runs too): a clear error, exit 2, no traceback."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "CUDA_VISIBLE_DEVICES")}
    env.update(
        DRY_RUN="1", MODEL=MODEL or "/m", TRAIN_FILES="t.parquet", VAL_FILES="v.parquet", OUTPUT_DIR=str(tmp_path)
    )
    r = subprocess.run(
        [sys.executable, "-m", "scripts.launch", "gsm8k_local_judge", "judge_placement=server", setting],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 2 and message in r.stdout + r.stderr and "Traceback" not in r.stdout + r.stderr
