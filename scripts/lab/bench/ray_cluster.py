"""Submit a recipe to a Ray cluster started on this host, the way users run on clusters (docs/ray_cluster.md).

Starts a Ray head with its dashboard and, with ``--nodes 2``, a second Ray node on the same host that joins it. Each
node gets ``--gpus`` GPUs, split by CUDA_VISIBLE_DEVICES, so two nodes of one GPU each rehearse a two-node run. It waits
until the dashboard takes jobs and every node is up. Then it runs
``RAY_ADDRESS=http://127.0.0.1:<port> bash recipes/<recipe>/run.sh trainer.nnodes=<nodes> trainer.n_gpus_per_node=<gpus>
<overrides>``, which the launcher submits with ``ray job submit --runtime-env runtime_env.yaml``. Afterwards OUT holds
``metrics.jsonl`` (the job's, copied from OUT/run), ``ray_status.txt`` (the cluster before the job),
``ray_job_list.txt`` and the nodes' logs. Only the nodes started here are stopped: other Ray instances on the host are
left alone.

    PYTHON=python3 GSM8K_DIR=/data/gsm8k python -m scripts.lab.bench.ray_cluster --out outputs/cluster -- \\
        trainer.total_training_steps=3                                        # one node, all GPUs
    python -m scripts.lab.bench.ray_cluster --nodes 2 --gpus 1 --out outputs/cluster2 -- trainer.total_training_steps=3

The recipe's own variables (MODEL, GSM8K_DIR, DATA_DIR, PYTHON, NO_FLASH_ATTN, ...) are passed on; keep data and
model outside the repository or on storage every node sees (the launcher notes what the job's upload leaves out).
Exit status: the recipe's; 3 when the cluster takes no jobs (a Ray without its dashboard packages); 1 when a node
does not start.
"""

from __future__ import annotations

import argparse
import functools
import glob
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from scripts import console
from scripts.launch import ray_head, services
from scripts.workflows.cli import add_options, option

ROOT = ray_head.ROOT


say = functools.partial(console.say, "ray_cluster", stamp=True)


def dashboard_up(port: int, timeout: float) -> bool:
    """Whether the dashboard's HTTP server answers (a 401 of token authentication counts as up)."""
    deadline = time.time() + timeout
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/version", timeout=2)
            return True
        except urllib.error.HTTPError:
            return True
        except OSError:
            if time.time() >= deadline:
                return False
            time.sleep(0.5)


def missing_dashboard_deps() -> str | None:
    """None when Ray's dashboard can start here, else the import error that keeps it in minimal mode."""
    r = subprocess.run([sys.executable, "-c", "import ray.dashboard.optional_deps"], capture_output=True, text=True)
    return None if r.returncode == 0 else (r.stderr.strip().splitlines() or ["import failed"])[-1]


def ray(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*ray_head.ray_cli(), *args], capture_output=True, text=True, timeout=120, env=env)


def alive_nodes(address: str, env: dict) -> tuple[int, str]:
    out = ray("status", f"--address={address}", env=env).stdout
    active = out.split("Active:", 1)[-1].split("Pending:", 1)[0] if "Active:" in out else ""
    return len(re.findall(r"^\s*\d+ node_", active, re.M)), out


@dataclass(frozen=True, kw_only=True)
class Cluster:
    """The command line's settings (``parse``): the options, the recipe's script and the GPUs per node resolved."""

    recipe: str = option(default="gsm8k_rule", help="recipe folder under recipes/ (default gsm8k_rule)")
    nodes: int = option(type=int, choices=(1, 2), default=1, help="Ray nodes on this host (default 1)")
    gpus: int = option(type=int, default=None, help="GPUs per node (default: 1 with 2 nodes, else all visible)")
    out: str = option(required=True, help="folder for metrics.jsonl, ray_status.txt, ray_job_list.txt, logs")
    overrides: list[str]  # Hydra overrides for the recipe (after --)
    run_sh: str  # recipes/<recipe>/run.sh


