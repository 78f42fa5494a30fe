"""The command line both workflows share (no command of its own; used by ``python -m scripts.pipeline`` and
``python -m scripts.lab.policy_learns``): the judge stages' options, the checks of the arguments, and the run
(``stages.Stages``) a workflow gets.

    args = cli.parse(parser, argv)            # argparse options; args.overrides: the Hydra overrides
    flow = cli.run_of(args)                   # the run folder, environment and interpreter of every stage
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import scripts
from scripts.launch import knobs
from scripts.workflows.stages import Stages


def add_judge_args(p: argparse.ArgumentParser) -> None:
    """The judge stages' options (``scripts.pipeline`` and ``scripts.lab.policy_learns``)."""
    p.add_argument("--out", required=True, help="run folder (stages resume from it)")
    p.add_argument(
        "--sft", action=argparse.BooleanOptionalAction, default=True, help="warm start with SFT (default on)"
    )
    p.add_argument("--sft-rows", type=int, default=4000, help="SFT rows (default 4000)")
    p.add_argument("--sft-epochs", type=int, default=1)
    p.add_argument("--sft-steps", type=int, default=100, help="SFT optimizer steps (0 = the whole epoch; default 100)")
    p.add_argument("--sft-batch", type=int, default=32)
    p.add_argument("--sft-lr", type=float, default=2e-5)
    p.add_argument(
        "--sft-override", action="append", default=[], metavar="KEY=VALUE", help="extra SFT trainer override"
    )
    p.add_argument(
        "--model-solutions",
        metavar="JSONL|base|none",
        default=None,
        help="also train on a model's own GSM8K answers, graded by final answer: a scripts.eval.gsm8k "
        "samples.jsonl, or 'base' = stage 'samples' asks the start model (2 answers at temperature 1.0 to "
        "each of --model-solution-questions train questions); default: base for judge_to_reward, none for judge",
    )
    p.add_argument("--model-solution-questions", type=int, default=2000, help="'base': train questions asked (2000)")
    p.add_argument(
        "--sft-model",
        metavar="HF_DIR",
        help="start GRPO from this warm-started judge instead of training one (e.g. another run's "
        "sft/global_step_N/huggingface)",
    )
    p.add_argument(
        "--grpo-steps",
        type=int,
        default=None,
        help="GRPO steps after the warm start (0 = none; default 30, judge_to_reward: 0)",
    )
    p.add_argument(
        "--pair-groups",
        choices=("true", "false"),
        default="true",
        help="pairwise: both orders of a pair in one GRPO group (default true)",
    )
    p.add_argument("--max-prompt-length", type=int, default=1280)
    p.add_argument("--max-response-length", type=int, default=128)
    p.add_argument(
        "--eval-pairs",
        type=int,
        default=None,
        help="held-out pairs (pointwise: 2x rows) evaluated (default 300, judge_to_reward: 100)",
    )
    p.add_argument("--eval-gpu-mem", type=float, default=0.15)
    p.add_argument(
        "--parallel-eval",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="evaluate the start model beside the SFT stage and, in judge_to_reward, the trained judge beside the "
        "policy stage (default on; they share the GPU, the evaluator with a fixed KV cache)",
    )
    p.add_argument(
        "--eval-kv-cache-gb", type=float, default=None, help="fixed vLLM KV cache of the evaluator (GPU shared)"
    )
    p.add_argument(
        "--no-flash-attn", action="store_true", help="NO_FLASH_ATTN=1: torch SDPA attention, no remove-padding"
    )
    p.add_argument("--skip-eval", action="store_true", help="no evaluation stage at all")
    p.add_argument(
        "--eval-before", action=argparse.BooleanOptionalAction, default=True, help="evaluate the start model"
    )
    p.add_argument("--quiet", action="store_true", help="stage output only to the logs")


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """``parser``'s options; the rest must be Hydra overrides (``args.overrides``). Checks what both workflows
    take: a ``--model-solutions`` file exists, ``--sft-model`` is a model folder, the machine knobs are known, the
    memory and learning-rate numbers are finite and positive (``inf`` and ``nan`` are refused here, not mid-run)."""
    args, overrides = parser.parse_known_args(argv)
    bad = [o for o in overrides if "=" not in o or o.startswith("-")]
    if bad:
        parser.error(f"unrecognized arguments: {' '.join(bad)} (extra arguments are Hydra overrides KEY=VALUE)")
    args.overrides = overrides
    for flag, value, most in (
        ("--eval-kv-cache-gb", args.eval_kv_cache_gb, math.inf),
        ("--eval-gpu-mem", args.eval_gpu_mem, 1.0),
        ("--sft-lr", args.sft_lr, math.inf),
    ):
        if value is not None and not (0 < value <= most and math.isfinite(value)):
            parser.error(
                f"{flag} must be a finite number > 0{'' if most == math.inf else f' and <= {most:g}'}, got {value}"
            )
    if args.model_solutions not in (None, "base", "none") and not os.path.isfile(args.model_solutions):
        parser.error(f"--model-solutions {args.model_solutions}: no such file")
    if args.sft_model and not os.path.isfile(os.path.join(args.sft_model, "config.json")):
        parser.error(f"--sft-model {args.sft_model}: not a Hugging Face model folder (no config.json)")
    unknown = knobs.unknown(os.environ)
    if unknown:
        parser.error("; ".join(unknown))
    return args


def run_of(args: argparse.Namespace, **env: str) -> Stages:
    """The run of a workflow: ``--out``, the environment every stage gets (this repository on PYTHONPATH,
    ``--no-flash-attn``, ``env``), the interpreter (PYTHON, else this one) and ``--quiet``."""
    run_env = dict(os.environ, PYTHONPATH=scripts.ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), **env)
    if args.no_flash_attn:
        run_env["NO_FLASH_ATTN"] = "1"
    return Stages(args.out, run_env, os.environ.get("PYTHON") or sys.executable, args.quiet)
