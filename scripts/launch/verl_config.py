#!/usr/bin/env python3
"""Check a recipe config (or bare Hydra overrides) against verl 0.9.1's own ``ppo_trainer`` schema, on CPU.

Composes, with the Hydra compose API and the *installed* verl, either a recipe's
``recipes/<recipe>/config.yaml`` (``defaults: [ppo_trainer, base, _self_]``, found on
``scripts.launch.knobs.SEARCH_PATH`` as ``scripts/train/trainer.py`` finds them, with the ``vj.*`` resolvers) or verl's bare ``ppo_trainer.yaml``, applies the overrides, then fails
with a clear message on:

* a key verl does not define: in an override (Hydra struct error) or in the recipe's YAML files
  (only ``verl_judge.*`` keys declared in ``recipes/base.yaml`` and the additions below may be new);
* a ``+key`` / ``++key`` addition outside the allowlist ``ALLOWED_ADDITIONS`` (e.g.
  ``+actor_rollout_ref.model.override_config.*``, ``+reward.custom_reward_function.reward_kwargs.*``)
  and any ``~key`` deletion;
* any legacy top-level reward key (``reward_model.*``, ``custom_reward_function.*``,
  ``sandbox_fusion.*``): verl 0.9.1 reads reward settings under ``reward.*`` only;
* a value out of range (``VALUE_RULES``): GPU / node counts, batch sizes and ``rollout.n`` must be
  integers >= 1, ``gpu_memory_utilization`` in (0, 1], temperatures >= 0, the learning rate > 0;
* a ``reward_kwargs`` option its reward function refuses (its module's ``check_options``) and a ``verl_judge`` setting
  ``scripts/train/hooks.py`` refuses, both found by verl only at the first reward / in the trainer;
* a micro-batch that does not divide what each GPU gets (``batch_errors``), which verl itself finds only at its
  first update, after start-up;
* a value that does not resolve: a knob the config reads unset (``${oc.env:MODEL}``) or of a bad value;
* files that do not exist (``scripts/launch/config_paths.py``): model path, data files, judge model path,
  reward function file (or a ``pkg://`` module that cannot be found) and the function name inside it;

then runs verl's own ``validate_config``, instantiates the config dataclasses that build on CPU
(algorithm, rollout, model, reward model, sandbox), checks the reward manager is registered and
refuses a colocated judge on verl's V1 trainer.

    python -m scripts.launch.verl_config --recipe judge_pointwise data.train_files=a.parquet ...
    python -m scripts.launch.verl_config [--paths error|warn|off] [--overrides-file F] OVERRIDE ...
    python -m scripts.launch.verl_config --show trainer.logger data.train_files OVERRIDE ...

Exit 0 and ``CONFIG OK`` when valid; exit 1 with one ``CONFIG ERROR: ...`` line per problem.
Python API: ``check(overrides, recipe=None) -> DictConfig`` (raises ``ConfigError``),
``compose(overrides, recipe=None)``, ``value_errors(cfg)``.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import functools
import importlib.util
import io
import json
import math
import os
import re
import sys
import warnings
from typing import Iterable, Sequence

from scripts.launch import knobs
from scripts.launch.config_paths import check_paths, reward_option_errors
from scripts.train import hooks as train_hooks

ROOT, RECIPES = knobs.ROOT, knobs.RECIPES
#: The project's own section of a recipe config (read by scripts/train/hooks.py and scripts/launch/launcher.py).
PROJECT_SECTION = "verl_judge"

# Keys that may be *added* with `+key=value` (verl reads them but its yaml does not declare them).
ALLOWED_ADDITIONS: tuple[str, ...] = (
    # model config passed to transformers (e.g. attn_implementation=sdpa on machines without flash-attn)
    "actor_rollout_ref.model.override_config.*",
    "critic.model.override_config.*",
    # kwargs forwarded to the custom reward function (read by verl/trainer/ppo/reward.py)
    "reward.custom_reward_function.reward_kwargs",
    "reward.custom_reward_function.reward_kwargs.*",
    # `rate_limited` reward manager (verl/experimental/reward_loop/reward_manager/limited.py)
    "reward.max_concurrent",
    "reward.max_rpm",
    "reward.max_tpm",
    "reward.estimated_tokens_per_request",
    "reward.timeout",
    # engine kwargs for vLLM / SGLang
    "actor_rollout_ref.rollout.engine_kwargs.*",
    "reward.reward_model.rollout.engine_kwargs.*",
    # ray.init kwargs
    "ray_kwargs.ray_init.*",
)

LEGACY_TOP_LEVEL = ("reward_model", "custom_reward_function", "sandbox_fusion")

# Value ranges verl does not check itself (a negative GPU count or temperature, a memory share of 1.5
# would otherwise start a run). (key, kind, None allowed, keys that must all be true for the rule to apply)
COUNT, FRACTION, NON_NEGATIVE, POSITIVE = "count", "fraction", "non_negative", "positive"
REQUIREMENT = {COUNT: "an integer >= 1", FRACTION: "a number in (0, 1]", NON_NEGATIVE: "a number >= 0",
               POSITIVE: "a number > 0"}
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


class ConfigError(Exception):
    """One or more problems with a set of overrides; ``.errors`` holds one message per problem."""

    def __init__(self, errors: Sequence[str]):
        self.errors = list(errors)
        super().__init__("\n".join(self.errors))


def verl_config_dir() -> str:
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.origin:
        raise ConfigError(["verl is not importable by this interpreter (" + sys.executable + ")"])
    return os.path.join(os.path.dirname(spec.origin), "trainer", "config")


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


@contextlib.contextmanager
def _quiet():
    buf_out, buf_err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with contextlib.redirect_stdout(buf_out), contextlib.redirect_stderr(buf_err):
            yield buf_out


def recipe_dir(recipe: str) -> str:
    """A recipe name (``recipes/<name>``) or a folder, as the absolute folder holding its config.yaml."""
    d = os.path.abspath(recipe if os.sep in recipe or os.path.isdir(recipe) else os.path.join(RECIPES, recipe))
    if not os.path.isfile(os.path.join(d, "config.yaml")):
        raise ConfigError([f"recipe '{recipe}': no config.yaml in {d}"])
    return d


def compose(overrides: Sequence[str], recipe: str | None = None):
    """The recipe's config (``recipes/<recipe>/config.yaml``) or, without a recipe, verl's bare
    ``ppo_trainer`` config, with the overrides applied (struct mode: unknown keys raise)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    if recipe is None:
        config_dir, name, extra = verl_config_dir(), "ppo_trainer", []
    else:
        config_dir, name, extra = recipe_dir(recipe), "config", [knobs.SEARCH_PATH]
    knobs.register()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=config_dir, version_base=None):
            return hydra_compose(config_name=name, overrides=[*extra, *overrides])
    except ConfigError:
        raise
    except Exception as e:
        msg = " ".join(str(e).split())
        m = re.search(r"Could not override '([^']+)'", msg)
        if m:
            msg = f"unknown key '{m.group(1)}': not in verl's ppo_trainer schema (check the spelling)"
        raise ConfigError([msg]) from None
    finally:
        GlobalHydra.instance().clear()


