"""A recipe run as a Ray job (``RAY_ADDRESS`` set): ``ray job submit --runtime-env runtime_env.yaml -- python3 -m
scripts.train ...``, the knobs on the entrypoint (``env MODEL=... python3 ...``). The repo is the job's working_dir,
so repo paths become repo-relative, except those the upload leaves out (data/, outputs/, ...). Secrets reach ``ray
job submit`` on its stdin, never on a command line nor in a file. Used by the launcher (no command of its own):

    RAY_ADDRESS=http://head:8265 bash recipes/gsm8k_rule/run.sh trainer.nnodes=2
"""

from __future__ import annotations

import json
import os
import sys
import time

import scripts
from scripts.console import say, secret_names
from scripts.launch import ray_head

ROOT = scripts.ROOT
RUNTIME_ENV_DEFAULT = os.path.join(ROOT, "runtime_env.yaml")
SUBMIT_TRIES = 6  # `ray job submit` attempts while a fresh cluster's job agent is not ready
JOB_AGENT_NOT_READY = "No available agent to submit job"
# `ray job submit` run in a child that reads the runtime env JSON (which holds secret values) from
# stdin, so the values never appear in any process's argv (visible to `ps`) nor in a file.
_SUBMIT_FROM_STDIN = (
    "import sys; from ray.dashboard.modules.job.cli import submit; a = sys.argv[1:]; "
    "a[a.index('--runtime-env-json') + 1] = sys.stdin.read(); submit.main(args=a, prog_name='ray job submit')"
)


def local_path(p: str, env) -> str:
    """User path -> absolute (local runs), or relative to the repo when a Ray job uploads it with the repo (its
    working_dir). A path inside the repo that the upload leaves out (``not_uploaded``: data/, outputs/, ...) stays
    absolute: the job then opens it where it is, which needs the cluster to see this machine's files."""
    if "://" in p:
        return p
    p = os.path.abspath(os.path.expanduser(p))
    if env.get("RAY_ADDRESS") and (p == ROOT or p.startswith(ROOT + os.sep)):
        rel = os.path.relpath(p, ROOT)
        return p if not_uploaded(rel, env) else rel
    return p


def not_uploaded(rel: str, env) -> bool:
    """Whether ``ray job submit`` leaves the repo path ``rel`` out of the job's working_dir: the path or a folder
    above it matches the runtime env's ``excludes`` or the repo's ``.gitignore`` (which Ray honours unless
    RAY_RUNTIME_ENV_IGNORE_GITIGNORE=1), matched as Ray matches them (its own gitwildmatch). Without Ray here: False."""
    try:
        from ray._private.thirdparty.pathspec import PathSpec
    except ImportError:
        return False

    lines: list[str] = []
    rt_path = env.get("RUNTIME_ENV") or RUNTIME_ENV_DEFAULT
    if os.path.isfile(rt_path):
        lines += [str(x) for x in (load_runtime_env(rt_path).get("excludes") or [])]
    ignore = os.path.join(ROOT, ".gitignore")
    if env.get("RAY_RUNTIME_ENV_IGNORE_GITIGNORE", "0") != "1" and os.path.isfile(ignore):
        with open(ignore, encoding="utf-8") as f:
            lines += f.read().splitlines()
    spec = PathSpec.from_lines("gitwildmatch", lines)
    parts = rel.split(os.sep)
    return any(spec.match_file("/".join(parts[:i])) for i in range(1, len(parts) + 1))


class RuntimeEnvError(ValueError):
    pass


