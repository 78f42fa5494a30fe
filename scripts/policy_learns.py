"""Does a policy learn from the trained judge as it learns from the rule? The side-by-side experiment.

    python -m scripts.policy_learns --out runs/policy_learns                  # rule run and judge run, 100 steps
    python -m scripts.policy_learns --out runs/pl --no-rule --steps 30        # the judge run alone (scripts/main.sh)
    python -m scripts.policy_learns --out runs/pl --testbed none              # GSM8K itself (a real model: MODEL=...)

The same start policy, data, seed and GRPO settings are trained twice: with the ``#### N`` rule
(recipes/gsm8k_rule) and with the judge that the judge pipeline trains (recipes/gsm8k_local_judge, served on the
same GPU: ``--judge-placement server``, default, or ``colocated``). Stages (resumable, as in ``scripts.pipeline``):

1. ``testbed``: ``data_prep.word_problems`` (``--testbed-arg`` passes settings; ``--testbed none``: GSM8K from
   ``GSM8K_DIR`` / the hub), then ``policy_data`` (``data_prep.gsm8k``);
2. in a chain of their own, beside the judge's stages: ``policy_sft`` (the policy's warm start on
   ``--policy-sft-rows`` worked solutions, ``data_prep.policy_sft`` + verl's SFT trainer; 0 = none), then ``rule``
   (the rule run), ``merge_rule``, ``policy_eval_rule``;
3. the judge's stages of ``scripts.pipeline judge_to_reward``: verification data plus the start policy's own answers
   (``samples``, after the policy's warm start, graded by the last number; ``--model-solutions none``: verification data
   only), SFT warm start, evaluation before / after;
4. ``policy_eval_before`` (``scripts.eval.gsm8k`` of the start policy, ``--eval-questions`` held-out questions,
   greedy), beside ``judge`` (the judge run), then ``merge_judge``, ``policy_eval_judge``;
5. ``report.md``, ``report.json``, ``policy_learns.png`` (``scripts.report.policy_learns``).

The runs share the GPU, so each vLLM engine gets a fixed KV cache and stays awake. Positional arguments are Hydra
overrides for both runs. verl validates every ``--test-freq`` steps on ``--val-questions`` test questions (greedy).
"""

from __future__ import annotations

import argparse
import os
import sys

from scripts import knobs, launch, pipeline
from scripts.report import policy_learns as report

# GRPO settings of both runs, one place (the recipes' own defaults otherwise): 16 questions x 8 answers a step, two
# optimizer steps of 8 questions each, short answers (GSM8K itself: data.max_prompt_length=512
# data.max_response_length=512), large micro-batches for a small model, the policy's vLLM with CUDA graphs (100 steps
# of ~100-token answers: capture pays for itself), the judge's eager (its verdicts are ~30 tokens)
RUN = ["data.train_batch_size=16", "actor_rollout_ref.rollout.n=8", "actor_rollout_ref.actor.ppo_mini_batch_size=8",
       "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=64", "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=64",
       "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=64", "data.max_prompt_length=192",
       "data.max_response_length=192", "actor_rollout_ref.actor.optim.lr=5e-6", "data.seed=0",
       "trainer.val_before_train=true", "trainer.max_actor_ckpt_to_keep=1", "actor_rollout_ref.rollout.enforce_eager=false",
       "actor_rollout_ref.rollout.gpu_memory_utilization=0.15", "actor_rollout_ref.rollout.free_cache_engine=false"]
JUDGE_RUN = ["reward.reward_model.rollout.gpu_memory_utilization=0.1", "reward.reward_model.rollout.free_cache_engine=false",
             "reward.reward_model.rollout.enforce_eager=true"]
JUDGE_SERVER_RUN = ["judge_placement=server", "verl_judge.judge_server.gpu_memory_utilization=0.1"]  # + its KV cache


