"""The checks of the config check, one function per kind of problem, each returning one message per problem, against
verl 0.9.1's ``ppo_trainer`` schema, on CPU. No command of its own; run in order by ``scripts/launch/verl_config.py``
(``check``), and by the launcher:

    from scripts.launch import config_checks; errors = config_checks.value_errors(cfg)
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import inspect
import io
import json
import math
import os
import re
import warnings
from typing import Iterable, Sequence

from scripts.launch import knobs, stall
from scripts.launch.config_compose import ALLOWED_ADDITIONS, ConfigError, compose, recipe_dir
from scripts.launch.config_paths import resolve_module_file, reward_function, reward_option_errors
from scripts.train import hooks as train_hooks

ROOT, RECIPES = knobs.ROOT, knobs.RECIPES
#: The project's own section of a recipe config (read by scripts/train/hooks.py and scripts/launch/launcher.py).
PROJECT_SECTION = "verl_judge"

LEGACY_TOP_LEVEL = ("reward_model", "custom_reward_function", "sandbox_fusion")

# Value ranges verl does not check itself (a negative GPU count or temperature, a memory share of 1.5
# would otherwise start a run). (key, kind, None allowed, keys that must all be true for the rule to apply)
COUNT, FRACTION, NON_NEGATIVE, POSITIVE = "count", "fraction", "non_negative", "positive"


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


#: kind -> (what a value must be, the test)
RANGES = {
    COUNT: ("an integer >= 1", _count),
    FRACTION: ("a number in (0, 1]", lambda v: _number(v) and 0 < v <= 1),
    NON_NEGATIVE: ("a number >= 0", lambda v: _number(v) and v >= 0),
    POSITIVE: ("a number > 0", lambda v: _number(v) and v > 0),
}
_RM, _POOL = "reward.reward_model.enable", "reward.reward_model.enable_resource_pool"
VALUE_RULES: tuple[tuple[str, str, bool, tuple[str, ...]], ...] = (
    ("trainer.n_gpus_per_node", COUNT, False, ()),
    ("trainer.nnodes", COUNT, False, ()),
    ("reward.reward_model.n_gpus_per_node", COUNT, False, (_RM, _POOL)),
    ("reward.reward_model.nnodes", COUNT, False, (_RM, _POOL)),
    ("actor_rollout_ref.rollout.gpu_memory_utilization", FRACTION, False, ()),
    ("reward.reward_model.rollout.gpu_memory_utilization", FRACTION, False, (_RM,)),
    ("actor_rollout_ref.rollout.temperature", NON_NEGATIVE, False, ()),
    ("actor_rollout_ref.rollout.val_kwargs.temperature", NON_NEGATIVE, False, ()),
    ("actor_rollout_ref.actor.optim.lr", POSITIVE, False, ()),
    ("data.train_batch_size", COUNT, False, ()),
    ("data.val_batch_size", COUNT, True, ()),
    ("actor_rollout_ref.actor.ppo_mini_batch_size", COUNT, False, ()),
    ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", COUNT, True, ()),
    ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", COUNT, True, ()),
    ("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", COUNT, True, ()),
    ("actor_rollout_ref.rollout.n", COUNT, False, ()),
)


# ---------------------------------------------------------------------------------------------- overrides
def parse_overrides(overrides: Sequence[str]):
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        return OverridesParser.create().parse_overrides(list(overrides))
    except Exception as e:  # hydra.errors.OverrideParseException
        raise ConfigError([f"cannot parse overrides: {e}"]) from None


def check_override_keys(overrides: Sequence[str], allowed: Iterable[str] = ALLOWED_ADDITIONS) -> list[str]:
    """Static checks on the override keys (before composing): legacy keys, additions, deletions."""
    allowed = tuple(allowed)
    errors = []
    for ov in parse_overrides(overrides):
        key = ov.key_or_group
        top = key.split(".", 1)[0]
        if top in LEGACY_TOP_LEVEL:
            errors.append(
                f"legacy reward key '{key}' ({ov.input_line}): verl 0.9.1 reads reward settings under reward.*; "
                f"use 'reward.{key}' instead (top-level {top}.* is migrated or ignored, never set it)"
            )
            continue
        if ov.is_delete():
            errors.append(f"deleting keys is not allowed: '{ov.input_line}'")
        elif ov.is_add() or ov.is_force_add():
            if not any(fnmatch.fnmatchcase(key, pat) for pat in allowed):
                errors.append(
                    f"'{ov.input_line}' adds key '{key}' that verl's schema does not define and that is not in "
                    f"the allowlist ({', '.join('+' + p for p in allowed)}); drop the '+' if the key exists, "
                    "or fix the name"
                )
    return errors


# ---------------------------------------------------------------------------------------------- recipe keys
def leaves(node, prefix: str = "") -> dict:
    """Dotted path -> value of the leaves of a config (an empty mapping counts as a leaf), unresolved."""
    from omegaconf import OmegaConf

    data = OmegaConf.to_container(node, resolve=False) if OmegaConf.is_config(node) else node
    out = {}
    for k, v in data.items():
        if isinstance(v, dict) and v:
            out.update(leaves(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


@functools.lru_cache(maxsize=None)
def schema_keys() -> frozenset:
    """Every key of verl's ppo_trainer config plus the ``verl_judge`` keys recipes/base.yaml declares."""
    from omegaconf import OmegaConf

    keys = set(leaves(compose([])))
    base = OmegaConf.load(os.path.join(RECIPES, "base.yaml"))
    keys |= {f"{PROJECT_SECTION}.{k}" for k in leaves(base.get(PROJECT_SECTION) or {})}
    return frozenset(keys)


