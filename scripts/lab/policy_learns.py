"""Does a policy learn from the trained judge as it learns from the rule? The side-by-side experiment.

    python -m scripts.lab.policy_learns --out runs/policy_learns                  # rule run and judge run, 100 steps
    python -m scripts.lab.policy_learns --out runs/pl --no-rule --steps 30        # the judge run alone
    python -m scripts.lab.policy_learns --out runs/pl --testbed none            # GSM8K itself (a real model: MODEL=...)
    python -m scripts.lab.policy_learns --out runs/card --arms rule,judge,random,format --seeds 0,1,2 --parallel 4
    python -m scripts.lab.policy_learns --out runs/card --instances 0,1,2 --arms rule,judge,route,random --seeds 0,1 \\
        --parallel 4 --gpus 0,1,2,3                      # the scorecard over three judge instances (instances.py)
    python -m scripts.lab.policy_learns --out runs/cost --reuse runs/card --arms rule,judge,route --steps 20
    python -m scripts.lab.policy_learns --out runs/pw --judge-task pairwise_ref --arms rule,pairwise_ref,tournament

The same start policy, data, seed and GRPO settings are trained twice: with the ``#### N`` rule
(recipes/gsm8k_rule) and with the judge that the judge pipeline trains (recipes/gsm8k_local_judge: ``--judge-task``
pointwise, or pairwise_ref for the arms pairwise_ref and tournament, scripts/lab/arms.py; served on the
same GPU: ``--judge-placement server``, default, or ``colocated``). Stages (resumable, as in
``scripts.workflows.pipeline``):

1. ``testbed``: ``data_prep.word_problems`` (``--testbed-arg`` passes settings; ``--testbed none``: GSM8K from
   ``GSM8K_DIR`` / the hub), then ``policy_data`` (``data_prep.gsm8k``);
2. ``policy_sft``: the policy's warm start on ``--policy-sft-rows`` worked solutions (``data_prep.policy_sft`` +
   verl's SFT trainer; 0 = none); then, side by side, each in a chain of its own:
   ``rule`` (the rule run) and, with the judge served, ``judge`` (the judge run: its Ray, workers, vLLM and the
   policy's own start-up go on while the judge is still being trained; its judge server starts once stage
   ``judge_model`` is done, and the reward waits for it);
3. the judge's stages (``scripts.workflows.pipeline.judge``): verification data plus the start policy's own answers
   (``samples``, graded by the last number; ``--model-solutions none``: verification data only), SFT warm start,
   evaluation before / after, then ``judge_model`` (a link to the trained judge);
4. ``report.md``, ``report.json``, ``policy_learns.png`` (``scripts.lab.report``), its table printed last.

Held-out accuracy is verl's own validation, greedy, on the first ``--eval-questions`` test questions and as many
questions of the testbed's held-out stories (``eval_data``: wordings the training never has), at step 0 (the first
run; the judge run too with ``--no-rule``), every ``--test-freq`` steps and at the last step; every answer is
kept (``<run>_val/<step>.jsonl``) and the report grades it with the strict and the flexible rule. The runs share the
GPU, so each vLLM engine gets a fixed KV cache and stays awake. Positional arguments are Hydra overrides for both
runs. Any stage that fails stops the experiment at once, naming the stage (exit 1).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import os
import re
import sys
import tempfile

from scripts.lab import arms, instances, report, reuse, scorecard
from scripts.lab.scorecard import run_name
from scripts.launch import knobs
from scripts.launch import launcher as launch
from scripts.launch.services import as_command
from scripts.workflows import cli, pipeline, steps
from scripts.workflows.stages import Stages, say

# GRPO settings of both runs, one place (the recipes' own defaults otherwise): 16 questions x 8 answers a step, two
# optimizer steps of 8 questions each, short answers (GSM8K itself: data.max_prompt_length=512
# data.max_response_length=512), large micro-batches for a small model, the policy's vLLM with CUDA graphs (100 steps
# of ~100-token answers: capture pays for itself), the judge's eager (its verdicts are ~30 tokens)
RUN = [
    "data.train_batch_size=16",
    "actor_rollout_ref.rollout.n=8",
    "actor_rollout_ref.actor.ppo_mini_batch_size=8",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=64",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=64",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=64",
    "data.max_prompt_length=192",
    "data.max_response_length=192",
    "actor_rollout_ref.actor.optim.lr=5e-6",
    "trainer.max_actor_ckpt_to_keep=1",
    "actor_rollout_ref.rollout.enforce_eager=false",
    "actor_rollout_ref.rollout.gpu_memory_utilization=0.15",
    "actor_rollout_ref.rollout.free_cache_engine=false",
]
JUDGE_RUN = [
    "reward.reward_model.rollout.gpu_memory_utilization=0.1",
    "reward.reward_model.rollout.free_cache_engine=false",
    "reward.reward_model.rollout.enforce_eager=true",
]
JUDGE_SERVER_RUN = ["judge_placement=server", "verl_judge.judge_server.gpu_memory_utilization=0.1"]  # + its KV cache
# the reward of each arm and the judge it needs: scripts/lab/arms.py
ARMS, JUDGED, SEEDED = arms.ARMS, arms.JUDGED, arms.SEEDED


def arm_list(value: str) -> list[str]:
    """``--arms``: one arm or more, comma-separated (an empty list is an error, not the default arms)."""
    arms = [x.strip() for x in value.split(",") if x.strip()]
    if not arms:
        raise argparse.ArgumentTypeError(f"needs at least one arm of {', '.join(ARMS)}, got {value!r}")
    return arms


def gpu_list(value: str) -> str:
    """``--gpus``: GPU ids, non-negative integers, comma-separated (``0,1``), no empty ones."""
    ids = [x.strip() for x in value.split(",")]
    if not all(re.fullmatch(r"[0-9]+", x) for x in ids):
        raise argparse.ArgumentTypeError(
            f"GPU ids are non-negative integers, comma-separated, none empty (e.g. 0,1), got {value!r}"
        )
    return ",".join(ids)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Experiment(cli.JudgeRun):
    """The experiment's settings: the judge's stages' (``task``: ``--judge-task``), then its own options, the
    testbed's and the GRPO runs' (``arms``: the judge task's default filled in, ``--no-rule`` applied)."""

    testbed: str = cli.option(
        choices=("word_problems", "none"),
        default="word_problems",
        help="the policy's task: data_prep.word_problems (default) or none = GSM8K (GSM8K_DIR / the hub)",
    )
    testbed_arg: tuple[str, ...] = cli.option(
        action="append",
        default=[],
        metavar="ARG",
        help="an argument for data_prep.word_problems, e.g. --testbed-arg=--steps=3 (repeatable)",
    )
    policy_sft_rows: int = cli.option(
        type=int,
        default=500,
        help="worked solutions in the policy's warm start, one epoch (default 500; 0 = no warm start)",
    )
    arms: tuple[str, ...] = cli.option(
        type=arm_list,
        default=None,
        help="rewards to train with, comma-separated, of: " + ", ".join(ARMS) + " (default rule,judge; "
        "--judge-task pairwise_ref: rule,pairwise_ref; random and format are controls: reward_fns/controls.py; "
        "scripts/lab/arms.py)",
    )
    seeds: tuple[int, ...] = cli.option(
        type=lambda v: [int(x) for x in v.split(",") if x.strip()],
        default=[0],
        help="data.seed of each run, comma-separated (default 0); several: the scorecard (scorecard.md)",
    )
    instances: tuple[int, ...] | None = cli.option(
        type=lambda v: [int(x) for x in v.split(",")],
        default=None,
        metavar="0,1,2",
        help="testbed seeds: one experiment per seed, each with its own testbed, warm start and trained judge, in "
        "<out>/instance_<k>, all at once, then the scorecard pooled over them (scripts/lab/instances.py)",
    )
    parallel: int = cli.option(type=int, default=2, help="GRPO runs at a time (default 2; per instance)")
    gpus: str | None = cli.option(
        type=gpu_list,
        default=None,
        metavar="0,1",
        help="spread the runs' chains over these GPUs (CUDA_VISIBLE_DEVICES of each chain; default: all runs "
        "on the visible GPU)",
    )
    reuse: str | None = cli.option(
        default=None,
        metavar="DIR",
        help="a finished experiment whose stages (testbed, data, start policy, judge) this one links instead "
        f"of making them again: only the GRPO runs are made. The settings that make those stages must match the "
        f"ones it recorded ({reuse.SETTINGS_FILE}: the testbed, the model, the warm starts, the judge's options), else "
        "exit 2 naming each difference; a stage marked done there whose folder is missing is made here; a "
        "half-written stage here (no .done marker) is replaced by the link",
    )
    steps: int = cli.option(type=int, default=100, help="GRPO steps of each run (default 100)")
    test_freq: int = cli.option(type=int, default=20, help="verl validation every N steps and at the last (default 20)")
    eval_questions: int = cli.option(
        type=int, default=500, help="held-out test questions of verl's validation, greedy (default 500)"
    )
    judge_placement: str = cli.option(
        choices=("colocated", "server"),
        default="server",
        help="the judge run's judge: server (default: an OpenAI-compatible server beside the policy, rewards "
        "streamed as each rollout finishes) or colocated (verl's reward stage); recipes/gsm8k_local_judge",
    )
    kv_cache_gb: float = cli.option(type=float, default=4.0, help="fixed KV cache of each run's vLLM engines (4)")


def start_policy(flow: Stages, cfg: Experiment, base: str) -> str:
    """The policy every run starts from: the warm-started one (stage ``policy_sft``), else the start model."""
    return steps.last_checkpoint(flow.path("policy_sft"), "huggingface") if cfg.policy_sft_rows > 0 else base


def testbed(flow: Stages, cfg: Experiment) -> None:
    cmd = [flow.py, "-m", "data_prep.word_problems", "--out", flow.path("testbed"), *cfg.testbed_arg]
    flow.sh(cmd, "testbed")


def eval_data(flow: Stages, cfg: Experiment, base: str) -> None:
    """The validation's questions: the first ``--eval-questions`` of the testbed's test split and of its held-out
    stories, one file each (``eval_data/test``, ``eval_data/heldout``)."""
    for split, source in (("test", "word_problems"), ("heldout", "word_problems_heldout")):
        cmd = [flow.py, "-m", "data_prep.gsm8k", "--out", flow.path("eval_data", split), "--tokenizer", base]
        cmd += ["--test", flow.path("testbed", f"{split}.jsonl"), "--limit", str(cfg.eval_questions)]
        flow.sh(cmd + ["--data-source", source, "--no-progress"], f"eval_data_{split}")


def val_settings(flow: Stages, cfg: Experiment) -> list[str]:
    """verl's validation files: the testbed's test split and held-out stories (each cut to ``--eval-questions``),
    or GSM8K's test split's first ``--eval-questions``."""
    if cfg.testbed == "none":
        return [
            f"data.val_max_samples={cfg.eval_questions}",
            f"data.val_files={flow.path('policy_data', 'test.parquet')}",
        ]
    files = ",".join(flow.path("eval_data", s, "test.parquet") for s in ("test", "heldout"))
    return ["data.val_max_samples=-1", f"data.val_files=[{files}]"]


def policy_sft(flow: Stages, cfg: Experiment, base: str) -> None:
    """The policy's warm start: ``--policy-sft-rows`` worked solutions (``data_prep.policy_sft``), one epoch."""
    data = flow.path("policy_sft_data", "train.parquet")
    cmd = [flow.py, "-m", "data_prep.policy_sft", "--in", flow.path("policy_data", "train.parquet"), "--out", data]
    flow.sh(cmd + ["--max-rows", str(cfg.policy_sft_rows)], "policy_sft")
    pipeline.sft(flow, cfg, "policy_sft", base, data, 0, 512)


def runs(cfg: Experiment) -> list[tuple[str, str, int]]:
    """``(name, arm, seed)`` of every GRPO run, seed by seed."""
    return [(run_name(arm, seed), arm, seed) for seed in cfg.seeds for arm in cfg.arms]


def run_settings(flow: Stages, cfg: Experiment, name: str, arm: str, seed: int) -> list[str]:
    """Run ``name``'s settings (its models: ``policy_run``); the user's overrides last."""
    kv = f"kv_cache_memory_bytes={int(cfg.kv_cache_gb * 2**30)}"
    before = name == runs(cfg)[0][0]  # the start policy's validation ("before"): once, in the first run
    settings = [
        *RUN,
        f"data.seed={seed}",
        f"+actor_rollout_ref.rollout.engine_kwargs.vllm.{kv}",
        f"trainer.total_training_steps={cfg.steps}",
        f"trainer.test_freq={cfg.test_freq}",
        f"trainer.val_before_train={str(before).lower()}",
        f"trainer.save_freq={cfg.steps}",
        *val_settings(flow, cfg),
        f"trainer.validation_data_dir={flow.path(name + '_val')}",
        f"trainer.default_local_dir={flow.path(name)}",
        f"trainer.experiment_name=policy_learns-{name}",
        f"trainer.rollout_data_dir={flow.path(name + '_rollouts')}",  # every sample, per step: what was paid for
        f"data.train_files={flow.path('policy_data', 'train.parquet')}",
        *ARMS[arm],
        *([f"++reward.custom_reward_function.reward_kwargs.seed={seed}"] if arm in SEEDED else []),
    ]
    if arm in JUDGED and cfg.judge_placement == "server":  # the launcher serves the judge beside the policy
        settings += [
            *JUDGE_SERVER_RUN,
            f"verl_judge.judge_server.kv_cache_memory_bytes={int(cfg.kv_cache_gb * 2**30)}",
            f"verl_judge.judge_server.wait_for={flow.path('.judge_model.done')}",
        ]
    elif arm in JUDGED:
        settings += [*JUDGE_RUN, f"+reward.reward_model.rollout.engine_kwargs.vllm.{kv}"]
    return [*settings, *cfg.overrides]


def recipe_of(arm: str) -> str:
    return "gsm8k_local_judge" if arm in JUDGED else "gsm8k_rule"


def policy_run(
    flow: Stages, cfg: Experiment, base: str, name: str, arm: str, seed: int, gpu: str | None = None
) -> None:
    """GRPO run ``name``: the start policy (``start_policy``, looked up when the run starts) with ``arm``'s reward;
    ``gpu``: its CUDA_VISIBLE_DEVICES."""
    models = [f"actor_rollout_ref.model.path={start_policy(flow, cfg, base)}"]
    if arm in JUDGED:
        models.append(f"reward.reward_model.model_path={flow.path('judge_model')}")
    env = dict(flow.env, CUDA_VISIBLE_DEVICES=gpu) if gpu is not None else None
    settings = models + run_settings(flow, cfg, name, arm, seed)
    flow.train(name, recipe_of(arm), settings, f"{name}_metrics.jsonl", env=env)


def run_chains(flow: Stages, cfg: Experiment, base: str, todo: list[tuple[str, str, int]]) -> list[dict]:
    """``todo`` in ``--parallel`` chains started now, round robin; chain i on GPU ``--gpus[i % n]`` when given."""
    lanes = [todo[i :: cfg.parallel] for i in range(min(cfg.parallel, len(todo)))]
    gpus = cfg.gpus.split(",") if cfg.gpus else []
    chains = []
    for i, lane in enumerate(lanes):
        gpu = gpus[i % len(gpus)] if gpus else None
        lane_stages = [
            (name, flow.path(name), functools.partial(policy_run, flow, cfg, base, name, arm, seed, gpu))
            for name, arm, seed in lane
        ]
        chains.append(flow.chain(f"runs{i}", lane_stages))
    return chains


def link_judge(flow: Stages, judge: str) -> None:
    """``judge_model``: a link to the judge the judge's stages made (the judge run's reward model)."""
    link, tmp = flow.path("judge_model"), flow.path(".judge_model.tmp")
    if os.path.lexists(tmp):
        os.remove(tmp)
    os.symlink(os.path.abspath(judge), tmp)
    os.replace(tmp, link)


def experiment(flow: Stages, cfg: Experiment) -> str:
    """The side-by-side experiment: the testbed and the start policy, the runs in chains beside the judge's
    stages (a served judge's runs start at once and wait for stage ``judge_model``), then the report."""
    if cfg.reuse:
        say(f"stages reused from {cfg.reuse}: {', '.join(reuse.reuse(flow, cfg.reuse, ARMS)) or 'none new'}")
    base = steps.start_model(flow.env)
    if cfg.testbed != "none":
        flow.stage("testbed", flow.path("testbed"), lambda: testbed(flow, cfg))
    pipeline.policy_data_stage(flow, base)
    if cfg.testbed != "none":
        flow.stage("eval_data", flow.path("eval_data"), lambda: eval_data(flow, cfg, base))
    if cfg.policy_sft_rows > 0:  # the start policy: the runs and the judge's samples need it
        flow.stage("policy_sft", flow.path("policy_sft"), lambda: policy_sft(flow, cfg, base))
    early = cfg.judge_placement == "server"  # judge runs start now; their server waits for stage judge_model
    now = [r for r in runs(cfg) if early or r[1] not in JUDGED]
    chains = run_chains(flow, cfg, base, now)
    judge = pipeline.judge(flow, cfg, solver=functools.partial(start_policy, flow, cfg, base), beside_next=True)
    flow.marked("judge_model", flow.path("judge_model"), lambda: link_judge(flow, judge))
    for name, arm, seed in runs(cfg):
        if (name, arm, seed) not in now:  # colocated: the judge is loaded with the run, so it must exist first
            flow.stage(name, flow.path(name), functools.partial(policy_run, flow, cfg, base, name, arm, seed))
    pipeline.finish_judge(flow, cfg)
    for job in chains:
        flow.join(job)
    out = report.write(flow.out, [name for name, _, _ in runs(cfg)], log=print)
    if len(cfg.seeds) > 1 or len(cfg.arms) > 2:
        out = scorecard.write(flow.out, cfg.arms, cfg.seeds, cfg.steps, log=print)
    print(report.console(out, flow.out), flush=True)
    return judge


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m scripts.lab.policy_learns",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cli.add_options(p, Experiment)
    p.add_argument(
        "--rule",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also train with the rule reward, beside the judge's stages (default on; --no-rule: the judge arm only)",
    )
    p.add_argument(
        "--judge-task",
        dest="task",
        choices=tuple(arms.DEFAULT_JUDGED),
        default="pointwise",
        help="the judge the judge's stages train (scripts.workflows.pipeline, as --task there): pointwise (default; "
        "arms judge, route, flaky_*: reward_fns/llm_judge.py) or pairwise_ref, the reference-guided pairwise judge "
        "(arms pairwise_ref, tournament: reward_fns/pairwise_judge.py)",
    )
    # every vLLM engine of the evaluations and samples gets a fixed KV cache: the GPU is shared from the start
    p.set_defaults(eval_kv_cache_gb=steps.SHARED_KV_CACHE_GB)
    return p


def parse_args(argv: list[str]) -> Experiment:
    """The command line checked, with the arms resolved (the judge task's default, ``--no-rule``)."""
    parser = build_parser()
    ns = cli.parse(parser, argv)
    for name in ("steps", "test_freq", "eval_questions", "parallel"):
        if getattr(ns, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(ns, name)}")
    if ns.policy_sft_rows < 0:
        parser.error(f"--policy-sft-rows must be >= 0, got {ns.policy_sft_rows}")
    if not (ns.kv_cache_gb > 0 and math.isfinite(ns.kv_cache_gb)):
        parser.error(f"--kv-cache-gb must be a finite number > 0, got {ns.kv_cache_gb}")
    judged = arms.DEFAULT_JUDGED[ns.task]
    arm_names = ns.arms or (["rule", judged] if ns.rule else [judged])
    bad_arms = [x for x in arm_names if x not in ARMS]
    if bad_arms:
        parser.error(f"--arms: unknown arm(s) {', '.join(bad_arms)}; known: {', '.join(ARMS)}")
    for flag, values in (("--arms", arm_names), ("--seeds", ns.seeds), ("--instances", ns.instances or [])):
        if scorecard.repeated(values):
            twice = ", ".join(map(str, scorecard.repeated(values)))
            parser.error(f"{flag}: {twice} listed more than once in {','.join(map(str, values))}: list each once")
    wrong_judge = arms.mismatched(arm_names, ns.task)
    if wrong_judge:
        parser.error(
            f"--arms {','.join(wrong_judge)}: rewarded by the {arms.NEEDS[wrong_judge[0]]} judge, but --judge-task "
            f"{ns.task} trains the {ns.task} judge"
        )
    cfg = Experiment.parsed(ns, rewards=True, arms=[x for x in arm_names if ns.rule or x != "rule"])
    if not cfg.arms or not cfg.seeds or min(cfg.seeds) < 0:
        parser.error("--arms and --seeds need at least one value each; seeds >= 0")
    for problem in reuse.reuse_problems(cfg.reuse, cfg, os.environ) if cfg.reuse else []:
        parser.error(problem)
    report_json = os.path.join(cfg.out, "report.json")  # the report adds to it: an unreadable one fails now
    if os.path.exists(report_json):
        try:
            reuse.read_settings(report_json, "report")
        except ValueError as e:
            parser.error(f"--out {cfg.out}: {e}; move it away")
    if cfg.instances is not None:
        if min(cfg.instances) < 0 or cfg.testbed == "none":
            parser.error("--instances: testbed seeds >= 0, with the word-problem testbed")
        if any(x.startswith("--seed") for x in cfg.testbed_arg):
            parser.error("--instances sets each instance's --testbed-arg=--seed itself")
    return cfg


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    cfg = parse_args(argv)
    dry = knobs.truthy(os.environ.get("DRY_RUN") or "0")
    if cfg.instances is not None and not dry:
        return instances.run(cfg, argv)
    testbed_dir = {} if cfg.testbed == "none" else {"GSM8K_DIR": os.path.abspath(os.path.join(cfg.out, "testbed"))}
    flow = cli.run_of(cfg, **testbed_dir)
    if dry:
        return dry_run(flow, cfg)
    reuse.record_settings(flow.out, cfg, os.environ)
    flow.guarded(lambda: experiment(flow, cfg))
    return 0


def dry_run(flow: Stages, cfg: Experiment) -> int:
    """Each run's recipe checked with the settings it gets (the default model and data stand for the stages' own).
    Writes nothing outside a temporary folder: the default data the launcher builds (``DATA_DIR``) go there."""
    with tempfile.TemporaryDirectory(prefix="policy_learns_dry_") as data_dir:
        env = dict(flow.env, DATA_DIR=data_dir)
        if not os.path.isdir(env.get("GSM8K_DIR", "")):  # the testbed is not built yet: GSM8K's default stands for it
            env.pop("GSM8K_DIR", None)
            if os.environ.get("GSM8K_DIR"):  # the user's GSM8K folder, as the launcher's default data would use it
                env["GSM8K_DIR"] = os.environ["GSM8K_DIR"]
        checked = set()
        for name, arm, seed in runs(cfg):
            if arm in checked:  # the seeds of an arm differ in data.seed alone
                continue
            checked.add(arm)
            settings = [
                s
                for s in run_settings(flow, cfg, name, arm, seed)
                if not s.startswith(("data.train_files=", "data.val_files=", "data.val_max_samples="))
            ]
            say(f"policy_learns run {name}: recipe {recipe_of(arm)}")
            try:
                launch.check_recipe(recipe_of(arm), settings, dict(env), **flow.where(name, f"{name}_metrics.jsonl"))
            except launch.LaunchError as e:
                say(f"ERROR: {e}")
                return 2
    return 0


if __name__ == "__main__":
    sys.exit(as_command(main))
