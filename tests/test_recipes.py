"""Recipes, shared launcher and runtime_env, on CPU.

* DRY_RUN=1 of every recipe composes a valid verl config (no unknown keys, reward keys under
  reward.*, paths exist) through the real run.sh -> scripts/launch.sh -> scripts/launch.py path.
* Every knob documented in a recipe README changes the verl key the README claims (table-driven:
  the README tables are parsed; one changed-everything plan per recipe, composed with verl's schema).
* README tables list every knob of run.sh/common.sh with the same default.
* runtime_env.yaml holds no secret values; the launcher never prints a key (dry runs, Ray job
  submission, a real local run whose child prints the key), and never writes one to a file.
* The local path: a private Ray head is started, the entrypoint runs against it with the repo on
  PYTHONPATH, its exit code is returned, and that head is stopped.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import math
import os
import re
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import launch  # noqa: E402
import verl_config  # noqa: E402

pytest.importorskip("verl")

RECIPES = ["judge_pointwise", "judge_pairwise", "gsm8k_rule", "gsm8k_api_judge", "gsm8k_local_judge"]
ALL_RECIPES = RECIPES + ["judge_to_reward"]
MODES = {"judge_pointwise": "rule", "judge_pairwise": "rule", "gsm8k_rule": "rule", "gsm8k_api_judge": "api",
         "gsm8k_local_judge": "local"}
# Fake keys, assembled at run time so secret scanners do not mistake the test for a leak.
SECRET = "sk-" + "test-7f3a9c1e5b2d4f6a8c0e"
INLINE_SECRET = "sk-" + "inline-0123456789abcdef"
HF_SECRET = "hf_testTOKENabcdef123456"
SWAN_SECRET = "swan-test-key-0123456789"
SPECIAL = ["PYTHON", "DRY_RUN", "RAY_ADDRESS", "RUNTIME_ENV", "JOB_PYTHON", "PASS_ENV", "CHECK_PATHS", "ENTRYPOINT"]
ABSENT = object()


# ----------------------------------------------------------------------------------------------- helpers
def base_env(**extra) -> dict:
    """The current environment without any recipe knob or secret, plus PYTHON = this interpreter."""
    drop = set(launch.KNOB_BY_VAR) | set(launch.SPECIAL_KNOBS) | set(SPECIAL) | {
        "RECIPE", "REWARD_MODE", "DATA_KIND", "PIPELINE_DIR", "JUDGE_STEPS", "POLICY_STEPS", "JUDGE_SAVE_FREQ",
        "JUDGE_TRAIN_FILES", "JUDGE_VAL_FILES", "POLICY_TRAIN_FILES", "POLICY_VAL_FILES", "OUTPUT_DIR", "DATA_DIR",
        "GSM8K_DIR", "METRICS_FILE", "LOGGER", "NO_FLASH_ATTN", "JUDGE_GPUS", "VERL_FILE_LOGGER_PATH"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not launch.SECRET_NAME.search(k)}
    env["PYTHON"] = sys.executable
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_recipe(recipe, env, *args, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", os.path.join(ROOT, "recipes", recipe, "run.sh"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def plan_json(recipe, env, *args) -> dict:
    r = run_recipe(recipe, {**env, "DRY_RUN": "print"}, *args, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def compose(overrides):
    return verl_config.compose(overrides)


def select(cfg, key):
    from omegaconf import OmegaConf

    v = OmegaConf.select(cfg, key.lstrip("+"), default=ABSENT)
    if OmegaConf.is_config(v):
        v = OmegaConf.to_container(v)
    return v


def same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            return math.isclose(float(a), float(b), rel_tol=1e-9)
        except (TypeError, ValueError):
            return False
    return a == b


def parse_defaults(path) -> dict:
    out = {}
    for ln in open(path, encoding="utf-8"):
        m = re.match(r"^export (\w+)=\$\{\1:-(.*)\}\s*$", ln.strip())
        if m:
            out[m.group(1)] = m.group(2)
    return out


def readme_rows(recipe) -> dict:
    """{VAR: (default cell, [claimed verl keys])} from the recipe README's knob table(s)."""
    rows = {}
    for ln in open(os.path.join(ROOT, "recipes", recipe, "README.md"), encoding="utf-8"):
        m = re.match(r"^\| `([A-Z][A-Z0-9_]*)` \| (.*?) \| (.*?) \|", ln)
        if m:
            var, default, sets = m.groups()
            keys = re.findall(r"`(\+?[a-z_]+(?:\.[A-Za-z_]+)+)`", sets)
            rows[var] = (default, keys)
    return rows


