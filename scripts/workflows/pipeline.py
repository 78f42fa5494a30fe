"""The judge workflows: build data -> warm start (SFT) -> GRPO -> merge -> evaluate, and then a policy rewarded
by the judge made.

    python -m scripts.pipeline judge --task pointwise --out runs/pointwise [hydra overrides for GRPO]
    python -m scripts.pipeline judge --task pairwise_ref --grpo-steps 40 --out runs/pairwise_ref
    python -m scripts.pipeline judge --task pairwise --no-sft --pair-groups false --out runs/pairwise_plain
    python -m scripts.pipeline judge_to_reward --out runs/j2r          # + policy rewarded by the judge
    python -m scripts.pipeline judge_to_reward --task pairwise_ref --out runs/j2r_pairwise  # the pairwise judge

Judge tasks (GSM8K verification data from ``data_prep.gsm8k_verify``):

* ``pointwise``     reference shown, ``gsm8k_grade.v3``, labels 4 / 0 -> recipes/judge_pointwise
* ``pairwise_ref``  reference shown, ``pairwise_ref.v3``, both orders  -> recipes/judge_pairwise
* ``pairwise``      no reference, ``pairwise.v1`` (preference-style)   -> recipes/judge_pairwise

Stages (one whose ``.done`` marker exists is skipped, so a rerun resumes):
``samples`` (``--model-solutions base``) -> ``data`` -> ``sft_data`` -> ``eval_before`` (beside ``sft`` unless
``--no-parallel-eval``) -> ``sft`` -> ``eval_sft`` -> ``grpo`` (``scripts.launch.launcher.run_recipe``) -> ``merge``
-> ``eval_after`` -> ``compare`` (``compare.md``). ``judge_to_reward`` adds ``policy``: recipes/gsm8k_local_judge
with the trained judge as the reward (``reward_fns/llm_judge.py`` for ``pointwise``, ``reward_fns/pairwise_judge.py``
in ``pairwise_ref`` mode for ``pairwise_ref``; the no-reference ``pairwise`` judge rewards nothing).

Machine settings are the launcher's knobs (``python -m scripts.launch --knobs``). ``DRY_RUN=1`` runs no stage: it
checks each training stage's recipe with the arguments that stage gets.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sys
import time
from typing import NamedTuple

from data_prep.cli import new_parser
from reward_fns import verdicts
from scripts import bytecode
from scripts.launch import knobs
from scripts.launch import launcher as launch
from scripts.workflows import cli, steps
from scripts.workflows.stages import Stages, say

#: the policy's reward overrides that make the pairwise judge (reference-guided, per sample) its reward
PAIRWISE_REF_REWARD = (
    "reward.custom_reward_function.path=pkg://reward_fns.pairwise_judge",
    "++reward.custom_reward_function.reward_kwargs.mode=pairwise_ref",
)


class Task(NamedTuple):
    recipe: str  # recipes/<recipe>
    verdict: verdicts.Verdict  # its name prefixes the verification parquets
    prompt_args: list[str]  # data_prep.gsm8k_verify's prompt arguments
    reward: tuple[str, ...] | None  # the policy stage's overrides that make this judge its reward; None: it cannot


TASKS = {
    "pointwise": Task("judge_pointwise", verdicts.POINTWISE, [], ()),
    "pairwise_ref": Task("judge_pairwise", verdicts.PAIRWISE, [], PAIRWISE_REF_REWARD),
    "pairwise": Task("judge_pairwise", verdicts.PAIRWISE, ["--pair-prompt", "pairwise.v1"], None),
}
POLICY_RECIPE = "gsm8k_local_judge"
# The policy stage is a short check that the trained judge is used (6 steps by default), so its judge decodes
# eagerly: CUDA graphs (the recipe's default, for real runs) cost ~40 s of compile and capture at start-up on an
# H100 and saved 0.5-1 s per step with the trained judge's short replies. --policy-override wins over this.
POLICY_STAGE = ["reward.reward_model.rollout.enforce_eager=true"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Pipeline(cli.JudgeRun):
    """``python -m scripts.pipeline``'s settings: the judge's, the workflow and its policy stage's."""

    workflow: str
    policy_steps: int = cli.option(type=int, default=6, help="judge_to_reward: policy GRPO steps (default 6)")
    policy_override: tuple[str, ...] = cli.option(
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="judge_to_reward: Hydra override of the policy stage (the positional overrides go to the judge)",
    )