def load_runtime_env(path: str) -> dict:
    """The runtime env file as a mapping; RuntimeEnvError (a ValueError) naming the file when it cannot be read, is
    not YAML, or is not a mapping of Ray's runtime-env fields (``env_vars`` a mapping, ``excludes`` a list)."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            rt = yaml.safe_load(f)
    except OSError as e:
        raise RuntimeEnvError(f"RUNTIME_ENV {path}: cannot read it ({e.strerror or e})") from None
    except yaml.YAMLError as e:
        raise RuntimeEnvError(f"RUNTIME_ENV {path}: not YAML ({str(e).splitlines()[0]})") from None
    rt = {} if rt is None else rt
    if not isinstance(rt, dict):
        raise RuntimeEnvError(
            f"RUNTIME_ENV {path}: must be a mapping of runtime-env fields (working_dir, env_vars, "
            f"excludes, ...), got a {type(rt).__name__}"
        )
    if not isinstance(rt.get("env_vars") or {}, dict) or not isinstance(rt.get("excludes") or [], list):
        raise RuntimeEnvError(f"RUNTIME_ENV {path}: env_vars must be a mapping and excludes a list")
    return rt


def command(rdir: str, overrides: list[str], knob_env: dict, env) -> tuple[list[str], dict | None, list[str]]:
    """(the ``ray job submit`` command, the runtime env it carries in memory or None, notes)."""
    # Hydra reads a relative --config-path relative to scripts/train/trainer.py, wherever the job's working_dir lands
    config_path = os.path.relpath(rdir, os.path.join(ROOT, "scripts", "train"))
    train = [env.get("JOB_PYTHON") or "python3", "-m", "scripts.train", "--config-path", config_path]
    train += ["--config-name", "config", *overrides]
    if knob_env:  # the driver resolves the config (scripts/train/trainer.py), so the knobs need to reach it only
        train = ["env", *[f"{k}={v}" for k, v in knob_env.items()], *train]
    rt_path = env.get("RUNTIME_ENV") or RUNTIME_ENV_DEFAULT
    rt = load_runtime_env(rt_path)  # + the secrets set here, merged in memory only
    passed = [name for name in secret_names(env) if env.get(name)]
    submit = [*ray_head.ray_cli(), "job", "submit"]
    if not passed:
        return [*submit, "--runtime-env", os.path.relpath(rt_path, ROOT), "--", *train], None, []
    rt["env_vars"] = {**(rt.get("env_vars") or {}), **{name: env[name] for name in passed}}
    cmd = [*submit, "--runtime-env-json", json.dumps(rt), "--", *train]
    return cmd, rt, ["secrets passed to the job by name: " + ", ".join(passed)]


def upload_notes(values: list[str], ckpt: str) -> list[str]:
    """Notes on repo paths the job opens where they are, and on checkpoints in the job's temporary working_dir."""
    notes = []
    kept = sorted({v.strip("'\"") for v in values if v.strip("'\"").startswith(ROOT + os.sep)})
    if kept:
        notes.append(
            "Ray job: not uploaded with the repo (runtime_env excludes / .gitignore), so the job opens "
            "these where they are; every node must see them (one host, or shared storage): " + ", ".join(kept)
        )
    if not os.path.isabs(ckpt) and "://" not in ckpt:
        notes.append(
            f"Ray job: checkpoints go to {ckpt} inside the job's temporary working_dir on the node "
            "running verl's TaskRunner: set trainer.default_local_dir=<shared storage> to keep them"
        )
    return notes


def submit_argv(cmd: list[str]) -> tuple[list[str], str | None]:
    """(argv, stdin) that run ``cmd`` without putting the runtime env JSON on a command line."""
    if "--runtime-env-json" not in cmd:
        return cmd, None
    args = list(cmd[cmd.index("job") + 2 :])  # after `ray job submit`
    i = args.index("--runtime-env-json")
    payload, args[i + 1] = args[i + 1], "<stdin>"
    return [sys.executable, "-c", _SUBMIT_FROM_STDIN, *args], payload


def submit(cmd: list[str], run, env, tries: int = SUBMIT_TRIES) -> int:
    """Run ``ray job submit`` through ``run(argv, stdin) -> (exit code, output tail)``, again while a freshly
    started cluster answers 500 "No available agent to submit job" (nothing was submitted, so it is safe)."""
    argv, payload = submit_argv(cmd)
    for attempt in range(1, tries + 1):
        rc, tail = run(argv, payload)
        if rc == 0 or JOB_AGENT_NOT_READY not in tail or attempt == tries:
            return rc
        wait = min(2.0 * attempt, 10.0)
        why = f"the cluster's job agent is not ready yet (try {attempt}/{tries}); submitting again in {wait:.0f}s"
        say("launch", why, env)
        time.sleep(wait)
    return 1