# ----------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def fx(tmp_path_factory):
    """Tiny verl-style parquet files: GSM8K policy rows, pointwise and pairwise judge rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = tmp_path_factory.mktemp("recipe_data")
    q = "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did she sell altogether?"
    sol = "In May she sold 48 / 2 = 24 clips. Altogether 48 + 24 = 72.\n#### 72"
    policy = [{"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": q + " End with #### <number>."}],
               "ability": "math", "reward_model": {"style": "rule", "ground_truth": "72"},
               "extra_info": {"split": "train", "index": 0, "question": q, "answer": sol}}]
    point = [{"data_source": "gsm8k_verify/pointwise", "prompt": [{"role": "user", "content": f"# Query\n{q}\n# Response\n{sol}"}],
              "ability": "judge", "reward_model": {"style": "rule", "ground_truth": "4"}, "extra_info": {"split": "train", "index": 0}}]
    pair = [{"data_source": "gsm8k_verify/pairwise", "prompt": [{"role": "user", "content": f"{q}\nA: {sol}\nB: 48 + 48 = 96\n#### 96"}],
             "ability": "judge", "reward_model": {"style": "rule", "ground_truth": "A"}, "extra_info": {"split": "train", "index": 0}}]
    files = {}
    for name, rows in (("policy", policy), ("pointwise", point), ("pairwise", pair)):
        for split in ("train", "test"):
            p = d / f"{name}_{split}.parquet"
            pq.write_table(pa.Table.from_pylist(rows), str(p))
            files[(name, split)] = str(p)
    return files


def recipe_files(fx, recipe):
    kind = {"judge_pointwise": "pointwise", "judge_pairwise": "pairwise"}.get(recipe, "policy")
    return {"TRAIN_FILES": fx[(kind, "train")], "VAL_FILES": fx[(kind, "test")]}


@pytest.fixture(scope="module")
def dry_runs(fx, model_path, tmp_path_factory):
    """DRY_RUN=1 of every recipe through its run.sh, run concurrently; {recipe: CompletedProcess}."""
    out = tmp_path_factory.mktemp("dry")
    secrets = {"OPENAI_API_KEY": SECRET, "HF_TOKEN": HF_SECRET, "SWANLAB_API_KEY": SWAN_SECRET}

    def one(recipe):
        env = base_env(DRY_RUN=1, MODEL=model_path, DATA_DIR=out / "data", OUTPUT_DIR=out / recipe,
                       CKPT_DIR=out / recipe / "ckpt", **secrets)
        if recipe == "judge_to_reward":
            env.update(PIPELINE_DIR=str(out / "pipeline"), JUDGE_TRAIN_FILES=fx[("pointwise", "train")],
                       JUDGE_VAL_FILES=fx[("pointwise", "test")], POLICY_TRAIN_FILES=fx[("policy", "train")],
                       POLICY_VAL_FILES=fx[("policy", "test")])
            env.pop("OUTPUT_DIR"), env.pop("CKPT_DIR")
        else:
            env.update(recipe_files(fx, recipe))
        t0 = time.time()
        r = run_recipe(recipe, env, timeout=600)
        return recipe, r, time.time() - t0, out

    with cf.ThreadPoolExecutor(max_workers=max(2, min(6, os.cpu_count() or 2))) as ex:
        results = list(ex.map(one, ALL_RECIPES))
    return {rec: (r, secs, out) for rec, r, secs, out in results}


# ----------------------------------------------------------------------------------------------- dry runs
@pytest.mark.parametrize("recipe", ALL_RECIPES)
def test_dry_run_passes(dry_runs, recipe):
    r, secs, out = dry_runs[recipe]
    text = r.stdout + r.stderr
    assert r.returncode == 0, text[-4000:]
    n_configs = 2 if recipe == "judge_to_reward" else 1
    assert text.count("[launch] config OK:") == n_configs, text[-4000:]
    assert "CONFIG ERROR" not in text
    assert "verl.trainer.main_ppo" in text  # the full command is printed
    for s in (SECRET, HF_SECRET, SWAN_SECRET):
        assert s not in text, f"secret printed by {recipe}"
    assert not os.path.exists(os.path.join(out, recipe, "ckpt")), "a dry run must not create checkpoints"
    if recipe == "judge_to_reward":
        for stage in ("stage 1 output:", "stage 2 output:", "stage 3 output:", "stage 4 output:"):
            assert stage in text
        assert "verl.model_merger merge --backend fsdp --local_dir" in text


@pytest.mark.parametrize("recipe", RECIPES)
def test_composed_config_per_recipe(recipe, fx, model_path):
    """The default plan of each recipe: GRPO seed settings, reward keys under reward.* only."""
    p = plan_json(recipe, base_env(MODEL=model_path, NO_FLASH_ATTN=1, **recipe_files(fx, recipe)))
    assert p["recipe"] == recipe and p["mode"] == "local"
    for ov in p["overrides"]:
        assert ov.split("=", 1)[0].lstrip("+~").split(".")[0] not in verl_config.LEGACY_TOP_LEVEL, ov
    cfg = verl_config.check(p["overrides"])  # full schema check: keys, paths, validate_config
    assert cfg.algorithm.adv_estimator == "grpo"
    a = cfg.actor_rollout_ref.actor
    assert a.use_kl_loss is True and a.kl_loss_type == "low_var_kl" and same(a.kl_loss_coef, 0.001) and same(a.optim.lr, 1e-6)
    assert cfg.actor_rollout_ref.rollout.n == 4
    assert all(v is None for v in cfg.custom_reward_function.values())
    assert cfg.reward_model.enable is None and cfg.sandbox_fusion.url is None
    assert "file" in cfg.trainer.logger and cfg.ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH.endswith("metrics.jsonl")
    fn = {"judge_pointwise": "pointwise", "judge_pairwise": "pairwise", "gsm8k_rule": "gsm8k"}.get(recipe, "llm_judge")
    assert cfg.reward.custom_reward_function.path == f"pkg://reward_fns.{fn}"
    mode = MODES[recipe]
    assert cfg.reward.reward_model.enable is (mode == "local")
    if mode == "api":
        assert cfg.reward.reward_manager.name == "rate_limited"
        kw = cfg.reward.custom_reward_function.reward_kwargs
        assert kw.base_url == "https://api.openai.com/v1" and kw.model == "gpt-4o-mini" and kw.api_key_env == "OPENAI_API_KEY"
        assert cfg.reward.max_concurrent == 64
    if mode == "local":
        rm = cfg.reward.reward_model
        assert rm.model_path == model_path and rm.enable_resource_pool is False and rm.rollout.name == "vllm"
        assert rm.rollout.tensor_model_parallel_size == 1
        assert cfg.trainer.use_v1 is False  # verl 0.9.1: the V1 colocated reward path drops data_source
        assert "base_url" not in cfg.reward.custom_reward_function.reward_kwargs
    if mode == "rule":
        assert "reward_kwargs" not in cfg.reward.custom_reward_function


# ----------------------------------------------------------------------------------------------- knobs
# VAR -> (value to set, expected value of every claimed key | {key: expected})
KNOB_VALUES = {
    "MODEL": ("/tmp/vj-test-model", "/tmp/vj-test-model"),
    "TRAIN_FILES": ("/tmp/vj-a.parquet,/tmp/vj-b.parquet", ["/tmp/vj-a.parquet", "/tmp/vj-b.parquet"]),
    "VAL_FILES": ("/tmp/vj-v.parquet", "/tmp/vj-v.parquet"),
    "MAX_PROMPT_LENGTH": ("333", 333),
    "MAX_RESPONSE_LENGTH": ("222", 222),
    "TRAIN_BATCH_SIZE": ("8", 8),
    "TRAIN_MAX_SAMPLES": ("100", 100),
    "VAL_MAX_SAMPLES": ("50", 50),
    "ADV_ESTIMATOR": ("rloo", "rloo"),
    "ROLLOUT_N": ("3", 3),
    "TEMPERATURE": ("0.7", 0.7),
    "LR": ("3e-6", 3e-6),
    "MINI_BATCH_SIZE": ("4", 4),
    "MICRO_BATCH_SIZE": ("2", 2),
    "USE_KL_LOSS": ("0", False),
    "KL_COEF": ("0.01", 0.01),
    "KL_LOSS_TYPE": ("kl", "kl"),
    "ENTROPY_COEFF": ("0.001", 0.001),
    "GRAD_CKPT": ("1", True),
    "ROLLOUT_ENGINE": ("sglang", "sglang"),
    "GPU_MEM_UTIL": ("0.55", 0.55),
    "TP_SIZE": ("2", 2),
    "ENFORCE_EAGER": ("0", False),
    "ROLLOUT_SLEEP": ("0", False),
    "AGENT_WORKERS": ("3", 3),
    "REWARD_WORKERS": ("5", 5),
    "REWARD_FN": ("/tmp/vj-reward.py", "/tmp/vj-reward.py"),
    "REWARD_FN_NAME": ("my_score", "my_score"),
    "REWARD_MANAGER": ("dapo", "dapo"),
    "N_GPUS": ("2", 2),
    "NNODES": ("3", 3),
    "TOTAL_EPOCHS": ("7", 7),
    "TOTAL_STEPS": ("11", 11),
    "SAVE_FREQ": ("13", 13),
    "KEEP_CKPTS": ("4", 4),
    "TEST_FREQ": ("17", 17),
    "VAL_BEFORE_TRAIN": ("1", True),
    "PROJECT": ("projx", "projx"),
    "EXPERIMENT": ("expx", "expx"),
    "CKPT_DIR": ("/tmp/vj-ckpt", "/tmp/vj-ckpt"),
    "RESUME_MODE": ("disable", "disable"),
    "USE_V1": ("0", False),
    "JUDGE_BASE_URL": ("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1"),
    "JUDGE_MODEL_NAME": ("judge-x", "judge-x"),
    "JUDGE_API_KEY_ENV": ("MY_JUDGE_CRED", "MY_JUDGE_CRED"),
    "MAX_CONCURRENT": ("7", 7),
    "MAX_RPM": ("120", 120),
    "MAX_TPM": ("9000", 9000),
    "JUDGE_MODEL": ("/tmp/vj-judge", "/tmp/vj-judge"),
    "JUDGE_GPUS": ("2", {"reward.reward_model.enable_resource_pool": True, "reward.reward_model.n_gpus_per_node": 2,
                         "trainer.use_v1": True}),
    "JUDGE_TP": ("2", 2),
    "JUDGE_GPU_MEM_UTIL": ("0.33", 0.33),
    "JUDGE_ROLLOUT_ENGINE": ("sglang", "sglang"),
    "JUDGE_SLEEP": ("0", False),
    "JUDGE_ENFORCE_EAGER": ("0", False),
    "JUDGE_MODE": ("hybrid", "hybrid"),
    "JUDGE_FALLBACK": ("0.0", 0.0),
    "JUDGE_TIMEOUT": ("12.5", 12.5),
    "JUDGE_MAX_RETRIES": ("9", 9),
    "JUDGE_MAX_TOKENS": ("99", 99),
    "METRICS_FILE": ("/tmp/vj-metrics.jsonl", "/tmp/vj-metrics.jsonl"),
    "LOGGER": ("console,tensorboard", ["console", "tensorboard", "file"]),
    "NO_FLASH_ATTN": ("1", {"actor_rollout_ref.model.use_remove_padding": False,
                            "actor_rollout_ref.model.override_config.attn_implementation": "sdpa"}),
}


@pytest.mark.parametrize("recipe", RECIPES)
def test_every_documented_knob_sets_its_key(recipe, fx, model_path):
    rows = {v: keys for v, (_, keys) in readme_rows(recipe).items() if keys}
    assert len(rows) >= 40, "README knob table not found"
    missing = sorted(set(rows) - set(KNOB_VALUES))
    assert not missing, f"documented knobs without a test value: {missing}"
    # the README's claim is the launcher's own mapping (so the docs cannot drift from the code)
    for var, keys in rows.items():
        if var in launch.KNOB_BY_VAR:
            assert [k.lstrip("+") for k in keys] == list(launch.KNOB_BY_VAR[var].keys), var

    base = base_env(MODEL=model_path, NO_FLASH_ATTN=0, **recipe_files(fx, recipe))
    before = compose(plan_json(recipe, base)["overrides"])
    changed_env = dict(base)
    for var in rows:
        changed_env[var] = KNOB_VALUES[var][0]
    after = compose(plan_json(recipe, changed_env)["overrides"])
    problems = []
    for var, keys in rows.items():
        value, expected = KNOB_VALUES[var]
        for key in keys:
            want = expected.get(key.lstrip("+"), ABSENT) if isinstance(expected, dict) else expected
            got, was = select(after, key), select(before, key)
            if not same(got, want):
                problems.append(f"{var}={value}: {key} = {got!r}, expected {want!r}")
            elif same(got, was):
                problems.append(f"{var}={value}: {key} did not change (still {was!r})")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("recipe", RECIPES + ["judge_to_reward"])
def test_readme_lists_every_knob_with_its_default(recipe):
    rows = readme_rows(recipe)
    own = parse_defaults(os.path.join(ROOT, "recipes", recipe, "run.sh"))
    assert own, "run.sh sets no ${VAR:-default}"
    if recipe == "judge_to_reward":
        assert set(own) <= set(rows)
        return
    effective = {**parse_defaults(os.path.join(ROOT, "recipes", "common.sh")), **own}
    assert set(effective) <= set(rows), sorted(set(effective) - set(rows))
    for k in launch.KNOBS:
        if MODES[recipe] in k.modes:
            assert k.var in rows, f"{k.var} missing from recipes/{recipe}/README.md"
    for var in SPECIAL + ["NO_FLASH_ATTN", "LOGGER", "METRICS_FILE", "OUTPUT_DIR", "DATA_DIR", "GSM8K_DIR"]:
        assert var in rows, var
    for var, default in effective.items():
        cell = rows[var][0]
        literal = re.fullmatch(r"`(.*)`", cell)
        if literal:  # a literal default in the README must be run.sh's
            want = default.replace("$ROOT/", "").replace("$RECIPE", recipe)
            assert literal.group(1) == want, f"{var}: README says {cell}, run.sh {default!r}"
        else:
            assert default in ("", "$RECIPE"), f"{var}: README default {cell!r} but run.sh has {default!r}"


def test_run_sh_files_are_thin():
    """No logic in run.sh: defaults, the recipe's identity, then the shared launcher (pipeline aside)."""
    for recipe in RECIPES:
        lines = [ln.strip() for ln in open(os.path.join(ROOT, "recipes", recipe, "run.sh")) if ln.strip() and not ln.startswith("#")]
        assert lines[-1] == 'exec bash "$HERE/../../scripts/launch.sh" "$@"'
        for ln in lines[:-1]:
            assert re.match(r"^(set -euo pipefail|HERE=.*|export .*|source \"\$HERE/\.\./common\.sh\")$", ln), ln


