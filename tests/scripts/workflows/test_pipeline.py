"""scripts/workflows/pipeline.py on CPU: stage order, the exact commands handed to verl, resume, failures.

The GPU steps (verl's SFT trainer, ``scripts.train``, ``verl.model_merger``, the vLLM evaluator) are
replaced by a fake interpreter that records its arguments and writes what the real step writes (an SFT
model folder holds the test model's config and tokenizer, no weights); data preparation runs for real on
a small GSM8K fixture. The training stages go through the launcher, which checks each stage's composed
config for real; only its private Ray head is a stand-in.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

import scripts
from reward_fns.parse import hash_answer, normalize_number

ROOT = scripts.ROOT
GSM8K = os.path.join(ROOT, "tests", "fixtures", "data_prep", "gsm8k.jsonl")

FAKE = os.path.join(ROOT, "tests", "fixtures", "workflows", "fake_python.py")


@pytest.fixture()
def fake(tmp_path):
    return fake_tree(tmp_path)


def fake_tree(tmp_path):
    """The fake interpreter and the GSM8K set in ``tmp_path``: (tmp_path, the environment that runs them)."""
    py = tmp_path / "python"
    py.write_text(f"#!{sys.executable}\n" + open(FAKE).read())
    py.chmod(0o755)
    gsm = tmp_path / "gsm8k"
    gsm.mkdir()
    rows = []
    for line in open(GSM8K):  # the fixture also holds malformed rows, on purpose: keep the valid ones
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if (
            isinstance(row, dict)
            and isinstance(row.get("question"), str)
            and normalize_number(hash_answer(row.get("answer"))) is not None
        ):
            rows.append(row)
    # five wordings of each (distinct questions): the launcher refuses data smaller than one batch (16 rows)
    rows = [{**r, "question": f"{r['question']} (Wording {k}.)"} for k in range(5) for r in rows]
    for split in ("train", "test"):
        with open(gsm / f"{split}.jsonl", "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "DRY_RUN")}
    env.update(
        PYTHON=str(py),
        FAKE_LOG=str(tmp_path / "calls.jsonl"),
        GSM8K_DIR=str(gsm),
        MODEL=os.environ.get("VERL_JUDGE_MODEL", ""),
        NO_FLASH_ATTN="1",
    )
    return tmp_path, env


# the tests that run a stage with the test model (tests/conftest.py materialises it, or says why it cannot)
needs_model = pytest.mark.skipif(
    not os.environ.get("VERL_JUDGE_MODEL"), reason=os.environ.get("VERL_JUDGE_MODEL_MISSING", "no test model")
)

# python -m scripts.pipeline, with the launcher's private Ray head a stand-in (the fake trainer needs none)
DRIVER = """
import sys
from scripts.workflows import pipeline
from scripts.launch import ray_head
ray_head.start = lambda env, log, **kw: (None, "stand-in")
ray_head.stop = lambda proc, **kw: None
sys.exit(pipeline.main(sys.argv[1:]))
"""


def run(env, *args):
    return subprocess.run(
        [sys.executable, "-c", DRIVER, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )


def calls(tmp):
    path = tmp / "calls.jsonl"
    return [json.loads(line) for line in open(path)] if path.exists() else []


def modules(tmp):
    return [c[1] for c in calls(tmp) if c[:1] == ["-m"]]


@needs_model
def test_judge_pipeline_stages_commands_and_resume(fake):
    tmp, env = fake
    out = tmp / "run"
    r = run(
        env,
        "judge",
        "--task",
        "pairwise_ref",
        "--out",
        str(out),
        "--grpo-steps",
        "3",
        "--eval-pairs",
        "2",
        "actor_rollout_ref.rollout.n=2",
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    mods = modules(tmp)  # the start model's evaluation runs beside the SFT: those two in either order
    assert mods[:2] == ["data_prep.gsm8k_verify", "data_prep.judge_sft"]  # stages data, sft_data
    assert sorted(mods[2:4]) == ["scripts.eval.judge", "torch.distributed.run"]
    assert mods[4:] == ["scripts.eval.judge", "scripts.train", "verl.model_merger", "scripts.eval.judge"]
    by = {c[1]: c for c in calls(tmp) if c[:1] == ["-m"]}
    sft = by["torch.distributed.run"]
    assert "-m" in sft[2:] and "verl.trainer.sft_trainer" in sft
    assert "trainer.total_training_steps=100" in sft and "checkpoint.save_contents=[model,hf_model]" in sft
    assert "model.external_lib=scripts.train.fast_logprobs" in sft  # chunked log-probabilities without flash-attn
    grpo = by["scripts.train"]
    assert grpo[grpo.index("--config-path") + 1] == os.path.join(ROOT, "recipes", "judge_pairwise")
    assert (
        f"actor_rollout_ref.model.path={out}/sft/global_step_100/huggingface" in grpo
    )  # GRPO starts from the SFT model
    assert "verl_judge.pair_groups=true" in grpo and "trainer.total_training_steps=3" in grpo
    assert "trainer.save_freq=3" in grpo  # min(steps, 10): a long run keeps a checkpoint every 10 steps
    assert grpo[-1] == "actor_rollout_ref.rollout.n=2"  # the user's override comes last and wins
    assert (
        by["verl.model_merger"][by["verl.model_merger"].index("--local_dir") + 1] == f"{out}/grpo/global_step_3/actor"
    )
    assert "--pairs" in by["scripts.eval.judge"]
    compare = (out / "compare.md").read_text()
    assert "| eval_before |" in compare and "| eval_after |" in compare
    assert "exit 4, output written: continuing" in r.stdout
    for stage in ("data", "sft_data", "eval_before", "sft", "eval_sft", "grpo", "merge", "eval_after"):
        assert (out / f".{stage}.done").exists(), stage
    # a second run resumes: every stage is skipped, nothing is run again
    (tmp / "calls.jsonl").unlink()
    r = run(env, "judge", "--task", "pairwise_ref", "--out", str(out), "--grpo-steps", "3", "--eval-pairs", "2")
    assert r.returncode == 0 and modules(tmp) == [] and r.stdout.count("skipped") == 8


@pytest.mark.slow
@needs_model
def test_failed_stage_stops_and_is_not_marked_done(fake):
    tmp, env = fake
    out = tmp / "run"
    env["FAKE_FAIL"] = "grpo"
    r = run(
        env,
        "judge",
        "--task",
        "pointwise",
        "--out",
        str(out),
        "--grpo-steps",
        "2",
        "--eval-pairs",
        "2",
        "--no-eval-before",
    )
    assert r.returncode != 0 and "stage failed (exit 7)" in r.stdout + r.stderr
    assert (out / ".sft.done").exists() and not (out / ".grpo.done").exists() and not (out / ".merge.done").exists()


@pytest.mark.slow
@needs_model
def test_given_warm_start_skips_sft(fake):
    tmp, env = fake
    warm = tmp / "other" / "sft" / "global_step_40" / "huggingface"
    shutil.copytree(env["MODEL"], warm, ignore=shutil.ignore_patterns("*.safetensors", "*.bin", "*.gguf"))
    out = tmp / "off"
    r = run(
        env,
        "judge",
        "--task",
        "pairwise_ref",
        "--out",
        str(out),
        "--grpo-steps",
        "12",
        "--eval-pairs",
        "2",
        "--no-eval-before",
        "--pair-groups",
        "false",
        "--sft-model",
        str(warm),
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert modules(tmp) == [
        "data_prep.gsm8k_verify",
        "data_prep.judge_sft",
        "scripts.train",
        "verl.model_merger",
        "scripts.eval.judge",
    ]
    grpo = next(c for c in calls(tmp) if c[1] == "scripts.train")
    assert f"actor_rollout_ref.model.path={warm}" in grpo and "verl_judge.pair_groups=false" in grpo
    assert "trainer.save_freq=10" in grpo and "trainer.total_training_steps=12" in grpo
    assert not (out / ".sft.done").exists() and not (out / "sft").exists()


@pytest.mark.slow
@needs_model
def test_model_solutions_are_mixed_into_sft_and_grpo(fake):
    import pyarrow.parquet as pq

    tmp, env = fake
    gsm = [json.loads(line) for line in open(tmp / "gsm8k" / "train.jsonl")]
    samples = tmp / "samples.jsonl"  # scripts.eval.gsm8k's samples.jsonl shape: question, answer, response
    with open(samples, "w") as f:
        for i, row in enumerate(gsm[:3]):
            final = hash_answer(row["answer"])
            f.write(
                json.dumps(
                    {
                        "question_idx": i,
                        "sample": 0,
                        "question": row["question"],
                        "answer": row["answer"],
                        "response": f"Some working.\nThe answer is {final}." if i == 0 else "12\n#### 12\n#### 12",
                        "status": "ok",
                    }
                )
                + "\n"
            )
    out = tmp / "mix"
    r = run(
        env,
        "judge",
        "--task",
        "pointwise",
        "--out",
        str(out),
        "--grpo-steps",
        "2",
        "--eval-pairs",
        "2",
        "--no-eval-before",
        "--model-solutions",
        str(samples),
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    model_rows = pq.read_table(out / "data" / "model_solutions" / "pointwise_train.parquet").to_pylist()
    # graded by final answer: 'The answer is N.' (no '####') is correct, the repeated wrong '#### 12' is not
    assert [
        (
            r_["extra_info"]["kind"] if "kind" in r_["extra_info"] else r_["extra_info"]["candidate"],
            r_["reward_model"]["ground_truth"],
        )
        for r_ in model_rows
    ][:1] == [("model", 4)]
    assert sorted(r_["reward_model"]["ground_truth"] for r_ in model_rows) == [0, 0, 4]
    sft = pq.read_table(out / "data" / "sft_train.parquet").to_pylist()
    n_perturbed = pq.read_table(out / "data" / "pointwise_train.parquet").num_rows
    assert len(sft) == n_perturbed + 3  # every row of both kinds has a rationale
    assert sum("Candidate: 12. Different." in s_["messages"][-1]["content"] for s_ in sft) == 2
    grpo = next(c for c in calls(tmp) if c[1] == "scripts.train")
    assert (
        f"data.train_files=[{out}/data/pointwise_train.parquet,{out}/data/model_solutions/pointwise_train.parquet]"
        in grpo
    )


@pytest.mark.slow
@needs_model
def test_judge_to_reward_samples_the_start_model_first(fake):
    import pyarrow.parquet as pq

    tmp, env = fake
    out = tmp / "j2r"
    env.update(FAKE_EVAL_WAIT="eval_sft=policy", FAKE_EVAL_WAIT_S="90")  # ends as soon as the folder appears
    r = run(
        env,
        "judge_to_reward",
        "--out",
        str(out),
        "--eval-pairs",
        "2",
        "--no-eval-before",
        "--model-solution-questions",
        "3",
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    # GSM8K with the policy's prompt first (local files or the hub), the start model's answers to it beside the
    # perturbed verification data, then the model-solution rows, the SFT parquet and the judge
    mods = modules(tmp)
    assert mods[0] == "data_prep.gsm8k" and sorted(mods[1:3]) == ["data_prep.gsm8k_verify", "scripts.eval.gsm8k"]
    assert mods[3:6] == ["data_prep.gsm8k_verify", "data_prep.judge_sft", "torch.distributed.run"]
    assert sorted(mods[6:]) == ["scripts.eval.judge", "scripts.train"]  # the judge's evaluation beside the policy stage
    assert (out / "eval_sft_saw_policy").read_text() == "True"
    ev = next(c for c in calls(tmp) if c[1] == "scripts.eval.judge")
    assert ev[ev.index("--out") + 1] == f"{out}/eval_sft" and ev[-2:] == ["--kv-cache-gb", "4.0"]
    assert "| eval_sft |" in (out / "summary.md").read_text()
    assert "stage samples ... (in the background" in r.stdout
    gen = next(c for c in calls(tmp) if c[1] == "scripts.eval.gsm8k")
    assert gen[gen.index("--limit") + 1] == "3" and gen[gen.index("--temperature") + 1] == "1.0"
    assert (
        gen[gen.index("--n-samples") + 1] == "2" and gen[gen.index("--data") + 1] == f"{out}/policy_data/train.parquet"
    )
    assert "stage policy_data skipped" in r.stdout  # made once, used by the samples and the policy stage
    model_rows = pq.read_table(out / "data" / "model_solutions" / "pointwise_train.parquet").to_pylist()
    assert sorted(r_["reward_model"]["ground_truth"] for r_ in model_rows) == [0, 0, 0, 4, 4, 4]  # 'A: N' is right
    policy = next(c for c in calls(tmp) if c[1] == "scripts.train")
    assert f"reward.reward_model.model_path={out}/sft/global_step_100/huggingface" in policy
    assert policy[-1] == "reward.reward_model.rollout.enforce_eager=true"  # a short stage: no compile at start-up
    assert (out / "summary.md").exists() and (out / ".samples.done").exists()
    # --model-solutions none: no samples stage, perturbed references only
    (tmp / "calls.jsonl").unlink()
    r = run(
        env,
        "judge_to_reward",
        "--out",
        str(tmp / "plain"),
        "--eval-pairs",
        "2",
        "--no-eval-before",
        "--model-solutions",
        "none",
        "--sft-steps",
        "40",
    )
    assert r.returncode == 0 and modules(tmp)[:4] == [
        "data_prep.gsm8k",
        "data_prep.gsm8k_verify",
        "data_prep.judge_sft",
        "torch.distributed.run",
    ]


@needs_model
@pytest.mark.parametrize(
    "flag, beside, kv_cache",
    [
        ([], "True", ["--kv-cache-gb", "4.0"]),  # default: beside the SFT, with a fixed KV cache
        pytest.param(["--eval-kv-cache-gb", "2.5"], "True", ["--kv-cache-gb", "2.5"], marks=pytest.mark.slow),
        pytest.param(["--no-parallel-eval"], "False", [], marks=pytest.mark.slow),  # before the SFT, its own cache
    ],
)
def test_start_model_is_evaluated_beside_the_sft(fake, flag, beside, kv_cache):
    tmp, env = fake
    out = tmp / "run"
    env.update(FAKE_EVAL_WAIT="eval_before=sft", FAKE_EVAL_WAIT_S="90" if beside == "True" else "1")
    r = run(env, "judge", "--task", "pointwise", "--out", str(out), "--grpo-steps", "0", "--eval-pairs", "2", *flag)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert (out / "eval_before_saw_sft").read_text() == beside
    before = next(
        c for c in calls(tmp) if c[1] == "scripts.eval.judge" and c[c.index("--out") + 1].endswith("eval_before")
    )
    tail = before[before.index("--no-progress") + 1 :]
    assert tail == kv_cache
    assert ("in the background, beside the next stage" in r.stdout) == (beside == "True")
    mods = modules(tmp)
    assert mods[-1] == "scripts.eval.judge" and mods.count("scripts.eval.judge") == 2  # eval_sft after both
    assert (out / ".eval_before.done").exists() and "| eval_before |" in (out / "compare.md").read_text()


def test_background_stage_failure_stops_the_pipeline(tmp_path):
    from scripts.workflows.stages import Stages

    pipe = Stages(str(tmp_path))
    ran = []

    def fails():
        ran.append("fails")
        raise SystemExit("[pipeline] stage failed (exit 3)")

    pipe.stage("ok", "o", lambda: ran.append("ok"), background=True)
    pipe.stage("bad", "b", fails, background=True)
    pipe.stage("next", "n", lambda: ran.append("next"))  # runs beside them
    with pytest.raises(SystemExit, match="exit 3"):
        pipe.stage("after", "a", lambda: ran.append("after"))  # joins them first: the failure stops it
    assert sorted(ran) == ["fails", "next", "ok"]
    assert [p.name for p in sorted(tmp_path.glob(".*.done"))] == [".next.done", ".ok.done"]


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["judge", "--out", "x", "--model-solutions", "/nonexistent.jsonl"],
            "--model-solutions /nonexistent.jsonl: no such file",
        ),
        (
            ["judge", "--out", "x", "--sft-model", "/nonexistent"],
            "--sft-model /nonexistent: not a Hugging Face model folder",
        ),
        (["judge", "--out", "x", "not-an-override"], "unrecognized arguments: not-an-override"),
        (
            ["judge_to_reward", "--task", "pairwise", "--out", "x"],
            "judge_to_reward: a pairwise judge cannot reward a policy (the pairwise reward asks with the reference "
            "solution shown, a prompt this judge is not trained on); --task pointwise, pairwise_ref",
        ),
        (["judge", "--task", "nope", "--out", "x"], "invalid choice: 'nope'"),
    ],
)
def test_bad_arguments(args, message):
    r = subprocess.run([sys.executable, "-m", "scripts.pipeline", *args], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and message in r.stderr


def test_help():
    r = subprocess.run([sys.executable, "-m", "scripts.pipeline", "--help"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0 and "--sft-steps" in r.stdout and "judge_to_reward" in r.stdout


@needs_model
def test_training_stage_is_checked_before_it_starts(fake):
    """A GRPO stage whose composed config does not pass verl's schema stops before the trainer runs."""
    tmp, env = fake
    out = tmp / "bad"
    r = run(
        env,
        "judge",
        "--task",
        "pointwise",
        "--out",
        str(out),
        "--grpo-steps",
        "2",
        "--no-eval-before",
        "--skip-eval",
        "trainer.save_freqq=3",
    )
    assert r.returncode != 0 and "unknown key 'trainer.save_freqq'" in r.stdout, r.stdout[-3000:]
    assert "stage failed (exit 2): recipe judge_pointwise" in r.stdout + r.stderr
    assert "scripts.train" not in modules(tmp) and not (out / ".grpo.done").exists()