def unknown_recipe_keys(cfg, recipe: str, allowed: Iterable[str] = ALLOWED_ADDITIONS) -> list[str]:
    """Keys a recipe's YAML files add that neither verl nor recipes/base.yaml define (typos)."""
    known, allowed = schema_keys(), tuple(allowed)
    errors = []
    for key in leaves(cfg):
        if key in known:
            continue
        if any(fnmatch.fnmatchcase(key, pat) or fnmatch.fnmatchcase(key, pat + ".*") for pat in allowed):
            continue
        errors.append(
            f"unknown key '{key}' in recipe '{recipe}' ({os.path.relpath(recipe_dir(recipe), ROOT)}/config.yaml or "
            f"recipes/base.yaml): neither verl's ppo_trainer schema nor base.yaml's {PROJECT_SECTION} section "
            "defines it (check the spelling)"
        )
    return errors


# ---------------------------------------------------------------------------------------------- values
def resolution_errors(cfg) -> list[str]:
    """Values that do not resolve, one message per key that reads a knob (``${oc.env:MODEL}`` unset, a bad
    value for a ``vj.*`` resolver); keys that only refer to such a key are not repeated."""
    from omegaconf import OmegaConf

    errors, readers = [], []
    for key, raw in leaves(cfg).items():
        try:
            OmegaConf.select(cfg, key)
        except Exception as e:
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            msg = re.sub(r"^\w+ raised while resolving interpolation: ", "", msg).strip('"')
            m = re.match(r"Environment variable '([^']+)' not found", msg)
            if m:
                msg = f"the environment variable {m.group(1)} is not set (set it, or pass {key}=...)"
            errors.append(f"{key}: {msg}")
            if re.search(r"\$\{(oc\.env|vj\.)", str(raw)):
                readers.append(errors[-1])
    return readers or errors


def value_errors(cfg) -> list[str]:
    """Values out of range (``VALUE_RULES``), reward options and ``verl_judge`` settings refused; one message each."""
    errors = []
    for key, kind, optional, when in VALUE_RULES:
        v, (requirement, ok) = _select(cfg, key, UNSET, UNSET), RANGES[kind]
        if all(_select(cfg, w) is True for w in when) and v is not UNSET and not (v is None and optional) and not ok(v):
            errors.append(f"{key}={v!r}: must be {requirement}")
    errors += reward_option_errors(cfg) + train_hooks.settings_errors(cfg) + watchdog_errors(cfg)
    return errors + group_reward_errors(cfg) + reward_call_errors(cfg)


#: what verl 0.9.1's per-sample reward managers (naive, dapo, limited, gdpo) pass the reward function, by keyword;
#: with a reward model enabled, also the router's address and the judge's tokenizer; reward_kwargs are merged in
PER_SAMPLE_CALL = ("data_source", "solution_str", "ground_truth", "extra_info")
ROUTER_KWARGS = ("reward_router_address", "reward_model_tokenizer")