def test_relative_paths_special_switches_and_user_overrides_win(fx, model_path, tmp_path):
    env = base_env(MODEL=model_path, **recipe_files(fx, "gsm8k_rule"))
    p = plan_json("gsm8k_rule", {**env, "REWARD_FN": "reward_fns/gsm8k.py", "NO_FLASH_ATTN": "1"},
                  "trainer.total_training_steps=3", "+actor_rollout_ref.model.override_config.attn_implementation=eager")
    cfg = compose(p["overrides"])
    assert cfg.reward.custom_reward_function.path == os.path.join(ROOT, "reward_fns", "gsm8k.py")  # cwd-relative -> absolute
    assert cfg.trainer.total_training_steps == 3
    assert cfg.actor_rollout_ref.model.override_config.attn_implementation == "eager"  # the user's '+' replaces ours
    assert cfg.actor_rollout_ref.model.use_remove_padding is False
    # OUTPUT_DIR decides the metrics file; DATA_DIR decides where the default data goes
    p2 = plan_json("gsm8k_rule", {**base_env(MODEL=model_path), "OUTPUT_DIR": str(tmp_path / "o"), "DATA_DIR": str(tmp_path / "d")})
    assert p2["metrics_file"] == str(tmp_path / "o" / "metrics.jsonl") and p2["output_dir"] == str(tmp_path / "o")
    assert f"data.train_files={tmp_path / 'd' / 'gsm8k_p512' / 'train.parquet'}" in p2["overrides"]
    # GSM8K_DIR goes to data_prep as local files (else --hf)
    r = run_recipe("gsm8k_rule", {**base_env(MODEL=model_path), "DRY_RUN": "print", "DATA_DIR": str(tmp_path / "d"),
                                  "GSM8K_DIR": "/data/gsm8k"}, "--build-data")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "--train /data/gsm8k/train.jsonl --test /data/gsm8k/test.jsonl" in r.stdout and "--max-prompt-length 512" in r.stdout
    r = run_recipe("gsm8k_rule", {**base_env(MODEL=model_path), "DRY_RUN": "print", "DATA_DIR": str(tmp_path / "d")}, "--build-data")
    assert " --hf" in r.stdout
    # SWANLAB_API_KEY adds swanlab; a bad integer is a clear error
    p3 = plan_json("gsm8k_rule", {**env, "SWANLAB_API_KEY": SWAN_SECRET})
    assert "trainer.logger=[console,swanlab,file]" in p3["overrides"]
    bad = run_recipe("gsm8k_rule", {**env, "DRY_RUN": "print", "ROLLOUT_N": "four"})
    assert bad.returncode == 2 and "ROLLOUT_N='four': expected an integer" in bad.stdout


