"""The judge served beside the policy (``judge_placement=server``): an OpenAI-compatible server of the judge model
on the training machine, started before training, watched while it runs, stopped after it.

Why: verl 0.9.1 scores a colocated reward model in a stage of its own after generation, but computes a custom reward
inside the agent loop as each rollout finishes when no reward model is configured; so a judge behind an endpoint
grades a finished answer while the rest of the batch is still generating. Settings: ``verl_judge.judge_server`` in
``recipes/base.yaml``. A server that cannot start or dies mid-run stops training at once (``Served``).

    python -m scripts.launch.judge_server --model PATH [--engine cpu_judge] [--port 0]   # serve until Ctrl-C / SIGTERM

  It prints ``READY <url>`` once the server answers and exits 0 when stopped; a Ctrl-C before that ends it by SIGINT
  (``$?``: 130), so a script that ran it stops too.
"""

from __future__ import annotations

import argparse
import functools
import json
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
from scripts.launch import services
from scripts.launch.services import free_port

ENGINES = ("vllm", "cpu_judge")
#: exit status of a run stopped because its judge server died (scripts.train's silent-judge stop is 3)
SERVER_DIED_EXIT = 4


@dataclass
class Server:
    proc: subprocess.Popen
    port: int
    log_path: str
    name: str = "judge"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def tail(self, n: int = 20) -> str:
        return services.tail(self.log_path, n)


