"""The numbers the README, docs/results/README.md and each results folder quote come from the runs kept under
docs/results/<date>-<name>/: each test recomputes them from the kept metrics, reports and logs."""

import gzip
import json
import os
import re
import statistics
import subprocess
import sys

import pytest

import scripts
from tests.scripts.lab.bench.test_bench_cli import _summ  # scripts.report.summarize_run as a command

ROOT = scripts.ROOT


def _text(*parts):
    """A kept file's text; a ``.gz`` file (every kept JSONL is ``.jsonl.gz``) is read through gzip."""
    path = os.path.join(*parts)
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        return f.read()


def _jsonl(*parts):
    """The records of a kept ``.jsonl.gz``, one a line."""
    return [json.loads(line) for line in _text(*parts).splitlines() if line.strip()]


INDEX = os.path.join(ROOT, "docs", "results", "README.md")  # every kept run, with the numbers it gave
JUDGE_COST = os.path.join(ROOT, "docs", "results", "2026-11-22-judge_cost")


def test_judge_cost_numbers_in_readme_come_from_the_committed_h100_metrics():
    """README "Judge cost" is the output of scripts.report.summarize_run on the metrics the H100 runs wrote."""
    files = [os.path.join(JUDGE_COST, r, "metrics.jsonl.gz") for r in ("rule", "local", "hybrid")]
    r = _summ(*files, "--labels", "rule", "local", "hybrid", "--ratio", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    med = {
        lab: {
            k.removeprefix("median timing_s/"): round(v, 2) for k, v in run.items() if k.startswith("median timing_s/")
        }
        for lab, run in out["runs"].items()
    }
    assert [out["runs"][lab]["steps"] for lab in ("rule", "local", "hybrid")] == [6, 6, 6]
    assert (med["rule"]["step"], med["local"]["step"], med["hybrid"]["step"]) == (18.96, 27.1, 20.14)
    assert (med["rule"]["reward"], med["local"]["reward"], med["hybrid"]["reward"]) == (0.0, 7.77, 0.13)
    assert (med["rule"]["gen"], med["local"]["gen"], med["hybrid"]["gen"]) == (9.13, 9.38, 9.9)
    rat = {lab: {k: round(v, 2) for k, v in d.items()} for lab, d in out["ratios"].items()}
    assert rat["local"]["timing_s/step"] == 1.43 and rat["hybrid"]["timing_s/step"] == 1.06
    assert "timing_s/reward" not in rat["local"]  # rule reward: 18 microseconds, no meaningful ratio
    kept = open(os.path.join(JUDGE_COST, "README.md")).read()
    for cell in ("| step | 18.96 | 27.10 (**1.43x**) | 20.14 (**1.06x**) |", "| reward | 0.00 | 7.77 | 0.13 |"):
        assert cell in kept
    assert "colocated judge 1.43× the rule step; `mode=hybrid` + 128 tokens 1.06×" in open(INDEX).read()


LEARN = os.path.join(ROOT, "docs", "results", "2026-11-22-learn")


@pytest.mark.parametrize(
    "run, rows",
    [
        (
            "judge_pairwise",
            {
                "parse_fail_rate": (1.0, 0.0),
                "accuracy": (0.0, 0.502),
                "a_share": (None, 0.002),
                "flip_rate": (None, 0.997),
                "pairs_compared": (0, 300),
            },
        ),
        (
            "gsm8k_rule",
            {
                "strict_acc": (0.004, 0.010),
                "flexible_acc": (0.010, 0.018),
                "strict_format_rate": (0.498, 0.682),
                "n_questions": (500, 500),
            },
        ),
    ],
)
def test_learning_numbers_in_readme_come_from_the_committed_h100_reports(run, rows):
    """README "Learning" is scripts.report.compare_evals on the eval reports the H100 learning runs wrote."""
    d = os.path.join(LEARN, run)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.report.compare_evals",
            os.path.join(d, "eval_before"),
            os.path.join(d, "eval_after"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == open(os.path.join(d, "compare.md")).read().strip()
    rep = {side: json.load(open(os.path.join(d, side, "report.json"))) for side in ("eval_before", "eval_after")}
    head = "overall" if run == "judge_pairwise" else "policy"
    for metric, (before, after) in rows.items():
        got = tuple(
            None if rep[s][head].get(metric) is None else round(rep[s][head][metric], 3)
            for s in ("eval_before", "eval_after")
        )
        assert got == (before, after), metric
    steps = [r["step"] for r in _jsonl(d, "metrics.jsonl.gz")]
    assert max(steps) == 50
    if run == "judge_pairwise":
        assert "answered B to 599/600 (accuracy 0.502)" in open(INDEX).read()


def test_judge_to_reward_h100_run_in_readme():
    """The judge_to_reward end-to-end run: both stages' metrics are kept and the README quotes them."""
    d = os.path.join(ROOT, "docs", "results", "2026-11-22-judge_to_reward")
    r = _summ(
        os.path.join(d, "judge", "metrics.jsonl.gz"),
        os.path.join(d, "policy", "metrics.jsonl.gz"),
        "--labels",
        "judge",
        "policy",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    runs = json.loads(r.stdout)  # without --ratio: {label: summary}
    assert (runs["judge"]["steps"], runs["policy"]["steps"]) == (3, 3)
    assert round(runs["policy"]["median timing_s/reward"], 2) == 8.78
    smoke = open(os.path.join(d, "gpu_smoke_summary.md")).read()
    assert "| judge_to_reward | 0 | 854 | 3 | metrics ok metrics ok merged judge ok |" in smoke


JUDGES = os.path.join(ROOT, "docs", "results", "2026-11-23-judges")
MODEL_SOLUTIONS = os.path.join(ROOT, "docs", "results", "2026-11-23-judges-model-solutions")
MAIN_SPEED = os.path.join(ROOT, "docs", "results", "2026-11-23-main-speed")
MAIN_BYTECODE = os.path.join(ROOT, "docs", "results", "2026-11-23-main-bytecode")
SHAPES = os.path.join(ROOT, "docs", "results", "2026-11-23-judge_cost_shapes")
AWAKE = os.path.join(ROOT, "docs", "results", "2026-11-23-judge_cost_shapes_awake")
RAY_CLUSTER = os.path.join(ROOT, "docs", "results", "2026-11-23-ray_cluster_1gpu")


def _report(folder, *parts):
    return json.load(open(os.path.join(folder, *parts, "report.json")))


@pytest.mark.parametrize(
    "folder, parts, metric, value",
    [
        (JUDGES, ("pointwise", "eval_before"), "balanced_accuracy", 0.007),
        (JUDGES, ("pointwise", "eval_before"), "parse_fail_rate", 0.987),
        (JUDGES, ("pointwise", "eval_sft"), "balanced_accuracy", 0.972),
        (JUDGES, ("pointwise", "eval_sft"), "parse_fail_rate", 0.0),
        (JUDGES, ("pairwise_ref", "eval_sft"), "pair_accuracy", 0.653),
        (JUDGES, ("pairwise_ref", "eval_sft"), "flip_rate", 0.333),
        (JUDGES, ("pairwise_ref", "eval_after"), "pair_accuracy", 0.78),
        (JUDGES, ("pairwise_ref", "eval_after"), "flip_rate", 0.18),
        (JUDGES, ("pairwise_ref", "eval_after"), "accuracy", 0.87),
        (JUDGES, ("judge_to_reward", "eval_before"), "balanced_accuracy", 0.005),
        (JUDGES, ("judge_to_reward", "eval_sft"), "balanced_accuracy", 0.99),
        (MODEL_SOLUTIONS, ("main", "eval_before"), "balanced_accuracy", 0.0),
        (MODEL_SOLUTIONS, ("main", "eval_before"), "parse_fail_rate", 1.0),
        (MODEL_SOLUTIONS, ("main", "eval_sft"), "balanced_accuracy", 1.0),
        (MODEL_SOLUTIONS, ("main", "eval_sft"), "parse_fail_rate", 0.0),
        (MODEL_SOLUTIONS, ("pairwise_ref", "eval_sft"), "accuracy", 0.983),
        (MODEL_SOLUTIONS, ("pairwise_ref", "eval_sft"), "pair_accuracy", 0.97),
        (MODEL_SOLUTIONS, ("pairwise_ref", "eval_sft"), "flip_rate", 0.025),
        (MODEL_SOLUTIONS, ("pairwise_ref", "eval_after"), "pair_accuracy", 0.965),
        (MODEL_SOLUTIONS, ("pairwise_ref", "eval_after"), "flip_rate", 0.03),
        (MODEL_SOLUTIONS, ("pairwise_noref", "eval_sft"), "a_share", 0.995),
        (MODEL_SOLUTIONS, ("pairwise_noref", "pair_groups_on", "eval_after"), "pair_accuracy", 0.0),
        (MODEL_SOLUTIONS, ("pairwise_noref", "pair_groups_off", "eval_after"), "pair_accuracy", 0.0),
        (MAIN_SPEED, ("run_a", "eval_before"), "balanced_accuracy", 0.0),
        (MAIN_SPEED, ("run_a", "eval_before"), "parse_fail_rate", 0.995),
        (MAIN_SPEED, ("run_a", "eval_sft"), "balanced_accuracy", 0.985),
        (MAIN_SPEED, ("run_a", "eval_sft"), "parse_fail_rate", 0.0),
        (MAIN_SPEED, ("run_b", "eval_before"), "balanced_accuracy", 0.005),
        (MAIN_SPEED, ("run_b", "eval_sft"), "balanced_accuracy", 1.0),
        (MAIN_SPEED, ("run_b", "eval_sft"), "parse_fail_rate", 0.0),
        (MAIN_BYTECODE, ("eval_before",), "balanced_accuracy", 0.0),
        (MAIN_BYTECODE, ("eval_before",), "parse_fail_rate", 1.0),
        (MAIN_BYTECODE, ("eval_sft",), "balanced_accuracy", 0.98),
        (MAIN_BYTECODE, ("eval_sft",), "parse_fail_rate", 0.0),
        (MAIN_BYTECODE, ("eval_sft",), "recall", 0.96),
    ],
)
def test_judge_numbers_in_readme_come_from_the_kept_reports(folder, parts, metric, value):
    """README "Results" and the results READMEs quote the H100 evaluation reports kept in docs/results."""
    assert round(_report(folder, *parts)["overall"][metric], 3) == value


def test_judge_health_numbers_come_from_the_kept_policy_metrics():
    steps = _metrics(JUDGES, "judge_to_reward", "metrics.jsonl.gz")
    assert len(steps) == 6 and all("judge_health/agree_rule" in d for d in steps)  # every training step
    mean = lambda k: round(sum(d[k] for d in steps) / len(steps), 3)  # noqa: E731
    assert (
        mean("judge_health/parse_fail_rate"),
        mean("judge_health/fallback_rate"),
        mean("judge_health/agree_rule"),
    ) == (0.013, 0.0, 0.683)
    real = json.load(open(os.path.join(JUDGES, "real_solutions", "sft_judge", "report.json")))["judge"]
    assert (real["tp"], real["fn"], real["tn"], real["fp"], round(real["agreement"], 3)) == (6, 0, 320, 71, 0.821)
    readme = open(INDEX).read()
    for cell in ("pointwise balanced accuracy 0.007 → 0.972", "pair accuracy 0.653 → 0.780, flip rate 0.333 → 0.180"):
        assert cell in readme, cell


def test_main_job_numbers_come_from_the_kept_metrics_and_reports():
    steps = _metrics(MODEL_SOLUTIONS, "main", "metrics.jsonl.gz")
    assert len(steps) == 6 and all("reward/rule_format/mean" in d for d in steps)
    mean = lambda k, rows=steps: round(sum(d[k] for d in rows) / len(rows), 3)  # noqa: E731
    assert (
        mean("judge_health/agree_rule"),
        mean("judge_health/parse_fail_rate"),
        mean("judge_health/fallback_rate"),
    ) == (0.969, 0.003, 0.0)
    old = _metrics(MODEL_SOLUTIONS, "judge_to_reward_perturbed_only", "metrics.jsonl.gz")
    assert mean("judge_health/agree_rule", old) == 0.539
    stages = dict(line.split() for line in open(os.path.join(MODEL_SOLUTIONS, "main", "stage_seconds.txt")))
    assert round(sum(float(v) for v in stages.values())) == 1367 and set(stages) == {
        "samples",
        "data",
        "eval_before",
        "sft",
        "eval_sft",
        "policy_data",
        "policy",
    }
    new, perturbed = (
        _report(MODEL_SOLUTIONS, "real_solutions", d)["judge"]
        for d in ("model_solutions_judge", "perturbed_only_judge")
    )
    assert (new["tp"], new["fn"], new["tn"], new["fp"], round(new["agreement"], 3)) == (5, 0, 390, 5, 0.988)
    assert (perturbed["tp"], perturbed["fn"], perturbed["tn"], perturbed["fp"], round(perturbed["agreement"], 3)) == (
        5,
        0,
        302,
        90,
        0.773,
    )
    readme = open(INDEX).read()
    for cell in (
        "judge–rule agreement **0.969**, parse-fail 0.003, fallback 0.000; 1,367 s",
        "agreement **0.988**, recall 5/5, specificity 390/395 (perturbed-only judge: 0.773, 302/392)",
        "pair accuracy **0.970**, flip rate **0.025**; + 20 GRPO steps: 0.980 / 0.965 / 0.030",
    ):
        assert cell in readme, cell


def _metrics(*parts):
    return [r["data"] for r in _jsonl(*parts)]


def _median(rows, key):
    vals = sorted(r[key] for r in rows[1:])  # after step 1
    return round(vals[len(vals) // 2] if len(vals) % 2 else (vals[len(vals) // 2 - 1] + vals[len(vals) // 2]) / 2, 2)


@pytest.mark.parametrize(
    "run, wall, stages, step, update_actor, agree, mfu",
    [
        (
            "run_a",
            983,
            {"policy_data": 16.1, "samples": 154.3, "sft_data": 21.6, "sft": 154.8, "eval_sft": 100.3, "policy": 536.2},
            18.25,
            3.03,
            0.945,
            0.0226,
        ),
        (
            "run_b",
            1021,
            {"policy_data": 20.1, "samples": 210.3, "sft_data": 25.8, "sft": 187.0, "policy": 577.5},
            22.27,
            3.39,
            0.964,
            0.0192,
        ),
    ],
)
def test_main_speed_numbers_come_from_the_kept_runs(run, wall, stages, step, update_actor, agree, mfu):
    """docs/results/2026-11-23-main-speed and README quote these: the serial stages add up to the wall time."""
    d = os.path.join(MAIN_SPEED, run)
    assert open(os.path.join(d, "wall.txt")).read() == f"main.sh exit 0 wall {wall} s\n"
    kept = {k: float(v) for k, v in (line.split() for line in open(os.path.join(d, "stage_seconds.txt")))}
    assert {k: kept[k] for k in stages} == stages and round(sum(stages.values())) == wall
    policy = _metrics(d, "policy_metrics.jsonl.gz")
    assert len(policy) == 6
    assert (_median(policy, "timing_s/step"), _median(policy, "timing_s/update_actor")) == (step, update_actor)
    assert round(sum(r["judge_health/agree_rule"] for r in policy) / 6, 3) == agree
    assert max(r["judge_health/parse_fail_rate"] for r in policy) == 0.0
    sft = _metrics(d, "sft_metrics.jsonl.gz")
    assert len(sft) == 100 and round(sum(r["train/mfu"] for r in sft) / 100, 4) == mfu
    earlier = _metrics(MODEL_SOLUTIONS, "main", "metrics.jsonl.gz")
    assert (_median(earlier, "timing_s/step"), _median(earlier, "timing_s/update_actor")) == (29.24, 8.13)
    assert (
        round(sum(r["train/mfu"] for r in _metrics(MODEL_SOLUTIONS, "main", "sft_metrics.jsonl.gz")) / 100, 4) == 0.0055
    )
    readme = open(INDEX).read()
    assert (
        "| 983 s and 1,021 s (was 1,367 s); SFT MFU 0.0055 → 0.0226, policy step "
        "29.2 → 18.3 s; judge balanced accuracy 0.985 / 1.000, as the reward agreement 0.945 / 0.964" in readme
    )


def test_main_bytecode_numbers_come_from_the_kept_run():
    """docs/results/2026-11-23-main-bytecode and README quote these: the serial stages add up to the wall time."""
    d = MAIN_BYTECODE
    assert open(os.path.join(d, "wall.txt")).read() == "main.sh exit 0 wall 538 s\n"
    kept = {k: float(v) for k, v in (line.split() for line in open(os.path.join(d, "stage_seconds.txt")))}
    serial = ("policy_data", "samples", "sft_data", "sft", "policy")  # data, eval_before, eval_sft ran beside these
    assert [kept[k] for k in serial] == [11, 124, 10, 110, 282] and sum(kept[k] for k in serial) == 537  # 1 s rounding
    imports = open(os.path.join(d, "import_times.txt")).read()
    for line in (
        "PYTHONDONTWRITEBYTECODE=1",
        "## pycache dirs in <site-packages>: 0, .py files: 14094",
        "import run 1: 19.8 s",
        "import run 2: 19.7 s",
        "compileall <site-packages> <torch site-packages>: rc=0 19.0 s",
        "import run 3: 9.6 s",
        "import run 4: 8.7 s",
    ):
        assert line in imports, line
    policy = _metrics(d, "policy_metrics.jsonl.gz")
    assert len(policy) == 6 and max(r["judge_health/parse_fail_rate"] for r in policy) == 0.0
    assert round(sum(r["judge_health/agree_rule"] for r in policy) / 6, 3) == 0.953
    assert (_median(policy, "timing_s/step"), _median(policy, "timing_s/reward")) == (14.87, 1.09)
    assert round(282 - sum(r["timing_s/step"] for r in policy)) == 170  # the policy stage's start-up
    assert [round(r["reward/rule_format/mean"], 3) for r in policy] == [0.0, 0.156, 0.094, 0.125, 0.094, 0.203]
    sft = _metrics(d, "sft_metrics.jsonl.gz")
    assert len(sft) == 100 and round(sum(r["train/mfu"] for r in sft) / 100, 4) == 0.0289
    readme = open(INDEX).read()
    assert (
        "**538 s** (aim 900 s: met; `import vllm, verl, ...` 19.8 → 8.7 s per process); judge balanced accuracy "
        "0.000 → **0.980**, parse-fail 0.000; as the reward agreement **0.953**" in readme
    )


# anchor-shape runs of 4 steps: each run's medians after step 1, and its median of step - generation
ANCHOR_RUNS = {
    "shapes": (
        "2026-11-23-judge_cost_shapes",
        ("rule_1gpu", "colocated", "colocated_eager"),
        {
            "timing_s/step": [15.48, 16.52, 19.61],
            "timing_s/reward": [0.0, 2.57, 4.93],
            "timing_s/gen": [10.9, 9.12, 9.63],
        },
        [4.58, 7.36, 9.89],
    ),
    "awake": (
        "2026-11-23-judge_cost_shapes_awake",
        ("rule_1gpu", "colocated", "colocated_sleep"),
        {
            "timing_s/step": [17.34, 21.39, 21.46],
            "timing_s/gen": [12.99, 13.28, 13.3],
            "timing_s/reward": [0.0, 2.34, 2.58],
            "timing_s/ref": [0.81, 1.16, 1.21],
        },
        [4.95, 8.11, 8.35],
    ),
}


@pytest.mark.parametrize("name", list(ANCHOR_RUNS))
def test_anchor_shape_medians_come_from_the_kept_runs(name):
    folder, names, medians, step_minus_gen = ANCHOR_RUNS[name]
    runs = [_metrics(ROOT, "docs", "results", folder, n, "metrics.jsonl.gz") for n in names]
    assert [len(r) for r in runs] == [4, 4, 4]
    assert {k: [_median(r, k) for r in runs] for k in medians} == medians
    rest = [sorted(x["timing_s/step"] - x["timing_s/gen"] for x in r[1:])[1] for r in runs]
    assert [round(x, 2) for x in rest] == step_minus_gen


def test_shapes_numbers_come_from_the_kept_runs():
    assert (round(16.52 / 15.48, 2), round(19.61 / 15.48, 2), round((15.48 + 2.57) / 15.48, 2)) == (1.07, 1.27, 1.17)
    assert "| timing_s/step | 1.07 | 1.27 |" in open(os.path.join(SHAPES, "cost.md")).read()
    old_rule, old_colocated = (
        _metrics(SHAPES, "two_machines", n, "metrics.jsonl.gz") for n in ("rule_1gpu", "colocated")
    )
    assert [_median(old_rule, "timing_s/step"), _median(old_colocated, "timing_s/step")] == [19.18, 20.32]
    assert "| timing_s/step | 1.06 |" in open(os.path.join(SHAPES, "two_machines", "cost.md")).read()
    assert (
        "colocated step / rule step **1.07×** with CUDA graphs, 1.27× eager (before); the judge's reward stage "
        "4.93 → 2.57 s; generation-neutral: rule step + reward stage 1.17×" in open(INDEX).read()
    )


def test_awake_judge_numbers_come_from_the_kept_runs():
    awake, asleep = (_metrics(AWAKE, n, "metrics.jsonl.gz") for n in ("colocated", "colocated_sleep"))
    assert [[round(x["timing_s/reward"], 2) for x in r[1:]] for r in (awake, asleep)] == [
        [2.32, 2.34, 2.35],
        [2.63, 2.58, 2.55],
    ]
    assert (
        round(21.39 / 17.34, 2),
        round(21.46 / 17.34, 2),
        round((17.34 + 2.34) / 17.34, 2),
        round((17.34 + 2.58) / 17.34, 2),
    ) == (1.23, 1.24, 1.13, 1.15)
    assert "| timing_s/step | 1.23 | 1.24 |" in open(os.path.join(AWAKE, "cost.md")).read()
    assert "reward stage 2.58 → **2.34 s**; colocated step / rule step **1.23×** (sleeping 1.24×" in open(INDEX).read()
    from scripts.launch import config_compose

    assert config_compose.compose([], "gsm8k_local_judge").reward.reward_model.rollout.free_cache_engine is False


def test_ray_cluster_run_is_kept():
    rows = _jsonl(RAY_CLUSTER, "metrics.jsonl.gz")
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert [round(r["data"]["timing_s/step"], 2) for r in rows] == [37.26, 17.23, 18.46]
    assert [round(r["data"]["timing_s/gen"], 2) for r in rows] == [29.94, 12.25, 11.6]
    jobs = open(os.path.join(RAY_CLUSTER, "ray_job_list.txt")).read()
    assert "status=<JobStatus.SUCCEEDED: 'SUCCEEDED'>" in jobs and "driver_exit_code=0" in jobs
    assert "entrypoint='python3 -m scripts.train --config-path ../recipes/gsm8k_rule" in jobs
    start, end = (int(re.search(rf"{k}=(\d+)", jobs).group(1)) for k in ("start_time", "end_time"))
    assert round((end - start) / 1000) == 165
    log = open(os.path.join(RAY_CLUSTER, "submit_log.txt")).read()
    assert "Job 'raysubmit_GFyrz8ee2wAfvC5E' succeeded" in log and log.rstrip().endswith(
        "[launch] exit 0; metrics: <output dir>/verl-judge/gsm8k_rule.jsonl"
    )
    for name in os.listdir(RAY_CLUSTER):  # no machine paths kept
        assert "/tmp/" not in _text(RAY_CLUSTER, name), name


SCORECARD = os.path.join(ROOT, "docs", "results", "2026-11-26-scorecard")
TRAINED_COST = os.path.join(ROOT, "docs", "results", "2026-11-26-judge_cost_trained")
MAIN_JOB = os.path.join(ROOT, "docs", "results", "2026-11-25-main_job")
POLICY_LEARNS = os.path.join(ROOT, "docs", "results", "2026-11-25-policy_learns")
ONE_GPU_COST = os.path.join(ROOT, "docs", "results", "2026-11-25-judge_cost_one_gpu")


def test_scorecard_numbers_come_from_the_kept_report():
    """README and the index quote the scorecard's report.json: ratios, intervals and gains, both splits."""
    r = json.load(open(os.path.join(SCORECARD, "report.json")))
    ratio = lambda x: tuple(round(x[k], 2) for k in ("mean", "lo", "hi"))  # noqa: E731
    assert ratio(r["ratios"]["judge"]) == (1.26, 1.05, 1.58) and ratio(r["heldout"]["ratios"]["judge"]) == (
        1.11,
        0.85,
        1.42,
    )
    assert [round(r["arms"][a]["gain_mean"], 3) for a in ("rule", "judge", "random", "format")] == [
        0.159,
        0.2,
        -0.097,
        -0.031,
    ]
    assert (round(r["arms"]["rule"]["gain_sd"], 3), round(r["arms"]["judge"]["gain_sd"], 3)) == (0.018, 0.004)
    assert r["commit"].startswith("2da08fa") and r["questions"] == 500 and r["heldout"]["questions"] == 500
    canary = [
        json.loads(line)["data"].get("judge_health/canary_accept")
        for s in ("", "_s1", "_s2")
        for line in gzip.open(os.path.join(SCORECARD, "metrics", f"judge{s}_metrics.jsonl.gz"), "rt")
    ]
    assert len(canary) == 300 and set(canary) == {0.0}  # no wrong canary accepted at any step of any seed
    index = open(INDEX).read()
    assert "**1.26 (95% interval 1.05 to 1.58)**" in index and "**1.11 (0.85 to 1.42)**" in index
    assert "rule **0.159** (sd 0.018), judge **0.200** (sd 0.004), random -0.097, format -0.031" in index


@pytest.mark.parametrize(
    "folder, steps, ratios, judged, calls, phrase",
    [
        (
            "",
            {"rule": 3.78, "colocated": 6.16, "server": 5.1, "route": 4.41},
            [1.63, 1.35, 1.17],
            0.137,
            341,
            "colocated **1.63×**, server **1.35×**, `mode=route` **1.17×**, "
            "asking the judge about **13.7%** of the samples",
        ),
        (
            "busy_host",
            {"rule": 3.78, "colocated": 4.8, "server": 4.48, "route": 3.48},
            [1.27, 1.18, 0.92],
            0.129,
            382,
            "colocated 1.27×, server 1.18×, `mode=route` 0.92×",
        ),
    ],
)
def test_trained_judge_cost_numbers_come_from_the_kept_metrics(folder, steps, ratios, judged, calls, phrase):
    """The judge cost with the trained models, side by side (top level) and on the busy host (busy_host/): the
    medians, ratios and route's ledger that the folder's README and the index quote."""
    from scripts.report import summarize_run

    d = os.path.join(TRAINED_COST, folder)
    got = {
        n: summarize_run.summarize(summarize_run.load(os.path.join(d, n, "metrics.jsonl.gz")))["median timing_s/step"]
        for n in steps
    }  # steps 2-20 (a validation at step 0 is no training step)
    assert {n: round(v, 2) for n, v in got.items()} == steps
    assert [round(got[n] / got["rule"], 2) for n in ("colocated", "server", "route")] == ratios
    route = [r for r in _metrics(d, "route", "metrics.jsonl.gz") if "reward/judge_skipped/mean" in r]
    share = sorted(1 - r["reward/judge_skipped/mean"] for r in route)
    assert (
        round((share[9] + share[10]) / 2, 3) == judged
        and round(sum(r["reward/judge_attempts/mean"] * 128 for r in route)) == calls
    )
    assert phrase in open(INDEX).read()
    assert (
        f"| {ratios[0]:.2f} |" in open(os.path.join(d, "README.md")).read()
        or f"**{ratios[0]:.2f}**" in open(os.path.join(d, "README.md")).read()
    )


def test_two_gpu_numbers_come_from_the_kept_metrics():
    """The judge on a GPU of its own (anchor shapes) and the policy across two GPUs: what their READMEs quote."""
    from scripts.report import summarize_run

    def step(*parts):
        return round(
            summarize_run.summarize(summarize_run.load(os.path.join(ROOT, "docs", "results", *parts)))[
                "median timing_s/step"
            ],
            2,
        )

    cost = {n: step("2026-11-26-judge_cost_2gpu", n, "metrics.jsonl.gz") for n in ("rule_pool", "pool", "server_gpu1")}
    assert cost == {"rule_pool": 10.55, "pool": 15.5, "server_gpu1": 17.1}
    assert [round(cost[n] / cost["rule_pool"], 2) for n in ("pool", "server_gpu1")] == [1.47, 1.62]
    pol = {n: step("2026-11-26-policy_2gpu", n, "metrics.jsonl.gz") for n in ("gpu1", "gpu2")}
    assert pol == {"gpu1": 2.74, "gpu2": 2.62} and round(pol["gpu1"] / pol["gpu2"], 2) == 1.05
    index = open(INDEX).read()
    assert "pool **1.47×**, server on GPU 1 **1.62×**" in index and "**1.05×** the samples a second" in index


def test_outage_numbers_come_from_the_kept_report():
    """judge_failure=fallback against abstain under a 20% outage: gains per arm and the share of failed calls."""
    d = os.path.join(ROOT, "docs", "results", "2026-11-26-judge_failure_outage")
    r = json.load(open(os.path.join(d, "report.json")))
    gains = {
        a: (round(r["arms"][a]["gain_mean"], 3), round(r["heldout"]["arms"][a]["gain_mean"], 3))
        for a in ("flaky_fallback", "flaky_abstain")
    }
    assert gains == {"flaky_fallback": (0.089, 0.073), "flaky_abstain": (0.066, 0.069)}
    for arm, key in (
        ("flaky_fallback", "judge_health/fallback_rate"),
        ("flaky_abstain", "judge_health/abstained_rate"),
    ):
        for s in ("", "_s1", "_s2"):
            rows = [
                json.loads(line)["data"]
                for line in gzip.open(os.path.join(d, "metrics", f"{arm}{s}_metrics.jsonl.gz"), "rt")
            ]
            rows = [x for x in rows if key in x]
            rate = sum(x[key] for x in rows) / len(rows)
            assert len(rows) == 60 and 0.19 <= rate <= 0.21, (arm, s, rate)
            assert {x["judge_health/canary_accept"] for x in rows} == {0.0}
    assert "fallback **0.089** / 0.073, abstain **0.066** / 0.069" in open(INDEX).read()


def test_main_job_and_policy_learns_numbers_come_from_the_kept_runs():
    walls = [
        json.load(open(os.path.join(MAIN_JOB, d, "run.json")))["wall_s"]
        for d in ("alone", "side_by_side/gpu0", "side_by_side/gpu1")
    ]
    assert walls == [630, 629, 630]
    assert "**630 s** alone, **629 s / 630 s** side by side" in open(os.path.join(ROOT, "README.md")).read()
    r = json.load(open(os.path.join(POLICY_LEARNS, "report.json")))
    assert (r["before"]["strict"], r["runs"]["rule"]["after"]["strict"], r["runs"]["judge"]["after"]["strict"]) == (
        0.242,
        0.476,
        0.436,
    )
    assert round(r["judge_gain_over_rule_gain"]["strict"], 2) == 0.83 and r["judge_paid_audit"]["paid_wrong"] == 20
    assert round(100 * r["judge_paid_audit"]["paid_wrong_share"], 2) == 0.16
    cost = {
        n: _median(_metrics(ONE_GPU_COST, n, "metrics.jsonl.gz"), "timing_s/step")
        for n in ("rule_1gpu", "colocated", "server")
    }
    assert (round(cost["colocated"] / cost["rule_1gpu"], 2), round(cost["server"] / cost["rule_1gpu"], 2)) == (
        1.11,
        1.19,
    )
    index = open(INDEX).read()
    for cell in (
        "rule **0.242 → 0.476**, judge **0.242 → 0.436**: the judge's gain is **0.83×** the rule's",
        "20 wrong answers in 12,800 samples (0.16%)",
        "colocated **1.11×**, `judge_placement=server` **1.19×**",
    ):
        assert cell in index, cell


MAIN_JOB_FUNCTIONS = os.path.join(ROOT, "docs", "results", "2026-11-26-main_job_functions")


def test_main_job_after_the_redesign_numbers_come_from_the_kept_runs():
    """The main job beside a second pipeline after the workflow redesign: exit codes, walls, the gains, and the
    same-host A/B of step times that README, the index and the folder's README quote."""
    runs = {d: json.load(open(os.path.join(MAIN_JOB_FUNCTIONS, d, "run.json"))) for d in ("gpu0", "gpu1")}
    assert [(r["exit_code"], r["wall_s"], r["commit"]) for r in runs.values()] == [
        (0, 904, "413012b"),
        (0, 896, "413012b"),
    ]
    assert round(runs["gpu0"]["stage_s"]["sft"]) == 108 and round(runs["gpu0"]["stage_s"]["samples"]) == 106
    gains = []
    for d in ("gpu0", "gpu1"):
        r = json.load(open(os.path.join(MAIN_JOB_FUNCTIONS, d, "report.json")))
        gains.append(
            (
                r["before"]["strict"],
                r["runs"]["rule"]["after"]["strict"],
                r["runs"]["judge"]["after"]["strict"],
                round(r["judge_gain_over_rule_gain"]["strict"], 2),
                r["judge_paid_audit"]["paid_wrong"],
            )
        )
    assert gains == [(0.158, 0.354, 0.298, 0.71, 0), (0.15, 0.286, 0.284, 0.99, 0)]
    ab = {
        n: _median(_metrics(MAIN_JOB_FUNCTIONS, "ab", f"{n}_metrics.jsonl.gz"), "timing_s/step")
        for n in ("f7c62f3", "new")
    }
    assert (round(ab["f7c62f3"], 2), round(ab["new"], 2), round(ab["new"] / ab["f7c62f3"], 2)) == (4.03, 4.18, 1.04)
    assert len(_metrics(MAIN_JOB_FUNCTIONS, "ab", "new_metrics.jsonl.gz")) == 30
    folder = open(os.path.join(MAIN_JOB_FUNCTIONS, "README.md")).read()
    for phrase in (
        "| 0 | **904 s** |",
        "| 0 | **896 s** |",
        "median step **4.03 s** (`f7c62f3`) and **4.18 s**",
        "the same 24 commands",
    ):
        assert phrase in folder, phrase
    assert "**904 s / 896 s** side by side on a slower host" in open(os.path.join(ROOT, "README.md")).read()
    assert "exit 0 both: **904 s / 896 s**" in open(INDEX).read()


TWO_GPU_TRAINED = os.path.join(ROOT, "docs", "results", "2026-11-26-judge_cost_2gpu", "trained")


@pytest.mark.parametrize(
    "judged, rules, steps, ratios, calls, seconds",
    [
        ("p_pool", ("p_rule", "p_rule2"), (4.7, 3.45, 3.17), (1.36, 1.42, 0.92), 2559, 73.8),
        ("s_server_gpu1", ("s_rule", "s_rule2"), (4.29, 3.29, 3.1), (1.3, 1.34, 0.94), 2561, 40.7),
    ],
)
def test_judge_on_its_own_gpu_trained_numbers_come_from_the_kept_metrics(judged, rules, steps, ratios, calls, seconds):
    """The judge on a GPU of its own with the trained models, each phase beside two rule runs: the medians, ratios and
    ledger that trained/README.md, the index, the README and docs/ray_cluster.md quote."""
    from scripts.report import summarize_run

    got = [
        summarize_run.summarize(summarize_run.load(os.path.join(TWO_GPU_TRAINED, n, "metrics.jsonl.gz")))[
            "median timing_s/step"
        ]
        for n in (judged, *rules)
    ]  # steps 2-20
    assert tuple(round(v, 2) for v in got) == steps
    assert (round(got[0] / got[1], 2), round(got[0] / ((got[1] + got[2]) / 2), 2), round(got[2] / got[1], 2)) == ratios
    rows = [r for r in _metrics(TWO_GPU_TRAINED, judged, "metrics.jsonl.gz") if "reward/judge_attempts/mean" in r]
    assert len(rows) == 20 and round(sum(r["reward/judge_attempts/mean"] * 128 for r in rows)) == calls
    per_step = sorted(r["reward/judge_seconds/mean"] * 128 for r in rows[1:])
    assert round(per_step[len(per_step) // 2], 1) == seconds
    readme = open(os.path.join(TWO_GPU_TRAINED, "README.md")).read()
    assert f"**{ratios[0]:.2f}** | {ratios[1]:.2f} | {calls:,} | {seconds} |" in readme
    assert f"| {ratios[2]:.2f} |" in readme
    assert "judge pool **1.36×**, judge server on GPU 2 **1.30×**" in open(INDEX).read()
    assert "a judge on its own GPU still costs 1.30-1.36x" in open(os.path.join(ROOT, "README.md")).read()
    assert "they cost 1.36x (pool) and 1.30x (server)" in open(os.path.join(ROOT, "docs", "ray_cluster.md")).read()


@pytest.mark.parametrize(
    "name, nodes, job, job_s, steps",
    [
        ("2gpu", 1, "raysubmit_f1Nc6ZAxgJNuQDXM", 155, [28.34, 14.61, 15.37]),
        ("2node", 2, "raysubmit_vY9rfn21FUJ9Vsyj", 139, [25.82, 12.73, 13.15]),
    ],
)
def test_ray_cluster_two_gpu_runs_are_kept(name, nodes, job, job_s, steps):
    """The cluster of one node with two GPUs and the one of two nodes with one GPU each: exit 0, three steps, the
    settings the job ran with, and the durations their READMEs and docs/ray_cluster.md quote."""
    d = os.path.join(ROOT, "docs", "results", f"2026-11-26-ray_cluster_{name}")
    rows = _jsonl(d, "metrics.jsonl.gz")
    assert [r["step"] for r in rows] == [1, 2, 3] and [round(r["data"]["timing_s/step"], 2) for r in rows] == steps
    status = open(os.path.join(d, "ray_status.txt")).read().split("Pending:")[0]
    assert (
        len(re.findall(r"^\s*1 node_", status, re.M)) == nodes
        and " 0.0/2.0 GPU" in open(os.path.join(d, "ray_status.txt")).read()
    )
    jobs = open(os.path.join(d, "ray_job_list.txt")).read()
    assert (
        f"submission_id='{job}'" in jobs
        and "status=<JobStatus.SUCCEEDED: 'SUCCEEDED'>" in jobs
        and "driver_exit_code=0" in jobs
    )
    assert f"trainer.nnodes={nodes} trainer.n_gpus_per_node={2 // nodes} trainer.total_training_steps=3" in jobs
    start, end = (int(re.search(rf"{k}=(\d+)", jobs).group(1)) for k in ("start_time", "end_time"))
    assert round((end - start) / 1000) == job_s
    assert f"succeeded in {job_s} s" in open(os.path.join(d, "README.md")).read()
    assert f"(job {job_s} s)" in open(os.path.join(ROOT, "docs", "ray_cluster.md")).read()
    assert f"Job '{job}' succeeded" in open(os.path.join(d, "submit_log.txt")).read()
    for f in os.listdir(d):  # no machine paths kept
        assert "/tmp/" not in _text(d, f), f


def test_anchor_shape_rerun_numbers_come_from_the_kept_runs():
    """The anchor-shape rerun beside two rule runs: the medians and ratios its README and the index quote."""
    from scripts.report import summarize_run

    d = os.path.join(ROOT, "docs", "results", "2026-11-26-judge_cost_2gpu", "h100_rerun")
    got = {
        n: summarize_run.summarize(summarize_run.load(os.path.join(d, n, "metrics.jsonl.gz")))
        for n in ("rule_pool", "pool", "rule_pool2")
    }
    steps = {n: round(s["median timing_s/step"], 2) for n, s in got.items()}
    assert steps == {"rule_pool": 18.4, "pool": 15.92, "rule_pool2": 18.73}
    med = {n: s["median timing_s/step"] for n, s in got.items()}
    assert [round(med[n] / med["rule_pool"], 2) for n in ("pool", "rule_pool2")] == [0.86, 1.02]
    assert [round(got[n]["median timing_s/gen"], 2) for n in got] == [13.2, 10.92, 13.23]
    readme = open(os.path.join(d, "README.md")).read()
    for n, ratio in (("rule_pool", "1"), ("pool", "0.86"), ("rule_pool2", "1.02")):
        assert f"| [{n}]({n}/) | {steps[n]:.2f} s | {ratio} |" in readme
    assert "beside two rule runs gave pool 0.86×, not clean either" in open(INDEX).read()


RESULTS = os.path.join(ROOT, "docs", "results")
MAX_RESULTS_BYTES = 8_000_000  # the whole folder, as `du -sb docs/results` counts it
MAX_PLAIN_JSONL = 100_000  # a larger JSONL is kept as .jsonl.gz
DIR_BYTES = 4096  # what `du -sb` counts for a folder on ext4; fixed here so the figure is the same on any file system


def _weight(folder):
    """``(bytes, plain, stamped)`` of a folder: its files' sizes plus ``DIR_BYTES`` per folder (itself included), the
    uncompressed ``.jsonl`` files over ``MAX_PLAIN_JSONL`` and the ``.gz`` files whose header keeps a name or a time
    (so compressing the same data again gives other bytes), both as paths relative to ``folder``."""
    total, plain, stamped = 0, [], []
    for d, _, names in os.walk(folder):
        total += DIR_BYTES
        for n in names:
            p = os.path.join(d, n)
            size = os.lstat(p).st_size
            total += size
            rel = os.path.relpath(p, folder)
            if n.endswith(".jsonl") and size > MAX_PLAIN_JSONL:
                plain.append(rel)
            if n.endswith(".gz"):
                with open(p, "rb") as f:
                    head = f.read(8)
                if head[3] & 0x08 or head[4:8] != b"\0\0\0\0":  # FNAME flag, MTIME
                    stamped.append(rel)
    return total, sorted(plain), sorted(stamped)


def test_results_folder_stays_light():
    """Every clone and every accelerator call carries docs/results: at most 8 MB in all, kept JSONL compressed
    (``gzip -9 -n`` or ``zopfli --gzip``, no name or time in the header), and each .gz a whole gzip stream."""
    total, plain, stamped = _weight(RESULTS)
    assert plain == [] and stamped == []
    assert total <= MAX_RESULTS_BYTES, f"docs/results weighs {total:,} bytes"
    for d, _, names in os.walk(RESULTS):
        for n in names:
            if n.endswith(".gz"):
                with gzip.open(os.path.join(d, n), "rb") as f:
                    while f.read(1 << 20):  # a truncated or corrupt stream raises here
                        pass


@pytest.mark.parametrize(
    "files, weight",
    [
        ({}, (DIR_BYTES, [], [])),
        ({"a/metrics.jsonl": b"x" * MAX_PLAIN_JSONL}, (2 * DIR_BYTES + MAX_PLAIN_JSONL, [], [])),
        (
            {"a/metrics.jsonl": b"x" * (MAX_PLAIN_JSONL + 1)},
            (2 * DIR_BYTES + MAX_PLAIN_JSONL + 1, ["a/metrics.jsonl"], []),
        ),
        ({"a/b/0.jsonl.gz": gzip.compress(b"{}\n", mtime=0)}, (3 * DIR_BYTES + 23, [], [])),
        ({"m.jsonl.gz": gzip.compress(b"{}\n", mtime=1)}, (DIR_BYTES + 23, [], ["m.jsonl.gz"])),
        ({"m.gz": b"\x1f\x8b\x08\x08" + bytes(4)}, (DIR_BYTES + 8, [], ["m.gz"])),  # FNAME set
        ({"big.png": bytes(MAX_RESULTS_BYTES)}, (DIR_BYTES + MAX_RESULTS_BYTES, [], [])),
    ],
)
def test_results_weight_counts_files_folders_and_plain_jsonl(tmp_path, files, weight):
    for rel, data in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    assert _weight(str(tmp_path)) == weight


def test_disagreement_numbers_come_from_the_kept_report():
    """docs/results/2026-11-27-judge_rule_disagreements: its README and the index quote its report.json."""
    d = os.path.join(ROOT, "docs", "results", "2026-11-27-judge_rule_disagreements")
    arms = json.load(open(os.path.join(d, "report.json")))["arms"]
    got = {
        arm: [arms[arm]["val"]["samples"]] + [arms[arm]["val"]["classes"][c]["count"] for c in CLASSES]
        for arm in ("judge", "flaky_fallback", "flaky_abstain")
    }
    assert got == {
        "judge": [3000, 2, 0, 4, 3],
        "flaky_fallback": [3000, 0, 0, 6, 75],
        "flaky_abstain": [2401, 1, 0, 2, 59],
    }
    voided = {
        arm: (
            arms[arm]["val"]["classes"]["guard_voided"]["right"],
            arms[arm]["val"]["classes"]["guard_voided"]["wrong"],
        )
        for arm in got
    }
    assert voided == {"judge": (1, 2), "flaky_fallback": (1, 74), "flaky_abstain": (0, 59)}
    readme = open(os.path.join(d, "README.md")).read()
    for row in (
        "| 2026-11-26-scorecard, `judge`, seeds 0-2, step 100 | 3000 | 2 | 0 | 4 | 1 / 2 | 9 (0.30%) |",
        "`flaky_fallback`, step 60 | 3000 (622 without a verdict) | 0 | 0 | 6 | 1 / 74 | 81 (2.70%) |",
        "`flaky_abstain`, step 60 | 2401 (599 abstained, left out) | 1 | 0 | 2 | 0 / 59 | 62 (2.58%) |",
        "the judge gave 133 wrong answers a 4",
    ):
        assert row in readme, row
    assert "**9 of 3000** samples part ways" in open(INDEX).read()


CLASSES = ("other_form", "paid_wrong", "refused_right", "guard_voided")


INSTANCES = os.path.join(ROOT, "docs", "results", "2026-11-27-scorecard_instances")


def test_scorecard_over_instances_comes_from_the_kept_grades():
    """The pooled scorecard over three judge instances: the kept per-question grades, fed to the product's own
    bootstrap, give report.json's pooled numbers exactly; README, the index and the folder's README quote them."""
    import numpy as np

    from scripts.lab.scorecard_stats import Instance, bootstrap

    arms = ["rule", "judge", "random"]
    bits = lambda s: np.array([int(c) for c in s], dtype=float)  # noqa: E731
    grades = {"test": [], "heldout": []}
    for row in _jsonl(INSTANCES, "grades.jsonl.gz"):
        after = {a: bits(row[f"after_{a}_seed0"])[None, :] for a in arms}
        grades[row["split"]].append(Instance(bits(row["before"]), after))
    assert [len(g) for g in grades.values()] == [3, 3] and [len(g[0].before) for g in grades.values()] == [500, 500]
    report = json.load(open(os.path.join(INSTANCES, "report.json")))
    got, quoted = {}, {}
    for split, insts in grades.items():
        stats, kept = bootstrap(insts, arms), report["pooled"][split]
        assert stats["ratio"]["judge"] == kept["ratios"]["judge"] and stats["gain"]["rule"] == kept["rule_gain"]
        assert stats["ratio"]["random"] == kept["ratios"]["random"]
        got[split] = [round(stats["ratio"]["judge"][k], 3) for k in ("mean", "lo", "hi")]
        quoted[split] = [round(stats["ratio"]["judge"][k], 2) for k in ("mean", "lo", "hi")]
    assert got == {"test": [0.831, 0.65, 1.003], "heldout": [0.742, 0.602, 0.895]}
    per = [round(v["ratios"]["judge"]["mean"], 3) for v in report["instances"].values()]
    assert per == [0.664, 0.941, 0.886]
    d = report["disagreements"]["judge"]["rollouts"]
    assert d["samples"] == 38400 and [d["classes"][c]["count"] for c in CLASSES] == [342, 0, 65, 525]
    assert (d["classes"]["guard_voided"]["wrong"], d["classes"]["guard_voided"]["right"]) == (506, 19)
    alarms = [
        r["data"]["judge_health/hacking_alarm"]
        for k in range(3)
        for r in _jsonl(INSTANCES, "metrics", f"instance_{k}_judge.jsonl.gz")
        if "judge_health/hacking_alarm" in r["data"]
    ]
    assert len(alarms) == 300 and set(alarms) == {0.0}
    folder = open(os.path.join(INSTANCES, "README.md")).read()
    assert "**0.831 (0.650 to 1.003)**" in folder and "**0.742 (0.602 to 0.895)**" in folder
    assert "test 0.664, 0.941, 0.886" in folder
    headline = "**0.83 (95% interval 0.65 to 1.00)**"
    assert quoted["test"] == [0.83, 0.65, 1.0] and quoted["heldout"] == [0.74, 0.6, 0.9]
    for text in (open(os.path.join(ROOT, "README.md")).read(), open(INDEX).read()):
        assert headline in text and "**0.74 (0.60 to 0.90)**" in text


def test_scorecard_over_instances_disagreement_numbers_are_in_the_report():
    """Every number the folder's README gives where the judge and the rule part ways is one of report.json's pooled
    judge counts (training rollouts, then the last validation and its step), in the README's order, rates as
    percentages of the samples: a number counted from files that are not kept (the rollout dumps) has nothing to be
    checked against."""
    text = open(os.path.join(INSTANCES, "README.md")).read()
    start = text.index("- **Where the judge and the rule part ways**")
    section = text[start : text.index("\n- **", start + 1)]
    section = re.sub(r"`[^`]*`", "", section)  # quoted answers (report.json's examples), not counts
    said = [float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*(?:\.\d+)?", section)]
    d = json.load(open(os.path.join(INSTANCES, "report.json")))["disagreements"]["judge"]
    roll, val = d["rollouts"], d["val"]
    pct = lambda c: round(100 * c / roll["samples"], 2)  # noqa: E731
    cls, voided = roll["classes"], roll["classes"]["guard_voided"]
    expected = [roll["samples"], cls["other_form"]["count"], pct(cls["other_form"]["count"])]
    audits = []  # each instance's report: paid rule rejects, right and wrong by the flexible rule (the last number)
    for k in range(3):
        report = open(os.path.join(INSTANCES, f"report_instance_{k}.md")).read()
        paid = r"did not \(12,800 samples, 100 dumped steps\): (\d+); "
        m = re.search(paid + r".*?the last number\) (\d+); wrong answers (\d+)", report)
        audits += [float(x) for x in m.groups()]
    assert sum(audits[::3]) == cls["other_form"]["count"] and [audits[2], audits[5] + audits[8]] == [7, 0]
    expected += [audits[2], 0, *audits]  # "7 of them were wrong, all in instance 0 (...)"
    expected += [cls["refused_right"]["count"], pct(cls["refused_right"]["count"])]
    expected += [voided["count"], pct(voided["count"]), voided["wrong"], voided["right"]]
    expected += [val["steps"][-1], val["disagree"]["count"], val["samples"], val["classes"]["guard_voided"]["count"]]
    paid = [38400, 342, 0.89, 7, 0, 91, 84, 7, 198, 198, 0, 53, 53, 0]
    assert expected == paid + [65, 0.17, 525, 1.37, 506, 19, 100, 30, 3000, 25]
    assert said == expected
    examples = json.dumps(roll["examples"]["other_form"])
    assert 'End your response with: \\"#### 2\\"' in examples and "16 - 1 = 16 dollars" in examples


def test_deferred_reward_smoke_numbers_come_from_the_kept_metrics():
    """docs/results/2026-11-27-deferred_reward_smoke: its table is the kept metrics of the two logged steps."""
    d = os.path.join(ROOT, "docs", "results", "2026-11-27-deferred_reward_smoke")
    rows = []
    for step in (1, 2):
        for arm in ("colocated", "colocated_deferred"):
            m = _jsonl(d, f"{arm}_metrics.jsonl.gz")[step - 1]["data"]
            keys = ("timing_s/reward", "timing_s/reward_deferred", "timing_s/reward_join")
            cells = [f"{m[k]:.2f}" if k in m else "" for k in keys]
            logprobs = f"{m['timing_s/old_log_prob'] + m['timing_s/ref']:.2f}"
            rows.append(f"| {step} | {arm} | {' | '.join(cells)} | {logprobs} | {m['timing_s/step']:.2f} |")
    readme = open(os.path.join(d, "README.md")).read()
    for row in rows:
        assert re.sub(" +", " ", row) in readme, row  # an empty cell: "| |"
    assert "No arm finished: no table." in open(os.path.join(d, "cost.md")).read()


SEAM_ON_GPU = os.path.join(ROOT, "docs", "results", "2026-12-07-seam_on_gpu")


def test_seam_on_gpu_numbers_come_from_its_metrics():
    """2026-12-07-seam_on_gpu: the steps each run logged, the tournament's validation time and its judge calls per
    group, and the judge run's failed calls, as its README quotes them."""
    runs = {
        r: [m.get("data", m) for m in _jsonl(SEAM_ON_GPU, "metrics", f"{r}.jsonl.gz")]
        for r in ("tournament", "pairwise_ref", "user_group", "main_judge", "main_rule")
    }
    assert {r: len(ms) for r, ms in runs.items()} == {
        "tournament": 20,
        "pairwise_ref": 3,
        "user_group": 3,
        "main_judge": 2,
        "main_rule": 19,
    }
    last = runs["tournament"][-1]
    assert (round(last["timing_s/testing"], 1), last["judge_health/calls_per_group"]) == (131.8, 16.0)
    assert [m["judge_health/error_rate"] for m in runs["main_judge"]] == [1.0, 1.0]
    kept = open(os.path.join(SEAM_ON_GPU, "README.md")).read()
    assert "took **131.8 s**" in kept and "| **0** | 20 of 20 |" in kept
    assert open(os.path.join(SEAM_ON_GPU, "exits.txt")).read().split() == [
        "pairwise_ref",
        "exit",
        "1",
        "tournament",
        "exit",
        "0",
        "user_group",
        "exit",
        "1",
    ]


@pytest.mark.parametrize(
    "run, median_step, testing, parse_fail, val_group",
    [
        ("pairwise_ref", 10.97, 51.3, 0.999, None),
        ("tournament", 13.86, 10.9, 0.998, 1.0),
        ("user_group", 5.95, 8.2, None, 1.0),
    ],
)
def test_seam_at_fix_numbers_come_from_its_metrics(run, median_step, testing, parse_fail, val_group):
    """2026-12-07-seam_on_gpu/at_fix: each 20-step run's median step (steps 2-20), validation time, mean parse
    failures and validation group size, as the README's table and bullets quote them; every run exited 0."""
    ms = [m.get("data", m) for m in _jsonl(SEAM_ON_GPU, "at_fix", "metrics", f"{run}.jsonl.gz")]
    last = ms[-1]
    got = (
        len(ms),
        round(statistics.median(m["timing_s/step"] for m in ms[1:]), 2),
        round(last["timing_s/testing"], 1),
        round(statistics.mean(m["judge_health/parse_fail_rate"] for m in ms), 3) if parse_fail else None,
        last.get("val-aux/word_problems/judge_group_size/mean@1"),
    )
    assert got == (20, median_step, testing, parse_fail, val_group)
    kept = open(os.path.join(SEAM_ON_GPU, "README.md")).read()
    row = f"| **0** | 20 of 20 | {median_step:.2f} s | "
    assert row in kept and f"{testing} s" in kept
    assert f"{run} exit 0" in open(os.path.join(SEAM_ON_GPU, "at_fix", "exits.txt")).read()


def _val(ms: list[dict], step: int) -> str:
    """The strict rule's accuracy on verl's validation at ``step``, test / held-out stories, as the README writes it
    (the rule run logs it as ``acc``, the judge run as ``rule_score`` beside the judge's own score)."""
    d = next(m["data"] for m in ms if m["step"] == step and any(k.startswith("val-core/") for k in m["data"]))
    key = "val-core/{}/acc/mean@1" if "val-core/word_problems/acc/mean@1" in d else "val-aux/{}/rule_score/mean@1"
    return " / ".join(f"{d[key.format(s)]:.3f}" for s in ("word_problems", "word_problems_heldout"))


@pytest.mark.parametrize(
    "run, median_step, vals",
    [
        ("rule", 3.12, {0: "0.154 / 0.180", 100: "0.342 / 0.360"}),
        ("judge", 4.35, {20: "0.216 / 0.210", 100: "0.360 / 0.378"}),
    ],
)
def test_seam_main_exit0_numbers_come_from_its_metrics(run, median_step, vals):
    """2026-12-07-seam_on_gpu/main_exit0: ``main.sh`` through the seam logged all 100 steps of both runs, their median
    step (2-100) and held-out accuracies are the README's, its judge never failed, and the job exited 0."""
    d = os.path.join(SEAM_ON_GPU, "main_exit0")
    ms = _jsonl(d, "metrics", f"{run}.jsonl.gz")
    train = [m["data"] for m in ms if "timing_s/step" in m["data"]]
    assert (len(train), _median(train, "timing_s/step")) == (100, median_step)
    row = next(ln for ln in open(os.path.join(SEAM_ON_GPU, "README.md")) if ln.startswith(f"| `{run}`"))
    assert f"| 100 of 100 | {median_step:.2f} s |" in row
    for step, acc in vals.items():
        assert f"{acc} at step {step}" in row and _val(ms, step) == acc
    if run == "judge":
        assert {d["judge_health/error_rate"] for d in train} == {0.0} and "errors 0 every step" in row
        assert max(d["judge_health/parse_fail_rate"] for d in train) == 1 / 128
    stages = open(os.path.join(d, "stages.txt")).read()
    assert "EXIT=0" in stages and "(778 s from the start to the exit)" in stages and "answers (114s waited)" in stages
    assert "judge-run gain / rule-run gain 1.096" in open(os.path.join(SEAM_ON_GPU, "README.md")).read()
    assert "Judge-run gain / rule-run gain: strict 1.096, flexible 1.135." in open(os.path.join(d, "report.md")).read()


JUDGE_COST_DEFERRED = os.path.join(ROOT, "docs", "results", "2026-12-07-judge_cost_deferred")
JUDGE_COST_PLACEMENTS = os.path.join(ROOT, "docs", "results", "2026-12-07-judge_cost_placements")


def _cost_rows(folder: str, rep: int, ratios: dict, keys: tuple) -> dict[str, list[dict]]:
    """A cost repetition's README rows are each arm's medians over steps 2-20 (``cost_report.medians``; "-" for a
    stage the arm lacks) and its step ratio to the rule's; returns each arm's training rows."""
    from scripts.lab.bench.cost_report import medians

    readme = open(os.path.join(folder, "README.md")).read()
    path = lambda arm: os.path.join(folder, "metrics", f"rep{rep}", f"{arm}.jsonl.gz")  # noqa: E731
    rule = medians([path("rule")])[0]["timing_s/step"]
    rows = {}
    for arm, ratio in {"rule": 1.0, **ratios}.items():
        med, n = medians([path(arm)])
        assert (n, round(med["timing_s/step"] / rule, 2)) == (19, ratio)
        cells = " | ".join(f"{med[f'timing_s/{k}']:.2f}" if f"timing_s/{k}" in med else "-" for k in keys)
        assert f"| {rep} | `{arm}` | 19 | {med['timing_s/step']:.2f} s | {ratio:.2f}x | {cells} |" in readme
        rows[arm] = [r["data"] for r in _jsonl(path(arm)) if "timing_s/step" in r["data"]]
    return rows


@pytest.mark.parametrize(
    "rep, ratios",
    [(1, {"colocated": 1.72, "colocated_deferred": 1.19}), (2, {"colocated": 2.13, "colocated_deferred": 1.35})],
)
def test_judge_cost_deferred_numbers_come_from_its_metrics(rep, ratios):
    """2026-12-07-judge_cost_deferred: each repetition's table rows (``_cost_rows``), and the judged runs never failed
    a judge call."""
    keys = ("gen", "reward", "reward_deferred", "reward_join", "old_log_prob", "ref", "update_actor")
    rows = _cost_rows(JUDGE_COST_DEFERRED, rep, ratios, keys)
    assert {r["judge_health/error_rate"] for arm in ratios for r in rows[arm]} == {0.0}
    readme = open(os.path.join(JUDGE_COST_DEFERRED, "README.md")).read()
    assert f"{ratios['colocated']:.2f}x" in readme and f"{ratios['colocated_deferred']:.2f}x" in readme
    exits = open(os.path.join(JUDGE_COST_DEFERRED, "exits.txt")).read()
    assert exits.count("EXIT=0") == 6


@pytest.mark.parametrize(
    "rep, ratios",
    [
        (1, {"resident": 0.82, "route": 1.26}),
        (2, {"server": 1.20, "colocated": 1.22}),
        (3, {"resident": 1.33, "colocated": 1.86}),
    ],
)
def test_judge_cost_placements_numbers_come_from_its_metrics(rep, ratios):
    """2026-12-07-judge_cost_placements: each repetition's table rows (``_cost_rows``); a judged run never failed a
    judge call, and the judge answered every sample it was asked (route: the rule decided the rest)."""
    rows = _cost_rows(JUDGE_COST_PLACEMENTS, rep, ratios, ("gen", "reward", "old_log_prob", "ref", "update_actor"))
    for arm in set(ratios) & {"server", "colocated", "route"}:
        assert {r["judge_health/error_rate"] for r in rows[arm]} == {0.0}
    for arm in set(ratios) & {"server", "colocated"}:
        assert min(r["judge_health/answered_rate"] for r in rows[arm]) >= 0.992
    if "route" in ratios:
        route = rows["route"]
        assert {round(r["judge_health/answered_rate"] + r["judge_health/skipped_rate"], 6) for r in route} == {1.0}
        asked = 1 - sum(r["judge_health/skipped_rate"] for r in route[1:]) / len(route[1:])
        readme = open(os.path.join(JUDGE_COST_PLACEMENTS, "README.md")).read()
        assert f"{asked:.0%}" == "23%" and "asked for 23% of the" in readme


def test_judge_cost_placements_exits_and_split():
    """Ten runs exited 0 (the judge's training and three repetitions) and repetition 1's colocated and server runs
    ran out of memory; repetition 3's side-by-side resident / colocated steps give the README's cost of the calls."""
    from scripts.lab.bench.cost_report import medians

    exits = open(os.path.join(JUDGE_COST_PLACEMENTS, "exits.txt")).read()
    assert (exits.count("EXIT=0"), sorted(re.findall(r"(rep\d \w+) EXIT=1", exits))) == (
        10,
        ["rep1 colocated", "rep1 server"],
    )
    step = lambda arm: medians([os.path.join(JUDGE_COST_PLACEMENTS, "metrics", "rep3", f"{arm}.jsonl.gz")])[0]  # noqa: E731
    assert round(step("colocated")["timing_s/step"] - step("resident")["timing_s/step"], 2) == 1.07
    readme = open(os.path.join(JUDGE_COST_PLACEMENTS, "README.md")).read()
    assert "the calls add 1.07 s a step (3.77 s against 2.70 s)" in readme
    # runs.txt: each finished run's seconds from start to end; the rule's runs end first
    runs = re.findall(
        r"== rep\d (\w+)\n\[pipeline\] stage \w+ done in (\d+)s",
        open(os.path.join(JUDGE_COST_PLACEMENTS, "runs.txt")).read(),
    )
    rule = sorted(int(t) for a, t in runs if a == "rule")
    judged = sorted(int(t) for a, t in runs if a != "rule")
    assert (rule[0], rule[-1], judged[0], judged[-1], len(runs)) == (121, 153, 147, 190, 9)
    assert "121-153 s from start to end, against 147-190 s" in readme