def test_policy_stage_takes_another_recipe(tmp_path, monkeypatch):
    """pipeline.policy(flow, cfg, base, judge, recipe=..., name=...): the recipe, its inputs and outputs, through
    run_recipe."""
    from scripts.launch import launcher as launch
    from scripts.workflows import cli, pipeline

    calls = []
    monkeypatch.setattr(
        launch,
        "run_recipe",
        lambda recipe, overrides, env, **where: calls.append((recipe, overrides, env["PYTHON"], where)) or 0,
    )
    cfg = pipeline.parse_args(["judge_to_reward", "--out", str(tmp_path)])
    flow = cli.run_of(cfg)
    pipeline.policy(flow, cfg, "/models/base", "/models/judge", recipe="gsm8k_api_judge", name="policy_api")
    recipe, overrides, python, where = calls[0]
    assert recipe == "gsm8k_api_judge" and python == flow.py
    assert overrides[:2] == [
        "actor_rollout_ref.model.path=/models/base",
        "reward.reward_model.model_path=/models/judge",
    ]
    assert f"trainer.default_local_dir={tmp_path}/policy_api" in overrides
    assert "trainer.experiment_name=judge_to_reward-policy_api" in overrides
    assert where == {
        "output_dir": str(tmp_path),
        "metrics_file": f"{tmp_path}/policy_api_metrics.jsonl",
        "log_file": f"{tmp_path}/logs/policy_api.log",
    }
    pipeline.policy(flow, cfg, "/models/base", "/models/judge")  # the default: the local judge's recipe and outputs
    assert calls[1][0] == pipeline.POLICY_RECIPE == "gsm8k_local_judge"
    assert calls[1][3]["metrics_file"] == f"{tmp_path}/policy_metrics.jsonl"