def _whole(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


SECONDS = ("a number of seconds > 0", lambda v: (isinstance(v, float) or _whole(v)) and v > 0)
COUNT = ("a whole number >= 1 or null", lambda v: _whole(v) and v >= 1)
#: setting -> (what a value that is set must be, its test)
SETTINGS = {
    "start_timeout": SECONDS,
    "wait_for_timeout": SECONDS,
    "port": ("0 (a free port) or a port number", lambda v: _whole(v) and 0 <= v <= 65535),
    "max_num_seqs": COUNT,
    "kv_cache_memory_bytes": COUNT,
    "max_model_len": COUNT,
}


def command(settings: dict, port: int, python: str = sys.executable) -> list[str]:
    """The server's command line from ``verl_judge.judge_server`` settings (a ValueError names a bad one)."""
    s = {**settings, "port": settings.get("port") or 0}  # any false port: a free one, as ``start`` reads it
    engine, model = s.get("engine", "vllm"), s.get("model")
    if engine not in ENGINES:
        raise ValueError(f"verl_judge.judge_server.engine must be one of {ENGINES}, got {engine!r}")
    if not model:
        raise ValueError("verl_judge.judge_server.model is empty: set reward.reward_model.model_path (or JUDGE_MODEL)")
    for key, (want, ok) in SETTINGS.items():
        if s.get(key) is not None and not ok(s[key]):
            raise ValueError(f"verl_judge.judge_server.{key} must be {want}, got {s[key]!r}")
    name = str(s.get("served_model_name") or "judge")
    common = ["--model", str(model), "--served-model-name", name, "--host", "127.0.0.1", "--port", str(port)]
    if engine == "cpu_judge":
        return [python, "-m", "scripts.serve.cpu_judge", *common, *map(str, s.get("extra_args") or [])]
    mem = float(s.get("gpu_memory_utilization", 0.2))
    if not 0 < mem <= 1:
        raise ValueError(f"verl_judge.judge_server.gpu_memory_utilization must be in (0, 1], got {mem}")
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", *common, "--gpu-memory-utilization", str(mem)]
    cmd += ["--max-num-seqs", str(int(s.get("max_num_seqs", 256))), "--disable-uvicorn-access-log"]
    if s.get("kv_cache_memory_bytes"):
        cmd += ["--kv-cache-memory-bytes", str(int(s["kv_cache_memory_bytes"]))]
    if s.get("max_model_len"):
        cmd += ["--max-model-len", str(int(s["max_model_len"]))]
    cmd += ["--enable-prefix-caching"] if s.get("enable_prefix_caching", True) else ["--no-enable-prefix-caching"]
    if s.get("enforce_eager"):
        cmd.append("--enforce-eager")
    return cmd + [str(a) for a in s.get("extra_args") or []]


def split_devices(devices, visible: str | None, n_train: int, machine: int = 0) -> tuple[str, str] | None:
    """``(server's, training's)`` CUDA_VISIBLE_DEVICES for ``verl_judge.judge_server.devices`` (``1``, ``"2,3"``,
    ``[2, 3]``, a ``GPU-<uuid>``): training gets every other GPU of ``visible`` (unset: the ``machine``'s GPUs, or,
    when their number is unknown (0), n_train + the server's). None when ``devices`` is unset; a ValueError names a
    bad value, or too few GPUs left for training's ``n_train``.

    >>> split_devices(1, None, 1, machine=2)
    ('1', '0')
    >>> split_devices("3", "2,3", 1)
    ('3', '2')
    >>> split_devices(1, None, 1, machine=4)  # training gets every other GPU
    ('1', '0,2,3')
    """
    if devices is None or devices == "" or devices == []:
        return None
    raw = devices if isinstance(devices, (list, tuple)) else str(devices).split(",")
    ids = [str(d).strip() for d in raw]
    if isinstance(devices, bool) or not all(ids) or any(d.startswith("-") for d in ids) or len(set(ids)) != len(ids):
        raise ValueError(
            f'verl_judge.judge_server.devices must be GPU ids such as 1, "2,3" or [2,3] (distinct), got {devices!r}'
        )
    if visible is not None:
        seen = list(dict.fromkeys(d.strip() for d in visible.split(",") if d.strip()))
    else:
        seen = [str(i) for i in range(machine or n_train + len(ids))]
    missing = [d for d in ids if d not in seen]
    if missing:
        where = (
            f"CUDA_VISIBLE_DEVICES={visible}"
            if visible is not None
            else (f"this machine has {machine}" if machine else "CUDA_VISIBLE_DEVICES is unset")
        )
        raise ValueError(f"verl_judge.judge_server.devices={devices}: GPU {','.join(missing)} is not visible ({where})")
    rest = [d for d in seen if d not in ids]
    if len(rest) < n_train:
        raise ValueError(
            f"verl_judge.judge_server.devices={devices} leaves {len(rest)} GPU(s) of "
            f"{','.join(seen)} for training, which needs trainer.n_gpus_per_node={n_train}"
        )
    return ",".join(ids), ",".join(rest)


def planned(cfg, env: dict, job: bool) -> dict | None:
    """The launcher's look at ``verl_judge.judge_server`` in a composed config: None unless enabled, else its settings
    with ``split``, the server's and training's CUDA_VISIBLE_DEVICES (None: both on the visible GPUs). A ValueError
    names a bad setting; a Ray job cannot have a server beside it."""
    from omegaconf import OmegaConf

    from scripts.launch.ray_head import machine_gpus

    server = OmegaConf.select(cfg, "verl_judge.judge_server", default=None)
    if server is None or not server.get("enable"):
        return None
    if job:
        raise ValueError(
            "judge_placement=server starts the judge server beside a local run; on a Ray cluster serve "
            "the judge yourself (docs/ray_cluster.md) and use gsm8k_api_judge with JUDGE_BASE_URL, or "
            "judge_placement=pool"
        )
    settings = OmegaConf.to_container(server, resolve=True)
    command(settings, 0)  # a bad setting stops the run here, dry runs too
    want, visible = settings.get("devices"), env.get("CUDA_VISIBLE_DEVICES")
    machine = machine_gpus() if want not in (None, "", []) and visible is None else 0  # counted only when needed
    settings["split"] = split_devices(want, visible, int(cfg.trainer.n_gpus_per_node), machine=machine)
    return settings


def ready(url: str, name: str | None = None, timeout: float = 2.0) -> bool:
    """``GET {url}/models`` answers 200 (and, with ``name``, lists a model of that name: a server of someone
    else's on the port is not ours)."""
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=timeout) as r:
            if r.status != 200:
                return False
            if name is None:
                return True
            ids = [m.get("id") for m in json.loads(r.read() or b"{}").get("data") or [] if isinstance(m, dict)]
            return name in ids
    except (urllib.error.URLError, OSError, ValueError, AttributeError):
        return False