def leaf_keys(node, prefix: str = "") -> list[str]:
    """Dotted paths of the leaves of a config (an empty mapping counts as a leaf), unresolved."""
    from omegaconf import OmegaConf

    data = OmegaConf.to_container(node, resolve=False) if OmegaConf.is_config(node) else node
    out = []
    for k, v in data.items():
        path = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out += leaf_keys(v, path + ".")
        else:
            out.append(path)
    return out


@functools.lru_cache(maxsize=None)
def schema_keys() -> frozenset:
    """Every key of verl's ppo_trainer config plus the ``verl_judge`` keys recipes/base.yaml declares."""
    from omegaconf import OmegaConf

    keys = set(leaf_keys(compose([])))
    base = OmegaConf.load(os.path.join(RECIPES, "base.yaml"))
    keys |= {f"{PROJECT_SECTION}.{k}" for k in leaf_keys(base.get(PROJECT_SECTION) or {})}
    return frozenset(keys)


def unknown_recipe_keys(cfg, recipe: str, allowed: Iterable[str] = ALLOWED_ADDITIONS) -> list[str]:
    """Keys a recipe's YAML files add that neither verl nor recipes/base.yaml define (typos)."""
    known, allowed = schema_keys(), tuple(allowed)
    errors = []
    for key in leaf_keys(cfg):
        if key in known:
            continue
        if any(fnmatch.fnmatchcase(key, pat) or fnmatch.fnmatchcase(key, pat + ".*") for pat in allowed):
            continue
        errors.append(
            f"unknown key '{key}' in recipe '{recipe}' ({os.path.relpath(recipe_dir(recipe), ROOT)}/config.yaml or "
            f"recipes/base.yaml): neither verl's ppo_trainer schema nor base.yaml's {PROJECT_SECTION} section defines it "
            "(check the spelling)"
        )
    return errors


