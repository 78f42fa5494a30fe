#!/usr/bin/env python3
"""Check a recipe config (or bare Hydra overrides) against verl 0.9.1's own ``ppo_trainer`` schema, on CPU.

Composes a recipe's ``recipes/<recipe>/config.yaml`` or verl's bare ``ppo_trainer.yaml`` with the overrides
(``config_compose.compose``), then runs the checks of ``scripts/launch/config_checks.py`` in order (unknown and
legacy keys, additions outside ``ALLOWED_ADDITIONS``, values out of range or that do not resolve, reward options,
micro-batches, verl's own ``validate_config``) and those of ``scripts/launch/config_paths.py`` (files that do not
exist, too few parquet rows).

    python -m scripts.launch.verl_config --recipe judge_pointwise data.train_files=a.parquet ...
    python -m scripts.launch.verl_config [--paths error|warn|off] [--overrides-file F] OVERRIDE ...
    python -m scripts.launch.verl_config --show trainer.logger data.train_files OVERRIDE ...

Exit 0 and ``CONFIG OK`` when valid; exit 1 with one ``CONFIG ERROR: ...`` line per problem. Python API:
``check(overrides, recipe=None) -> DictConfig`` (raises ``ConfigError``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Iterable, Sequence

from scripts.launch import config_checks, config_compose
from scripts.launch.config_paths import check_paths, data_rows_errors, label_errors


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
        errors += data_rows_errors(cfg) + label_errors(cfg)  # local files only: fatal in every mode
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
    ap.add_argument("overrides", nargs="*", help="Hydra overrides, as given to python -m scripts.train")
    recipe_help = "check recipes/<RECIPE>/config.yaml (name or folder); without it: verl's bare ppo_trainer config"
    ap.add_argument("--recipe", help=recipe_help)
    file_help = "file with one override per line (# comments)"
    ap.add_argument("--overrides-file", action="append", default=[], help=file_help)
    paths_help = "missing model/data/reward files: error (default), warn (e.g. paths only on a Ray cluster), off"
    ap.add_argument("--paths", choices=["error", "warn", "off"], default="error", help=paths_help)
    ap.add_argument("--allow", action="append", default=[], help="extra glob of keys that may be added with '+'")
    show_help = "print these keys of the composed config (an item with '=' is an override: a key has none)"
    ap.add_argument("--show", nargs="+", default=[], metavar="KEY", help=show_help)
    ap.add_argument("--quiet", "-q", action="store_true", help="print only errors")
    args = ap.parse_args(argv)

    overrides = list(args.overrides) + [k for k in args.show if "=" in k]  # overrides written after --show KEY ...
    shown = [k for k in args.show if "=" not in k]
    for f in args.overrides_file:
        overrides += [ln.strip() for ln in open(f, encoding="utf-8") if ln.strip() and not ln.lstrip().startswith("#")]
    notes: list[str] = []
    allowed = config_checks.ALLOWED_ADDITIONS + tuple(args.allow)
    try:
        cfg = check(overrides, paths=args.paths, allowed=allowed, notes=notes, recipe=args.recipe)
    except config_compose.ConfigError as e:
        for msg in e.errors:
            print(f"CONFIG ERROR: {msg}", file=sys.stderr)
        print(f"config check FAILED ({len(e.errors)} problem(s), {len(overrides)} overrides)", file=sys.stderr)
        return 1
    from omegaconf import OmegaConf

    for n in notes:
        print(f"CONFIG NOTE: {n}", file=sys.stderr)
    for key in shown:
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