def spawn(settings: dict, env: dict, log_path: str, port: int, python: str = sys.executable) -> Server:
    """Start the server process (its own process group, output to ``log_path``); it answers later (``wait_ready``)."""
    cmd = command(settings, port, python)
    judge = f"{settings.get('engine', 'vllm')}, {settings.get('model')}"
    say("judge_server", f"starting the judge ({judge}) on port {port} (log: {log_path})")
    proc = services.spawn(cmd, env, log_path, group=True)
    return Server(proc, port, log_path, str(settings.get("served_model_name") or "judge"))


def wait_ready(server: Server, timeout: float, cancel: threading.Event | None = None) -> bool:
    """Wait until ``server`` answers as itself; False if ``cancel`` was set first. ``services.ServiceError`` (the
    log's tail) when it exits or does not answer within ``timeout`` seconds (it is stopped then)."""
    t0, up = time.time(), lambda: ready(server.url, server.name)
    wait = functools.partial(services.wait_until, who="judge_server", setting="verl_judge.judge_server.start_timeout")
    try:
        if not wait(up, server.proc, "the judge server", timeout, server.log_path, cancel):
            return False
    except services.ServiceError:
        stop(server)
        raise
    say("judge_server", f"judge server ready at {server.url} in {time.time() - t0:.0f}s")
    return True


def start(
    settings: dict, env: dict, log_path: str, port: int = 0, python: str = sys.executable, timeout: float | None = None
) -> Server:
    """Start the server and wait until it answers. The port: ``port``, else ``settings["port"]``, else a free one
    (``Server.port`` says which)."""
    port = port or int(settings.get("port") or 0) or free_port()
    release = services.hold_signals()
    try:
        server = spawn(settings, env, log_path, port, python)
    except BaseException:
        release()
        raise
    try:
        release()  # a signal noted while the process was made is delivered now: the server is known, and stopped
        wait_ready(server, float(timeout if timeout is not None else settings.get("start_timeout", 600)))
    except BaseException:
        stop(server)
        raise
    return server


def stop(server: Server | None, grace: float = 20.0) -> None:
    """SIGTERM to the server's process group, SIGKILL after ``grace`` seconds, and SIGKILL to whatever is left in
    the group once its leader is gone (vLLM's engine core); also when a second signal interrupts the wait."""
    if server is not None and services.stop(server.proc, grace, group=True):
        say("judge_server", "judge server stopped")