def _json_blobs(text):
    blobs, cur = [], None
    for ln in text.splitlines():
        if ln == "{":
            cur = [ln]
        elif cur is not None:
            cur.append(ln)
            if ln == "}":
                blobs.append(json.loads("\n".join(cur)))
                cur = None
    return blobs


def test_pipeline_knobs_and_resume(fx, model_path, tmp_path):
    pdir = tmp_path / "pipe"
    env = base_env(MODEL=model_path, DRY_RUN="print", PIPELINE_DIR=pdir, JUDGE_STEPS=7, POLICY_STEPS=9, JUDGE_SAVE_FREQ=3,
                   JUDGE_TRAIN_FILES=fx[("pointwise", "train")], JUDGE_VAL_FILES=fx[("pointwise", "test")],
                   POLICY_TRAIN_FILES=fx[("policy", "train")], POLICY_VAL_FILES=fx[("policy", "test")])
    r = run_recipe("judge_to_reward", env, "data.train_batch_size=8")
    assert r.returncode == 0, r.stdout + r.stderr
    judge, policy = _json_blobs(r.stdout)
    assert judge["recipe"] == "judge_pointwise" and policy["recipe"] == "gsm8k_local_judge"
    j, pol = compose(judge["overrides"]), compose(policy["overrides"])
    assert j.trainer.total_training_steps == 7 and j.trainer.save_freq == 3 and pol.trainer.total_training_steps == 9
    assert j.data.train_files == fx[("pointwise", "train")] and pol.data.train_files == fx[("policy", "train")]
    assert j.trainer.default_local_dir == str(pdir / "judge" / "checkpoints")
    assert pol.trainer.default_local_dir == str(pdir / "policy" / "checkpoints")
    assert j.data.train_batch_size == 8 and pol.data.train_batch_size == 8  # "$@" reaches both stages
    assert pol.reward.reward_model.model_path == model_path  # dry run: no merged judge yet
    for n in (1, 2, 3, 4):
        assert f"stage {n} output:" in r.stdout
    # resume: stage 2 and 3 done -> skipped, stage 4 uses the merged judge folder
    (pdir / "judge").mkdir(parents=True)
    (pdir / "judge" / ".done").write_text("")
    hf = pdir / "judge_hf"
    hf.mkdir()
    (hf / ".complete").write_text("merged\n")
    r = run_recipe("judge_to_reward", env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "stage 2 skipped" in r.stdout and "stage 3 skipped" in r.stdout
    (only,) = _json_blobs(r.stdout)
    assert compose(only["overrides"]).reward.reward_model.model_path == str(hf)


# ----------------------------------------------------------------------------------------------- secrets
SECRET_VALUE = re.compile(r"(sk-[A-Za-z0-9-]{10,}|hf_[A-Za-z0-9]{10,}|[A-Za-z0-9+/]{32,})")


def test_runtime_env_has_no_secret_values():
    import yaml

    text = open(os.path.join(ROOT, "runtime_env.yaml"), encoding="utf-8").read()
    rt = yaml.safe_load(text)
    assert rt["working_dir"] == "."
    for pat in (".git", ".venv*", "/data/", "/checkpoints/", "/outputs/", "*.parquet", "__pycache__"):
        assert pat in rt["excludes"], pat
    for k, v in rt["env_vars"].items():
        assert not launch.SECRET_NAME.search(k), f"secret-like variable {k} in runtime_env.yaml"
        assert not SECRET_VALUE.search(str(v)), f"{k} looks like a secret value"
    for k in ("TOKENIZERS_PARALLELISM", "NCCL_DEBUG", "VLLM_LOGGING_LEVEL"):
        assert k in rt["env_vars"]
    for v in os.environ.values():  # no value of this machine's environment that looks secret
        if v and len(v) >= 12 and SECRET_VALUE.fullmatch(v):
            assert v not in text
    assert not any(SECRET_VALUE.fullmatch(tok) for tok in re.findall(r"\S+", text) if not tok.startswith("#"))


def test_job_submission_passes_secrets_by_name_never_prints_or_writes_them(fx, model_path, tmp_path):
    rt_path = os.path.join(ROOT, "runtime_env.yaml")
    before = open(rt_path, "rb").read()
    env = base_env(MODEL=model_path, RAY_ADDRESS="http://127.0.0.1:1", OPENAI_API_KEY=SECRET, HF_TOKEN=HF_SECRET,
                   MY_EXTRA=SWAN_SECRET, PASS_ENV="MY_EXTRA", OUTPUT_DIR=tmp_path / "out", **recipe_files(fx, "gsm8k_api_judge"))
    # the user even passes a key inline: masked too
    args = ["+reward.custom_reward_function.reward_kwargs.api_key=" + INLINE_SECRET]
    printed = run_recipe("gsm8k_api_judge", {**env, "DRY_RUN": "print"}, *args)
    dry = run_recipe("gsm8k_api_judge", {**env, "DRY_RUN": "1", "CHECK_PATHS": "warn"}, *args)
    assert printed.returncode == 0, printed.stdout + printed.stderr
    assert dry.returncode == 0, dry.stdout + dry.stderr
    for r in (printed, dry):
        text = r.stdout + r.stderr
        for s in (SECRET, HF_SECRET, SWAN_SECRET, INLINE_SECRET):
            assert s not in text
    cmd = json.loads(printed.stdout)["command"]
    assert "ray job submit --runtime-env-json" in cmd and '"OPENAI_API_KEY": "***"' in cmd and '"HF_TOKEN": "***"' in cmd
    assert "ray job submit --runtime-env-json" in dry.stdout and '"OPENAI_API_KEY": "***"' in dry.stdout
    assert "secrets passed to the job by name: HF_TOKEN, OPENAI_API_KEY, MY_EXTRA" in dry.stdout
    assert open(rt_path, "rb").read() == before
    for dirpath, _, files in os.walk(tmp_path):
        for f in files:
            data = open(os.path.join(dirpath, f), "rb").read()
            assert SECRET.encode() not in data and HF_SECRET.encode() not in data
    # the plan handed to Ray (in memory) does carry the values, by name
    p = launch.plan({**env, "DRY_RUN": "print"}, [], materialize=False)
    assert p.runtime_env["env_vars"]["OPENAI_API_KEY"] == SECRET and p.runtime_env["env_vars"]["MY_EXTRA"] == SWAN_SECRET
    assert "--runtime-env-json" in p.command
    # without any secret set, runtime_env.yaml is passed as is
    clean = plan_json("gsm8k_rule", base_env(MODEL=model_path, RAY_ADDRESS="http://127.0.0.1:1", **recipe_files(fx, "gsm8k_rule")))
    assert "ray job submit --runtime-env runtime_env.yaml -- python3 -m verl.trainer.main_ppo" in clean["command"]
    assert "reward.custom_reward_function.path=pkg://reward_fns.gsm8k" in clean["overrides"]


def test_mask():
    env = {"OPENAI_API_KEY": SECRET, "MY_TOKEN": "abcdefghij", "SHORT_KEY": "abc", "JUDGE_API_KEY_ENV": "OPENAI_API_KEY"}
    out = launch.mask(f"key {SECRET} tok abcdefghij api_key=zzzzzzzz token: 'qqqqqqq' api_key_env=OPENAI_API_KEY abc", env)
    assert SECRET not in out and "abcdefghij" not in out and "zzzzzzzz" not in out and "qqqqqqq" not in out
    assert "api_key_env=OPENAI_API_KEY" in out and out.endswith(" abc")


FAKE_MAIN = r'''
import os, sys, json
import ray
print("fake trainer args:", len(sys.argv) - 1, "overrides")
print("the key is", os.environ.get("OPENAI_API_KEY"))  # a leaky trainer: the launcher must mask it
ray.init()
@ray.remote
def probe():
    import reward_fns.gsm8k  # the repo root is on PYTHONPATH in Ray workers
    return os.environ.get("OPENAI_API_KEY") is not None
print("worker sees the repo and the key:", ray.get(probe.remote()))
metrics = [a.split("=", 1)[1] for a in sys.argv if "VERL_FILE_LOGGER_PATH=" in a][0]
open(metrics, "a").write(json.dumps({"step": 1, "data": {"critic/score/mean": 0.5}}) + "\n")
ray.shutdown()
sys.exit(3)
'''


@pytest.mark.slow
def test_local_run_starts_and_stops_its_own_ray_head(fx, model_path, tmp_path):
    (tmp_path / "fake_main_vj.py").write_text(FAKE_MAIN)
    out = tmp_path / "out"
    out.mkdir()
    (out / "metrics.jsonl").write_text('{"step": 1, "data": {}}\n')  # a previous run's file: kept, renamed
    env = base_env(MODEL=model_path, ENTRYPOINT="fake_main_vj", PYTHONPATH=tmp_path, OUTPUT_DIR=out, OPENAI_API_KEY=SECRET,
                   CKPT_DIR=tmp_path / "ckpt", **recipe_files(fx, "gsm8k_rule"))
    env.pop("RAY_ADDRESS", None)
    r = run_recipe("gsm8k_rule", env, timeout=600)
    text = r.stdout + r.stderr
    assert r.returncode == 3, text[-4000:]  # the entrypoint's exit code
    assert SECRET not in text and "the key is ***" in text
    assert "worker sees the repo and the key: True" in text
    m = re.search(r"stopping the private Ray head \(pid (\d+)\)", text)
    assert m, text[-3000:]
    pid = int(m.group(1))
    for _ in range(60):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"Ray head {pid} still running")
    log = (out / "launch.log").read_text()
    assert "the key is ***" in log and SECRET not in log
    assert json.loads((out / "metrics.jsonl").read_text().splitlines()[0])["step"] == 1
    assert len(list(out.glob("metrics.*.jsonl"))) == 1


