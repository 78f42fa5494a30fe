"""A private Ray node: ``start()`` runs ``ray start --head --block`` (or a node joining a head), ``stop()`` ends only
that process. No command of its own:

    from scripts.launch import ray_head; proc, address = ray_head.start(env, "ray_head.log"); ...; ray_head.stop(proc)

Each node gets free ports and a Ray temp directory of its own (``proc.temp_dir``), so two runs on one machine never
share a file or a port; ``stop()`` removes that directory after a clean stop, unless ``keep``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile

import scripts
from scripts.console import say
from scripts.launch import services
from scripts.launch.services import free_port

ROOT = scripts.ROOT
#: Ray's command line through this interpreter (for installs without the `ray` script, e.g. pip --target)
RAY_CLI = (sys.executable, "-c", "import sys; sys.argv[0] = 'ray'; from ray.scripts.scripts import main; main()")
START_TIMEOUT_S = 180
#: the ports of a node's agents and servers, each given a free one
PRIVATE_PORTS = (
    "dashboard-agent-listen-port dashboard-agent-grpc-port runtime-env-agent-port metrics-export-port "
    "ray-client-server-port"
).split()
START_TRIES = 3


class RayStartError(RuntimeError):
    pass


def ray_cli() -> list[str]:
    """The `ray` command: the script beside this interpreter, else `ray` on PATH, else RAY_CLI."""
    beside = os.path.join(os.path.dirname(sys.executable), "ray")
    if os.access(beside, os.X_OK):
        return [beside]
    return ["ray"] if shutil.which("ray") else list(RAY_CLI)


def start(
    env: dict, log_path: str, dashboard_port: int | None = None, join: str | None = None, num_gpus: int | None = None
) -> tuple[subprocess.Popen, str]:
    """Start a private Ray head (``ray start --head --block``) with a temp directory of its own (``proc.temp_dir``),
    return (process, GCS address). A node that exits while starting is started again with other free ports (a port
    chosen free can be taken by another run before Ray binds it), ``START_TRIES`` times in all.

    Updates ``env`` for the driver: ``RAY_ADDRESS``, and ``RAY_AUTH_MODE=token`` when the head enabled
    Ray's token authentication (Ray >= 2.5x does by default; the token is in ~/.ray/auth_token).
    ``join`` (a head's GCS address): start a node that joins that head instead (``env`` is left as it is).
    ``num_gpus``: the GPUs the node offers (default: Ray counts the visible ones).
    """
    for attempt in range(1, START_TRIES + 1):
        try:
            return _start_once(env, log_path, dashboard_port, join, num_gpus)
        except services.ServiceExited as e:  # tried again
            if attempt == START_TRIES:
                raise RayStartError(f"{e} (after {START_TRIES} tries)") from None
            say("ray_head", f"{e}; trying again with other ports ({attempt + 1} of {START_TRIES})")
        except services.ServiceError as e:
            raise RayStartError(str(e)) from None
    raise AssertionError("unreachable")


def _start_once(
    env: dict, log_path: str, dashboard_port: int | None, join: str | None, num_gpus: int | None
) -> tuple[subprocess.Popen, str]:
    port = free_port()
    where = [f"--address={join}"] if join else ["--head", f"--port={port}"]
    # short: Ray puts unix sockets under it (at most 107 characters a path)
    temp_dir = tempfile.mkdtemp(prefix="vj-ray-", dir="/tmp" if os.path.isdir("/tmp") else None)
    cmd = [*RAY_CLI, "start", *where, "--block", "--disable-usage-stats", f"--temp-dir={temp_dir}"]
    # Ray's fixed default ports (dashboard agent 52365, ...) clash with any other Ray instance on
    # the machine, whose job agent then never comes up: a private head takes free ports.
    cmd += [f"--{flag}={free_port()}" for flag in PRIVATE_PORTS]
    if not join and dashboard_port:
        cmd += ["--include-dashboard=true", f"--dashboard-port={dashboard_port}", "--dashboard-host=127.0.0.1"]
    elif not join:
        cmd.append("--include-dashboard=false")
    cmd += [f"--num-gpus={num_gpus}"] if num_gpus is not None else []
    head = f"a private Ray head on port {port} (log: {log_path}; temp dir {temp_dir})"
    say("ray_head", f"starting a Ray node joining {join} (log: {log_path})" if join else f"starting {head}")
    proc = services.spawn(cmd, env, log_path, cwd=ROOT)
    proc.temp_dir = temp_dir
    try:
        return _wait_started(proc, log_path, env, join, port)
    except BaseException:  # a signal (SystemExit) or a failure while it starts: the half-started node goes too
        stop(proc)
        raise


def _wait_started(proc: subprocess.Popen, log_path: str, env: dict, join: str | None, port: int):
    def log() -> str:
        with open(log_path, errors="replace") as f:
            return f.read()

    what = f"ray start (a Ray {'node' if join else 'head'})"
    services.wait_until(
        lambda: "Ray runtime started" in log(), proc, what, START_TIMEOUT_S, log_path, who="ray_head", lines=5
    )
    if join:
        return proc, join
    text = log()
    m = re.search(r"ray start --address='([^']+)'", text)
    address = m.group(1) if m else f"127.0.0.1:{port}"
    env["RAY_ADDRESS"] = address
    if "Token authentication is enabled" in text and not env.get("RAY_AUTH_MODE"):
        env["RAY_AUTH_MODE"] = "token"
    return proc, address


def machine_gpus() -> int:
    """The machine's GPUs as ``nvidia-smi -L`` lists them (0 without it), whatever CUDA_VISIBLE_DEVICES says."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def stop(proc: subprocess.Popen, keep: bool = False) -> None:
    """Stop only the node we started (its --block process tears down its own children on SIGTERM), then remove its
    temp directory (``keep``: leave it, its session logs say what went wrong)."""
    if proc.poll() is None:
        say("ray_head", f"stopping the private Ray head (pid {proc.pid})")
    services.stop(proc, grace=60)
    temp_dir = getattr(proc, "temp_dir", None)
    if temp_dir and keep:
        say("ray_head", f"Ray's session logs kept in {temp_dir}")
    elif temp_dir:
        shutil.rmtree(temp_dir, ignore_errors=True)