def parse(argv: list[str] | None) -> Cluster:
    """The arguments, with ``run_sh`` (the recipe's script) and ``gpus`` (per node) checked."""
    ap = argparse.ArgumentParser(
        prog="python -m scripts.lab.bench.ray_cluster",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_options(ap, Cluster)
    ap.add_argument("overrides", nargs="*", help="Hydra overrides for the recipe (after --)")
    a = ap.parse_args(argv)
    recipes = os.environ.get("RECIPES_DIR") or os.path.join(ROOT, "recipes")  # tests point it at stand-ins
    run_sh = os.path.join(recipes, a.recipe, "run.sh")
    if not os.path.isfile(run_sh):
        ap.error(f"--recipe {a.recipe}: no {run_sh}")
    gpus = a.gpus if a.gpus is not None else (1 if a.nodes == 2 else ray_head.machine_gpus())
    if gpus < 0:
        ap.error(f"--gpus {gpus}: must be >= 0")
    return Cluster(**vars(a) | {"run_sh": run_sh, "gpus": gpus})


def start_nodes(count: int, gpus: int, out: str, port: int, procs: list[subprocess.Popen]) -> tuple[str, dict]:
    """Start ``count`` nodes of ``gpus`` GPUs, the head (dashboard on ``port``) and those that join it, each appended
    to ``procs``: ``(the head's address, the authentication variables the others and the submission use)``;
    ``RayStartError``: one did not."""
    address, auth = "", {}
    for i in range(count):
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        env.update(auth)  # a head with token authentication: the other nodes and the submission use it too
        if count > 1 and gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i * gpus + g) for g in range(gpus))
        log = os.path.join(out, f"ray_node{i}.log")
        proc, address = ray_head.start(env, log, dashboard_port=port, join=address or None, num_gpus=gpus)
        procs.append(proc)
        auth = {"RAY_AUTH_MODE": env["RAY_AUTH_MODE"]} if env.get("RAY_AUTH_MODE") else {}
    return address, auth


def nodes_up(address: str, want: int, out: str, status_env: dict) -> bool:
    """Whether ``want`` nodes are alive within 120 s; the cluster's status in OUT/ray_status.txt."""
    deadline = time.time() + 120
    while (n := alive_nodes(address, status_env))[0] < want and time.time() < deadline:
        time.sleep(1)
    with open(os.path.join(out, "ray_status.txt"), "w") as f:
        f.write(n[1])
    if n[0] < want:
        say(f"{n[0]} of {want} Ray nodes came up in 120 s; see ray_status.txt")
    return n[0] >= want


def run_job(cfg: Cluster, out: str, port: int, status_env: dict) -> int:
    """The recipe submitted to the cluster: its exit status; the job list and the job's metrics copied to OUT."""
    env = {**status_env, "RAY_ADDRESS": f"http://127.0.0.1:{port}", "OUTPUT_DIR": os.path.join(out, "run")}
    cmd = ["bash", cfg.run_sh, f"trainer.nnodes={cfg.nodes}", f"trainer.n_gpus_per_node={cfg.gpus}", *cfg.overrides]
    say("running " + " ".join(cmd[1:]))
    t0 = time.time()
    rc = subprocess.call(cmd, env=env, cwd=ROOT)
    say(f"{cfg.recipe}: exit {rc} in {time.time() - t0:.0f} s")
    with open(os.path.join(out, "ray_job_list.txt"), "w") as f:
        f.write(ray("job", "list", f"--address=http://127.0.0.1:{port}", env=status_env).stdout)
    found = sorted(glob.glob(os.path.join(out, "run", "**", "*.jsonl"), recursive=True), key=os.path.getmtime)
    if found:
        shutil.copyfile(found[-1], os.path.join(out, "metrics.jsonl"))
        say(f"metrics: {found[-1]} -> {os.path.join(out, 'metrics.jsonl')}")
    else:
        say("the job wrote no metrics under " + os.path.join(out, "run"))
    return rc


def main(argv: list[str] | None = None) -> int:
    cfg = parse(argv)
    why = missing_dashboard_deps()
    if why:  # `ray start` with a dashboard fails at once ("Cannot include dashboard with missing packages")
        say(
            f"Ray's dashboard cannot start here ({why}), so a cluster would take no jobs: install ray[default] of "
            "the same Ray version"
        )
        return 3
    out = os.path.abspath(cfg.out)
    os.makedirs(out, exist_ok=True)
    nodes: list[subprocess.Popen] = []
    try:
        port = services.free_port()
        try:
            address, auth = start_nodes(cfg.nodes, cfg.gpus, out, port, nodes)
        except ray_head.RayStartError as e:
            say(str(e))
            return 1
        if not dashboard_up(port, timeout=60):
            why = missing_dashboard_deps() or "see ray_node0.log"
            say(
                f"the Ray head started without its dashboard, so it takes no jobs ({why}): install ray[default] "
                "of the same Ray version"
            )
            return 3
        status_env = {**os.environ, **auth}
        if not nodes_up(address, cfg.nodes, out, status_env):
            return 1
        say(f"{cfg.nodes} node(s) of {cfg.gpus} GPU(s) up at {address}; dashboard http://127.0.0.1:{port}")
        return run_job(cfg, out, port, status_env)
    finally:
        for proc in reversed(nodes):
            ray_head.stop(proc)


if __name__ == "__main__":
    sys.exit(main())