def test_the_documented_new_experiment_runs(tmp_path, monkeypatch):
    """scripts/workflows/__init__.py's example (a judge, then two policies it rewards) wires real stages: each stage
    once, marked done, both policies through the launcher with their own outputs, the route one's override last."""
    import textwrap

    import scripts.workflows
    from scripts.launch import launcher as launch
    from scripts.workflows import cli, pipeline
    from scripts.workflows.stages import Stages

    doc = scripts.workflows.__doc__
    code = textwrap.dedent(doc[doc.index("    import functools") : doc.index("    cfg = pipeline.parse_args")])
    example = {}
    exec(code, example)
    ran, trained = [], []
    monkeypatch.setattr(Stages, "sh", lambda self, cmd, log, env=None, ok=None: ran.append((cmd[2], log)))
    monkeypatch.setattr(
        launch, "run_recipe", lambda recipe, overrides, env, **where: trained.append((recipe, overrides, where)) or 0
    )
    monkeypatch.setenv("MODEL", "/models/base")
    argv = ["judge_to_reward", "--out", str(tmp_path), "--no-sft", "--skip-eval", "--model-solutions", "none"]
    cfg = pipeline.parse_args(argv)  # no samples stage: its model answers need a GPU
    flow = cli.run_of(cfg)
    flow.guarded(lambda: example["judge_then_two_policies"](flow, cfg))
    assert ran == [
        ("data_prep.gsm8k", "policy_data"),
        ("data_prep.gsm8k_verify", "data"),
        ("data_prep.judge_sft", "sft_data"),
    ]
    assert [(r, w["log_file"]) for r, _, w in trained] == [
        ("gsm8k_local_judge", f"{tmp_path}/logs/policy.log"),
        ("gsm8k_local_judge", f"{tmp_path}/logs/policy_route.log"),
    ]
    assert "reward.reward_model.model_path=/models/base" in trained[0][1]  # no SFT, no GRPO: the start model judges
    assert trained[1][1][-1] == example["ROUTE"] and example["ROUTE"] not in trained[0][1]
    assert sorted(p.name for p in tmp_path.glob(".*.done")) == [
        ".data.done",
        ".policy.done",
        ".policy_data.done",
        ".policy_route.done",
        ".sft_data.done",
    ]


@pytest.mark.parametrize(
    "task, reward",
    [
        ("pointwise", []),  # recipes/gsm8k_local_judge's own reward: reward_fns/llm_judge.py
        (
            "pairwise_ref",
            [
                "reward.custom_reward_function.path=pkg://reward_fns.pairwise_judge",
                "++reward.custom_reward_function.reward_kwargs.mode=pairwise_ref",
            ],
        ),
    ],
)
def test_judge_to_reward_rewards_the_policy_with_the_judge_it_trained(task, reward, tmp_path):
    """The policy stage's settings carry the trained judge's reward (before the stage's own and the user's
    ``--policy-override``, which win)."""
    from scripts.workflows import cli, pipeline

    cfg = pipeline.parse_args(["judge_to_reward", "--task", task, "--out", str(tmp_path), "--policy-override", "a=b"])
    got = pipeline.policy_settings(cli.run_of(cfg), cfg)
    assert got == [
        "trainer.total_training_steps=6",
        f"trainer.default_local_dir={tmp_path}/policy",
        "trainer.experiment_name=judge_to_reward-policy",
        "trainer.save_freq=-1",
        *reward,
        *pipeline.POLICY_STAGE,
        "a=b",
    ]
