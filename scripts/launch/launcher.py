"""The launcher behind every ``recipes/<recipe>/run.sh``: plan, check and run one recipe (``run_recipe``).

    bash recipes/gsm8k_rule/run.sh trainer.total_training_steps=3
    python -m scripts.launch gsm8k_rule trainer.total_training_steps=3     # the same, from the repo root
    python -m scripts.launch --knobs                                       # the environment variables (Markdown)

A recipe is a Hydra config, ``recipes/<recipe>/config.yaml`` (verl's ``ppo_trainer``, then ``recipes/base.yaml``,
then its own values; machine knobs read as ``${oc.env:...}``); arguments are Hydra overrides and win. Before Hydra the
launcher stops on a variable that looks like a knob but is none and on knob values out of range (``knobs.py``); fills
the default model and data (``defaults.py``); makes the run folder (``OUTPUT_DIR``: ``launch.log``, ``metrics.jsonl``),
prints the command (secrets masked) and checks the composed config (``verl_config.py``, ``preflight.py``); then runs
``python -m scripts.train`` against a private Ray head (``local_run.py``) or, with ``RAY_ADDRESS`` answering, submits
it with ``ray job submit --runtime-env runtime_env.yaml`` (``ray_job.py``).

``DRY_RUN=1`` stops after the checks (CPU is enough); ``DRY_RUN=print`` prints the plan as JSON without building data
or checking. A Ctrl-C stops what the launch started on this machine, says so in one line, and ends the command by
SIGINT (``$?`` 130). Python: ``run_recipe(recipe, overrides, env)``, ``check_recipe(...)`` (plan + check, no run).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import shlex
import signal
import sys
import threading
import time
from dataclasses import dataclass, field

from scripts.console import KEY_ENV, mask, say
from scripts.launch import (
    config_checks,
    config_compose,
    defaults,
    judge_server,
    knobs,
    local_run,
    preflight,
    ray_head,
    ray_job,
    services,
    stall,
    verl_config,
)
from scripts.launch import overrides as ov
from scripts.launch.local_run import Tee, run_child

ROOT = knobs.ROOT
LOGGER_ENV = "+ray_kwargs.ray_init.runtime_env.env_vars"
PENDING = "<default>"  # what MODEL / TRAIN_FILES / VAL_FILES stand for while the values are checked


class LaunchError(Exception):
    pass


@dataclass
class Plan:
    recipe: str
    mode: str  # local | job
    recipe_dir: str = ""
    overrides: list[str] = field(default_factory=list)
    command: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # set for the run (printed)
    knobs: dict[str, str] = field(default_factory=dict)  # knobs the run's config reads (set, or the defaults)
    notes: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # Hydra key -> the knob that set it
    data: list[str] | None = None  # the data_prep command (None: data files given or there)
    metrics_file: str = ""
    output_dir: str = ""
    log_file: str = ""
    key_env: str = ""
    runtime_env: dict | None = None  # job mode; includes secret values -> never print / write
    judge_server: dict | None = None  # verl_judge.judge_server when enabled (judge_server.planned)
    watchdog: dict | None = None  # verl_judge.watchdog when enabled (scripts/launch/stall.py)


# ----------------------------------------------------------------------------------------------- plan
def knob_value(k: knobs.Knob, raw: str, env) -> str:
    """A set knob as the run gets it: paths absolute (repo-relative for a Ray job), hub ids and text as given."""
    raw = raw.strip()
    if k.kind == "files":
        return ",".join(ray_job.local_path(f.strip(), env) for f in raw.split(",") if f.strip())
    if k.kind == "path" and (
        "://" in raw or os.path.exists(os.path.expanduser(raw)) or raw.startswith((".", "/", "~"))
    ):
        return ray_job.local_path(raw.removeprefix("file://"), env)
    return raw


def compose(recipe: str, overrides: list[str], env):
    try:
        with knobs.environ(env):
            return config_compose.compose(overrides, recipe)
    except config_compose.ConfigError as e:
        raise LaunchError("; ".join(e.errors)) from None


def knob_sources(cfg, names) -> dict[str, str]:
    """Hydra key -> the knob its value reads (``${oc.env:NAME``), for the knobs in ``names``."""
    return {
        key: f"{name}={names[name]}"
        for key, raw in config_checks.leaves(cfg).items()
        if isinstance(raw, str)
        for name in re.findall(r"oc\.env:([A-Z0-9_]+)", raw)
        if name in names
    }


def refuse(errors: list[str], p: Plan, env, why: str) -> None:
    """One ``CONFIG ERROR`` line per problem (naming the knob behind it), then the LaunchError ``why``."""
    for msg in errors:
        say("launch", f"CONFIG ERROR: {annotate(msg, p)}", env)
    raise LaunchError(why)


def check_values(cfg, p: Plan, env) -> None:
    with knobs.environ({**env, **p.knobs}):
        errors = config_checks.resolution_errors(cfg) or config_checks.value_errors(cfg)
    if errors:
        refuse(errors, p, env, f"{len(errors)} setting(s) out of range or unresolvable; nothing was started")


def annotate(msg: str, p: Plan) -> str:
    """A checker message, plus the knob that set the key it names."""
    for key, src in p.sources.items():
        if re.search(rf"(?<![\w.]){re.escape(key)}(?![\w])", msg):
            return f"{msg} (set by {src})"
    return msg


def outputs(
    p: Plan, env, given, project: str, experiment: str, loggers: list[str], output_dir, metrics_file, log_file
) -> list[str]:
    """The run folder, log and metrics file of ``p``; the overrides for the loggers: the recipe's trainer.logger
    (+ swanlab with a key) and verl's JSONL file logger."""
    gen = []
    out = output_dir or env.get("OUTPUT_DIR") or os.path.join(ROOT, "outputs", project, experiment)
    p.output_dir = os.path.abspath(os.path.expanduser(out))
    p.log_file = log_file or os.path.join(p.output_dir, "launch.log")
    if env.get("SWANLAB_API_KEY") and "swanlab" not in loggers and "trainer.logger" not in given:
        gen.append("trainer.logger=[" + ",".join(loggers + ["swanlab"]) + "]")
        loggers.append("swanlab")
    if "file" not in loggers:
        p.notes.append("trainer.logger has no 'file': no metrics JSONL is written")
    if p.mode == "job":
        # the folder may not exist on the node that runs verl's TaskRunner; verl's file logger creates
        # <VERL_FILE_LOGGER_ROOT>/<project>/<experiment>.jsonl itself
        root = ray_job.local_path(p.output_dir, env)
        p.metrics_file = os.path.join(root, project, f"{experiment}.jsonl")
        gen.append(f"{LOGGER_ENV}.VERL_FILE_LOGGER_ROOT={ov.hydra_str(root)}")
        p.notes.append(
            f"Ray job: metrics go to {p.metrics_file} on the node running verl's TaskRunner "
            "(point OUTPUT_DIR at shared storage to keep them)"
        )
    else:
        p.metrics_file = os.path.abspath(metrics_file or os.path.join(p.output_dir, "metrics.jsonl"))
        gen.append(f"{LOGGER_ENV}.VERL_FILE_LOGGER_PATH={ov.hydra_str(p.metrics_file)}")
    return gen


def recipe_folder(recipe: str) -> str:
    """recipes/<recipe>, the folder of its config; the LaunchError for a pipeline's folder names its run.sh."""
    try:
        return config_compose.recipe_dir(recipe)
    except config_compose.ConfigError as e:
        pipeline = os.path.isfile(os.path.join(knobs.RECIPES, recipe, "run.sh"))
        hint = f" (a pipeline: bash recipes/{recipe}/run.sh)" if pipeline else ""
        raise LaunchError(e.errors[0] + hint) from None


def set_knobs(env) -> dict[str, str]:
    """The config's knobs ``env`` sets, as the run gets them (``knob_value``)."""
    return {
        k.name: knob_value(k, env[k.name], env)
        for k in knobs.KNOBS
        if k.where == "config" and (env.get(k.name) or "").strip()
    }


def missing_data(given: set[str], set_by_user: dict[str, str]) -> dict[str, str]:
    """Hydra key -> knob of the data files neither an override nor a knob gives (the recipe's default data stands
    in); one of the two without the other is refused."""
    files = {"data.train_files": "TRAIN_FILES", "data.val_files": "VAL_FILES"}
    missing = {key: name for key, name in files.items() if key not in given and name not in set_by_user}
    if len(missing) == 1:  # the recipe's default set would train or validate on another task than the user's
        ((key, name),) = missing.items()
        other_key, other = next(kv for kv in files.items() if kv[0] != key)
        raise LaunchError(
            f"{other} (or {other_key}=) is set but {name} (or {key}=) is not: set both, the training and the "
            f"validation parquet of one task (data_prep writes both: --train FILE --test FILE); without {name} the "
            "run would use the recipe's default data for it"
        )
    return missing


def fill_defaults(p: Plan, cfg, env, model: bool, missing: dict[str, str], materialize: bool) -> None:
    """The default model (``model``) and the recipe's default data (the knobs of ``missing``) into ``p.knobs``, the
    data's command and source line into ``p``."""
    from omegaconf import OmegaConf

    try:
        if model:
            p.knobs["MODEL"] = defaults.model(env, create=materialize)
        if missing:
            with knobs.environ({**env, **p.knobs}):
                kind = OmegaConf.select(cfg, "verl_judge.default_data", default=None)
                tokenizer = str(cfg.actor_rollout_ref.model.path)
            train, val, p.data, line = defaults.data(
                kind, p.recipe, cfg.data.max_prompt_length, tokenizer, env, materialize
            )
            p.notes.append(line)
            got = {"TRAIN_FILES": train, "VAL_FILES": val}
            p.knobs.update({name: ray_job.local_path(got[name], env) for name in missing.values()})
    except defaults.DefaultsError as e:
        raise LaunchError(str(e)) from None


def ignored_knobs(p: Plan, set_by_user: dict[str, str]) -> list[str]:
    """A note for each knob set that the recipe's config (config.yaml, its config groups, base.yaml) does not read."""
    yaml_files = [os.path.join(knobs.RECIPES, "base.yaml")] + glob.glob(
        os.path.join(p.recipe_dir, "**", "*.yaml"), recursive=True
    )
    yaml_text = "".join(open(f, encoding="utf-8").read() for f in yaml_files)
    return [
        f"{n} ignored: recipe {p.recipe} does not read it (no ${{oc.env:{n}}} in its config)"
        for n in set_by_user
        if f"oc.env:{n}" not in yaml_text
    ]


def read_config(p: Plan, cfg, env, given: set[str]) -> tuple[str, str, list[str], str]:
    """What the plan takes from the composed config, the knobs' values in force: the judge API's key variable, the
    attention note, the services to start beside training, the watchdog; ``(project, experiment, loggers,
    checkpoint folder)``."""
    from omegaconf import OmegaConf

    job = p.mode == "job"
    with knobs.environ({**env, **p.knobs}):
        p.key_env = str(
            OmegaConf.select(cfg, "reward.custom_reward_function.reward_kwargs.api_key_env", default=None) or ""
        )
        if (
            not job
            and "actor_rollout_ref.model.use_remove_padding" not in given
            and (env.get("NO_FLASH_ATTN") or "auto").strip().lower() == "auto"
            and not knobs.flash_attn("auto")
        ):
            p.notes.append("NO_FLASH_ATTN=auto: flash_attn not importable here -> sdpa attention, no remove-padding")
        try:
            p.judge_server = judge_server.planned(cfg, env, job)
        except ValueError as e:
            raise LaunchError(str(e)) from None
        p.watchdog = stall.planned(cfg)
        project, experiment = str(cfg.trainer.project_name), str(cfg.trainer.experiment_name)
        return project, experiment, [str(x) for x in cfg.trainer.logger], str(cfg.trainer.default_local_dir)


def set_command(p: Plan, env, gen: list[str], ckpt: str) -> None:
    """The command that runs ``p`` and the variables shown with it: a Ray job's submission (with what its upload
    leaves out), or the trainer on this machine."""
    if p.mode == "job":
        p.command, p.runtime_env, notes = ray_job.command(
            p.recipe_dir, p.overrides, p.knobs, {**env, KEY_ENV: p.key_env}
        )
        p.notes += notes
        p.env = {"RAY_ADDRESS": env["RAY_ADDRESS"]}
        values = [f for v in p.knobs.values() for f in v.split(",")] + [o.partition("=")[2] for o in gen]
        p.notes += ray_job.upload_notes(values, ckpt)
    else:
        python = env.get("PYTHON") or sys.executable
        p.command = [python, "-m", "scripts.train", "--config-path", p.recipe_dir, "--config-name", "config"]
        p.command += p.overrides
        p.env = {"PYTHONPATH": ROOT, "RAY_ADDRESS": "<private local head>"}


def plan(
    env,
    user_args: list[str],
    recipe: str,
    materialize: bool = True,
    output_dir: str | None = None,
    metrics_file: str | None = None,
    log_file: str | None = None,
) -> Plan:
    """Everything a run needs, from the recipe config, the knobs and the arguments (``materialize=False``:
    build no model or data, only name them)."""
    rdir = recipe_folder(recipe)
    unknown = knobs.unknown(env)
    if unknown:
        raise LaunchError("; ".join(unknown))
    p = Plan(recipe=recipe, mode="job" if env.get("RAY_ADDRESS") else "local", recipe_dir=rdir)
    user_args = ov.merge(user_args)
    given = {ov.key(o) for o in user_args}
    set_by_user = set_knobs(env)
    p.knobs = dict(set_by_user)
    missing = missing_data(given, p.knobs)
    pending = dict.fromkeys(missing.values(), PENDING)  # stand-ins while the values are checked
    if "actor_rollout_ref.model.path" not in given and "MODEL" not in p.knobs:
        pending["MODEL"] = PENDING
    cfg = compose(recipe, user_args, {**env, **p.knobs, **pending})
    p.sources = knob_sources(cfg, set_by_user)
    check_values(cfg, p, {**env, **pending})
    fill_defaults(p, cfg, env, "MODEL" in pending, missing, materialize)
    p.notes += ignored_knobs(p, set_by_user)
    project, experiment, loggers, ckpt = read_config(p, cfg, env, given)
    gen = outputs(p, env, given, project, experiment, loggers, output_dir, metrics_file, log_file)
    p.overrides = ov.merge(gen, user_args)
    set_command(p, env, gen, ckpt)
    return p


def printable(p: Plan, env) -> str:
    shown = {**p.env, **(p.knobs if p.mode == "local" else {})}
    pre = " ".join(f"{k}={shlex.quote(v)}" for k, v in shown.items())
    return mask(f"{pre} {shlex.join(p.command)}", env)


def validate(p: Plan, env) -> None:
    notes: list[str] = []
    t0 = time.time()
    try:
        with knobs.environ({**env, **p.knobs}):
            cfg = verl_config.check(
                p.overrides, paths="warn" if p.mode == "job" else "error", notes=notes, recipe=p.recipe_dir
            )
            errors = preflight.api_key_errors(cfg, env)
    except config_compose.ConfigError as e:
        errors = e.errors
    if errors:
        why = f"the composed config does not pass the launcher's checks ({len(errors)} problem(s)); nothing was started"
        refuse(errors, p, env, why)
    for n in notes:
        say("launch", f"CONFIG NOTE: {n}", env)
    what = f"recipe {p.recipe} with {len(p.overrides)} overrides"
    say("launch", f"config OK: {what} validates against verl's ppo_trainer schema ({time.time() - t0:.1f}s)", env)


def check_recipe(recipe: str, overrides: list[str], env, **where) -> Plan:
    """Plan the run (building the default model and data), print it and check it; raises LaunchError."""
    try:
        p = plan(env, list(overrides), recipe, **where)
    except ray_job.RuntimeEnvError as e:
        raise LaunchError(str(e)) from None
    env[KEY_ENV] = p.key_env
    say("launch", f"recipe {p.recipe} ({p.mode})", env)
    for n in p.notes:
        say("launch", f"note: {n}", env)
    say("launch", "command:", env)
    print(printable(p, env), flush=True)
    say("launch", f"metrics (JSONL): {p.metrics_file}", env)
    validate(p, env)
    return p


# ----------------------------------------------------------------------------------------------- run
def rotate(path: str, env) -> None:
    """An earlier run's metrics file is kept under its date, never overwritten."""
    if os.path.exists(path) and os.path.getsize(path) > 0:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(os.path.getmtime(path)))
        old = f"{path[: -len('.jsonl')] if path.endswith('.jsonl') else path}.{stamp}.jsonl"
        os.replace(path, old)
        say("launch", f"previous metrics kept as {old}", env)


