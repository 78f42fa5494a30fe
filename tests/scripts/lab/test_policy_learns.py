"""scripts/lab/policy_learns.py on CPU: the side-by-side experiment's stages, their order and concurrency, the
exact settings both runs get, the report, resume and a failing run; a dry run of the judge run as placed, writing
nothing outside a temporary folder.

The GPU steps are the fake interpreter of ``tests/fixtures/workflows/fake_python.py`` (it records its arguments and
writes what the real step writes); the testbed, the policy's data and warm-start rows and the judge's data are built
for real, and each run's config is checked by the launcher for real (its private Ray head is a stand-in).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile

import pytest

from tests.scripts.workflows.test_pipeline import ROOT, calls, fake, modules, needs_model  # noqa: F401  (fake: the fixture)

DRIVER = """
import sys
from scripts.lab import policy_learns
from scripts.launch import ray_head
ray_head.start = lambda env, log, **kw: (None, "stand-in")
ray_head.stop = lambda proc, **kw: None
sys.exit(policy_learns.main(sys.argv[1:]))
"""
SMALL = [
    "--steps",
    "3",
    "--test-freq",
    "1",
    "--eval-questions",
    "4",
    "--eval-pairs",
    "2",
    "--policy-sft-rows",
    "8",
    "--testbed-arg=--train-size=60",
    "--testbed-arg=--test-size=20",
    # the stand-in trainer serves no judge and samples no answers (test_judge_server runs a real server)
    "--judge-placement",
    "colocated",
    "--model-solutions",
    "none",
]


def run(env, *args):
    return subprocess.run(
        [sys.executable, "-c", DRIVER, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )


def train_call(tmp, name):
    return next(
        c for c in calls(tmp) if c[1] == "scripts.train" and f"trainer.experiment_name=policy_learns-{name}" in c
    )


@needs_model
def test_side_by_side_stages_settings_report_and_resume(fake):
    tmp, env = fake
    env.pop("GSM8K_DIR")  # the testbed stands for GSM8K
    out = tmp / "pl"
    r = run(env, "--out", str(out), *SMALL, "actor_rollout_ref.actor.optim.lr=1e-5")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    done = sorted(p.name for p in out.glob(".*.done"))
    assert done == sorted(
        f".{s}.done"
        for s in (
            "testbed",
            "policy_data",
            "eval_data",
            "policy_sft",
            "data",
            "sft_data",
            "eval_before",
            "sft",
            "eval_sft",
            "judge_model",
            "rule",
            "judge",
        )
    )
    mods = modules(tmp)
    # the policy's warm start (torchrun) runs before either GRPO run; the judge's (torchrun) beside the rule run
    assert mods.count("torch.distributed.run") == 2 and mods.count("scripts.train") == 2
    assert mods.index("torch.distributed.run") < mods.index("scripts.train")
    rule, judge = train_call(tmp, "rule"), train_call(tmp, "judge")
    assert rule[rule.index("--config-path") + 1].endswith("recipes/gsm8k_rule")
    assert judge[judge.index("--config-path") + 1].endswith("recipes/gsm8k_local_judge")
    start = f"actor_rollout_ref.model.path={out}/policy_sft/global_step_16/huggingface"
    assert start in rule and start in judge  # the same start policy, data and settings
    per_run = (
        "trainer.default_local_dir=",
        "trainer.experiment_name=",
        "trainer.rollout_data_dir=",
        "+ray_kwargs.",
        "reward.",
        "+reward.",
        "trainer.validation_data_dir=",
        "trainer.val_before_train=",
    )
    same = lambda c: [a for a in c[c.index("--config-name") + 2 :] if not a.startswith(per_run)]  # noqa: E731
    assert same(rule) == same(judge)
    assert f"reward.reward_model.model_path={out}/judge_model" in judge
    assert os.readlink(out / "judge_model") == f"{out}/sft/global_step_100/huggingface"
    assert "trainer.val_before_train=true" in rule and "trainer.val_before_train=false" in judge  # "before": once
    assert f"trainer.validation_data_dir={out}/rule_val" in rule and "data.val_max_samples=-1" in rule
    # validation: the first 4 test questions and the first 4 of the held-out stories (wordings training never has)
    assert f"data.val_files=[{out}/eval_data/test/test.parquet,{out}/eval_data/heldout/test.parquet]" in rule
    import pyarrow.parquet as pq

    held = [
        r["extra_info"]["question"] for r in pq.read_table(out / "eval_data" / "heldout" / "test.parquet").to_pylist()
    ]
    train = [json.loads(x)["question"] for x in open(out / "testbed" / "train.jsonl")]
    assert len(held) == 4 and not set(held) & set(train)
    assert {r["data_source"] for r in pq.read_table(out / "eval_data" / "heldout" / "test.parquet").to_pylist()} == {
        "word_problems_heldout"
    }
    assert (
        "reward.reward_model.rollout.enforce_eager=true" in judge
        and "actor_rollout_ref.rollout.enforce_eager=false" in rule
    )
    assert f"data.train_files={out}/policy_data/train.parquet" in rule and "trainer.total_training_steps=3" in rule
    assert rule[-1] == judge[-1] == "actor_rollout_ref.actor.optim.lr=1e-5"  # the user's override last: it wins
    assert not any(
        c[1] in ("scripts.eval.gsm8k", "verl.model_merger") for c in calls(tmp)
    )  # verl's validation is the evaluation
    # the testbed is what the policy and the judge's data were built from
    assert json.load(open(out / "testbed" / "settings.json"))["train"] == 60
    res = json.load(open(out / "report.json"))
    none, quarter, half = ({"strict": x, "flexible": x, "n": 4} for x in (0.0, 0.25, 0.5))
    assert res["before"] == {"strict": 0.25, "flexible": 0.5, "n": 4, "step": 0, "heldout": none}
    assert res["runs"]["judge"]["after"] == {"strict": 0.75, "flexible": 0.75, "n": 4, "step": 3, "heldout": half}
    assert res["runs"]["rule"]["after"] == {"strict": 0.5, "flexible": 0.75, "n": 4, "step": 3, "heldout": quarter}
    assert (res["runs"]["rule"]["gain_heldout_strict"], res["runs"]["judge"]["gain_heldout_strict"]) == (0.25, 0.5)
    assert [(res["runs"][n]["steps"], res["runs"][n]["gain_strict"]) for n in ("rule", "judge")] == [
        (3, 0.25),
        (3, 0.5),
    ]
    assert res["runs"]["judge"]["agree_rule"] == [[1, 1.0], [2, 1.0], [3, 1.0]]
    assert res["judge_gain_over_rule_gain"] == {"strict": 2.0, "flexible": 1.0}
    assert (
        f"trainer.rollout_data_dir={out}/judge_rollouts" in judge
        and f"trainer.rollout_data_dir={out}/rule_rollouts" in rule
    )
    report = (out / "report.md").read_text()
    assert "| rule | 3 |" in report and (out / "policy_learns.png").stat().st_size > 0
    assert (
        "Judge run, step 3: samples the judge accepted and the rule rejected (first 2):\n\n"
        '- ground truth 7, verdict 4: `"noise 1 2 3"`\n- ground truth 7, verdict 4: `"The answer is 7."`'
    ) in report
    assert res["judge_paid_audit"] == {
        "steps": 1,
        "samples": 4,
        "paid_rule_rejects": 2,
        "paid_flexible_right": 1,
        "paid_wrong": 1,
        "paid_wrong_share": 0.25,
        "paid_wrong_max_step_share": 0.25,
        "paid_agree_flexible_min": 0.75,
    }
    assert "Judge-run gain / rule-run gain: strict 2.000, flexible 1.000." in report
    assert "judge gain / rule gain: strict 2.000, flexible 1.000" in r.stdout.splitlines()[-4]  # the console's end
    assert r.stdout.splitlines()[-2] == f"report: {out}/report.md (report.json, policy_learns.png)"
    (tmp / "calls.jsonl").unlink()  # a rerun resumes: nothing runs again
    r = run(env, "--out", str(out), *SMALL)
    assert r.returncode == 0 and modules(tmp) == [], r.stdout[-2000:]


@pytest.mark.slow
@needs_model
def test_judge_run_alone_and_a_failing_run(fake):
    tmp, env = fake
    env.pop("GSM8K_DIR")
    out = tmp / "alone"
    r = run(env, "--out", str(out), *SMALL, "--no-rule", "--policy-sft-rows", "0", "--no-eval-before")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert not (out / ".rule.done").exists() and not (out / ".policy_sft.done").exists()
    judge = train_call(tmp, "judge")
    assert f"actor_rollout_ref.model.path={env['MODEL']}" in judge  # no warm start: the base model
    assert list(json.load(open(out / "report.json"))["runs"]) == ["judge"]
    env["FAKE_FAIL"] = "grpo"  # every GRPO run exits 7: the experiment stops, naming the stage
    r = run(env, "--out", str(tmp / "fails"), *SMALL)
    assert r.returncode == 1 and "[pipeline] stage rule failed after" in r.stderr.splitlines()[-1], r.stderr[-2000:]
    assert "stage failed (exit 7): recipe gsm8k_rule" in r.stderr.splitlines()[-1]
    assert not (tmp / "fails" / ".judge.done").exists() and not (tmp / "fails" / "report.json").exists()


@needs_model
@pytest.mark.slow  # a whole experiment with stand-in stages
def test_judge_run_starts_beside_the_judges_training(fake):
    """--judge-placement server: the judge run starts after the policy's warm start, beside the judge's stages; its
    judge server (here the CPU one) starts only once stage judge_model is done, and the run's reward waits for it."""
    tmp, env = fake
    env.pop("GSM8K_DIR")
    env.update(FAKE_SFT_WEIGHTS="1", FAKE_SFT_AFTER_TRAIN="1")
    out = tmp / "early"
    small = SMALL[: SMALL.index("--judge-placement")] + SMALL[SMALL.index("--judge-placement") + 2 :]
    r = run(
        env,
        "--out",
        str(out),
        *small,
        "--no-rule",
        "verl_judge.judge_server.engine=cpu_judge",
        "verl_judge.judge_server.start_timeout=300",
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    text = r.stdout
    waited = f"the judge server starts once {out}/.judge_model.done exists (the judge is still being made)"
    assert waited in text, text[-3000:]
    assert text.index(waited) < text.index("stage judge_model done") < text.index("judge server ready at")
    assert "the judge answered" in (out / "logs" / "judge.log").read_text()
    assert "judge server stopped" in text and (out / "logs" / "judge.judge_server.log").exists()
    judge = train_call(tmp, "judge")
    assert f"verl_judge.judge_server.wait_for={out}/.judge_model.done" in judge
    assert "trainer.val_before_train=true" in judge  # no rule run: the judge run measures the start policy itself
    assert json.load(open(out / "report.json"))["before"]["step"] == 0


def test_defaults_of_the_experiment():
    """The judge run's judge is served beside the policy, and the judge also learns from the start policy's answers."""
    from scripts.lab import policy_learns

    cfg = policy_learns.parse_args(["--out", "x"])
    assert (cfg.judge_placement, cfg.model_solutions, cfg.steps, cfg.policy_sft_rows, cfg.overrides) == (
        "server",
        "base",
        100,
        500,
        (),
    )


# child: the command in a child process (else its main in-process, exiting as the command does)
@pytest.mark.parametrize(
    "args, message, child",
    [
        (["--steps", "0"], "--steps must be >= 1", True),
        (["--policy-sft-rows", "-1"], "--policy-sft-rows must be >= 0", False),
        (["--model-solutions", "/no/such.jsonl"], "--model-solutions /no/such.jsonl: no such file", False),
        (["notanoverride"], "extra arguments are Hydra overrides", False),
    ],
)
def test_bad_arguments(args, message, child, tmp_path, capsys):
    from scripts.lab import policy_learns

    argv = ["--out", str(tmp_path / "x"), *args]
    if child:
        r = run(dict(os.environ), *argv)
        rc, err = r.returncode, r.stderr
    else:
        with pytest.raises(SystemExit) as e:
            policy_learns.main(argv)
        rc, err = e.value.code, capsys.readouterr().err
    assert rc == 2 and message in err, err


@needs_model
@pytest.mark.parametrize(
    "placement, expect, absent",
    [
        pytest.param(
            "colocated",
            ["reward.reward_model.rollout.enforce_eager=true", "reward.reward_model.rollout.free_cache_engine=false"],
            "judge_placement=server",
            marks=pytest.mark.slow,  # the default placement, server, stays in the default set
        ),
        (
            "server",
            [
                "judge_placement=server",
                "verl_judge.judge_server.gpu_memory_utilization=0.1",
                "verl_judge.judge_server.kv_cache_memory_bytes=4294967296",
            ],
            "reward.reward_model.rollout.",
        ),
    ],
)
def test_judge_placement_of_the_judge_run(placement, expect, absent, fake):
    """The dry run checks the judge run as placed; the launcher's default data that stand for the stages' own are
    built in a temporary folder, removed after it, not in the checkout's data/ (nor is the run folder made)."""
    tmp, env = fake
    env["DRY_RUN"] = "1"
    env.pop("DATA_DIR", None)
    r = run(env, "--out", str(tmp / "dry"), "--no-rule", "--judge-placement", placement)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    command = next(line for line in r.stdout.splitlines() if "-m scripts.train" in line)
    assert all(f" {e}" in command for e in expect) and absent not in command
    assert "config OK: recipe gsm8k_local_judge" in r.stdout
    (train,) = set(re.findall(r"TRAIN_FILES=(\S+)", r.stdout))
    folder = os.path.join(tempfile.gettempdir(), "policy_learns_dry_")
    assert train.startswith(folder) and not train.startswith(ROOT), train
    assert not os.path.exists(train[: train.index(os.sep, len(folder))])  # removed when the dry run ended
    assert not (tmp / "dry").exists()


@pytest.mark.parametrize(
    "row, series",
    [
        (
            {"step": 20, "val-core/word_problems/acc/mean@1": 0.3, "val-core/word_problems_heldout/acc/mean@1": 0.5},
            [(20, 0.3)],
        ),
        (
            {"step": 20, "val-core/word_problems_heldout/acc/mean@1": 0.5, "val-core/word_problems/acc/mean@1": 0.3},
            [(20, 0.3)],
        ),
        ({"step": 40, "val-aux/openai/gsm8k/rule_score/mean@1": 0.25}, [(40, 0.25)]),
    ],
)
def test_validation_series_is_the_test_split(row, series):
    """The validation curve is the test split's, whichever order verl logs the held-out stories' key in."""
    from scripts.lab import report

    assert report._series([row], report.VAL_RULE) == series
