"""Multi-stage workflows as Python stages: build data -> warm start (SFT) -> GRPO -> merge -> evaluate.

    python -m scripts.pipeline judge --task pointwise --out runs/pointwise [hydra overrides for GRPO]
    python -m scripts.pipeline judge --task pairwise_ref --grpo-steps 40 --out runs/pairwise_ref
    python -m scripts.pipeline judge --task pairwise --no-sft --pair-groups false --out runs/pairwise_plain
    python -m scripts.pipeline judge_to_reward --out runs/j2r          # + policy rewarded by the judge

Judge tasks (all on GSM8K verification data from ``data_prep.gsm8k_verify``):

* ``pointwise``     reference shown, ``gsm8k_grade.v3``, labels 4 / 0 -> recipes/judge_pointwise
* ``pairwise_ref``  reference shown, ``pairwise_ref.v2``, both orders  -> recipes/judge_pairwise
* ``pairwise``      no reference, ``pairwise.v1`` (preference-style)   -> recipes/judge_pairwise

Stages (each prints its output; a stage whose ``.done`` marker exists is skipped, so a rerun resumes):
``samples`` (``--model-solutions base``: the start model's answers to GSM8K train questions, on the GPU beside
``data``, after ``policy_data``: ``data_prep.gsm8k``) -> ``data`` (verification parquet of perturbed reference
solutions, CPU) -> ``sft_data`` (model-written rows too, then ``data_prep.judge_sft``) -> ``eval_before``
(``scripts.eval.judge``, the start model, beside ``sft`` with a fixed KV cache unless ``--no-parallel-eval``) ->
``sft`` (``torchrun -m verl.trainer.sft_trainer``) -> ``eval_sft`` (in ``judge_to_reward`` beside ``policy``) ->
``grpo`` (the recipe through ``scripts.launch.launcher.run_recipe``, checked first) -> ``merge`` (``verl.model_merger``)
-> ``eval_after`` -> ``compare`` (``compare.md``: before / after SFT / after GRPO). ``judge_to_reward`` adds
``policy``: recipes/gsm8k_local_judge with the trained judge as the reward (``JudgeToReward.policy(judge, recipe=...)``
takes another reward recipe; ``scripts.workflows.policy_learns`` compares it with the rule).

Machine settings are the launcher's knobs (``python -m scripts.launch --knobs``: MODEL, GSM8K_DIR, PYTHON, N_GPUS,
NO_FLASH_ATTN, ...), with its defaults (``scripts/launch/defaults.py``). ``DRY_RUN=1`` runs no stage: it checks each training
stage's recipe with the arguments that stage gets (the default model and data stand for what earlier stages make).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import glob
import json
import os
import shlex
import subprocess
import sys
import time

import scripts
from reward_fns import verdicts
from scripts import bytecode
from scripts.launch import defaults, knobs, services
from scripts.launch import launcher as launch
from scripts.report.metrics import read_metrics
from scripts.workflows.stages import Stages, say

ROOT = scripts.ROOT
TASKS = {
    # task: (recipe, verdict kind (reward_fns.verdicts; its name prefixes the verification parquets), gsm8k_verify prompt args)
    "pointwise": ("judge_pointwise", "pointwise", ["--pair-prompt", "pairwise_ref.v2"]),
    "pairwise_ref": ("judge_pairwise", "pairwise", ["--pair-prompt", "pairwise_ref.v2"]),
    "pairwise": ("judge_pairwise", "pairwise", ["--pair-prompt", "pairwise.v1"]),
}
POLICY_RECIPE = "gsm8k_local_judge"
# The policy stage is a short check that the trained judge is used (6 steps by default), so its judge decodes
# eagerly: CUDA graphs (the recipe's default, for real runs) cost ~40 s of compile and capture at start-up on an
# H100 and saved 0.5-1 s per step with the trained judge's short replies. --policy-override wins over this.
POLICY_STAGE = ["reward.reward_model.rollout.enforce_eager=true"]
SHARED_KV_CACHE_GB = 4.0  # an evaluator beside a training stage: ~170k tokens of KV cache for a 135M judge


class Pipeline(Stages):
    def __init__(self, args, overrides: list[str]):
        self.args = args
        self.overrides = overrides
        self.py = os.environ.get("PYTHON") or sys.executable
        self.env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        if args.no_flash_attn:
            self.env["NO_FLASH_ATTN"] = "1"
        self.n_gpus = int(os.environ.get("N_GPUS", "1"))
        self.recipe, kind, self.prompt_args = TASKS[args.task]
        self.verdict = verdicts.KINDS[kind]
        self.prefix = self.verdict.name
        self.t0 = time.time()
        super().__init__(args.out)

    def sh(self, cmd: list[str], log: str, env: dict | None = None, ok=None) -> None:
        """Run ``cmd``, its output to the terminal and to ``log``; a non-zero exit stops the pipeline
        unless ``ok()`` says the stage's output was written anyway (an evaluator's report)."""
        say("$ " + " ".join(shlex.quote(c) for c in cmd))
        os.makedirs(os.path.dirname(log), exist_ok=True)
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env or self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, text=True, bufsize=1)
        with services.tracked(proc), open(log, "a", encoding="utf-8") as f:
            echo = not self.args.quiet and not getattr(self._local, "background", False)
            for line in proc.stdout:
                f.write(line)
                if echo:
                    sys.stdout.write(line)
            rc = proc.wait()
        if rc != 0 and ok is not None and ok():
            say(f"exit {rc}, output written: continuing (see {log})")
        elif rc != 0:
            raise SystemExit(f"[pipeline] stage failed (exit {rc}): {cmd[0]} ... ; log: {log}")

    @functools.cached_property
    def base(self) -> str:
        """The start model (judge and policy): MODEL, else the offline SmolLM2-135M-Instruct, materialised once."""
        try:
            return defaults.model(self.env)
        except defaults.DefaultsError as e:
            raise SystemExit(f"[pipeline] {e}") from None

    def data(self) -> None:
        a = self.args
        cmd = [self.py, "-m", "data_prep.gsm8k_verify", "--out", self.path("data"), "--tokenizer", self.base,
               "--max-prompt-length", str(a.max_prompt_length), *self.prompt_args, *defaults.gsm8k_args(self.env)]
        self.sh(cmd, self.path("logs", "data.log"))

    def sft_data(self) -> None:
        a = self.args
        if a.model_solutions:  # a model's own answers (scripts.eval.gsm8k samples.jsonl), graded by final answer
            self.sh([self.py, "-m", "data_prep.gsm8k_verify", "--candidates", "solutions", "--train", self.solutions_file(),
                     "--grade", "flexible", "--on-bad-row", "skip", "--no-fail-on-empty", "--out", self.path("data", "model_solutions"),
                     "--tokenizer", self.base, "--max-prompt-length", str(a.max_prompt_length), *self.prompt_args],
                    self.path("logs", "sft_data.log"))
        self.sh([self.py, "-m", "data_prep.judge_sft", "--in", *self.train_files(), "--out", self.path("data", "sft_train.parquet"),
                 "--max-rows", str(a.sft_rows)], self.path("logs", "sft_data.log"))

    def solutions_file(self) -> str:
        return self.path("samples", "samples.jsonl") if self.args.model_solutions == "base" else self.args.model_solutions

    def policy_data(self) -> None:
        """GSM8K as the policy sees it (``data_prep.gsm8k``: local files or the HF hub)."""
        self.sh([self.py, "-m", "data_prep.gsm8k", "--out", self.path("policy_data"), "--tokenizer", self.base,
                 *defaults.gsm8k_args(self.env)], self.path("logs", "policy_data.log"))

    def samples(self) -> None:
        """The start model's own answers to GSM8K train questions, with the policy's prompt and sampled as GRPO
        rollouts are, for the judge's data."""
        a = self.args
        self.sh([self.py, "-m", "scripts.eval.gsm8k", "--data", self.path("policy_data", "train.parquet"),
                 "--limit", str(a.model_solution_questions),
                 "--n-samples", "2", "--temperature", "1.0", "--max-tokens", "512", "--vllm-offline", self.solver(),
                 "--gpu-memory-utilization", str(a.eval_gpu_mem), *(["--kv-cache-gb", str(a.eval_kv_cache_gb)]
                                                                   if a.eval_kv_cache_gb else []),
                 "--out", self.path("samples"), "--no-progress", "--no-plots"], self.path("logs", "samples.log"))

    def solver(self) -> str:
        """The model whose answers ``samples`` collects: the start model."""
        return self.base

    def train_files(self) -> list[str]:
        """The judge's training parquet(s): the verification split, plus the model-solution rows when given."""
        files = [self.path("data", f"{self.prefix}_train.parquet")]
        extra = self.path("data", "model_solutions", f"{self.prefix}_train.parquet")
        if self.args.model_solutions and os.path.exists(extra):
            import pyarrow.parquet as pq

            if pq.ParquetFile(extra).metadata.num_rows:  # pairs need a right and a wrong answer to one question
                files.append(extra)
        return files

    def evaluate(self, model: str, name: str, shared_gpu: bool = False) -> None:
        """``scripts.eval.judge`` on the held-out rows. ``shared_gpu``: another stage trains on the GPU meanwhile, so
        vLLM gets a fixed KV cache (``--eval-kv-cache-gb``, else SHARED_KV_CACHE_GB) instead of sizing it from the
        memory that is free while it profiles."""
        a = self.args
        data = self.path("data", f"{self.prefix}_test.parquet")
        sel = ["--pairs", str(a.eval_pairs)] if self.verdict.paired else ["--limit", str(2 * a.eval_pairs)]
        cmd = [self.py, "-m", "scripts.eval.judge", "--data", data, *sel, "--seed", "0",
               "--vllm-offline", model, "--max-tokens", str(a.max_response_length), "--temperature", "0",
               "--gpu-memory-utilization", str(a.eval_gpu_mem), "--out", self.path(name), "--no-progress"]
        kv_cache_gb = a.eval_kv_cache_gb or (SHARED_KV_CACHE_GB if shared_gpu else None)
        if kv_cache_gb:
            cmd += ["--kv-cache-gb", str(kv_cache_gb)]
        # an evaluation that fails (or that measured nothing, e.g. an untrained judge) does not stop training
        self.sh(cmd, self.path("logs", f"{name}.log"), ok=lambda: True)

    def sft(self, name: str = "sft", train_file: str = "", steps: int | None = None, max_length: int = 0) -> None:
        """verl's SFT trainer: the judge's warm start, or (``name``, ``train_file``, ...) another one, e.g. the policy's."""
        a = self.args
        steps = a.sft_steps if steps is None else steps
        cmd = [self.py, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={self.n_gpus}", "-m", "verl.trainer.sft_trainer",
               f"data.train_files={train_file or self.path('data', 'sft_train.parquet')}", "data.val_files=null",
               f"data.max_length={max_length or a.max_prompt_length + a.max_response_length}", "data.truncation=right",
               f"data.train_batch_size={a.sft_batch}", "data.micro_batch_size_per_gpu=8", "data.num_workers=0",
               f"model.path={self.base}", "model.external_lib=scripts.train.fast_logprobs", f"optim.lr={a.sft_lr}", f"trainer.total_epochs={a.sft_epochs}",
               f"trainer.default_local_dir={self.path(name)}", "trainer.project_name=verl-judge",
               f"trainer.experiment_name={a.task}-{name}", "trainer.logger=[console,file]", "trainer.save_freq=-1",
               "trainer.resume_mode=disable", "checkpoint.save_contents=[model,hf_model]",
               f"trainer.n_gpus_per_node={self.n_gpus}", *self.sdpa(), *a.sft_override]
        if steps > 0:
            cmd.append(f"trainer.total_training_steps={steps}")
        env = dict(self.env, VERL_FILE_LOGGER_PATH=self.path(f"{name}_metrics.jsonl"))
        self.sh(cmd, self.path("logs", f"{name}.log"), env)

    def sdpa(self) -> list[str]:
        """The SFT trainer's overrides without flash-attn (NO_FLASH_ATTN's rule, as the recipes apply it)."""
        if knobs.flash_attn(self.env.get("NO_FLASH_ATTN", "auto")):
            return []
        say("no flash-attn (NO_FLASH_ATTN / --no-flash-attn, or not importable): torch SDPA attention, no remove-padding")
        return ["model.use_remove_padding=False", "+model.override_config.attn_implementation=sdpa"]

    def sft_model(self, name: str = "sft") -> str:
        found = sorted(glob.glob(self.path(name, "global_step_*", "huggingface")),
                       key=lambda p: int(p.split("global_step_")[1].split(os.sep)[0]))
        if not found:
            raise SystemExit(f"[pipeline] no SFT model under {self.path(name)}")
        return found[-1]

    def grpo_settings(self) -> list[str]:  # its start model and data: grpo()
        a = self.args
        return [f"trainer.total_training_steps={a.grpo_steps}", f"trainer.default_local_dir={self.path('grpo')}",
                f"trainer.experiment_name={a.task}", f"trainer.save_freq={min(a.grpo_steps, 10)}",
                f"verl_judge.pair_groups={a.pair_groups}", *self.overrides]

    def grpo(self, start: str) -> None:
        inputs = [f"actor_rollout_ref.model.path={start}", "data.train_files=[" + ",".join(self.train_files()) + "]",
                  f"data.val_files={self.path('data', f'{self.prefix}_test.parquet')}"]
        self.train("grpo", self.recipe, inputs + self.grpo_settings(), "metrics.jsonl")

    def train(self, name: str, recipe: str, overrides: list[str], metrics: str, env: dict | None = None) -> None:
        """A training stage: the recipe with ``overrides`` through the launcher (checked, then run), ``logs/<name>.log``;
        ``env``: the stage's environment instead of the pipeline's (another GPU)."""
        quiet = contextlib.redirect_stdout(open(os.devnull, "w")) if self.args.quiet else contextlib.nullcontext()
        with quiet:
            rc = launch.run_recipe(recipe, overrides, dict(env or self.env, PYTHON=self.py), **self.where(name, metrics))
        if rc != 0:
            raise SystemExit(f"[pipeline] stage failed (exit {rc}): recipe {recipe}; log: {self.path('logs', name + '.log')}")

    def where(self, name: str, metrics: str) -> dict:
        return {"output_dir": self.out, "metrics_file": self.path(metrics), "log_file": self.path("logs", f"{name}.log")}

    def merge(self) -> None:
        steps = sorted(glob.glob(self.path("grpo", "global_step_*")), key=lambda p: int(p.rsplit("_", 1)[1]))
        if not steps:
            raise SystemExit(f"[pipeline] no GRPO checkpoint under {self.path('grpo')}")
        self.sh([self.py, "-m", "verl.model_merger", "merge", "--backend", "fsdp",
                 "--local_dir", os.path.join(steps[-1], "actor"), "--target_dir", self.path("hf")],
                self.path("logs", "merge.log"))

    def compare(self) -> None:
        rows, keys = [], self.verdict.compare_keys
        for name in ("eval_before", "eval_sft", "eval_after"):
            f = self.path(name, "report.json")
            if os.path.exists(f):
                rep = json.load(open(f))
                overall = rep.get("overall", rep)
                rows.append((name, [overall.get(k) for k in keys]))
        fmt = lambda v: f"{v:.3f}" if isinstance(v, float) else str(v)  # noqa: E731
        lines = [f"# {self.args.task}: held-out evaluation ({self.path('data', self.prefix + '_test.parquet')})", "",
                 "| stage | " + " | ".join(keys) + " |", "|---|" + "---:|" * len(keys)]
        lines += [f"| {n} | " + " | ".join(fmt(v) for v in vals) + " |" for n, vals in rows]
        open(self.path("compare.md"), "w").write("\n".join(lines) + "\n")
        print("\n".join(lines))

    def run_judge(self, beside_next: bool = False) -> str:
        """The judge's stages. ``beside_next``: the last evaluation runs in the background, beside the caller's next
        stage (the caller joins it and writes ``compare.md``)."""
        a = self.args
        if a.model_solutions == "base":  # GPU work beside the CPU-bound data stage
            self.stage("policy_data", self.path("policy_data"), self.policy_data)
            self.stage("samples", self.path("samples"), self.samples, background=True)
        self.stage("data", self.path("data"), self.data)
        self.stage("sft_data", self.path("data", "sft_train.parquet"), self.sft_data)
        if not a.skip_eval and a.eval_before:
            # the start model's evaluation needs nothing the SFT makes: it runs beside it when SFT will run
            self.eval_stage("eval_before", self.base,
                            beside=a.sft and not a.sft_model and not os.path.exists(self.path(".sft.done")))
        start = self.base
        if a.sft_model:  # a warm start trained elsewhere (e.g. the same SFT for GRPO with pair groups on and off)
            start = a.sft_model
            say(f"warm start given: {start} (stages sft and eval_sft skipped)")
        elif a.sft:
            self.stage("sft", self.path("sft"), self.sft)
            start = self.sft_model()
            if not a.skip_eval:
                self.eval_stage("eval_sft", start, beside=beside_next and a.grpo_steps <= 0)
        if a.grpo_steps > 0:
            self.stage("grpo", self.path("grpo"), lambda: self.grpo(start))
            self.stage("merge", self.path("hf"), self.merge)
            judge = self.path("hf")
            if not a.skip_eval:
                self.eval_stage("eval_after", judge, beside=beside_next)
        else:
            judge = start
        if not beside_next:
            self.finish_judge()
        return judge

    def eval_stage(self, name: str, model: str, beside: bool) -> None:
        """Evaluation stage ``name`` of ``model``; ``beside`` (and ``--parallel-eval``): in the background, fixed KV cache."""
        bg = beside and self.args.parallel_eval
        self.stage(name, self.path(name), lambda: self.evaluate(model, name, shared_gpu=bg), background=bg)

    def finish_judge(self) -> None:
        self.wait_background()
        if not self.args.skip_eval:
            self.compare()


