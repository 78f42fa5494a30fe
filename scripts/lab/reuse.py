"""``--reuse`` of ``scripts.lab.policy_learns``: an experiment records the settings that make its stages
(``stage_settings.json``), and a new experiment links a finished one's stages (testbed, data, start policy, judge)
instead of making them again, once their settings match; torn or missing stages are made here. No command of its own:

    python -m scripts.lab.policy_learns --out runs/cost --reuse runs/card --arms rule,judge,route --steps 20
"""

from __future__ import annotations

import json
import os
import re
import shutil

from data_prep.files.outputs import write_json
from scripts.console import masked
from scripts.workflows.stages import Stages, say

#: what an experiment records of the settings that make the stages ``--reuse`` links (``stage_settings``)
SETTINGS_FILE = "stage_settings.json"
#: the options that make those stages: the testbed and the validation questions, the policy's warm start, the
#: judge's data, warm start, GRPO and evaluations (the runs' own options may differ: steps, arms, seeds, placement)
STAGE_OPTIONS = (
    "testbed",
    "testbed_arg",
    "eval_questions",
    "policy_sft_rows",
    "task",
    "model_solutions",
    "model_solution_questions",
    "sft",
    "sft_model",
    "sft_rows",
    "sft_epochs",
    "sft_steps",
    "sft_batch",
    "sft_lr",
    "sft_override",
    "grpo_steps",
    "pair_groups",
    "max_prompt_length",
    "max_response_length",
    "eval_pairs",
    "skip_eval",
    "eval_before",
)
#: a stage whose product is not the folder of its name (the folder that holds it first)
PRODUCTS = {"sft_data": os.path.join("data", "sft_train.parquet"), "merge": "hf"}


def stage_settings(cfg, env: dict) -> dict:
    """The settings that make the stages ``--reuse`` links, of the experiment's ``cfg`` (``policy_learns.Experiment``):
    ``STAGE_OPTIONS``, the start model (``MODEL``; "" for the default), GSM8K's folder with ``--testbed none``, the
    Hydra overrides when the judge has GRPO steps."""
    settings = {k: getattr(cfg, k) for k in STAGE_OPTIONS}
    settings["model"] = env.get("MODEL") or ""
    if cfg.testbed == "none":
        settings["gsm8k_dir"] = env.get("GSM8K_DIR") or ""
    if cfg.grpo_steps > 0:
        settings["judge_grpo_overrides"] = masked(list(cfg.overrides), env)  # recorded: credentials masked
    return json.loads(json.dumps(settings))  # as the record reads back (tuples as lists)


def record_settings(out: str, cfg, env: dict) -> None:
    """``SETTINGS_FILE`` in ``out``: written by the attempt that starts the folder, kept by the ones that resume it
    (its stages are that attempt's); a resume with other settings is told which."""
    path, now = os.path.join(out, SETTINGS_FILE), stage_settings(cfg, env)
    if os.path.exists(path):
        for diff in settings_differences(read_settings(path), now):
            say(f"WARNING: {out} was started with other settings; its finished stages keep theirs: {diff}")
        return
    os.makedirs(out, exist_ok=True)
    write_json(path, now)


def read_settings(path: str, what: str = "settings record") -> dict:
    """A JSON object (a settings record, a report); ``ValueError`` naming the file when it is not one."""
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a {what} ({e})") from None
    if not isinstance(record, dict):
        raise ValueError(f"{path}: not a {what} (a JSON object), got a {type(record).__name__}")
    return record


def settings_differences(there: dict, here: dict) -> list[str]:
    """``setting: X there, Y here`` for each setting the two records do not share."""
    missing = "(not recorded)"
    return [
        f"{k}: {json.dumps(there.get(k, missing))} there, {json.dumps(here.get(k, missing))} here"
        for k in sorted(there.keys() | here.keys(), key=lambda k: (k not in STAGE_OPTIONS, k))
        if there.get(k, missing) != here.get(k, missing)
    ]


def reuse_problems(src: str, cfg, env: dict) -> list[str]:
    """Why experiment ``src``'s stages cannot serve this one ([]: they can): no finished experiment there, or its
    recorded settings differ from these (each difference named)."""
    if not os.path.isfile(os.path.join(src, ".judge_model.done")):
        return [f"--reuse {src}: no finished experiment there (no .judge_model.done)"]
    path = os.path.join(src, SETTINGS_FILE)
    if not os.path.exists(path):  # made before experiments recorded them: said when the stages are linked
        return []
    try:
        there = read_settings(path)
    except ValueError as e:
        return [f"--reuse {src}: {e}"]
    diffs = settings_differences(there, stage_settings(cfg, env))
    return [f"--reuse {src}: its stages were made with other settings: {'; '.join(diffs)}"] if diffs else []


def _finished(folder: str) -> list[str]:
    """The stages marked done in ``folder`` (``.NAME.done``), sorted."""
    return [m[1:-5] for m in sorted(os.listdir(folder)) if m.startswith(".") and m.endswith(".done") and len(m) > 6]


def reuse(flow: Stages, src: str, arms) -> list[str]:
    """Every finished stage of experiment ``src`` but its GRPO runs (the testbed, the data, the start policy, the
    judge's stages), linked into this one with its ``.done`` marker, so that only the runs are made here. Returns
    the stages linked. Stages this folder has finished are kept. A stage marked done in ``src`` whose product is
    missing there is made here, and so is any stage whose product shares its folder with such a stage or with one
    finished here (``data`` holds stages ``data`` and ``sft_data``): nothing is ever written into ``src``. A
    half-written stage here (its folder without its ``.done`` marker: an interrupted attempt) is removed and replaced
    by the link. Each of these is said."""
    run_folders = re.compile(rf"(?:{'|'.join(arms)})(?:_s\d+)?")  # run_name's folders
    os.makedirs(flow.out, exist_ok=True)
    if not os.path.exists(os.path.join(src, SETTINGS_FILE)):
        say(
            f"WARNING: {src} records no settings ({SETTINGS_FILE}: made before experiments wrote it): its stages' "
            "settings are not compared with these; they must match"
        )
    stages = [n for n in _finished(src) if not run_folders.fullmatch(n)]
    here = set(_finished(flow.out))
    folder = lambda name: PRODUCTS.get(name, name).split(os.sep)[0]  # noqa: E731
    missing = {n for n in stages if not os.path.exists(os.path.join(src, PRODUCTS.get(n, n)))}
    kept = {folder(n) for n in missing | here}  # folders that stages made or finished here write into
    linked = []
    for name in stages:
        local, target = flow.path(folder(name)), os.path.realpath(os.path.join(src, folder(name)))
        if name in here:
            continue
        if name in missing:
            say(
                f"stage {name}: marked done in {src}, but {os.path.join(src, PRODUCTS.get(name, name))} is missing: "
                "made here"
            )
            continue
        if folder(name) in kept:
            say(f"stage {name}: made here, as {local} also holds a stage made or finished here")
            continue
        if os.path.lexists(local) and os.path.realpath(local) != target:
            say(f"stage {name}: {local} is half-written (no .{name}.done here): replaced by a link to {target}")
            if os.path.isdir(local) and not os.path.islink(local):
                shutil.rmtree(local)
            else:
                os.remove(local)
        if not os.path.lexists(local):
            os.symlink(target, local)
        shutil.copyfile(os.path.join(src, f".{name}.done"), flow.path(f".{name}.done"))
        linked.append(name)
    return linked
