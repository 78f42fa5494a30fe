"""The environment variables of the project ("knobs"): where each is read, the config resolvers, one check.

Machine knobs are OmegaConf resolvers in the recipe configs (``${oc.env:N_GPUS,1}``); the few the launcher needs
before Hydra it reads itself. ``register()`` adds the project's resolvers (``vj.*``) and ``SEARCH_PATH`` is where a
recipe's ``defaults`` are found. A variable that looks like ours (``JUDGE_*``, ``TRAIN_*``, ...) but is no knob is an
error naming it.

    python -m scripts.launch.knobs                 # the table (Markdown), as python -m scripts.launch --knobs
    python -m scripts.launch.knobs --check WHO     # exit 2 naming each unknown JUDGE_*/TRAIN_*/... variable set
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import sys
import threading
from dataclasses import dataclass

import scripts
from scripts.console import SECRET_NAME

ROOT = scripts.ROOT
RECIPES = os.path.join(ROOT, "recipes")
#: Where a recipe's ``defaults: [ppo_trainer, base, _self_]`` are found: verl's config package, then recipes/.
SEARCH_PATH = f"hydra.searchpath=[pkg://verl.trainer.config,file://{RECIPES}]"
#: Names that look like knobs: one of these set but not in KNOBS (nor a secret's name) stops a run.
PREFIXES = ("JUDGE_", "TRAIN_", "VAL_", "ROLLOUT_", "REWARD_", "POLICY_", "PIPELINE_")


@dataclass(frozen=True)
class Knob:
    name: str
    where: str  # "config": a resolver in recipes/*.yaml reads it; "launcher": scripts/launch/launcher.py (before Hydra)
    kind: str  # path | files | text: how the launcher normalises a set value (paths made absolute)
    doc: str


#: One knob a row: name, where, kind, then its meaning, which goes on over the indented lines below it.
_TABLE = """
MODEL config path              policy model: Hugging Face folder or hub id (unset: SmolLM2-135M-Instruct,
    materialised offline and cached by the launcher)
JUDGE_MODEL config path        frozen judge of `gsm8k_local_judge` (unset: the policy model)
TRAIN_FILES config files       train parquet(s), comma-separated (unset: the recipe's default data, built by
    `data_prep`); set with VAL_FILES, never alone
VAL_FILES config files         validation parquet(s) of the same task, comma-separated (unset: the recipe's default
    data); set with TRAIN_FILES, never alone
REWARD_FN config path          reward function: a file (made absolute, or repo-relative for a Ray job) or
    `pkg://module` (unset: the recipe's)
REWARD_FN_NAME config text     function name in the reward file (unset: `compute_score`)
N_GPUS config text             training GPUs per node (unset: 1)
NNODES config text             nodes (unset: 1)
JUDGE_GPUS config text         `gsm8k_local_judge`: 0 (unset): the judge shares the training GPUs; N > 0: a judge
    pool of N GPUs on one node
JUDGE_BASE_URL config text     `gsm8k_api_judge`: OpenAI-compatible endpoint of the judge (unset: the OpenAI API)
NO_FLASH_ATTN config text      `1`: torch SDPA attention, no remove-padding; `0`: flash-attn; `auto` (unset): `1`
    where `flash_attn` is not importable (decided where the trainer composes its config)
DATA_DIR launcher path         where `data_prep` writes the default data (default `data/`)
GSM8K_DIR launcher path        folder with GSM8K `train.jsonl` / `test.jsonl` for the default data (unset:
    `../shared/data/gsm8k` beside the checkout's folder when it is there, else the HF hub `openai/gsm8k`, else, said
    in the plan, the synthetic word-problem testbed in `DATA_DIR/word_problems*_p<len>/`,
    `data_source=word_problems`)
OUTPUT_DIR launcher path       run folder: `launch.log`, `launch.ray_head.log` (`launch.judge_server.log`),
    `metrics.jsonl` (verl's `file` logger; an older file is renamed) (default
    `outputs/<trainer.project_name>/<trainer.experiment_name>`)
PYTHON launcher text           interpreter used as is, e.g. `python3` with verl + vLLM (unset:
    `scripts/setup_env.sh`, gpu profile when `nvidia-smi` works)
DRY_RUN launcher text          `1` (`true`, `yes`, `on`): build data, check the composed config, print the command,
    stop; `print`: print the plan as JSON only; `0` or unset: run; anything else is an error
RAY_ADDRESS launcher text      submit with `ray job submit --runtime-env runtime_env.yaml` to this cluster (unset: a
    private local Ray head, stopped afterwards)
RUNTIME_ENV launcher path      runtime env file for a Ray job (default `runtime_env.yaml`)
JOB_PYTHON launcher text       interpreter of a Ray job's entrypoint on the cluster (default `python3`)
PASS_ENV launcher text         more variable NAMES (comma-separated) whose values a Ray job gets; always passed when
    set: SWANLAB_API_KEY, HF_TOKEN, HUGGING_FACE_HUB_TOKEN, WANDB_API_KEY, OPENAI_API_KEY, the judge key named by
    `reward_kwargs.api_key_env`
SWANLAB_API_KEY launcher text  set: `swanlab` is added to `trainer.logger` (unless `trainer.logger` is given as an
    argument)
"""
KNOBS: tuple[Knob, ...] = tuple(Knob(*row.split(None, 3)) for row in re.sub(r"\n\s+", " ", _TABLE.strip()).splitlines())
BY_NAME = {k.name: k for k in KNOBS}


# ----------------------------------------------------------------------------------------------- resolvers
#: how a yes/no variable (DRY_RUN, NO_FLASH_ATTN, HF_HUB_OFFLINE, ...) is spelt
YES, NO = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def truthy(v) -> bool:
    """Whether a yes/no variable's value says yes (``YES``)."""
    return str(v).strip().lower() in YES


def flash_attn(mode) -> bool:
    """Whether training uses flash-attn: NO_FLASH_ATTN ``0`` / ``1`` / ``auto`` (flash_attn importable here)."""
    m = str(mode).strip().lower()
    if m in ("", "auto"):
        return importlib.util.find_spec("flash_attn") is not None
    if m in NO:
        return True
    if m in YES:
        return False
    raise ValueError(f"NO_FLASH_ATTN={mode!r}: expected 1, 0 or auto")


def _files(value):
    """``a.parquet`` -> the string; ``a.parquet,b.parquet`` -> a list (TRAIN_FILES / VAL_FILES)."""
    if value is None:
        return None
    files = [f.strip() for f in str(value).split(",") if f.strip()]
    return files[0] if len(files) == 1 else files


def _judge_pool(gpus) -> bool:
    """JUDGE_GPUS > 0: the judge gets a resource pool of its own."""
    s = str(gpus).strip()
    if not s.isdigit():
        raise ValueError(f"JUDGE_GPUS={gpus!r}: expected an integer >= 0")
    return int(s) > 0


RESOLVERS = {
    "vj.flash_attn": flash_attn,
    "vj.attn_implementation": lambda mode: "flash_attention_2" if flash_attn(mode) else "sdpa",
    "vj.files": _files,
    "vj.judge_pool": _judge_pool,
}


def register() -> None:
    """Add the ``vj.*`` resolvers to OmegaConf (idempotent); needed by every process that resolves a recipe."""
    from omegaconf import OmegaConf

    for name, fn in RESOLVERS.items():
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, fn)


