"""The command line both workflows share (no command of its own; used by ``python -m scripts.pipeline`` and
``python -m scripts.lab.policy_learns``): the judge stages' options and their settings (``JudgeRun``), the checks of
the arguments, and the run (``stages.Stages``) a workflow gets.

    cli.add_options(parser, Settings)         # Settings: JudgeRun or a workflow's, which extends it
    ns = cli.parse(parser, argv)              # argparse options; ns.overrides: the Hydra overrides
    cfg = Settings.parsed(ns, rewards=...)    # the settings, built once, the defaults that depend on others resolved
    flow = cli.run_of(cfg)                    # the run folder, environment and interpreter of every stage
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
from typing import Any

import scripts
from scripts.launch import knobs
from scripts.workflows.stages import Stages


def option(**argparse_kw) -> Any:
    """A setting that is a command-line option: ``--<its name>``, with argparse's keywords (``add_options``)."""
    return dataclasses.field(metadata=argparse_kw)


def add_options(p: argparse.ArgumentParser, cls: type) -> None:
    """The options of settings ``cls``: its fields made by ``option``, in their order."""
    for f in dataclasses.fields(cls):
        if f.metadata:
            p.add_argument("--" + f.name.replace("_", "-"), **f.metadata)


@dataclasses.dataclass(frozen=True, kw_only=True)
class JudgeRun:
    """The judge stages' settings, which each workflow's own extend: their options, the judge task (``--task``; the
    lab's ``--judge-task``) and the Hydra overrides, each default resolved (``parsed``)."""

    out: str = option(required=True, help="run folder (stages resume from it)")
    sft: bool = option(action=argparse.BooleanOptionalAction, default=True, help="warm start with SFT (default on)")
    sft_rows: int = option(type=int, default=4000, help="SFT rows (default 4000)")
    sft_epochs: int = option(type=int, default=1)
    sft_steps: int = option(type=int, default=100, help="SFT optimizer steps (0 = the whole epoch; default 100)")
    sft_batch: int = option(type=int, default=32)
    sft_lr: float = option(type=float, default=2e-5)
    sft_override: tuple[str, ...] = option(
        action="append", default=[], metavar="KEY=VALUE", help="extra SFT trainer override"
    )
    model_solutions: str | None = option(  # parsed: a samples.jsonl, "base", or None (no model-written rows)
        metavar="JSONL|base|none",
        default=None,
        help="also train on a model's own GSM8K answers, graded by final answer: a scripts.eval.gsm8k "
        "samples.jsonl, or 'base' = stage 'samples' asks the start model (2 answers at temperature 1.0 to "
        "each of --model-solution-questions train questions); default: base for judge_to_reward, none for judge",
    )
    model_solution_questions: int = option(type=int, default=2000, help="'base': train questions asked (2000)")
    sft_model: str | None = option(
        metavar="HF_DIR",
        help="start GRPO from this warm-started judge instead of training one (e.g. another run's "
        "sft/global_step_N/huggingface)",
    )
    grpo_steps: int = option(
        type=int, default=None, help="GRPO steps after the warm start (0 = none; default 30, judge_to_reward: 0)"
    )
    pair_groups: str = option(
        choices=("true", "false"),
        default="true",
        help="pairwise: both orders of a pair in one GRPO group (default true)",
    )
    max_prompt_length: int = option(type=int, default=1280)
    max_response_length: int = option(type=int, default=128)
    eval_pairs: int = option(
        type=int, default=None, help="held-out pairs (pointwise: 2x rows) evaluated (default 300, judge_to_reward: 100)"
    )
    eval_gpu_mem: float = option(type=float, default=0.15)
    parallel_eval: bool = option(
        action=argparse.BooleanOptionalAction,
        default=True,
        help="evaluate the start model beside the SFT stage and, in judge_to_reward, the trained judge beside the "
        "policy stage (default on; they share the GPU, the evaluator with a fixed KV cache)",
    )
    eval_kv_cache_gb: float | None = option(
        type=float, default=None, help="fixed vLLM KV cache of the evaluator (GPU shared)"
    )
    no_flash_attn: bool = option(action="store_true", help="NO_FLASH_ATTN=1: torch SDPA attention, no remove-padding")
    skip_eval: bool = option(action="store_true", help="no evaluation stage at all")
    eval_before: bool = option(action=argparse.BooleanOptionalAction, default=True, help="evaluate the start model")
    quiet: bool = option(action="store_true", help="stage output only to the logs")
    task: str
    overrides: tuple[str, ...]

    @classmethod
    def parsed(cls, ns: argparse.Namespace, rewards: bool, **resolved) -> JudgeRun:
        """The settings of options ``ns`` (``parse``'s; lists as tuples), ``resolved`` replacing theirs. The options
        left unset get the defaults of a judge that ``rewards`` a policy (the start model's answers, no GRPO, 100
        held-out pairs), else of a judge alone (no model answers, 30 GRPO steps, 300 pairs); ``none`` is None."""
        values = {f.name: getattr(ns, f.name) for f in dataclasses.fields(cls)} | resolved
        for k, rewarding, alone in (("model_solutions", "base", None), ("grpo_steps", 0, 30), ("eval_pairs", 100, 300)):
            values[k] = (rewarding if rewards else alone) if values[k] is None else values[k]
        if values["model_solutions"] == "none":
            values["model_solutions"] = None
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """``parser``'s options; the rest must be Hydra overrides (``ns.overrides``). Checks what both workflows
    take: a ``--model-solutions`` file exists, ``--sft-model`` is a model folder, the machine knobs are known, the
    memory and learning-rate numbers are finite and positive (``inf`` and ``nan`` are refused here, not mid-run)."""
    ns, overrides = parser.parse_known_args(argv)
    bad = [o for o in overrides if "=" not in o or o.startswith("-")]
    if bad:
        parser.error(f"unrecognized arguments: {' '.join(bad)} (extra arguments are Hydra overrides KEY=VALUE)")
    ns.overrides = overrides
    for flag, value, most in (
        ("--eval-kv-cache-gb", ns.eval_kv_cache_gb, math.inf),
        ("--eval-gpu-mem", ns.eval_gpu_mem, 1.0),
        ("--sft-lr", ns.sft_lr, math.inf),
    ):
        if value is not None and not (0 < value <= most and math.isfinite(value)):
            parser.error(
                f"{flag} must be a finite number > 0{'' if most == math.inf else f' and <= {most:g}'}, got {value}"
            )
    if ns.model_solutions not in (None, "base", "none") and not os.path.isfile(ns.model_solutions):
        parser.error(f"--model-solutions {ns.model_solutions}: no such file")
    if ns.sft_model and not os.path.isfile(os.path.join(ns.sft_model, "config.json")):
        parser.error(f"--sft-model {ns.sft_model}: not a Hugging Face model folder (no config.json)")
    unknown = knobs.unknown(os.environ)
    if unknown:
        parser.error("; ".join(unknown))
    return ns


def run_of(cfg: JudgeRun, **env: str) -> Stages:
    """The run of a workflow: ``--out``, the environment every stage gets (this repository on PYTHONPATH,
    ``--no-flash-attn``, ``env``), the interpreter (PYTHON, else this one) and ``--quiet``."""
    run_env = dict(os.environ, PYTHONPATH=scripts.ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), **env)
    if cfg.no_flash_attn:
        run_env["NO_FLASH_ATTN"] = "1"
    return Stages(cfg.out, run_env, os.environ.get("PYTHON") or sys.executable, cfg.quiet)
