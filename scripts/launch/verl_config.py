#!/usr/bin/env python3
"""Check a recipe config (or bare Hydra overrides) against verl 0.9.1's own ``ppo_trainer`` schema, on CPU.

Composes, with the Hydra compose API and the *installed* verl, either a recipe's
``recipes/<recipe>/config.yaml`` (``defaults: [ppo_trainer, base, _self_]``, found on
``scripts.launch.knobs.SEARCH_PATH`` as ``scripts/train/trainer.py`` finds them, with the ``vj.*`` resolvers) or
verl's bare ``ppo_trainer.yaml``, applies the overrides, then fails with a clear message on:

* a key verl does not define: in an override (Hydra struct error) or in the recipe's YAML files
  (only ``verl_judge.*`` keys declared in ``recipes/base.yaml`` and the additions below may be new);
* a ``+key`` / ``++key`` addition outside the allowlist ``config_checks.ALLOWED_ADDITIONS`` (e.g.
  ``+actor_rollout_ref.model.override_config.*``, ``+reward.custom_reward_function.reward_kwargs.*``)
  and any ``~key`` deletion;
* any legacy top-level reward key (``reward_model.*``, ``custom_reward_function.*``,
  ``sandbox_fusion.*``): verl 0.9.1 reads reward settings under ``reward.*`` only;
* a value out of range (``config_checks.VALUE_RULES``): GPU / node counts, batch sizes and ``rollout.n`` must be
  integers >= 1, ``gpu_memory_utilization`` in (0, 1], temperatures >= 0, the learning rate > 0;
* a ``reward_kwargs`` option its reward function refuses (its module's ``check_options``) and a ``verl_judge`` setting
  ``scripts/train/hooks.py`` refuses, both found by verl only at the first reward / in the trainer;
* a micro-batch that does not divide what each GPU gets (``config_checks.batch_errors``), which verl itself finds only
  at its first update, after start-up;
* a value that does not resolve: a knob the config reads unset (``${oc.env:MODEL}``) or of a bad value;
* files that do not exist (``scripts/launch/config_paths.py``): model path, data files, judge model path,
  reward function file (or a ``pkg://`` module that cannot be found) and the function name inside it;
* local training parquet(s) with fewer rows than ``data.train_batch_size`` (verl: ``Train dataloader is empty!``) or
  validation parquet(s) with no row;

then runs verl's own ``validate_config``, instantiates the config dataclasses that build on CPU
(algorithm, rollout, model, reward model, sandbox), checks the reward manager is registered and
refuses a colocated judge on verl's V1 trainer.

    python -m scripts.launch.verl_config --recipe judge_pointwise data.train_files=a.parquet ...
    python -m scripts.launch.verl_config [--paths error|warn|off] [--overrides-file F] OVERRIDE ...
    python -m scripts.launch.verl_config --show trainer.logger data.train_files OVERRIDE ...

Exit 0 and ``CONFIG OK`` when valid; exit 1 with one ``CONFIG ERROR: ...`` line per problem.
Python API: ``check(overrides, recipe=None) -> DictConfig`` (raises ``ConfigError``); the stages it runs are in
``scripts/launch/config_checks.py`` (``value_errors(cfg)`` ...), the composing in ``scripts/launch/config_compose.py``
(``compose(overrides, recipe=None)``, ``ConfigError``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Iterable, Sequence

from scripts.launch import config_checks, config_compose
from scripts.launch.config_paths import check_paths, data_rows_errors


def check(
    overrides: Sequence[str],
    paths: str = "error",
    allowed: Iterable[str] = config_checks.ALLOWED_ADDITIONS,
    notes: list | None = None,
    recipe: str | None = None,
):
    """Compose (the recipe's config, or verl's bare ppo_trainer) + validate; returns the composed
    DictConfig or raises ConfigError (all problems of a stage at once)."""
    errors = config_checks.check_override_keys(overrides, allowed)
    if errors:
        raise config_compose.ConfigError(errors)
    cfg = config_compose.compose(overrides, recipe)
    errors = config_checks.unknown_recipe_keys(cfg, recipe, allowed) if recipe is not None else []
    unresolved = config_checks.resolution_errors(cfg)
    if unresolved:  # the checks below would only trip over the same values
        raise config_compose.ConfigError(errors + unresolved)
    values = config_checks.value_errors(cfg)
    errors += values
    if paths != "off":
        perr, pnotes = check_paths(cfg)
        errors += data_rows_errors(cfg)  # local files only: fatal in every mode
        if paths == "error":
            errors += perr
        else:
            pnotes = [f"(not fatal, --paths {paths}) {e}" for e in perr] + pnotes
        if notes is not None:
            notes.extend(pnotes)
    if not values:  # verl's own checks may crash on such values (n_gpus_per_node=0: ZeroDivisionError)
        errors += config_checks.batch_errors(cfg) + config_checks.verl_checks(cfg)
    if errors:
        raise config_compose.ConfigError(errors)
    return cfg


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Allowed '+' additions: " + ", ".join(config_checks.ALLOWED_ADDITIONS),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "overrides", nargs="*", help="Hydra overrides, as given to python -m scripts.train / verl.trainer.main_ppo"
    )
    ap.add_argument(
        "--recipe",
        help="check recipes/<RECIPE>/config.yaml (name or folder) with the overrides; "
        "without it: verl's bare ppo_trainer config",
    )
    ap.add_argument(
        "--overrides-file", action="append", default=[], help="file with one override per line (# comments)"
    )
    ap.add_argument(
        "--paths",
        choices=["error", "warn", "off"],
        default="error",
        help="missing model/data/reward files: error (default), warn (e.g. paths that exist only on a Ray cluster), "
        "off",
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
        cfg = check(
            overrides,
            paths=args.paths,
            allowed=config_checks.ALLOWED_ADDITIONS + tuple(args.allow),
            notes=notes,
            recipe=args.recipe,
        )
    except config_compose.ConfigError as e:
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
