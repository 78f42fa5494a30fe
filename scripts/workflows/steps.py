"""The stage bodies the workflows share that need none of their settings, each a plain function of the run
(``stages.Stages``) and its step's paths: it runs one command and writes its output where it is told (the bodies that
read the settings are ``scripts.workflows.pipeline``'s). Wired by it and ``scripts.lab.policy_learns``.

    steps.merge(flow, checkpoints=flow.path("grpo"), target=flow.path("hf"))
"""

from __future__ import annotations

import functools
import glob
import json
import os
import time

from reward_fns import verdicts
from scripts.launch import defaults, knobs
from scripts.report.render import md_table, read_metrics
from scripts.workflows.stages import Stages, say

SHARED_KV_CACHE_GB = 4.0  # an evaluator beside a training stage: ~170k tokens of KV cache for a 135M judge


def start_model(env: dict) -> str:
    """The start model (judge and policy): MODEL, else the offline SmolLM2-135M-Instruct, materialised once."""
    return _start_model(env.get("MODEL") or "")


@functools.lru_cache(maxsize=None)
def _start_model(model: str) -> str:
    try:
        return defaults.model({"MODEL": model} if model else {})
    except defaults.DefaultsError as e:
        raise SystemExit(f"[pipeline] {e}") from None


def verify_data(flow: Stages, out: str, tokenizer: str, max_prompt_length: int, prompt_args: list[str]) -> None:
    """The judge's verification parquets (``data_prep.gsm8k_verify``) from GSM8K (``GSM8K_DIR`` / the hub)."""
    cmd = [flow.py, "-m", "data_prep.gsm8k_verify", "--out", out, "--tokenizer", tokenizer]
    cmd += ["--max-prompt-length", str(max_prompt_length), *prompt_args, *defaults.gsm8k_args(flow.env)]
    flow.sh(cmd, "data")


def judge_train_files(data: str, verdict: verdicts.Verdict, with_solutions: bool) -> list[str]:
    """The judge's training parquet(s) under ``data``: the verification split, plus the model-solution rows when
    asked and there are any (pairs need a right and a wrong answer to one question)."""
    files = [os.path.join(data, f"{verdict.name}_train.parquet")]
    extra = os.path.join(data, "model_solutions", f"{verdict.name}_train.parquet")
    if with_solutions and os.path.exists(extra):
        import pyarrow.parquet as pq

        if pq.ParquetFile(extra).metadata.num_rows:
            files.append(extra)
    return files


def policy_data(flow: Stages, out: str, tokenizer: str) -> None:
    """GSM8K as the policy sees it (``data_prep.gsm8k``: ``GSM8K_DIR``, else the hub)."""
    cmd = [flow.py, "-m", "data_prep.gsm8k", "--out", out, "--tokenizer", tokenizer, *defaults.gsm8k_args(flow.env)]
    flow.sh(cmd, "policy_data")


def sdpa(env: dict) -> list[str]:
    """The SFT trainer's overrides without flash-attn (NO_FLASH_ATTN's rule, as the recipes apply it)."""
    if knobs.flash_attn(env.get("NO_FLASH_ATTN", "auto")):
        return []
    say("no flash-attn (NO_FLASH_ATTN / --no-flash-attn, or not importable): torch SDPA attention, no remove-padding")
    return ["model.use_remove_padding=False", "+model.override_config.attn_implementation=sdpa"]


def last_checkpoint(folder: str, inside: str = "") -> str:
    """``folder/global_step_<N>[/inside]`` of the highest N (an SFT model: ``inside="huggingface"``)."""
    found = glob.glob(os.path.join(folder, "global_step_*", inside))
    if not found:
        raise SystemExit(f"[pipeline] no checkpoint under {folder}" + (f" (global_step_*/{inside})" if inside else ""))
    return max(found, key=lambda p: int(os.path.relpath(p, folder).split(os.sep)[0].rsplit("_", 1)[1]))


def merge(flow: Stages, checkpoints: str, target: str) -> None:
    """The last GRPO checkpoint under ``checkpoints`` as a Hugging Face model in ``target`` (``verl.model_merger``)."""
    actor = os.path.join(last_checkpoint(checkpoints), "actor")
    cmd = [flow.py, "-m", "verl.model_merger", "merge", "--backend", "fsdp", "--local_dir", actor]
    cmd += ["--target_dir", target]
    flow.sh(cmd, "merge")


def compare(flow: Stages, title: str, keys: tuple[str, ...]) -> str:
    """``compare.md``: the held-out evaluations (``eval_before``, ``eval_sft``, ``eval_after``) found, one row each;
    printed and returned."""
    rows = []
    for name in ("eval_before", "eval_sft", "eval_after"):
        f = flow.path(name, "report.json")
        if os.path.exists(f):
            rep = json.load(open(f))
            if not isinstance(rep, dict):
                raise ValueError(f"{f}: not an evaluation report (a JSON object), got a {type(rep).__name__}")
            rows.append([name, *(rep.get("overall", rep).get(k) for k in keys)])
    text = f"# {title}\n\n" + md_table(["stage", *keys], rows) + "\n"
    open(flow.path("compare.md"), "w").write(text)
    print(text, end="")
    return text


#: summary.md's rows: how the judge fared as the policy's reward
HEALTH = tuple(
    "judge_health/parse_fail_rate judge_health/error_rate judge_health/fallback_rate judge_health/agree_rule "
    "judge_health/score_mean critic/score/mean reward/rule_score/mean reward/rule_format/mean".split()
)


def summary(flow: Stages, metrics: str, title: str, t0: float) -> None:
    """``summary.md``: the judge's held-out comparison (``compare.md``), then the judge's health over the training
    steps of the judge-rewarded run whose metrics are ``metrics``; printed."""
    steps = [m for m in read_metrics(flow.path(metrics)) if "judge_health/parse_fail_rate" in m]
    compared = flow.path("compare.md")
    lines = [f"# {title}", "", open(compared).read().split("\n", 2)[-1] if os.path.exists(compared) else "", ""]
    lines += [f"Policy stage ({len(steps)} training steps, {flow.path(metrics)}):", ""]
    rows = [
        [f"`{k}`", steps[0][k], steps[-1][k], sum(m[k] for m in steps) / len(steps)]
        for k in HEALTH
        if steps and k in steps[-1]
    ]
    lines += [md_table(["judge as the reward", "first step", "last step", "mean over steps"], rows), ""]
    lines += [f"Wall time of this invocation (the stages it ran): {time.time() - t0:.0f} s."]
    open(flow.path("summary.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))