class JudgeToReward(Pipeline):
    """The judge pipeline, then a GSM8K policy trained with the merged judge as its reward."""

    def policy_settings(self, name: str = "policy") -> list[str]:  # its models and data: policy()
        return [f"trainer.total_training_steps={self.args.policy_steps}", f"trainer.default_local_dir={self.path(name)}",
                f"trainer.experiment_name=judge_to_reward-{name}", "trainer.save_freq=-1", *POLICY_STAGE,
                *self.args.policy_override]

    def policy(self, judge: str, recipe: str = POLICY_RECIPE, name: str = "policy") -> None:
        """A GSM8K policy trained with ``recipe`` (default the local judge's, ``judge`` as its reward model);
        outputs ``<name>/`` (checkpoints), ``<name>_metrics.jsonl``, ``logs/<name>.log``."""
        inputs = [f"actor_rollout_ref.model.path={self.base}", f"reward.reward_model.model_path={judge}",
                  f"data.train_files={self.path('policy_data', 'train.parquet')}",
                  f"data.val_files={self.path('policy_data', 'test.parquet')}"]
        self.train(name, recipe, inputs + self.policy_settings(name), f"{name}_metrics.jsonl")

    def summary(self) -> None:
        steps = read_metrics(self.path("policy_metrics.jsonl"))
        train = [m for m in steps if "judge_health/parse_fail_rate" in m]
        mean = lambda k: sum(m[k] for m in train) / len(train) if train else float("nan")  # noqa: E731
        lines = [f"# judge_to_reward ({self.out})", "", open(self.path("compare.md")).read().split("\n", 2)[-1]
                 if os.path.exists(self.path("compare.md")) else "", "",
                 f"Policy stage ({len(train)} training steps, {self.path('policy_metrics.jsonl')}):", "",
                 "| judge as the reward | first step | last step | mean over steps |", "|---|---:|---:|---:|"]
        for k in ("judge_health/parse_fail_rate", "judge_health/error_rate", "judge_health/fallback_rate",
                  "judge_health/agree_rule", "judge_health/score_mean", "critic/score/mean",
                  "reward/rule_score/mean", "reward/rule_format/mean"):
            if train and k in train[-1]:
                lines.append(f"| `{k}` | {train[0][k]:.3f} | {train[-1][k]:.3f} | {mean(k):.3f} |")
        lines += ["", f"Wall time of this invocation (the stages it ran): {time.time() - self.t0:.0f} s."]
        open(self.path("summary.md"), "w").write("\n".join(lines) + "\n")
        print("\n".join(lines))

    def run(self) -> str:
        self.stage("policy_data", self.path("policy_data"), self.policy_data)
        judge = self.run_judge(beside_next=True)  # the judge's last evaluation runs beside the policy stage
        self.stage("policy", self.path("policy"), lambda: self.policy(judge))
        self.finish_judge()
        self.summary()
        return judge


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m scripts.pipeline", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workflow", choices=("judge", "judge_to_reward"),
                   help="judge: data -> SFT -> GRPO -> merge -> evaluate; judge_to_reward: the same (pointwise), then "
                        "a GSM8K policy rewarded by the trained judge")
    p.add_argument("--task", choices=sorted(TASKS), default="pointwise")
    add_judge_args(p)
    p.add_argument("--policy-steps", type=int, default=6, help="judge_to_reward: policy GRPO steps (default 6)")
    p.add_argument("--policy-override", action="append", default=[], metavar="KEY=VALUE",
                   help="judge_to_reward: Hydra override of the policy stage (the positional overrides go to the judge)")
    return p