_ENVIRON_LOCK = threading.RLock()


@contextlib.contextmanager
def environ(env):
    """``os.environ`` is ``env`` inside the block (``${oc.env:...}`` reads os.environ), restored afterwards."""
    with _ENVIRON_LOCK:
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update({k: str(v) for k, v in env.items()})
        try:
            yield
        finally:
            os.environ.clear()
            os.environ.update(saved)


# ----------------------------------------------------------------------------------------------- checks
#: what DRY_RUN may be: off, on, or print (the launcher's JSON plan)
DRY_RUN_VALUES = ("", *NO, *YES, "print")


def _spelling(name: str) -> str:
    """A name as a hurried hand writes it: no underscores, no plural ``S`` (``DRYRUN``, ``N_GPU``, ``NOFLASHATTN``)."""
    return name.upper().replace("_", "").removesuffix("S")


#: a knob's name by its hurried spelling: ``DRYRUN=1`` would start a real run, ``NGPUS=2`` train on one GPU
SPELLINGS = {_spelling(k.name): k.name for k in KNOBS}


def unknown(env) -> list[str]:
    """One message per variable set in ``env`` that is a knob's name spelt without its underscores or plural
    (``SPELLINGS``: the message names the knob) or starts like a knob (PREFIXES) but is none (a misspelt or removed
    one), and for a DRY_RUN value that is not one of ``DRY_RUN_VALUES``; secrets' names (``JUDGE_API_KEY`` holding a
    key, names in PASS_ENV) are left alone."""
    passed = {n.strip() for n in (env.get("PASS_ENV") or "").split(",")}
    msgs = []
    for name in sorted(env):
        if env[name] == "" or name in BY_NAME or name in passed or SECRET_NAME.search(name):
            continue
        if _spelling(name) in SPELLINGS:
            msgs.append(
                f"{name}={env[name]} is set, but no script reads it: did you mean {SPELLINGS[_spelling(name)]}? "
                f"(python -m scripts.launch --knobs); set that one, or unset {name}"
            )
        elif name.startswith(PREFIXES):
            msgs.append(
                f"{name}={env[name]} is set, but no script reads it: it is not one of the knobs (python -m "
                f"scripts.launch --knobs); give the setting as a Hydra override argument (KEY=VALUE), or unset {name}"
            )
    dry = (env.get("DRY_RUN") or "").strip().lower()
    if dry not in DRY_RUN_VALUES:  # an unknown value must not start a real run
        msgs.append(f"DRY_RUN={env['DRY_RUN']} is not one of {', '.join(v or '(empty)' for v in DRY_RUN_VALUES)}")
    return msgs


def markdown() -> str:
    rows = ["| variable | read by | meaning |", "|---|---|---|"]
    for k in KNOBS:
        where = "recipe config (`${oc.env:...}`)" if k.where == "config" else "launcher"
        rows.append(f"| `{k.name}` | {where} | {k.doc} |")
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--check"]:
        msgs = unknown(os.environ)
        for m in msgs:
            print(f"{argv[1] if len(argv) > 1 else 'knobs'}: {m}", file=sys.stderr)
        return 2 if msgs else 0
    print(markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