def judge(flow: Stages, cfg: cli.JudgeRun, solver=None, beside_next: bool = False) -> str:
    """The judge's stages; returns the judge they make. ``solver``: a function giving the model whose answers stage
    ``samples`` collects, asked when the stage runs (default the start model). ``beside_next``: the last evaluation
    runs in the background, beside the caller's next stage (the caller then calls ``finish_judge``)."""
    task, base = TASKS[cfg.task], steps.start_model(flow.env)
    data, test = flow.path("data"), test_file(flow, cfg)
    if cfg.model_solutions == "base":  # GPU work beside the CPU-bound data stage
        policy_data = policy_data_stage(flow, base)

        def answers() -> None:  # two answers to each question, sampled as GRPO rollouts are
            cmd = [flow.py, "-m", "scripts.eval.gsm8k", "--data", os.path.join(policy_data, "train.parquet")]
            cmd += ["--limit", str(cfg.model_solution_questions), "--n-samples", "2", "--temperature", "1.0"]
            cmd += ["--max-tokens", "512", "--vllm-offline", solver() if solver else base]
            cmd += ["--gpu-memory-utilization", str(cfg.eval_gpu_mem), *kv_cache(cfg.eval_kv_cache_gb)]
            flow.sh(cmd + ["--out", flow.path("samples"), "--no-progress", "--no-plots"], "samples")

        flow.stage("samples", flow.path("samples"), answers, background=True)
    flow.stage("data", data, lambda: steps.verify_data(flow, data, base, cfg.max_prompt_length, task.prompt_args))
    flow.stage("sft_data", flow.path("data", "sft_train.parquet"), lambda: sft_data(flow, cfg, base))
    if not cfg.skip_eval and cfg.eval_before:
        # the start model's evaluation needs nothing the SFT makes: it runs beside it when SFT will run
        beside = cfg.sft and not cfg.sft_model and not flow.done("sft", flow.path("sft"))
        evaluation(flow, cfg, "eval_before", base, beside)
    start = base
    if cfg.sft_model:  # a warm start trained elsewhere (e.g. the same SFT for GRPO with pair groups on and off)
        start = cfg.sft_model
        say(f"warm start given: {start} (stages sft and eval_sft skipped)")
    elif cfg.sft:
        length = cfg.max_prompt_length + cfg.max_response_length
        train = flow.path("data", "sft_train.parquet")
        flow.stage("sft", flow.path("sft"), lambda: sft(flow, cfg, "sft", base, train, cfg.sft_steps, length))
        start = steps.last_checkpoint(flow.path("sft"), "huggingface")
        if not cfg.skip_eval:
            evaluation(flow, cfg, "eval_sft", start, beside_next and cfg.grpo_steps <= 0)
    judge_model = start
    if cfg.grpo_steps > 0:
        flow.stage("grpo", flow.path("grpo"), lambda: grpo(flow, cfg, start, test))
        judge_model = flow.path("hf")
        flow.stage("merge", judge_model, lambda: steps.merge(flow, flow.path("grpo"), judge_model))
        if not cfg.skip_eval:
            evaluation(flow, cfg, "eval_after", judge_model, beside_next)
    if not beside_next:
        finish_judge(flow, cfg)
    return judge_model


def policy_data_stage(flow: Stages, base: str) -> str:
    """Stage ``policy_data``: GSM8K as the policy sees it (made once, for the samples and the policy runs)."""
    out = flow.path("policy_data")
    return flow.stage("policy_data", out, lambda: steps.policy_data(flow, out, base))