def add_judge_args(p: argparse.ArgumentParser) -> None:
    """The judge stages' options (also ``scripts.workflows.policy_learns``'s)."""
    p.add_argument("--out", required=True, help="run folder (stages resume from it)")
    p.add_argument("--sft", action=argparse.BooleanOptionalAction, default=True, help="warm start with SFT (default on)")
    p.add_argument("--sft-rows", type=int, default=4000, help="SFT rows (default 4000)")
    p.add_argument("--sft-epochs", type=int, default=1)
    p.add_argument("--sft-steps", type=int, default=100, help="SFT optimizer steps (0 = the whole epoch; default 100)")
    p.add_argument("--sft-batch", type=int, default=32)
    p.add_argument("--sft-lr", type=float, default=2e-5)
    p.add_argument("--sft-override", action="append", default=[], metavar="KEY=VALUE", help="extra SFT trainer override")
    p.add_argument("--model-solutions", metavar="JSONL|base|none", default=None,
                   help="also train on a model's own GSM8K answers, graded by final answer: a scripts.eval.gsm8k "
                        "samples.jsonl, or 'base' = stage 'samples' asks the start model (2 answers at temperature 1.0 to "
                        "each of --model-solution-questions train questions); default: base for judge_to_reward, none for judge")
    p.add_argument("--model-solution-questions", type=int, default=2000, help="'base': train questions asked (2000)")
    p.add_argument("--sft-model", metavar="HF_DIR",
                   help="start GRPO from this warm-started judge instead of training one (e.g. another run's "
                        "sft/global_step_N/huggingface)")
    p.add_argument("--grpo-steps", type=int, default=None,
                   help="GRPO steps after the warm start (0 = none; default 30, judge_to_reward: 0)")
    p.add_argument("--pair-groups", choices=("true", "false"), default="true",
                   help="pairwise: both orders of a pair in one GRPO group (default true)")
    p.add_argument("--max-prompt-length", type=int, default=1280)
    p.add_argument("--max-response-length", type=int, default=128)
    p.add_argument("--eval-pairs", type=int, default=None,
                   help="held-out pairs (pointwise: 2x rows) evaluated (default 300, judge_to_reward: 100)")
    p.add_argument("--eval-gpu-mem", type=float, default=0.15)
    p.add_argument("--parallel-eval", action=argparse.BooleanOptionalAction, default=True,
                   help="evaluate the start model beside the SFT stage and, in judge_to_reward, the trained judge beside the "
                        "policy stage (default on; they share the GPU, the evaluator with a fixed KV cache)")
    p.add_argument("--eval-kv-cache-gb", type=float, default=None, help="fixed vLLM KV cache of the evaluator (GPU shared)")
    p.add_argument("--no-flash-attn", action="store_true", help="NO_FLASH_ATTN=1: torch SDPA attention, no remove-padding")
    p.add_argument("--skip-eval", action="store_true", help="no evaluation stage at all")
    p.add_argument("--eval-before", action=argparse.BooleanOptionalAction, default=True, help="evaluate the start model")
    p.add_argument("--quiet", action="store_true", help="stage output only to the logs")