JOB_MAIN = r'''
import os, sys
import ray
print("the key is", os.environ.get("OPENAI_API_KEY"))
ray.init()
@ray.remote
def probe():
    import reward_fns.gsm8k  # the uploaded working_dir is on PYTHONPATH
    return (os.environ.get("OPENAI_API_KEY") is not None, os.path.exists("runtime_env.yaml"),
            os.path.exists(".git") or os.path.exists("data") or os.path.exists(".venv"))
key, repo, excluded_present = ray.get(probe.remote())
print(f"job worker: key={key} repo={repo} excluded_present={excluded_present}")
'''


@pytest.mark.slow
def test_ray_job_submission_end_to_end(fx, model_path, tmp_path):
    """RAY_ADDRESS set: ray job submit with runtime_env.yaml; the key reaches the job by name only."""
    pytest.importorskip("aiohttp")
    mod = f"_job_main_{os.getpid()}"
    entry = os.path.join(ROOT, "tests", mod + ".py")  # must be inside the uploaded working_dir
    with open(entry, "w") as f:
        f.write(JOB_MAIN)
    env = base_env()
    head = None
    try:
        head, _ = launch.start_ray_head(env, str(tmp_path / "head.log"), dashboard_port=launch.free_port())
        log = (tmp_path / "head.log").read_text()
        m = re.search(r"dashboard at[\s\S]*?(127\.0\.0\.1:\d+)", log)
        assert m, log[-2000:]
        import urllib.error
        import urllib.request

        for _ in range(120):  # the dashboard's HTTP server comes up a little after the head
            try:
                urllib.request.urlopen(f"http://{m.group(1)}/api/version", timeout=2)
                break
            except urllib.error.HTTPError:
                break  # 401 with token auth: it is up
            except OSError:
                time.sleep(0.5)
        job_env = {**env, "MODEL": model_path, "RAY_ADDRESS": f"http://{m.group(1)}", "ENTRYPOINT": f"tests.{mod}",
                   "JOB_PYTHON": sys.executable, "OPENAI_API_KEY": SECRET, "OUTPUT_DIR": str(tmp_path / "out"),
                   **recipe_files(fx, "gsm8k_rule")}
        r = run_recipe("gsm8k_rule", job_env, timeout=600)
        text = r.stdout + r.stderr
        assert r.returncode == 0, text[-4000:]
        assert "job worker: key=True repo=True excluded_present=False" in text, text[-4000:]
        assert SECRET not in text and "the key is ***" in text
        assert SECRET not in (tmp_path / "out" / "launch.log").read_text()
    finally:
        os.remove(entry)
        if head is not None:
            launch.stop_ray_head(head)