def reward_call_errors(cfg) -> list[str]:
    """A reward function of this repository that verl could not call at step 1: not callable, or a signature that
    does not take verl's keyword call (``PER_SAMPLE_CALL``, the router's kwargs, ``reward_kwargs``). The group
    reward manager calls its function its own way (``group_reward_errors``)."""
    sel = functools.partial(_select, cfg)
    fn, name = reward_function(cfg), sel("reward.custom_reward_function.name")
    if fn is None:
        return []
    where = f"reward.custom_reward_function: {name} of {sel('reward.custom_reward_function.path')}"
    if not callable(fn):
        return [f"{where} is a {type(fn).__name__}, not a function verl can call"]
    if sel("reward.reward_manager.source") == "importlib" or sel("reward.reward_manager.name") == "pairwise_group":
        return []
    kwargs = dict.fromkeys(PER_SAMPLE_CALL)
    kwargs.update(dict.fromkeys(ROUTER_KWARGS) if sel("reward.reward_model.enable") else {})
    kwargs.update(sel("reward.custom_reward_function.reward_kwargs") or {})
    try:
        inspect.signature(fn).bind(**kwargs)
    except TypeError as e:
        return [
            f"{where} cannot take verl's call {name}({', '.join(f'{k}=...' for k in kwargs)}): {e}; a reward is "
            "compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs)"
        ]
    except ValueError:  # no signature to read (a builtin): verl's first call says
        pass
    return []


#: ``verl_judge.group_reward.timeout``'s range, in seconds: an answer waits this long for its GRPO group mates, which
#: finish generating at different times (the agent loop streams each answer to the reward as it ends); at most the
#: stall watchdog's shortest step limit by default (``min_step_s``, ``scripts/launch/stall.py``), so that a lost
#: rollout's group is scored as it stands before the watchdog stops the run
GROUP_TIMEOUT_S = (10.0, stall.DEFAULTS["min_step_s"])
GROUP_MANAGER_FILE = os.path.join(ROOT, "scripts", "train", "group_reward.py")
GROUP_MANAGER = (
    "reward.reward_manager.source=importlib reward.reward_manager.name=GroupRewardManager "
    "reward.reward_manager.module.path=pkg://scripts.train.group_reward"
)
CONTRACT = 'recipes/README.md, "Group rewards"'


UNSET = object()


def _select(cfg, key: str, default=None, unresolved=None):
    """The value at ``key`` (a node as plain containers); ``default`` where it is absent or missing (``???``),
    ``unresolved`` where it does not resolve (an interpolation that does not resolve is reported by
    ``resolution_errors``)."""
    from omegaconf import OmegaConf

    try:
        value = OmegaConf.select(cfg, key, default=default)
        return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
    except Exception:
        return unresolved


def _same_file(path, target: str) -> bool:
    f = resolve_module_file(str(path)) if path else None
    return f is not None and os.path.realpath(f) == os.path.realpath(target)


def group_only(fn, reward_kwargs: dict) -> bool:
    """Whether the reward function ``fn`` scores only a whole group with these ``reward_kwargs``: its own
    ``group_only(**reward_kwargs)`` where it scores one sample too, else whether it takes ``solution_strs`` and no
    ``solution_str`` (the contract: ``scripts/train/group_reward.py``)."""
    params = inspect.signature(fn).parameters
    if "solution_strs" not in params:
        return False
    ask = getattr(fn, "group_only", None)
    return bool(ask(**reward_kwargs)) if callable(ask) else "solution_str" not in params


