"""Compose a recipe's Hydra config (or verl 0.9.1's bare ``ppo_trainer``) on CPU, as the trainer will see it.

``compose(overrides, recipe=None)``: ``recipes/<recipe>/config.yaml`` (found on ``knobs.SEARCH_PATH``, with the
``vj.*`` resolvers) or verl's bare ``ppo_trainer.yaml`` with the overrides in struct mode; every problem is a
``ConfigError``. No command of its own; used by the config check and the launcher:

    from scripts.launch.config_compose import compose; cfg = compose(["trainer.nnodes=1"], "gsm8k_rule")
"""

from __future__ import annotations

import fnmatch
import importlib.util
import os
import re
import sys
from typing import Sequence

from scripts.launch import knobs

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


def recipe_dir(recipe: str) -> str:
    """A recipe name (``recipes/<name>``) or a folder, as the absolute folder holding its config.yaml."""
    d = os.path.abspath(recipe if os.sep in recipe or os.path.isdir(recipe) else os.path.join(knobs.RECIPES, recipe))
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
        if m and any(fnmatch.fnmatchcase(m.group(1), pattern) for pattern in ALLOWED_ADDITIONS):
            key = m.group(1)
            msg = (
                f"'{key}' is not in verl's ppo_trainer schema, so it must be added: +{key}=... adds it, "
                f"++{key}=... adds or replaces it"
            )
        elif m:
            msg = f"unknown key '{m.group(1)}': not in verl's ppo_trainer schema (check the spelling)"
        raise ConfigError([msg]) from None
    finally:
        GlobalHydra.instance().clear()