def test_job_submission_retried_while_the_job_agent_is_not_ready(tmp_path, monkeypatch):
    """A fresh cluster answers "No available agent to submit job" for a while: submit again, then stop."""
    counter = tmp_path / "tries"
    fake_submit = (
        "import pathlib, sys; p = pathlib.Path(sys.argv[1]); n = int(p.read_text() or 0) + 1 if p.exists() else 1; "
        "p.write_text(str(n)); "
        "print('RuntimeError: Request failed with status code 500: No available agent to submit job') if n < 3 "
        "else print('job submitted'); sys.exit(1 if n < 3 else 0)"
    )
    p = launch.Plan(recipe="x", mode="job", command=[sys.executable, "-c", fake_submit, str(counter)],
                    output_dir=str(tmp_path / "out"), metrics_file=str(tmp_path / "out" / "m.jsonl"))
    env = {**os.environ, "JOB_SUBMIT_TRIES": "5"}
    monkeypatch.setattr(launch.time, "sleep", lambda s: None)
    assert launch.execute(p, env) == 0
    assert counter.read_text() == "3"
    counter.write_text("0")
    env["JOB_SUBMIT_TRIES"] = "2"
    assert launch.execute(p, env) == 1  # gives up after 2 tries, returns the failure
    assert counter.read_text() == "2"