def execute(p: Plan, env, tries: int = ray_job.SUBMIT_TRIES, start_tries: int = local_run.START_TRIES) -> int:
    cenv = {k: v for k, v in env.items() if not k.startswith("_")}
    cenv["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cenv.setdefault("HYDRA_FULL_ERROR", "1")
    if p.mode == "local":
        cenv.update(p.knobs)
    log_file = p.log_file or os.path.join(p.output_dir, "launch.log")
    os.makedirs(os.path.dirname(log_file), exist_ok=True)
    tee, started = Tee(log_file, env), time.strftime("%Y-%m-%d %H:%M:%S")
    head = f"[launch] {started} recipe {p.recipe} ({p.mode})\n[launch] command: {printable(p, env)}\n"
    tee.log.write(mask(head, env))

    def on_term(signum, _frame):
        raise SystemExit(128 + signum)

    if threading.current_thread() is threading.main_thread():  # a pipeline may run recipes from its threads
        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGHUP, on_term)
    try:
        if p.mode == "job":

            def attempt(argv, stdin):
                tee.tail = ""
                return run_child(argv, cenv, tee, stdin=stdin), tee.tail

            return ray_job.submit(p.command, attempt, env, tries)
        if "://" not in p.metrics_file:
            os.makedirs(os.path.dirname(p.metrics_file), exist_ok=True)
            rotate(p.metrics_file, env)
        return local_run.run(p, cenv, env, tee, log_file, start_tries)
    except ray_head.RayStartError as e:
        raise LaunchError(str(e)) from None
    finally:
        tee.close()