def group_reward_errors(cfg) -> list[str]:
    """A group reward the run could not give: the group reward manager (``scripts/train/group_reward.py``) without
    ``reward.num_workers=1``, a group reward function, ``rollout.n >= 2`` or a non-REMAX estimator; a ``group_only``
    function under a manager that scores one sample alone; ``verl_judge.group_reward`` settings that change what the
    arm measures (each message says why)."""
    sel = functools.partial(_select, cfg)
    source, name = sel("reward.reward_manager.source"), sel("reward.reward_manager.name")
    grouped = (source == "register" and name == "pairwise_group") or (
        source == "importlib"
        and name == "GroupRewardManager"
        and _same_file(sel("reward.reward_manager.module.path"), GROUP_MANAGER_FILE)
    )
    fn_path, fn_name = sel("reward.custom_reward_function.path"), sel("reward.custom_reward_function.name")
    workers, fn = sel("reward.num_workers"), reward_function(cfg)
    fn = fn if callable(fn) else None  # reward_call_errors names a value that is no function
    kwargs = sel("reward.custom_reward_function.reward_kwargs") or {}
    errors = []
    if grouped and workers != 1:
        errors.append(
            f"reward.num_workers={workers}: the group reward manager ({name}) needs reward.num_workers=1 (the answers "
            "of a GRPO group must reach one reward worker)"
        )
    if grouped and not fn_path:
        errors.append(
            f"reward.custom_reward_function.path is unset: the group reward manager ({name}) calls a group "
            f"reward ({CONTRACT})"
        )
    elif grouped and fn is not None and "solution_strs" not in inspect.signature(fn).parameters:
        errors.append(
            f"reward.custom_reward_function: {fn_name} of {fn_path} is no group reward (it takes no solution_strs), "
            f"which the group reward manager ({name}) calls with every answer of a GRPO group ({CONTRACT})"
        )
    if not grouped and fn is not None and group_only(fn, kwargs):
        errors.append(
            f"reward.custom_reward_function: {fn_name} of {fn_path} with its reward_kwargs scores a whole GRPO group, "
            f"which reward manager {name!r} (source {source}) cannot gather: set {GROUP_MANAGER} reward.num_workers=1"
        )
    n = sel("actor_rollout_ref.rollout.n")
    counted = _count(n)  # else VALUE_RULES reports rollout.n
    if grouped and counted and n < 2:
        errors.append(
            f"actor_rollout_ref.rollout.n={n}: the group reward manager ({name}) scores each answer with its GRPO "
            "group mates and needs rollout.n >= 2 (with 1 every answer is a group of one, with no mate)"
        )
    estimator = str(sel("algorithm.adv_estimator") or "")
    if grouped and estimator == "remax":
        errors.append(
            "algorithm.adv_estimator=remax: REMAX's greedy baseline answer shares its prompt's uid, so the group "
            f"reward manager ({name}) would take it for a group mate (or score it alone after the group timeout): use "
            "grpo, or a reward manager that scores one sample at a time"
        )
    settings = sel("verl_judge.group_reward") or {}
    unknown = sorted(set(settings) - {"size", "timeout"})
    size, timeout = settings.get("size"), settings.get("timeout")
    if unknown:
        errors.append(f"verl_judge.group_reward: unknown setting(s) {unknown}; known: size, timeout")
    if size is not None and counted and (isinstance(size, bool) or size != n):
        errors.append(
            f"verl_judge.group_reward.size={size!r}: must be null or actor_rollout_ref.rollout.n ({n}): a smaller size "
            "splits every GRPO group, a larger one makes every group wait verl_judge.group_reward.timeout"
        )
    low, high = GROUP_TIMEOUT_S
    if "timeout" in settings and not (_number(timeout) and low <= timeout <= high):
        errors.append(
            f"verl_judge.group_reward.timeout={timeout!r}: must be a number of seconds in [{low:g}, {high:g}] (below, "
            "a mate still generating misses its group, scored without it; above, one lost rollout can hold its step "
            "past the stall watchdog's limit)"
        )
    return errors


def watchdog_errors(cfg) -> list[str]:
    """``verl_judge.watchdog`` settings the stall watchdog refuses (``stall.settings_errors``: not a number > 0,
    ``startup_s`` under a few seconds, ``min_step_s`` above ``step_s``) and an enabled watchdog with no step source
    (``trainer.logger`` without ``console`` and ``file``)."""
    settings, loggers = _select(cfg, "verl_judge.watchdog", None, UNSET), _select(cfg, "trainer.logger", None, UNSET)
    if UNSET in (settings, loggers):  # reported by resolution_errors
        return []
    return stall.settings_errors(settings or {}) or stall.source_errors(settings, loggers)


