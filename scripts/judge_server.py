"""The judge served beside the policy (``judge_placement=server``): an OpenAI-compatible server of the judge model
on the training machine, started before training, watched while it runs, stopped after it.

verl 0.9.1 scores a colocated reward model in a stage of its own after generation, but computes a custom reward
inside the agent loop as each rollout finishes when no reward model is configured. So a judge behind an endpoint
on the same GPU, asked by ``reward_fns.llm_judge``, grades a finished answer while the rest of the batch is still
generating. The launcher (``scripts/launch.py``) runs this for a recipe whose composed config has
``verl_judge.judge_server.enable: true`` (``recipes/gsm8k_local_judge/judge_placement/server.yaml``); the settings
and their defaults are in ``recipes/base.yaml`` (``verl_judge.judge_server``).

* ``engine: vllm``: ``python -m vllm.entrypoints.openai.api_server`` with a fixed memory share (or a fixed KV
  cache), prefix caching, CUDA graphs unless ``enforce_eager``; ``engine: cpu_judge``: the project's CPU server
  (``scripts/serve/cpu_judge.py``, for tests and CPU machines).
* ``start`` waits until ``GET /v1/models`` answers (the server's log tail in the error when it exits or times
  out); ``Watchdog`` stops training at once when the server dies mid-run, naming its exit code and log tail (no
  silent fallback to the rule for many steps); ``stop`` ends the server's whole process group.

    python -m scripts.judge_server --model PATH [--engine cpu_judge] [--port 0]   # serve until Ctrl-C / SIGTERM
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from scripts.console import say
from scripts.ray_head import free_port

ENGINES = ("vllm", "cpu_judge")
#: exit status of a run stopped because its judge server died (scripts.train's silent-judge stop is 3)
SERVER_DIED_EXIT = 4


class JudgeServerError(RuntimeError):
    pass


@dataclass
class Server:
    proc: subprocess.Popen
    port: int
    log_path: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def tail(self, n: int = 20) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-n:]).rstrip()
        except OSError:
            return "(no log)"


def command(settings: dict, port: int, python: str = sys.executable) -> list[str]:
    """The server's command line from ``verl_judge.judge_server`` settings (a ValueError names a bad one)."""
    s = dict(settings)
    engine, model = s.get("engine", "vllm"), s.get("model")
    if engine not in ENGINES:
        raise ValueError(f"verl_judge.judge_server.engine must be one of {ENGINES}, got {engine!r}")
    if not model:
        raise ValueError("verl_judge.judge_server.model is empty: set reward.reward_model.model_path (or JUDGE_MODEL)")
    name = str(s.get("served_model_name") or "judge")
    common = ["--model", str(model), "--served-model-name", name, "--host", "127.0.0.1", "--port", str(port)]
    if engine == "cpu_judge":
        return [python, "-m", "scripts.serve.cpu_judge", *common, *map(str, s.get("extra_args") or [])]
    mem = float(s.get("gpu_memory_utilization", 0.2))
    if not 0 < mem <= 1:
        raise ValueError(f"verl_judge.judge_server.gpu_memory_utilization must be in (0, 1], got {mem}")
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", *common, "--gpu-memory-utilization", str(mem),
           "--max-num-seqs", str(int(s.get("max_num_seqs", 256))), "--disable-uvicorn-access-log"]
    if s.get("kv_cache_memory_bytes"):
        cmd += ["--kv-cache-memory-bytes", str(int(s["kv_cache_memory_bytes"]))]
    if s.get("max_model_len"):
        cmd += ["--max-model-len", str(int(s["max_model_len"]))]
    cmd += ["--enable-prefix-caching"] if s.get("enable_prefix_caching", True) else ["--no-enable-prefix-caching"]
    if s.get("enforce_eager"):
        cmd.append("--enforce-eager")
    return cmd + [str(a) for a in s.get("extra_args") or []]