def resolution_errors(cfg) -> list[str]:
    """Values that do not resolve, one message per key that reads a knob (``${oc.env:MODEL}`` unset, a bad
    value for a ``vj.*`` resolver); keys that only refer to such a key are not repeated."""
    from omegaconf import OmegaConf

    errors, readers, tree = [], [], OmegaConf.to_container(cfg, resolve=False)
    for key in leaf_keys(cfg):
        try:
            OmegaConf.select(cfg, key)
        except Exception as e:
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            msg = re.sub(r"^\w+ raised while resolving interpolation: ", "", msg).strip('"')
            m = re.match(r"Environment variable '([^']+)' not found", msg)
            if m:
                msg = f"the environment variable {m.group(1)} is not set (set it, or pass {key}=...)"
            errors.append(f"{key}: {msg}")
            raw = tree
            for part in key.split("."):
                raw = raw[part]
            if re.search(r"\$\{(oc\.env|vj\.)", str(raw)):
                readers.append(errors[-1])
    return readers or errors


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def value_errors(cfg) -> list[str]:
    """Values out of range (``VALUE_RULES``), reward options and ``verl_judge`` settings refused; one message each."""
    from omegaconf import OmegaConf

    missing = object()
    errors = []
    for key, kind, optional, when in VALUE_RULES:
        if not all(OmegaConf.select(cfg, w, default=None) is True for w in when):
            continue
        try:
            v = OmegaConf.select(cfg, key, default=missing)
        except Exception:  # an interpolation that does not resolve: verl's own checks report it
            continue
        if v is missing or (v is None and optional):
            continue
        if kind == COUNT:
            ok = isinstance(v, int) and not isinstance(v, bool) and v >= 1
        elif kind == FRACTION:
            ok = _number(v) and 0 < v <= 1
        elif kind == NON_NEGATIVE:
            ok = _number(v) and v >= 0
        else:
            ok = _number(v) and v > 0
        if not ok:
            errors.append(f"{key}={v!r}: must be {REQUIREMENT[kind]}")
    return errors + reward_option_errors(cfg) + train_hooks.settings_errors(cfg)