def test_file(flow: Stages, cfg: cli.JudgeRun) -> str:
    """The judge's held-out verification rows (evaluations, GRPO validation, ``compare.md``)."""
    return flow.path("data", f"{TASKS[cfg.task].verdict.name}_test.parquet")


def sft_data(flow: Stages, cfg: cli.JudgeRun, base: str) -> None:
    """The judge's SFT rows (``data_prep.judge_sft``): the verification split, plus, when asked, verification rows from
    a model's own answers (``scripts.eval.gsm8k``'s ``samples.jsonl``), graded by their final answer."""
    task, solutions = TASKS[cfg.task], cfg.model_solutions
    if solutions:
        solutions = flow.path("samples", "samples.jsonl") if solutions == "base" else solutions
        cmd = [flow.py, "-m", "data_prep.gsm8k_verify", "--candidates", "solutions", "--train", solutions]
        cmd += ["--grade", "flexible", "--on-bad-row", "skip", "--no-fail-on-empty"]
        cmd += ["--out", flow.path("data", "model_solutions"), "--tokenizer", base]
        cmd += ["--max-prompt-length", str(cfg.max_prompt_length), *task.prompt_args]
        flow.sh(cmd, "sft_data")
    inputs = steps.judge_train_files(flow.path("data"), task.verdict, bool(cfg.model_solutions))
    out = ["--out", flow.path("data", "sft_train.parquet"), "--max-rows", str(cfg.sft_rows)]
    flow.sh([flow.py, "-m", "data_prep.judge_sft", "--in", *inputs, *out], "sft_data")