# ----------------------------------------------------------------------------------------------- GPU-side tools, on CPU
def test_use_v1_knob_and_colocated_judge(fx, model_path):
    rule = compose(plan_json("gsm8k_rule", base_env(MODEL=model_path, USE_V1="0", **recipe_files(fx, "gsm8k_rule")))["overrides"])
    assert rule.trainer.use_v1 is False
    p = plan_json("gsm8k_local_judge", base_env(MODEL=model_path, USE_V1="1", **recipe_files(fx, "gsm8k_local_judge")))
    # the local-judge recipe picks the trainer from JUDGE_GPUS: colocated -> legacy, whatever USE_V1 says
    assert [o for o in p["overrides"] if o.startswith("trainer.use_v1")] == ["trainer.use_v1=False"]


def _fake_merger(tmp_path, writes=True):
    """A PYTHON that answers ``-m verl.model_merger merge ... --target_dir X`` by writing X/config.json."""
    py = tmp_path / "fakepy"
    body = 'mkdir -p "$t" && echo "{}" > "$t/config.json"' if writes else "true"
    py.write_text(f'#!/bin/bash\necho "fake merger: $*"\nwhile [ $# -gt 0 ]; do [ "$1" = --target_dir ] && t=$2; shift; done\n{body}\n')
    py.chmod(0o755)
    return str(py)


def _ckpt(tmp_path, step=7):
    ck = tmp_path / "ckpt"
    (ck / f"global_step_{step}" / "actor").mkdir(parents=True)
    (ck / "latest_checkpointed_iteration.txt").write_text(str(step))
    return ck


def _merge(*args, **env):
    return subprocess.run(["bash", os.path.join(ROOT, "scripts", "merge_ckpt.sh"), *map(str, args)], cwd=ROOT,
                          env={**base_env(), **env}, capture_output=True, text=True, timeout=60)