def run_recipe(recipe: str, overrides: list[str], env=None, warn: bool = False, **where) -> int:
    """Plan, check and run a recipe (``DRY_RUN=1``: stop after the check); the exit code, 2 for a launch error.
    ``where``: ``output_dir``, ``metrics_file``, ``log_file`` instead of the OUTPUT_DIR defaults."""
    env = dict(os.environ if env is None else env)
    dry = knobs.truthy(env.get("DRY_RUN") or "0")
    try:
        p = check_recipe(recipe, overrides, env, **where)
        if dry:
            say("launch", "DRY_RUN=1: stopping before training", env)
            return 0
        unreachable = preflight.ray_address_error(env["RAY_ADDRESS"]) if p.mode == "job" else None
        if unreachable:
            raise LaunchError(unreachable)
        from scripts import bytecode

        slow_start = bytecode.warning(env) if warn and p.mode != "job" else None  # a job: the cluster's interpreters
        if slow_start:
            say("launch", f"WARNING: {slow_start}", env)
        rc = execute(p, env)
        say("launch", f"exit {rc}; metrics: {p.metrics_file}", env)
        return rc
    except LaunchError as e:
        say("launch", f"ERROR: {e}", env)
        return 2


# ----------------------------------------------------------------------------------------------- entry
def main(argv: list[str], env: dict | None = None) -> int:
    env = dict(os.environ if env is None else env)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__ + "\nEnvironment variables (the only ones it uses):\n\n" + knobs.markdown())
        return 0 if argv else 2
    if argv[0] == "--knobs":
        print(knobs.markdown())
        return 0
    recipe, args = argv[0], argv[1:]
    if (env.get("DRY_RUN") or "").strip().lower() != "print":
        try:
            return run_recipe(recipe, args, env, warn=True)
        except KeyboardInterrupt:  # on its way here each block stopped what it started (local_run, judge_server)
            say("launch", f"interrupted (Ctrl-C): what it started on this machine is stopped; exit {services.INT_EXIT}")
            raise services.Interrupted from None
    try:  # stdout holds only the JSON plan
        with contextlib.redirect_stdout(sys.stderr):
            p = plan(env, args, recipe, materialize=False)
    except (LaunchError, ray_job.RuntimeEnvError) as e:
        say("launch", f"ERROR: {e}", env)
        return 2
    env[KEY_ENV] = p.key_env
    keys = ("recipe", "mode", "overrides", "command", "env", "knobs", "notes", "data", "metrics_file", "output_dir")
    shown = {k: getattr(p, k) for k in keys} | {"command": shlex.join(p.command), "data": p.data and shlex.join(p.data)}
    print(mask(json.dumps(shown, indent=1), env))
    return 0