def ready(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=timeout) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def start(settings: dict, env: dict, log_path: str, port: int = 0, python: str = sys.executable,
          timeout: float | None = None) -> Server:
    """Start the server (its own process group, output to ``log_path``) and wait until it answers. The port:
    ``port``, else ``settings["port"]``, else a free one (``Server.port`` says which)."""
    port = port or int(settings.get("port") or 0) or free_port()
    cmd = command(settings, port, python)
    timeout = float(timeout if timeout is not None else settings.get("start_timeout", 600))
    os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    say("judge_server", f"starting the judge ({settings.get('engine', 'vllm')}, {settings.get('model')}) on port {port} "
        f"(log: {log_path})")
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    server = Server(proc, port, log_path)
    t0 = shown = time.time()
    while not ready(server.url):
        if proc.poll() is not None:
            raise JudgeServerError(f"the judge server exited with {proc.returncode} before it answered; its log "
                                   f"({log_path}) ends:\n{server.tail()}")
        if time.time() - t0 > timeout:
            stop(server)
            raise JudgeServerError(f"the judge server did not answer within {timeout:.0f}s "
                                   f"(verl_judge.judge_server.start_timeout); its log ({log_path}) ends:\n{server.tail()}")
        if time.time() - shown >= 30:
            say("judge_server", f"waiting for the judge server ({time.time() - t0:.0f}s) ...")
            shown = time.time()
        time.sleep(0.5)
    say("judge_server", f"judge server ready at {server.url} in {time.time() - t0:.0f}s")
    return server


def stop(server: Server | None, grace: float = 20.0) -> None:
    """SIGTERM to the server's process group, SIGKILL after ``grace`` seconds; no process is left behind."""
    if server is None or server.proc.poll() is not None:
        return
    try:
        os.killpg(server.proc.pid, signal.SIGTERM)
        server.proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(server.proc.pid, signal.SIGKILL)
        server.proc.wait()
    except ProcessLookupError:
        pass
    say("judge_server", "judge server stopped")


class Watchdog:
    """Polls the server while training runs; when it dies, ``cause`` says why and ``victim`` (the training
    process, set once it starts) is terminated, so the run stops now instead of falling back for many steps."""

    def __init__(self, server: Server, interval: float = 1.0):
        self.server, self.interval = server, interval
        self.victim: subprocess.Popen | None = None
        self.cause: str | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="judge-server-watchdog", daemon=True)

    def attach(self, proc: subprocess.Popen) -> None:
        """The training process to stop (stopped at once if the server already died)."""
        self.victim = proc
        if self.cause is not None and proc.poll() is None:
            proc.terminate()

    def __enter__(self) -> "Watchdog":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._done.wait(self.interval):
            rc = self.server.proc.poll()
            if rc is None:
                continue
            self.cause = (f"the judge server ({self.server.url}) exited with {rc} during training; its log "
                          f"({self.server.log_path}) ends:\n{self.server.tail()}")
            say("judge_server", f"ERROR: {self.cause}\n[judge_server] stopping the run")
            if self.victim is not None and self.victim.poll() is None:
                self.victim.terminate()
            return


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.judge_server", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="the judge model (Hugging Face folder)")
    p.add_argument("--engine", choices=ENGINES, default="vllm")
    p.add_argument("--port", type=int, default=0, help="0: a free port")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.2)
    p.add_argument("--log", default="judge_server.log")
    a = p.parse_args(argv)
    settings = {"engine": a.engine, "model": a.model, "gpu_memory_utilization": a.gpu_memory_utilization}
    try:
        server = start(settings, dict(os.environ), a.log, port=a.port)
    except (JudgeServerError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"READY {server.url}", flush=True)

    def on_term(*_):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_term)
    try:
        while server.proc.poll() is None:
            time.sleep(1)
        return server.proc.returncode or 1
    except (KeyboardInterrupt, SystemExit):
        return 0
    finally:
        stop(server)


if __name__ == "__main__":
    sys.exit(main())