def batch_errors(cfg) -> list[str]:
    """Micro-batches that do not divide what each GPU gets (verl 0.9.1 asserts this only after start-up, in the
    first update): the actor's mini-batch, ``ppo_mini_batch_size * rollout.n / GPUs``, and a step's samples,
    ``train_batch_size * rollout.n / GPUs``, for the log-prob passes. Skipped with dynamic batch sizes."""
    from omegaconf import OmegaConf

    def get(key):
        try:
            return OmegaConf.select(cfg, key, default=None)
        except Exception:  # an interpolation that does not resolve: reported elsewhere
            return None

    gpus = (get("trainer.n_gpus_per_node") or 0) * (get("trainer.nnodes") or 0)
    n, mini, batch = get("actor_rollout_ref.rollout.n"), get("actor_rollout_ref.actor.ppo_mini_batch_size"), get("data.train_batch_size")
    if not all(isinstance(v, int) and v > 0 for v in (gpus, n, mini, batch)):
        return []
    errors = []
    for micro_key, size, what in (
            ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", mini * n, f"the actor's mini-batch ({mini} x {n})"),
            ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", batch * n, f"a step's samples ({batch} x {n})"),
            ("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", batch * n, f"a step's samples ({batch} x {n})")):
        micro, dynamic = get(micro_key), get(micro_key.rsplit(".", 1)[0] + (".use_dynamic_bsz" if "actor." in micro_key else ".log_prob_use_dynamic_bsz"))
        if not isinstance(micro, int) or dynamic:
            continue
        if size % gpus or (size // gpus) % micro:
            errors.append(f"{micro_key}={micro} does not divide {what} over {gpus} GPU(s) = {size / gpus:g} a GPU: "
                          "verl would stop at its first update; use a divisor of that")
    return errors


# ---------------------------------------------------------------------------------------------- verl checks
_BUILT: set = set()


def verl_checks(cfg) -> list[str]:
    """verl's own validate_config plus the dataclasses that instantiate on CPU."""
    from omegaconf import OmegaConf

    errors = []
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
    if OmegaConf.select(cfg, "reward.reward_model.enable"):
        targets.append("reward.reward_model")
    model_path = str(OmegaConf.select(cfg, "actor_rollout_ref.model.path") or "")
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

    rm = OmegaConf.select(cfg, "reward.reward_manager")
    if rm.source == "register":
        try:
            with _quiet():
                from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls

                get_reward_manager_cls(rm.name)
        except Exception as e:
            errors.append(f"reward.reward_manager.name: '{rm.name}' is not a registered reward manager ({e})")
    elif rm.source != "importlib":
        errors.append(f"reward.reward_manager.source must be 'register' or 'importlib', got '{rm.source}'")
    if OmegaConf.select(cfg, "reward.reward_model.enable") and OmegaConf.is_missing(
        OmegaConf.select(cfg, "reward.reward_model.rollout"), "name"
    ):
        errors.append("reward.reward_model.enable=True needs reward.reward_model.rollout.name (e.g. vllm)")
    if (OmegaConf.select(cfg, "reward.reward_model.enable") and not OmegaConf.select(cfg, "reward.reward_model.enable_resource_pool")
            and OmegaConf.select(cfg, "trainer.use_v1") and OmegaConf.select(cfg, "reward.custom_reward_function.path")):
        errors.append(
            "colocated reward model + custom reward function + trainer.use_v1=True: verl 0.9.1's V1 trainer calls the "
            "reward function with prompts/responses only (KeyError 'data_source' at the first step); set "
            "trainer.use_v1=False (legacy trainer, whole batch) or reward.reward_model.enable_resource_pool=True"
        )
    if OmegaConf.is_missing(OmegaConf.select(cfg, "actor_rollout_ref.rollout"), "name"):
        errors.append("actor_rollout_ref.rollout.name is not set (e.g. vllm)")
    return errors


def _has_value(node) -> bool:
    from omegaconf import DictConfig

    if isinstance(node, DictConfig):
        return any(_has_value(node[k]) for k in node.keys())
    return node is not None


# ---------------------------------------------------------------------------------------------- entry
def check(
    overrides: Sequence[str],
    paths: str = "error",
    allowed: Iterable[str] = ALLOWED_ADDITIONS,
    notes: list | None = None,
    recipe: str | None = None,
):
    """Compose (the recipe's config, or verl's bare ppo_trainer) + validate; returns the composed
    DictConfig or raises ConfigError (all problems of a stage at once)."""
    errors = check_override_keys(overrides, allowed)
    if errors:
        raise ConfigError(errors)
    cfg = compose(overrides, recipe)
    errors = unknown_recipe_keys(cfg, recipe, allowed) if recipe is not None else []
    unresolved = resolution_errors(cfg)
    if unresolved:  # the checks below would only trip over the same values
        raise ConfigError(errors + unresolved)
    values = value_errors(cfg)
    errors += values
    if paths != "off":
        perr, pnotes = check_paths(cfg)
        if paths == "error":
            errors += perr
        else:
            pnotes = [f"(not fatal, --paths {paths}) {e}" for e in perr] + pnotes
        if notes is not None:
            notes.extend(pnotes)
    if not values:  # verl's own checks may crash on such values (n_gpus_per_node=0: ZeroDivisionError)
        errors += batch_errors(cfg) + verl_checks(cfg)
    if errors:
        raise ConfigError(errors)
    return cfg


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Allowed '+' additions: " + ", ".join(ALLOWED_ADDITIONS),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("overrides", nargs="*", help="Hydra overrides, as given to python -m scripts.train / verl.trainer.main_ppo")
    ap.add_argument("--recipe", help="check recipes/<RECIPE>/config.yaml (name or folder) with the overrides; "
                                     "without it: verl's bare ppo_trainer config")
    ap.add_argument("--overrides-file", action="append", default=[], help="file with one override per line (# comments)")
    ap.add_argument(
        "--paths",
        choices=["error", "warn", "off"],
        default="error",
        help="missing model/data/reward files: error (default), warn (e.g. paths that exist only on a Ray cluster), off",
    )
    ap.add_argument("--allow", action="append", default=[], help="extra glob of keys that may be added with '+'")
    ap.add_argument("--show", nargs="+", default=[], metavar="KEY", help="print these keys of the composed config")
    ap.add_argument("--quiet", "-q", action="store_true", help="print only errors")
    args = ap.parse_args(argv)

    overrides = list(args.overrides)
    for f in args.overrides_file:
        overrides += [ln.strip() for ln in open(f, encoding="utf-8") if ln.strip() and not ln.lstrip().startswith("#")]
    notes: list[str] = []
    try:
        cfg = check(overrides, paths=args.paths, allowed=ALLOWED_ADDITIONS + tuple(args.allow), notes=notes,
                    recipe=args.recipe)
    except ConfigError as e:
        for msg in e.errors:
            print(f"CONFIG ERROR: {msg}", file=sys.stderr)
        print(f"config check FAILED ({len(e.errors)} problem(s), {len(overrides)} overrides)", file=sys.stderr)
        return 1
    from omegaconf import OmegaConf

    for n in notes:
        print(f"CONFIG NOTE: {n}", file=sys.stderr)
    for key in args.show:
        val = OmegaConf.select(cfg, key, default="<missing>")
        if OmegaConf.is_config(val):
            val = OmegaConf.to_container(val, resolve=False)
        print(f"{key} = {val}")
    if not args.quiet:
        what = f"recipe {args.recipe} with {len(overrides)} overrides" if args.recipe else f"{len(overrides)} overrides"
        print(f"CONFIG OK: {what} compose and validate against verl's ppo_trainer schema")
    return 0


if __name__ == "__main__":
    sys.exit(main())
