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
import textwrap

import pytest

import scripts
from reward_fns.parse import hash_answer, normalize_number

ROOT = scripts.ROOT
GSM8K = os.path.join(ROOT, "tests", "fixtures", "data_prep", "gsm8k.jsonl")

FAKE = textwrap.dedent("""\
    #!{python}
    import json, os, shutil, sys
    args = sys.argv[1:]
    with open(os.environ["FAKE_LOG"], "a") as f:
        f.write(json.dumps(args) + "\\n")
    mod = args[1] if args[:1] == ["-m"] else None
    def val(flag):
        return args[args.index(flag) + 1]
    def over(key):
        return next(a.split("=", 1)[1] for a in args if a.startswith(key + "="))
    if mod == "torch.distributed.run":  # an HF folder the launcher's check can load: config and tokenizer
        steps = next((a.split("=", 1)[1] for a in args if a.startswith("trainer.total_training_steps=")), "16")
        hf = os.path.join(over("trainer.default_local_dir"), f"global_step_{{steps}}", "huggingface")
        if os.environ.get("FAKE_SFT_AFTER_TRAIN") and over("trainer.default_local_dir").endswith("/sft"):
            import time  # the judge's SFT ends only once a GRPO run has started (a real SFT takes minutes)
            end = time.time() + 120
            while time.time() < end and '"-m", "scripts.train"' not in open(os.environ["FAKE_LOG"]).read():
                time.sleep(0.2)
        weights = os.environ.get("FAKE_SFT_WEIGHTS")  # a judge that a real (CPU) server can load
        shutil.copytree(os.environ["MODEL"], hf, ignore=None if weights else shutil.ignore_patterns("*.safetensors", "*.bin", "*.gguf"))
    elif mod == "scripts.train":
        steps = int(over("trainer.total_training_steps"))
        os.makedirs(os.path.join(over("trainer.default_local_dir"), f"global_step_{{steps}}", "actor"))
        with open(over("+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH"), "a") as f:
            for step in range(1, steps + 1):  # the judge's reward keys only in a judge-rewarded run
                judged = {{"judge_health/agree_rule": 1.0, "judge_health/accept_rule_reject": 0.0,
                          "reward/rule_score/mean": 0.1 * step}} if "reward.reward_model.model_path" in " ".join(args) else {{}}
                f.write(json.dumps({{"step": step, "data": {{"critic/score/mean": 0.1 * step, **judged}}}}) + "\\n")
        dump = next((a.split("=", 1)[1] for a in args if a.startswith("trainer.rollout_data_dir=")), None)
        if dump:  # verl's rollout dump: the last step, one sample the judge accepts and the rule rejects
            os.makedirs(dump, exist_ok=True)
            with open(os.path.join(dump, f"{{steps}}.jsonl"), "w") as f:
                for out, judge, rule in (("#### 7", 4.0, 1.0), ("noise 1 2 3", 4.0, 0.0), ("#### 9", 0.0, 0.0),
                                         ("The answer is 7.", 4.0, 0.0)):
                    f.write(json.dumps({{"output": out, "gts": "7", "score": judge / 4, "judge_score": judge,
                                        "rule_score": rule}}) + "\\n")
        val = next((a.split("=", 1)[1] for a in args if a.startswith("trainer.validation_data_dir=")), None)
        if val:  # verl's validation dump (greedy answers to 4 questions): step 0 if asked, and the last step
            os.makedirs(val, exist_ok=True)
            judged = "reward.reward_model.model_path" in " ".join(args)  # the judge run learns more than the rule run
            last = {{"random_reward": ("#### 7", "so 7", "#### 9", "no idea"), "format_only": ("#### 7", "#### 9", "#### 9", "#### 9")}}
            fn = next((a.split("=", 1)[1] for a in args if a.startswith("reward.custom_reward_function.name=")), "")
            answers = {{0: ("#### 7", "so 7", "#### 9", "no idea"),
                       steps: last.get(fn) or (("#### 7", "#### 7", "#### 7", "#### 9") if judged else ("#### 7", "#### 7", "so 7", "#### 9"))}}
            if "trainer.val_before_train=false" in args:
                answers.pop(0)
            files = next((a.split("=", 1)[1].strip("[]").split(",") for a in args if a.startswith("data.val_files=")), [])
            import pyarrow.parquet as pq  # the prompts of the validation files' first 4 questions (else q0..q3)
            asked = [[f"user\\n{{r['extra_info']['question']}}\\n\\nassistant" for r in pq.read_table(p).to_pylist()[:4]]
                     for p in files if os.path.isfile(p)] or [[f"q{{i}}" for i in range(4)]]
            held = {{0: ("#### 9",) * 4, steps: ("#### 7", "#### 7", "#### 9", "#### 9") if judged else ("#### 7", "#### 9", "#### 9", "#### 9")}}
            for step, outs in answers.items():  # a second file (the held-out stories): answered as ``held``
                with open(os.path.join(val, f"{{step}}.jsonl"), "w") as f:
                    f.writelines(json.dumps({{"input": q, "output": o, "gts": "7", "score": 0.0, "step": step}}) + "\\n"
                                 for k, qs in enumerate(asked) for q, o in zip(qs, outs if k == 0 else held[step]))
        port = next((a.split("=", 1)[1] for a in args if a.startswith("verl_judge.judge_server.port=")), None)
        if port:  # a judge served beside the run: the first step waits for it (scripts.train.hooks)
            from scripts.train.hooks import wait_for_judge
            wait_for_judge({{"judge_server": {{"enable": True, "port": port, "start_timeout": 300}}}})
            print("the judge answered", flush=True)
        if os.environ.get("FAKE_FAIL") == "grpo":
            sys.exit(7)
    elif mod == "scripts.eval.gsm8k":  # the start model's answers: one right ('A: N'), one wrong, per question
        out = val("--out")
        os.makedirs(out, exist_ok=True)
        acc = 0.5 if "_hf" in val("--vllm-offline") else 0.25  # a trained policy (merged) vs the start policy
        json.dump({{"policy": {{"strict_acc": acc, "flexible_acc": acc + 0.1, "n_questions": int(val("--limit"))}}}},
                  open(os.path.join(out, "report.json"), "w"))
        import pyarrow.parquet as pq
        rows = [r["extra_info"] for r in pq.read_table(val("--data")).to_pylist()][: int(val("--limit"))]
        with open(os.path.join(out, "samples.jsonl"), "w") as f:
            for i, r in enumerate(rows):
                final = r["answer"].rsplit("#### ", 1)[1].strip()
                for k, resp in enumerate((f"Working.\\nA: {{final}}", "99991\\n#### 99991\\n#### 99991")):
                    f.write(json.dumps({{"question_idx": i, "sample": k, "question": r["question"],
                                        "answer": r["answer"], "response": resp, "status": "ok"}}) + "\\n")
    elif mod == "verl.model_merger":
        os.makedirs(val("--target_dir"))
    elif mod == "scripts.eval.judge":
        out = val("--out")
        os.makedirs(out, exist_ok=True)
        # FAKE_EVAL_WAIT="eval_before=sft,...": did that stage's folder appear while this evaluation ran?
        waits = dict(w.split("=") for w in os.environ.get("FAKE_EVAL_WAIT", "").split(",") if w)
        if os.path.basename(out) in waits:
            import time
            other = os.path.join(os.path.dirname(out), waits[os.path.basename(out)])
            end = time.time() + float(os.environ.get("FAKE_EVAL_WAIT_S", "20"))
            while time.time() < end and not os.path.isdir(other):
                time.sleep(0.05)
            open(out + "_saw_" + os.path.basename(other), "w").write(str(os.path.isdir(other)))
        n = {{"eval_before": 0.0, "eval_sft": 0.9, "eval_after": 0.95}}[os.path.basename(out)]
        json.dump({{"overall": {{"balanced_accuracy": n, "precision": n, "recall": n, "specificity": n,
                                "parse_fail_rate": 1.0 - n, "exact": n, "n": 8}}}}, open(os.path.join(out, "report.json"), "w"))
        if os.path.basename(out) == "eval_before":
            sys.exit(4)  # an untrained judge measures nothing: the pipeline goes on
    else:
        os.execv({python!r}, [{python!r}] + args)
    """)