def sft(flow: Stages, cfg: cli.JudgeRun, name: str, base: str, train: str, n_steps: int, length: int) -> None:
    """verl's SFT trainer (``torchrun -m verl.trainer.sft_trainer``) with the SFT options of ``cfg`` on ``train`` from
    ``base``: the judge's warm start, or another one (the policy's). Checkpoints in ``<name>/``, metrics
    ``<name>_metrics.jsonl``, log ``logs/<name>.log``; ``n_steps`` 0 = the whole epoch(s)."""
    n_gpus = int(flow.env.get("N_GPUS", "1"))
    cmd = [flow.py, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={n_gpus}"]
    cmd += ["-m", "verl.trainer.sft_trainer", f"data.train_files={train}", "data.val_files=null"]
    cmd += [f"data.max_length={length}", "data.truncation=right", f"data.train_batch_size={cfg.sft_batch}"]
    cmd += ["data.micro_batch_size_per_gpu=8", "data.num_workers=0", f"model.path={base}"]
    cmd += ["model.external_lib=scripts.train.fast_logprobs", f"optim.lr={cfg.sft_lr}"]
    cmd += [f"trainer.total_epochs={cfg.sft_epochs}", f"trainer.default_local_dir={flow.path(name)}"]
    cmd += ["trainer.project_name=verl-judge", f"trainer.experiment_name={cfg.task}-{name}"]
    cmd += ["trainer.logger=[console,file]", "trainer.save_freq=-1", "trainer.resume_mode=disable"]
    cmd += ["checkpoint.save_contents=[model,hf_model]", f"trainer.n_gpus_per_node={n_gpus}", *steps.sdpa(flow.env)]
    cmd += [*cfg.sft_override, *([f"trainer.total_training_steps={n_steps}"] if n_steps > 0 else [])]
    flow.sh(cmd, name, dict(flow.env, VERL_FILE_LOGGER_PATH=flow.path(f"{name}_metrics.jsonl")))


def kv_cache(gb: float | None) -> list[str]:
    """The evaluators' ``--kv-cache-gb`` flag: a fixed vLLM KV cache (the GPU is shared), none when unset."""
    return ["--kv-cache-gb", str(gb)] if gb else []


def evaluation(flow: Stages, cfg: cli.JudgeRun, name: str, model: str, beside: bool) -> None:
    """Evaluation stage ``name``: ``scripts.eval.judge`` of ``model`` on ``--eval-pairs`` held-out rows, greedy, log
    ``logs/<name>.log``. ``beside`` (and ``--parallel-eval``): in the background, beside the next stage, with a fixed
    KV cache (another stage trains on the GPU meanwhile) instead of one sized from the memory free while it profiles.
    An evaluation that fails (or measured nothing, e.g. an untrained judge) does not stop training."""
    task, background = TASKS[cfg.task], beside and cfg.parallel_eval
    rows = ["--pairs", str(cfg.eval_pairs)] if task.verdict.paired else ["--limit", str(2 * cfg.eval_pairs)]
    kv_cache_gb = cfg.eval_kv_cache_gb or (steps.SHARED_KV_CACHE_GB if background else None)
    cmd = [flow.py, "-m", "scripts.eval.judge", "--data", test_file(flow, cfg), *rows, "--seed", "0", "--vllm-offline"]
    cmd += [model, "--max-tokens", str(cfg.max_response_length), "--temperature", "0", "--gpu-memory-utilization"]
    cmd += [str(cfg.eval_gpu_mem), "--out", flow.path(name), "--no-progress", *kv_cache(kv_cache_gb)]
    flow.stage(name, flow.path(name), lambda: flow.sh(cmd, name, ok=lambda: True), background=background)


def grpo_settings(flow: Stages, cfg: cli.JudgeRun) -> list[str]:
    """The judge's GRPO settings (its start model and data: ``grpo``); the user's overrides last."""
    return [
        f"trainer.total_training_steps={cfg.grpo_steps}",
        f"trainer.default_local_dir={flow.path('grpo')}",
        f"trainer.experiment_name={cfg.task}",
        f"trainer.save_freq={min(cfg.grpo_steps, 10)}",
        f"verl_judge.pair_groups={cfg.pair_groups}",
        *cfg.overrides,
    ]


def grpo(flow: Stages, cfg: cli.JudgeRun, start: str, test: str) -> None:
    files = steps.judge_train_files(flow.path("data"), TASKS[cfg.task].verdict, bool(cfg.model_solutions))
    inputs = [f"actor_rollout_ref.model.path={start}", f"data.train_files=[{','.join(files)}]"]
    settings = [*inputs, f"data.val_files={test}", *grpo_settings(flow, cfg)]
    flow.train("grpo", TASKS[cfg.task].recipe, settings, "metrics.jsonl")


def finish_judge(flow: Stages, cfg: cli.JudgeRun) -> None:
    """Join the judge's background evaluations, then write ``compare.md``."""
    flow.wait_background()
    if not cfg.skip_eval:
        title = f"{cfg.task}: held-out evaluation ({test_file(flow, cfg)})"
        steps.compare(flow, title, TASKS[cfg.task].verdict.compare_keys)


def policy_settings(flow: Stages, cfg: Pipeline, name: str = "policy") -> list[str]:
    """The policy stage's settings (its models and data: ``policy``)."""
    return [
        f"trainer.total_training_steps={cfg.policy_steps}",
        f"trainer.default_local_dir={flow.path(name)}",
        f"trainer.experiment_name=judge_to_reward-{name}",
        "trainer.save_freq=-1",
        *TASKS[cfg.task].reward,
        *POLICY_STAGE,
        *cfg.policy_override,
    ]


def policy(
    flow: Stages,
    cfg: Pipeline,
    base: str,
    judge: str,
    recipe: str = POLICY_RECIPE,
    name: str = "policy",
    extra: tuple[str, ...] = (),
) -> None:
    """A GSM8K policy from ``base`` trained with ``recipe`` (default the local judge's, ``judge`` as its reward
    model) and ``extra`` overrides last; outputs ``<name>/`` (checkpoints), ``<name>_metrics.jsonl``,
    ``logs/<name>.log``."""
    inputs = [
        f"actor_rollout_ref.model.path={base}",
        f"reward.reward_model.model_path={judge}",
        f"data.train_files={flow.path('policy_data', 'train.parquet')}",
        f"data.val_files={flow.path('policy_data', 'test.parquet')}",
    ]
    flow.train(name, recipe, [*inputs, *policy_settings(flow, cfg, name), *extra], f"{name}_metrics.jsonl")
    # its output: verl makes this folder only when it saves a checkpoint (none here: save_freq=-1), and a stage whose
    # output is missing is made again on a resume
    os.makedirs(flow.path(name), exist_ok=True)


def judge_to_reward(flow: Stages, cfg: Pipeline) -> str:
    """The judge's stages, then a GSM8K policy trained with the merged judge as its reward; ``summary.md``."""
    base = steps.start_model(flow.env)
    policy_data_stage(flow, base)
    judge_model = judge(flow, cfg, beside_next=True)  # the judge's last evaluation runs beside the policy stage
    flow.stage("policy", flow.path("policy"), lambda: policy(flow, cfg, base, judge_model))
    finish_judge(flow, cfg)
    steps.summary(flow, "policy_metrics.jsonl", f"judge_to_reward ({flow.out})", flow.t0)
    return judge_model


def build_parser() -> argparse.ArgumentParser:
    p = new_parser("scripts.pipeline", __doc__)
    workflow_help = "judge: data -> SFT -> GRPO -> merge -> evaluate; judge_to_reward: the same, then a GSM8K policy "
    workflow_help += "rewarded by the trained judge (--task pointwise or pairwise_ref)"
    p.add_argument("workflow", choices=("judge", "judge_to_reward"), help=workflow_help)
    p.add_argument("--task", choices=sorted(TASKS), default="pointwise")
    cli.add_options(p, Pipeline)
    return p


def dry_run(flow: Stages, cfg: Pipeline, argv: list[str]) -> int:
    """DRY_RUN: each training stage's recipe, with the settings and arguments that stage gets, checked as a
    single recipe run is (the default model and data stand for the ones the stages before it make)."""
    checks = [("judge", "grpo", TASKS[cfg.task].recipe, grpo_settings(flow, cfg), "metrics.jsonl")]
    if cfg.workflow == "judge_to_reward":
        checks.append(("policy", "policy", POLICY_RECIPE, policy_settings(flow, cfg), "policy_metrics.jsonl"))
    for stage, name, recipe, settings, metrics in checks:
        say(f"{cfg.workflow} stage {stage}: recipe {recipe}")
        try:
            launch.check_recipe(recipe, settings, dict(flow.env), **flow.where(name, metrics))
        except launch.LaunchError as e:
            say(f"ERROR: {e}")
            return 2
    say(f"DRY_RUN: would run: python -m scripts.pipeline {shlex.join(argv)}")
    return 0


def parse_args(argv: list[str]) -> Pipeline:
    """The command line checked, with the defaults that depend on the workflow filled in."""
    parser = build_parser()
    ns = cli.parse(parser, argv)
    j2r = ns.workflow == "judge_to_reward"
    if j2r and TASKS[ns.task].reward is None:
        rewards = ", ".join(k for k, t in TASKS.items() if t.reward is not None)
        parser.error(
            f"judge_to_reward: a {ns.task} judge cannot reward a policy (the pairwise reward asks with the reference "
            f"solution shown, a prompt this judge is not trained on); --task {rewards}"
        )
    return Pipeline.parsed(ns, rewards=j2r)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    cfg = parse_args(argv)
    flow = cli.run_of(cfg)
    if knobs.truthy(os.environ.get("DRY_RUN") or "0"):
        return dry_run(flow, cfg, argv)
    slow_start = bytecode.warning()  # before any stage: every stage starts Python processes
    if slow_start:
        say(f"WARNING: {slow_start}")
    workflow = judge_to_reward if cfg.workflow == "judge_to_reward" else judge
    judge_model = flow.guarded(lambda: workflow(flow, cfg))
    say(f"done in {time.time() - flow.t0:.0f}s: judge {judge_model}")
    return 0