class Served:
    """The judge server of one training run, started in a thread beside the training: it waits for
    ``settings["wait_for"]`` (a file the stage that makes the judge writes when done: the policy's start-up overlaps
    the judge's training), starts the server on ``port`` (chosen now: the trainer is told it before the server
    exists, and its first step waits for it: ``train_hooks.wait_for_judge``), then watches it. When it cannot start or
    dies, ``cause`` says why and the training process (``attach``) is stopped at once: no silent fallback for many
    steps. Leaving the ``with`` block stops the server, whatever state it is in."""

    #: the run's exit status when the server failed it
    exit_code = SERVER_DIED_EXIT

    def __init__(
        self,
        settings: dict,
        env: dict,
        log_path: str,
        python: str = sys.executable,
        interval: float = 1.0,
        grace: float = 20.0,
    ):
        self.settings, self.env, self.log_path, self.python, self.interval = settings, env, log_path, python, interval
        self.grace = grace
        self.port = int(settings.get("port") or 0) or free_port()
        self.server: Server | None = None
        self.victim: subprocess.Popen | None = None
        self.cause: str | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="judge-server", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @classmethod
    def beside(cls, settings: dict, train_env: dict, log_path: str, python: str, say_=print) -> "Served":
        """The server of a local run (not started yet): on its own GPUs when ``settings["split"]`` says so, training's
        environment (``train_env``) then keeps the rest."""
        env = dict(train_env)
        if settings.get("split"):
            env["CUDA_VISIBLE_DEVICES"], train_env["CUDA_VISIBLE_DEVICES"] = settings["split"]
            say_(f"judge server on GPU {settings['split'][0]}, training on GPU {settings['split'][1]}")
        return cls(settings, env, log_path, python=python)

    @property
    def overrides(self) -> list[str]:
        """What the trainer is told: the port, chosen now, before the server exists."""
        return [f"verl_judge.judge_server.port={self.port}"]

    def attach(self, proc: subprocess.Popen) -> None:
        """The training process to stop (stopped at once if the server already failed)."""
        self.victim = proc
        if self.cause is not None and proc.poll() is None:
            proc.terminate()

    def __enter__(self) -> "Served":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        try:
            self._thread.join()
        finally:
            stop(self.server, self.grace)

    def _fail(self, cause: str) -> None:
        self.cause = cause
        say("judge_server", f"ERROR: {cause}\n[judge_server] stopping the run")
        if self.victim is not None and self.victim.poll() is None:
            self.victim.terminate()

    def _wait_for(self, path: str, timeout: float) -> bool:
        t0 = shown = time.time()
        if not os.path.exists(path):
            say("judge_server", f"the judge server starts once {path} exists (the judge is still being made)")
        while not os.path.exists(path):
            if time.time() - t0 > timeout:
                raise services.ServiceError(
                    f"{path} did not appear within {timeout:.0f}s (verl_judge.judge_server."
                    "wait_for_timeout): the stage that makes the judge did not finish"
                )
            if time.time() - shown >= 120:
                say("judge_server", f"still waiting for {path} ({time.time() - t0:.0f}s) ...")
                shown = time.time()
            if self._done.wait(1.0):
                return False
        return True

    def _run(self) -> None:
        s = self.settings
        try:
            if s.get("wait_for") and not self._wait_for(str(s["wait_for"]), float(s.get("wait_for_timeout") or 7200)):
                return
            if self._done.is_set():
                return
            self.server = spawn(s, self.env, self.log_path, self.port, self.python)
            if not wait_ready(self.server, float(s.get("start_timeout", 600)), cancel=self._done):
                return
        except (services.ServiceError, ValueError, OSError) as e:
            self._fail(str(e))
            return
        while not self._done.wait(self.interval):
            rc = self.server.proc.poll()
            if rc is not None:
                self._fail(
                    f"the judge server ({self.url}) exited with {rc} during training; its log "
                    f"({self.log_path}) ends:\n{self.server.tail()}"
                )
                return


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m scripts.launch.judge_server",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", required=True, help="the judge model (Hugging Face folder)")
    p.add_argument("--engine", choices=ENGINES, default="vllm")
    p.add_argument("--port", type=int, default=0, help="0: a free port")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.2)
    p.add_argument("--log", default="judge_server.log")
    a = p.parse_args(argv)
    settings = {"engine": a.engine, "model": a.model, "gpu_memory_utilization": a.gpu_memory_utilization}

    def on_term(*_):
        raise SystemExit(0)

    for sig in (signal.SIGTERM, signal.SIGHUP):  # also while the server starts: start() stops it on the way out
        signal.signal(sig, on_term)
    server = None
    try:  # one block from the start on: a SIGTERM right after READY is printed still stops the server
        server = start(settings, dict(os.environ), a.log, port=a.port)
        print(f"READY {server.url}", flush=True)
        while server.proc.poll() is None:
            time.sleep(1)
        return server.proc.returncode or 1
    except (services.ServiceError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if server is not None:
            return 0
        print(
            "judge_server: interrupted (Ctrl-C) before the server was ready; no server is left running", file=sys.stderr
        )
        raise services.Interrupted from None  # the command line then dies of SIGINT (services.as_command)
    except SystemExit:
        return 0
    finally:
        stop(server)


if __name__ == "__main__":
    sys.exit(services.as_command(main))