@pytest.fixture()
def fake(tmp_path):
    py = tmp_path / "python"
    py.write_text(FAKE.format(python=sys.executable))
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


@pytest.mark.skipif(
    not os.environ.get("VERL_JUDGE_MODEL"), reason=os.environ.get("VERL_JUDGE_MODEL_MISSING", "no test model")
)
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


@pytest.mark.skipif(
    not os.environ.get("VERL_JUDGE_MODEL"), reason=os.environ.get("VERL_JUDGE_MODEL_MISSING", "no test model")
)
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


@pytest.mark.skipif(
    not os.environ.get("VERL_JUDGE_MODEL"), reason=os.environ.get("VERL_JUDGE_MODEL_MISSING", "no test model")
)
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


@pytest.mark.skipif(
    not os.environ.get("VERL_JUDGE_MODEL"), reason=os.environ.get("VERL_JUDGE_MODEL_MISSING", "no test model")
)
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


@pytest.mark.skipif(
    not os.environ.get("VERL_JUDGE_MODEL"), reason=os.environ.get("VERL_JUDGE_MODEL_MISSING", "no test model")
)
def test_judge_to_reward_samples_the_start_model_first(fake):
    import pyarrow.parquet as pq

    tmp, env = fake
    out = tmp / "j2r"
    env.update(FAKE_EVAL_WAIT="eval_sft=policy")
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