class PolicyLearns(pipeline.JudgeToReward):
    def __init__(self, args, overrides: list[str]):
        super().__init__(args, overrides)
        if args.testbed != "none":
            self.env["GSM8K_DIR"] = self.path("testbed")

    def solver(self) -> str:
        return self.start

    @property
    def start(self) -> str:
        return self.sft_model("policy_sft") if self.args.policy_sft_rows > 0 else self.base

    def testbed(self) -> None:
        self.sh([self.py, "-m", "data_prep.word_problems", "--out", self.path("testbed"), *self.args.testbed_arg],
                self.path("logs", "testbed.log"))

    def policy_sft(self) -> None:
        a = self.args
        data = self.path("policy_sft_data", "train.parquet")
        self.sh([self.py, "-m", "data_prep.policy_sft", "--in", self.path("policy_data", "train.parquet"), "--out", data,
                 "--max-rows", str(a.policy_sft_rows)], self.path("logs", "policy_sft.log"))
        self.sft("policy_sft", data, steps=0, max_length=512)

    def eval_policy(self, name: str, model: str) -> None:
        a = self.args
        self.sh([self.py, "-m", "scripts.eval.gsm8k", "--data", self.path("policy_data", "test.parquet"),
                 "--limit", str(a.eval_questions), "--temperature", "0", "--max-tokens", "256", "--vllm-offline", model,
                 "--gpu-memory-utilization", str(a.eval_gpu_mem), "--out", self.path(name), "--no-progress",
                 "--kv-cache-gb", str(a.eval_kv_cache_gb)],
                self.path("logs", f"{name}.log"))

    def run_settings(self, name: str) -> list[str]:
        a = self.args
        kv = f"kv_cache_memory_bytes={int(a.kv_cache_gb * 2**30)}"
        settings = [*RUN, f"+actor_rollout_ref.rollout.engine_kwargs.vllm.{kv}",
                    f"trainer.total_training_steps={a.steps}", f"trainer.test_freq={a.test_freq}",
                    f"trainer.save_freq={a.steps}", f"data.val_max_samples={a.val_questions}",
                    f"trainer.default_local_dir={self.path(name)}", f"trainer.experiment_name=policy_learns-{name}",
                    f"trainer.rollout_data_dir={self.path(name + '_rollouts')}",  # every sample, per step: what was paid for
                    f"data.train_files={self.path('policy_data', 'train.parquet')}",
                    f"data.val_files={self.path('policy_data', 'test.parquet')}"]
        if name == "judge" and a.judge_placement == "server":  # the launcher serves the judge beside the policy
            settings += [*JUDGE_SERVER_RUN, f"verl_judge.judge_server.kv_cache_memory_bytes={int(a.kv_cache_gb * 2**30)}"]
        elif name == "judge":
            settings += [*JUDGE_RUN, f"+reward.reward_model.rollout.engine_kwargs.vllm.{kv}"]
        return settings + self.overrides

    def policy_run(self, name: str, judge: str | None = None) -> None:
        recipe = "gsm8k_local_judge" if judge else "gsm8k_rule"
        models = [f"actor_rollout_ref.model.path={self.start}"] + ([f"reward.reward_model.model_path={judge}"] if judge else [])
        self.train(name, recipe, models + self.run_settings(name), f"{name}_metrics.jsonl")

    def merge_run(self, name: str) -> None:
        step = self.path(name, f"global_step_{self.args.steps}", "actor")
        self.sh([self.py, "-m", "verl.model_merger", "merge", "--backend", "fsdp", "--local_dir", step,
                 "--target_dir", self.path(f"{name}_hf")], self.path("logs", f"merge_{name}.log"))

    def tail(self, name: str) -> list[tuple]:
        """A run's stages after its start policy exists: the run, its merge, its held-out evaluation."""
        return [(name, self.path(name), lambda: self.policy_run(name, self.judge if name == "judge" else None)),
                (f"merge_{name}", self.path(f"{name}_hf"), lambda: self.merge_run(name)),
                (f"policy_eval_{name}", self.path(f"policy_eval_{name}"),
                 lambda: self.eval_policy(f"policy_eval_{name}", self.path(f"{name}_hf")))]

    def run(self) -> str:
        a = self.args
        if a.testbed != "none":
            self.stage("testbed", self.path("testbed"), self.testbed)
        self.stage("policy_data", self.path("policy_data"), self.policy_data)
        # chain "policy": the policy's warm start, then (with --rule) the rule run, its merge and evaluation, all beside
        # the judge's stages; the judge's samples (--model-solutions base) are the start policy's, so they wait for it
        first = [("policy_sft", self.path("policy_sft"), self.policy_sft)] if a.policy_sft_rows > 0 else []
        policy = self.chain("policy", first + (self.tail("rule") if a.rule else []))
        if first and a.model_solutions:
            self.wait_for(policy, "policy_sft")
        self.judge = self.run_judge(beside_next=True)
        if first:
            self.wait_for(policy, "policy_sft")
        self.stage("policy_eval_before", self.path("policy_eval_before"),
                   lambda: self.eval_policy("policy_eval_before", self.start), background=True)
        for name, output, fn in self.tail("judge"):
            self.stage(name, output, fn)
        self.finish_judge()
        self.join(policy)
        report.write(self.out, [n for n in ("rule", "judge") if n == "judge" or a.rule], log=print)
        return self.judge


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m scripts.policy_learns", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    pipeline.add_judge_args(p)
    p.add_argument("--testbed", choices=("word_problems", "none"), default="word_problems",
                   help="the policy's task: data_prep.word_problems (default) or none = GSM8K (GSM8K_DIR / the hub)")
    p.add_argument("--testbed-arg", action="append", default=[], metavar="ARG",
                   help="an argument for data_prep.word_problems, e.g. --testbed-arg=--steps=3 (repeatable)")
    p.add_argument("--policy-sft-rows", type=int, default=500,
                   help="worked solutions in the policy's warm start, one epoch (default 500; 0 = no warm start)")
    p.add_argument("--rule", action=argparse.BooleanOptionalAction, default=True,
                   help="also train with the rule reward, beside the judge's stages (default on)")
    p.add_argument("--steps", type=int, default=100, help="GRPO steps of each run (default 100)")
    p.add_argument("--test-freq", type=int, default=10, help="verl validation every N steps (default 10)")
    p.add_argument("--val-questions", type=int, default=300, help="test questions in verl's validation (default 300)")
    p.add_argument("--eval-questions", type=int, default=500, help="held-out questions, greedy (default 500)")
    p.add_argument("--judge-placement", choices=("colocated", "server"), default="server",
                   help="the judge run's judge: server (default: an OpenAI-compatible server beside the policy, rewards "
                        "streamed as each rollout finishes) or colocated (verl's reward stage); recipes/gsm8k_local_judge")
    p.add_argument("--kv-cache-gb", type=float, default=4.0, help="fixed KV cache of each run's vLLM engines (4)")
    # every vLLM engine of the evaluations and samples gets a fixed KV cache: the GPU is shared from the start
    p.set_defaults(task="pointwise", model_solutions="base", grpo_steps=0, eval_pairs=100, sft_model=None,
                   eval_kv_cache_gb=pipeline.SHARED_KV_CACHE_GB)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    args, overrides = parser.parse_known_args(argv)
    bad = [o for o in overrides if "=" not in o or o.startswith("-")]
    if bad:
        parser.error(f"unrecognized arguments: {' '.join(bad)} (extra arguments are Hydra overrides KEY=VALUE)")
    for name in ("steps", "test_freq", "val_questions", "eval_questions"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.model_solutions == "none":
        args.model_solutions = None
    elif args.model_solutions != "base" and not os.path.isfile(args.model_solutions):
        parser.error(f"--model-solutions {args.model_solutions}: no such file")
    if args.policy_sft_rows < 0 or not args.kv_cache_gb > 0:
        parser.error("--policy-sft-rows must be >= 0 and --kv-cache-gb > 0")
    unknown = knobs.unknown(os.environ)
    if unknown:
        parser.error("; ".join(unknown))
    pipe = PolicyLearns(args, overrides)
    if launch.truthy(os.environ.get("DRY_RUN") or "0"):
        return dry_run(pipe)
    pipe.run()
    return 0


def dry_run(pipe: PolicyLearns) -> int:
    """Each run's recipe checked with the settings it gets (the default model and data stand for the stages' own)."""
    env = dict(pipe.env)
    if not os.path.isdir(env.get("GSM8K_DIR", "")):  # the testbed is not built yet: the GSM8K default stands for it
        env.pop("GSM8K_DIR", None)
        if os.environ.get("GSM8K_DIR"):  # the user's GSM8K folder, as the launcher's default data would use it
            env["GSM8K_DIR"] = os.environ["GSM8K_DIR"]
    for name in ("rule", "judge") if pipe.args.rule else ("judge",):
        recipe = "gsm8k_local_judge" if name == "judge" else "gsm8k_rule"
        settings = [s for s in pipe.run_settings(name) if not s.startswith(("data.train_files=", "data.val_files="))]
        pipeline.say(f"policy_learns run {name}: recipe {recipe}")
        try:
            launch.check_recipe(recipe, settings, dict(env), **pipe.where(name, f"{name}_metrics.jsonl"))
        except launch.LaunchError as e:
            pipeline.say(f"ERROR: {e}")
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