def batch_errors(cfg) -> list[str]:
    """Micro-batches that do not divide what each GPU gets (verl 0.9.1 asserts this only after start-up, in the
    first update): the actor's mini-batch, ``ppo_mini_batch_size * rollout.n / GPUs``, and a step's samples,
    ``train_batch_size * rollout.n / GPUs``, for the log-prob passes. Skipped with dynamic batch sizes."""
    get = functools.partial(_select, cfg)
    gpus = (get("trainer.n_gpus_per_node") or 0) * (get("trainer.nnodes") or 0)
    n, mini = get("actor_rollout_ref.rollout.n"), get("actor_rollout_ref.actor.ppo_mini_batch_size")
    batch = get("data.train_batch_size")
    if not all(isinstance(v, int) and v > 0 for v in (gpus, n, mini, batch)):
        return []
    errors, actor, step = [], f"the actor's mini-batch ({mini} x {n})", f"a step's samples ({batch} x {n})"
    for part, micro_name, dynamic, size, what in (
        ("actor", "ppo_micro_batch_size_per_gpu", "use_dynamic_bsz", mini * n, actor),
        ("rollout", "log_prob_micro_batch_size_per_gpu", "log_prob_use_dynamic_bsz", batch * n, step),
        ("ref", "log_prob_micro_batch_size_per_gpu", "log_prob_use_dynamic_bsz", batch * n, step),
    ):
        micro_key = f"actor_rollout_ref.{part}.{micro_name}"
        micro = get(micro_key)
        if not isinstance(micro, int) or get(f"actor_rollout_ref.{part}.{dynamic}"):
            continue
        if size % gpus or (size // gpus) % micro:
            errors.append(
                f"{micro_key}={micro} does not divide {what} over {gpus} GPU(s) = {size / gpus:g} a GPU: "
                "verl would stop at its first update; use a divisor of that"
            )
    return errors


# ---------------------------------------------------------------------------------------------- verl checks
@contextlib.contextmanager
def _quiet():
    out = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        warnings.simplefilter("ignore")
        yield


_BUILT: set = set()


def verl_checks(cfg) -> list[str]:
    """verl's own validate_config plus the dataclasses that instantiate on CPU."""
    from omegaconf import OmegaConf

    sel, errors = functools.partial(OmegaConf.select, cfg), []
    legacy = [k for k in LEGACY_TOP_LEVEL if k in cfg and _has_value(cfg[k])]
    for k in legacy:
        errors.append(f"legacy top-level '{k}' has values set; move them under reward.*")

    work = OmegaConf.create(OmegaConf.to_container(cfg, resolve=False))  # a copy verl may touch
    try:
        with _quiet():
            from verl.trainer.ppo.utils import need_critic, need_reference_policy
            from verl.utils.config import validate_config

            validate_config(work, use_reference_policy=need_reference_policy(work), use_critic=need_critic(work))
    except Exception as e:
        errors.append(f"verl validate_config: {type(e).__name__}: {' '.join(str(e).split())}")

    from verl.utils.config import omega_conf_to_dataclass

    targets = ["algorithm", "actor_rollout_ref.rollout", "reward.sandbox_fusion"]
    if sel("reward.reward_model.enable"):
        targets.append("reward.reward_model")
    model_path = str(sel("actor_rollout_ref.model.path") or "")
    if os.path.isdir(os.path.expanduser(model_path)):
        targets.append("actor_rollout_ref.model")  # loads the HF config + tokenizer: local folders only
    for key in targets:
        node = OmegaConf.select(work, key)
        memo = (key, json.dumps(OmegaConf.to_container(node, resolve=True), sort_keys=True, default=str))
        if memo in _BUILT:  # the HF model config loads config + tokenizer from disk: once per process
            continue
        try:
            with _quiet():
                omega_conf_to_dataclass(node)
            _BUILT.add(memo)
        except Exception as e:
            errors.append(f"{key}: cannot build verl's dataclass: {type(e).__name__}: {' '.join(str(e).split())[:500]}")

    rm = sel("reward.reward_manager")
    if rm.source == "register":
        try:
            with _quiet():
                from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls

                get_reward_manager_cls(rm.name)
        except Exception as e:
            errors.append(f"reward.reward_manager.name: '{rm.name}' is not a registered reward manager ({e})")
    elif rm.source != "importlib":
        errors.append(f"reward.reward_manager.source must be 'register' or 'importlib', got '{rm.source}'")
    if sel("reward.reward_model.enable") and OmegaConf.is_missing(sel("reward.reward_model.rollout"), "name"):
        errors.append("reward.reward_model.enable=True needs reward.reward_model.rollout.name (e.g. vllm)")
    if (
        sel("reward.reward_model.enable")
        and not sel("reward.reward_model.enable_resource_pool")
        and sel("trainer.use_v1")
        and sel("reward.custom_reward_function.path")
    ):
        errors.append(
            "colocated reward model + custom reward function + trainer.use_v1=True: verl 0.9.1's V1 trainer calls the "
            "reward function with prompts/responses only (KeyError 'data_source' at the first step); set "
            "trainer.use_v1=False (legacy trainer, whole batch) or reward.reward_model.enable_resource_pool=True"
        )
    if OmegaConf.is_missing(sel("actor_rollout_ref.rollout"), "name"):
        errors.append("actor_rollout_ref.rollout.name is not set (e.g. vllm)")
    return errors


def _has_value(node) -> bool:
    from omegaconf import DictConfig

    if isinstance(node, DictConfig):
        return any(_has_value(node[k]) for k in node.keys())
    return node is not None