@pytest.mark.skipif(
    not os.environ.get("VERL_JUDGE_MODEL"), reason=os.environ.get("VERL_JUDGE_MODEL_MISSING", "no test model")
)
@pytest.mark.parametrize(
    "flag, beside, kv_cache",
    [
        ([], "True", ["--kv-cache-gb", "4.0"]),  # default: beside the SFT, with a fixed KV cache
        (["--eval-kv-cache-gb", "2.5"], "True", ["--kv-cache-gb", "2.5"]),
        (["--no-parallel-eval"], "False", []),  # before the SFT, vLLM sizes its own cache
    ],
)
def test_start_model_is_evaluated_beside_the_sft(fake, flag, beside, kv_cache):
    tmp, env = fake
    out = tmp / "run"
    env.update(FAKE_EVAL_WAIT="eval_before=sft", FAKE_EVAL_WAIT_S="20" if beside == "True" else "1")
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
    from scripts.workflows.pipeline import Pipeline, build_parser

    pipe = Pipeline(build_parser().parse_args(["judge", "--out", str(tmp_path)]), [])
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
        (["judge_to_reward", "--task", "pairwise", "--out", "x"], "judge_to_reward trains the pointwise judge"),
        (["judge", "--task", "nope", "--out", "x"], "invalid choice: 'nope'"),
    ],
)
def test_bad_arguments(args, message):
    r = subprocess.run([sys.executable, "-m", "scripts.pipeline", *args], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and message in r.stderr


def test_help():
    r = subprocess.run([sys.executable, "-m", "scripts.pipeline", "--help"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0 and "--sft-steps" in r.stdout and "judge_to_reward" in r.stdout


@pytest.mark.skipif(
    not os.environ.get("VERL_JUDGE_MODEL"), reason=os.environ.get("VERL_JUDGE_MODEL_MISSING", "no test model")
)
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
    """JudgeToReward.policy(judge, recipe=..., name=...): the recipe, its inputs and outputs, through run_recipe."""
    from scripts.launch import launcher as launch
    from scripts.workflows import pipeline

    calls = []
    monkeypatch.setattr(
        launch,
        "run_recipe",
        lambda recipe, overrides, env, **where: calls.append((recipe, overrides, env["PYTHON"], where)) or 0,
    )
    monkeypatch.setenv("MODEL", "/models/base")
    pipe = pipeline.JudgeToReward(pipeline.build_parser().parse_args(["judge_to_reward", "--out", str(tmp_path)]), [])
    pipe.policy("/models/judge", recipe="gsm8k_api_judge", name="policy_api")
    recipe, overrides, python, where = calls[0]
    assert recipe == "gsm8k_api_judge" and python == pipe.py
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
    pipe.policy("/models/judge")  # the default: the local judge's recipe, the stage's usual outputs
    assert calls[1][0] == pipeline.POLICY_RECIPE == "gsm8k_local_judge"
    assert calls[1][3]["metrics_file"] == f"{tmp_path}/policy_metrics.jsonl"