def dry_run(pipe: "Pipeline", argv: list[str]) -> int:
    """DRY_RUN: each training stage's recipe, with the settings and arguments that stage gets, checked as a
    single recipe run is (the default model and data stand for the ones the stages before it make)."""
    stages = [("judge", "grpo", pipe.recipe, pipe.grpo_settings(), "metrics.jsonl")]
    if isinstance(pipe, JudgeToReward):
        stages.append(("policy", "policy", POLICY_RECIPE, pipe.policy_settings(), "policy_metrics.jsonl"))
    for stage, name, recipe, stage_overrides, metrics in stages:
        say(f"{pipe.args.workflow} stage {stage}: recipe {recipe}")
        try:
            launch.check_recipe(recipe, stage_overrides, dict(pipe.env), **pipe.where(name, metrics))
        except launch.LaunchError as e:
            say(f"ERROR: {e}")
            return 2
    say(f"DRY_RUN: would run: python -m scripts.pipeline {shlex.join(argv)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    args, overrides = parser.parse_known_args(argv)
    bad = [o for o in overrides if "=" not in o or o.startswith("-")]
    if bad:
        parser.error(f"unrecognized arguments: {' '.join(bad)} (extra arguments are Hydra overrides KEY=VALUE)")
    j2r = args.workflow == "judge_to_reward"
    if args.model_solutions is None:
        args.model_solutions = "base" if j2r else "none"
    if args.model_solutions == "none":
        args.model_solutions = None
    if args.model_solutions not in (None, "base") and not os.path.isfile(args.model_solutions):
        parser.error(f"--model-solutions {args.model_solutions}: no such file")
    if args.sft_model and not os.path.isfile(os.path.join(args.sft_model, "config.json")):
        parser.error(f"--sft-model {args.sft_model}: not a Hugging Face model folder (no config.json)")
    if j2r and args.task != "pointwise":
        parser.error("judge_to_reward trains the pointwise judge the llm_judge reward asks (--task pointwise)")
    unknown = knobs.unknown(os.environ)
    if unknown:
        parser.error("; ".join(unknown))
    args.grpo_steps = (0 if j2r else 30) if args.grpo_steps is None else args.grpo_steps
    args.eval_pairs = (100 if j2r else 300) if args.eval_pairs is None else args.eval_pairs
    pipe = JudgeToReward(args, overrides) if j2r else Pipeline(args, overrides)
    if launch.truthy(os.environ.get("DRY_RUN") or "0"):
        return dry_run(pipe, argv)
    slow_start = bytecode.warning()  # before any stage: every stage starts Python processes
    if slow_start:
        say(f"WARNING: {slow_start}")
    judge = pipe.guarded(pipe.run if j2r else pipe.run_judge)
    say(f"done in {time.time() - pipe.t0:.0f}s: judge {judge}")
    return 0