def test_merge_ckpt(tmp_path):
    ck, hf = _ckpt(tmp_path), tmp_path / "hf"
    r = _merge(ck, hf, DRY_RUN="1", PYTHON="python3")
    assert r.returncode == 0 and f"--local_dir {ck}/global_step_7/actor --target_dir {hf}.tmp" in r.stdout
    assert "DRY_RUN: merge not run" in r.stdout and not hf.exists()
    r = _merge(tmp_path / "nothing", hf, PYTHON=_fake_merger(tmp_path))
    assert r.returncode == 3 and "no checkpoint at" in r.stdout and not hf.exists()
    r = _merge(ck, hf, PYTHON=_fake_merger(tmp_path, writes=False))
    assert r.returncode == 3 and "wrote no config.json" in r.stdout and not hf.exists()
    r = _merge(ck, hf, PYTHON=_fake_merger(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert (hf / ".complete").read_text() == f"merged from {ck}/global_step_7/actor\n"
    assert (hf / "config.json").exists() and not (tmp_path / "hf.tmp").exists()
    r = _merge(ck, hf, PYTHON=_fake_merger(tmp_path))
    assert r.returncode == 0 and "skipped" in r.stdout and "fake merger" not in r.stdout
    assert _merge(ck).returncode == 1 and "Merge a verl FSDP checkpoint" in _merge("--help").stdout


def _script(name, env, *args, timeout=300):
    return subprocess.run(["bash", os.path.join(ROOT, "scripts", name), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_judge_cost_runs_identical_settings_then_variants(fx, model_path, tmp_path):
    env = base_env(MODEL=model_path, DRY_RUN="print", COST_DIR=tmp_path / "jc", STEPS=6,
                   VARIANTS="tok128:JUDGE_MAX_TOKENS=128 hybrid:JUDGE_MODE=hybrid,JUDGE_MAX_TOKENS=64",
                   **recipe_files(fx, "gsm8k_rule"))
    r = _script("judge_cost.sh", env, "data.train_batch_size=8")
    assert r.returncode == 0, r.stdout + r.stderr
    cfgs = {}
    for name in ("rule", "local", "tok128", "hybrid"):
        (blob,) = _json_blobs((tmp_path / "jc" / name / "run.log").read_text())
        cfgs[name] = compose(blob["overrides"])
    for name, c in cfgs.items():  # identical shared settings in every run
        assert (c.trainer.use_v1, c.trainer.total_training_steps, c.trainer.save_freq, c.trainer.test_freq,
                c.actor_rollout_ref.rollout.gpu_memory_utilization, c.data.train_batch_size) == (False, 6, -1, -1, 0.3, 8), name
        assert c.trainer.default_local_dir == str(tmp_path / "jc" / name / "checkpoints")
    assert cfgs["rule"].reward.reward_model.enable is False and cfgs["local"].reward.reward_model.enable is True
    kw = {n: cfgs[n].reward.custom_reward_function.reward_kwargs for n in ("local", "tok128", "hybrid")}
    assert [(k.mode, k.max_tokens) for k in kw.values()] == [("judge", 512), ("judge", 128), ("hybrid", 64)]
    bad = _script("judge_cost.sh", {**env, "VARIANTS": "tok128=JUDGE_MAX_TOKENS"})
    assert bad.returncode == 2 and "VARIANTS: bad entry 'tok128=JUDGE_MAX_TOKENS'" in bad.stderr
    only = _script("judge_cost.sh", {**env, "VARIANTS": "", "RUNS": "local", "COST_DIR": str(tmp_path / "jc2")})
    assert only.returncode == 0 and sorted(os.listdir(tmp_path / "jc2")) == ["local"]


def test_learn_eval_stages(fx, model_path, tmp_path):
    run_dir = tmp_path / "learn"
    (run_dir / "eval_before").mkdir(parents=True)
    (run_dir / "eval_before" / "report.json").write_text("{}")
    env = base_env(MODEL=model_path, DRY_RUN="print", RUN_DIR=run_dir, RECIPE="gsm8k_rule", STEPS=4, EVAL_LIMIT=5,
                   EVAL_KV_CACHE_GB=4, EVAL_GPU_MEM_UTIL=0.1, **recipe_files(fx, "gsm8k_rule"))
    r = _script("learn_eval.sh", env)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert f"skipped: {run_dir}/eval_before/report.json exists" in out  # the start model was evaluated already
    (blob,) = _json_blobs(out)
    c = compose(blob["overrides"])
    assert (c.trainer.total_training_steps, c.trainer.save_freq) == (4, 4)
    assert c.trainer.default_local_dir == str(run_dir / "checkpoints")
    assert f"--local_dir {run_dir}/checkpoints/global_step_<N>/actor --target_dir {run_dir}/hf.tmp" in out
    want = (f"scripts/eval_gsm8k.py --data {fx[('policy', 'test')]} --limit 5 --vllm-offline {run_dir}/hf "
            f"--gpu-memory-utilization 0.1 --kv-cache-gb 4 --max-tokens 512 --temperature 0 --out {run_dir}/eval_after.tmp")
    assert want in out
    pw = _script("learn_eval.sh", {**env, "RECIPE": "judge_pairwise", "EVAL_PAIRS": "300", "RUN_DIR": str(tmp_path / "pw"),
                                   **recipe_files(fx, "judge_pairwise")})
    assert pw.returncode == 0, pw.stdout + pw.stderr
    assert f"scripts/eval_judge.py --data {fx[('pairwise', 'test')]} --pairs 300 --seed 0 --vllm-offline {model_path}" in pw.stdout
    bad = _script("learn_eval.sh", {**env, "RECIPE": "judge_to_reward"})
    assert bad.returncode == 2 and "not a single-run recipe" in bad.stderr


def test_learn_eval_overlap(fx, model_path, tmp_path):
    """EVAL_OVERLAP=1: the start model is evaluated in the background while training runs, and
    training waits for it before merging; without a fixed KV cache it refuses to start."""
    run_dir = tmp_path / "ov"
    env = base_env(MODEL=model_path, DRY_RUN="print", RUN_DIR=run_dir, RECIPE="gsm8k_rule", STEPS=4, EVAL_LIMIT=5,
                   EVAL_OVERLAP=1, EVAL_KV_CACHE_GB=2, **recipe_files(fx, "gsm8k_rule"))
    r = _script("learn_eval.sh", env)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    bg = f"stage 2 runs in the background during training (EVAL_OVERLAP=1), log: {run_dir}/eval_before.log"
    assert out.index(bg) < out.index("stage 3/6") < out.index("waiting for stage 2 (background)") < out.index("stage 4/6")
    log = (run_dir / "eval_before.log").read_text()
    assert f"--vllm-offline {model_path} --gpu-memory-utilization 0.3 --kv-cache-gb 2 --max-tokens 512" in log
    assert log in out  # the background stage's output is shown once it is done
    for extra, msg in (({"EVAL_KV_CACHE_GB": ""}, "EVAL_OVERLAP=1 needs EVAL_KV_CACHE_GB"),
                       ({"EVAL_OVERLAP": "yes"}, "EVAL_OVERLAP=yes: want 0 or 1")):
        bad = _script("learn_eval.sh", {**env, **extra})
        assert bad.returncode == 2 and msg in bad.stderr, bad.stderr
    (run_dir / "eval_before").mkdir()
    (run_dir / "eval_before" / "report.json").write_text("{}")
    again = _script("learn_eval.sh", env)  # done before: no background stage
    assert again.returncode == 0 and f"skipped: {run_dir}/eval_before/report.json exists" in again.stdout
    assert "background" not in again.stdout
